"""Re-run a sample of the committed CPU-tier units with the current code, and compare each
with its stored result: the check a reviewer runs first (does a rerun give the numbers?).

    python experiments/recheck.py                  the cheapest unit of every kind
    python experiments/recheck.py --keys K1,K2     these units

Every other unit is read from the committed files, and the sampled ones are trained or
evaluated again in a scratch folder; nothing committed is touched.  A unit is compared on
every field but timings and bookkeeping (``rekey.NOT_COMPARED``), and its digest must be the
stored one, so the check also shows that the code a unit was keyed on is the code that ran.
A unit that reads a trained model (an evaluation, a scaling rule, a fine-tuning run, a probe)
is sampled only where that model's weights are in ``experiments/.cache`` or the model is
itself in the sample.  Prints each unit's verdict and its stored and new seconds, and exits
1 if any differs.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.rekey import CheckStore  # noqa: E402
from posenc.analysis.experiments import corpus as C  # noqa: E402
from posenc.analysis.experiments.units import stage_code, stage_of, unit_kind  # noqa: E402

UNITS = ROOT / "experiments" / "units" / "cpu"
CACHE = ROOT / "experiments" / ".cache"


def _model(unit: dict) -> str | None:
    """The digest of the trained model a unit reads, if it reads one."""
    m = unit["params"].get("model")
    return m if isinstance(m, str) else None


def choose(units: list[dict], weights: set[str]) -> list[str]:
    """The cheapest unit of every kind that can run here: a unit reading a model needs its
    weights (``weights``: the digests with a cached file) or the model in the sample."""
    trained = {}
    for u in units:
        if _model(u) is None and (unit_kind(u["key"]) not in trained
                                  or u["seconds"] < trained[unit_kind(u["key"])]["seconds"]):
            trained[unit_kind(u["key"])] = u
    picked = {u["digest"] for u in trained.values()}
    readers: dict[str, dict] = {}
    for u in units:
        m = _model(u)
        if m is None or not (m in weights or m in picked):
            continue
        k = unit_kind(u["key"])
        if k not in readers or u["seconds"] < readers[k]["seconds"]:
            readers[k] = u
    return sorted(u["key"] for u in [*trained.values(), *readers.values()])


def _numbers(x, path=""):
    """Every number in a unit's field, by its path."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _numbers(v, f"{path}/{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _numbers(v, f"{path}/{i}")
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield path, float(x)


def largest_difference(a, b) -> float:
    """The largest absolute difference between two fields' numbers (inf if the fields do
    not have the same shape)."""
    na, nb = dict(_numbers(a)), dict(_numbers(b))
    if na.keys() != nb.keys():
        return float("inf")
    return max((abs(na[k] - nb[k]) for k in na), default=0.0)


class TimedStore(CheckStore):
    """:class:`rekey.CheckStore` that also prints each checked unit's seconds and, for a
    field that differs, the largest absolute difference in it."""

    def __init__(self, folder: Path, units: list[dict], check: list[str]):
        super().__init__(folder, units, check)
        self.times: dict[str, tuple[float, float]] = {}
        self.diffs: dict[str, dict[str, float]] = {}

    def put(self, key, params, result, code=None):
        unit = super().put(key, params, result, code)
        old = self.expected[key]
        self.times[key] = (old["seconds"], unit["seconds"])
        self.diffs[key] = {f: largest_difference(unit.get(f), old.get(f))
                           for f in self.checked[key]}
        print(f"    stored {self.times[key][0]:.0f} s, now {self.times[key][1]:.0f} s"
              + "".join(f"; {f}: largest difference {d:.3g}"
                        for f, d in self.diffs[key].items()), flush=True)
        return unit


def report(store: TimedStore, stored: dict, new: dict, run_module) -> dict:
    """The recheck as a file: provenance, and per unit the verdict, the fields that differ
    (with the largest absolute difference in each), the seconds, the commit that stored it,
    and for an evaluation the target loss at each length, stored and now."""
    prov = run_module.provenance(1, "cpu")
    prov["machine"]["isa"] = run_module.torch.backends.cpu.get_cpu_capability()
    out: dict = {"provenance": prov, "units": {}}
    for key, fields in sorted(store.checked.items()):
        old, now = stored[key], new[key]
        row = {"equal": not fields, "differs": store.diffs[key],
               "stored_commit": old.get("commit"), "stored_seconds": old["seconds"],
               "seconds": now["seconds"]}
        if key.startswith("test-"):
            row["target"] = {n: [None if v is None else v["target"],
                                 None if now["test"][n] is None else now["test"][n]["target"]]
                             for n, v in old["test"].items()}
        out["units"][key] = row
    return out


def main(argv=None) -> int:
    from experiments import run as R

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default=None,
                    help="comma-separated unit keys (default: the cheapest of every kind)")
    ap.add_argument("--units", type=Path, default=UNITS)
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--json", type=Path, default=None,
                    help="write each unit's verdict, timings and differences here")
    ap.add_argument("--keep", type=Path, default=None,
                    help="a folder to keep the re-run units in (default: none kept)")
    args = ap.parse_args(argv)
    units = [json.loads(p.read_text()) for p in sorted(args.units.glob("*.json"))]
    if not units:
        ap.error(f"--units {args.units}: no unit files there")
    codes = {s: stage_code(s) for s in {stage_of(u["key"]) for u in units}}
    stale = sorted(u["key"] for u in units if u["code"] != codes[stage_of(u["key"])])
    if stale:
        ap.error(f"{len(stale)} units were keyed on other code than the current (first: "
                 f"{stale[0]}); experiments/rekey.py carries them across first")
    cached = {p.name.rsplit("-", 1)[1][:-3]: p for p in args.cache.glob("*.pt")}
    have = {u["key"] for u in units}
    if args.keys:
        check = sorted(set(args.keys.split(",")))
        unknown = [k for k in check if k not in have]
        if unknown:
            ap.error(f"--keys must name stored units, got {unknown}")
    else:
        check = choose(units, set(cached))
    print(f"re-running {len(check)} of {len(units)} units: " + ", ".join(check), flush=True)
    by_key = {u["key"]: u for u in units}
    sampled = {by_key[k]["digest"] for k in check}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "cache").mkdir()
        for d, p in cached.items():  # a sampled model is trained again, not read
            if d not in sampled:
                shutil.copy2(p, tmp / "cache" / p.name)
        store = TimedStore(tmp / "units", units, check)
        R.torch.set_num_threads(1)
        kinds = {stage_of(k) for k in check}
        tasks = tuple(t for t in R.STAGES if any(k.startswith(t) for k in check))
        extra = R.CPU.get("lm_more_seeds") or {"seeds": []}
        with_more = any(k.startswith("lm-") and k.rsplit("-s", 1)[1]
                        in {str(s) for s in extra["seeds"]} for k in check)
        R.run(copy.deepcopy(R.CPU), cache=tmp / "cache", device="cpu", progress=False,
              stages=tasks, store=store, corpus=C.load_corpus(),
              with_finetune="finetune" in kinds, with_more_seeds=with_more)
        if args.keep is not None:
            shutil.copytree(tmp / "units", args.keep, dirs_exist_ok=True)
        new_units = {p.stem: json.loads(p.read_text()) for p in (tmp / "units").glob("*.json")}
    if args.json is not None:
        args.json.write_text(json.dumps(report(store, by_key, new_units, R), indent=1) + "\n")
    missing = sorted(set(check) - set(store.checked))
    bad = {k: v for k, v in store.checked.items() if v}
    old = sum(t[0] for t in store.times.values())
    new = sum(t[1] for t in store.times.values())
    print(f"{len(store.checked) - len(bad)} of {len(check)} equal; not run {missing}; "
          f"differing {bad}; {old:.0f} s stored, {new:.0f} s now")
    return 1 if missing or bad else 0


if __name__ == "__main__":
    sys.exit(main())
