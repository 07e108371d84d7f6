"""Re-run a sample of the committed CPU-tier units with the current code, and compare each
with its stored result: the check a reviewer runs first (does a rerun give the numbers?).

    python experiments/recheck.py                  the cheapest unit of every kind and
                                                   of every work group
    python experiments/recheck.py --keys K1,K2     these units
    python experiments/recheck.py --jobs 2         in two processes side by side
    python experiments/recheck.py --task-seeds     every seed of both synthetic tasks at
                                                   each encoding's chosen rate, and the
                                                   seeds the refined grid replaced
    ... --json F --section NAME                    the report as section NAME of file F
                                                   (the rest of F kept)

Every other unit is read from the committed files, and the sampled ones are trained or
evaluated again in a scratch folder; nothing committed is touched.  A unit is compared on
every field but timings and bookkeeping (``rekey.NOT_COMPARED``), and its digest must be the
stored one, so the check also shows that the code a unit was keyed on is the code that ran.
A unit that reads a trained model (an evaluation, a scaling rule, a fine-tuning run, a probe)
is sampled only where that model's weights are in ``experiments/.cache`` or the model is
itself in the sample (else the model is trained again too).  Prints each unit's verdict and
its stored and new seconds, and exits 1 if any differs.  The new seconds of one unit of each
work group time the whole protocol (``report.rerun_seconds``): the stored seconds cannot,
as many units ran while other work shared the machine.  A sample of task units only (as
``--task-seeds``) is re-run unit by unit at each one's stored rate, cap and warm-up, not
through the stages, so that a re-run which would move a rate choice still compares every
seed with its stored self.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.rekey import CheckStore  # noqa: E402
from posenc.analysis.experiments import corpus as C  # noqa: E402
from posenc.analysis.experiments.report import TASK_OUTCOME  # noqa: E402
from posenc.analysis.experiments.units import (  # noqa: E402
    stage_code,
    stage_of,
    unit_kind,
    work_group,
)

UNITS = ROOT / "experiments" / "units" / "cpu"
TASKS = ("copy", "passkey")  # the prefixes of the synthetic tasks' unit keys
CACHE = ROOT / "experiments" / ".cache"


def _model(unit: dict) -> str | None:
    """The digest of the trained model a unit reads, if it reads one."""
    m = unit["params"].get("model")
    return m if isinstance(m, str) else None


def choose(units: list[dict], weights: set[str]) -> list[str]:
    """The cheapest unit of every kind and of every work group (:func:`units.work_group`:
    the units that do the same work per step) that can run here.  A unit reading a model
    needs its weights (``weights``: the digests with a cached file) or the model in the
    sample; where no unit of a kind or group can, its cheapest is taken with its model."""
    models = {u["digest"]: u for u in units}
    sets = {"kind": lambda u: unit_kind(u["key"]), "group": lambda u: work_group(u, models)[0]}

    def cheapest(pool):
        best: dict = {}
        for u in pool:
            for name, of in sets.items():
                k = (name, of(u))
                if k not in best or u["seconds"] < best[k]["seconds"]:
                    best[k] = u
        return best

    trained = cheapest([u for u in units if _model(u) is None])
    picked = {u["digest"] for u in trained.values()}
    readers = [u for u in units if _model(u) is not None]
    runnable = cheapest([u for u in readers if _model(u) in weights | picked])
    for k, u in cheapest(readers).items():
        if k not in runnable:  # no reader of this kind or group can run: train its model
            runnable[k] = u
            trained[("model", u["key"])] = models[_model(u)]
    return sorted({u["key"] for u in [*trained.values(), *runnable.values()]})


def task_seeds(results: dict) -> list[str]:
    """The units behind the synthetic tasks' k/n counts: every seed of copy and passkey at
    each encoding's chosen rate (``runs``) and the seeds that the refined rate grid
    replaced (``replaced``, :mod:`experiments.taskgrid`).  ``ValueError`` if ``results``
    has no such task sections."""
    keys: list[str] = []
    for task in ("copy", "passkey"):
        sec = results.get(task) if isinstance(results, dict) else None
        if not (isinstance(sec, dict) and isinstance(sec.get("runs"), list)):
            raise ValueError(f"results must have a '{task}' section with its 'runs' "
                             "(experiments/results.json)")
        keys += [u["key"] for u in [*sec["runs"], *sec.get("replaced", [])]]
    return sorted(set(keys))


def outcome(unit: dict) -> dict:
    """What a task unit's k/n counts and accuracies read: whether it learned within its
    cap, the steps it trained, its final validation accuracy and its test accuracies."""
    return {f: unit[f] for f in TASK_OUTCOME}


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
    (with the largest absolute difference in each), the seconds (of training as well, for
    a unit that trains) and its work group and steps (:func:`units.work_group`), the commit
    that stored it, and for an evaluation the target loss at each length, stored and now."""
    models = {u["digest"]: u for u in stored.values()}
    prov = run_module.provenance(1, "cpu")
    prov["machine"]["isa"] = run_module.torch.backends.cpu.get_cpu_capability()
    out: dict = {"provenance": prov, "units": {}}
    for key, fields in sorted(store.checked.items()):
        old, now = stored[key], new[key]
        group, steps = work_group(old, models)
        row = {"equal": not fields, "differs": store.diffs[key],
               "stored_commit": old.get("commit"), "stored_seconds": old["seconds"],
               "seconds": now["seconds"], "group": group, "steps": steps,
               "train_seconds": now.get("train_seconds")}
        if key.startswith(TASKS):
            row["outcome"] = {"stored": outcome(old), "now": outcome(now)}
        if key.startswith("test-"):
            row["target"] = {n: [None if v is None else v["target"],
                                 None if now["test"][n] is None else now["test"][n]["target"]]
                             for n, v in old["test"].items()}
        out["units"][key] = row
    return out


def write(path: Path, data: dict, section: str | None) -> None:
    """Write the report to the JSON file at ``path`` (created if absent): as its top level
    (``provenance`` and ``units``), or, with ``section``, as that section; the file's other
    sections (another machine's recheck, ``stacking_speed.py``'s timings) are kept."""
    whole = json.loads(path.read_text()) if path.exists() else {}
    if section is None:
        whole.update(data)
    else:
        whole[section] = data
    path.write_text(json.dumps(whole, indent=1) + "\n")


def split(sample: list[dict], jobs: int) -> list[list[str]]:
    """``sample`` in ``jobs`` parts of about equal stored seconds, each unit in the part of
    the model it reads where that model is in the sample (so no part trains it twice)."""
    digests = {u["digest"] for u in sample}
    bundles: dict[str, list[dict]] = {}
    for u in sample:
        m = _model(u)
        bundles.setdefault(m if m in digests else u["digest"], []).append(u)
    parts: list[list[str]] = [[] for _ in range(jobs)]
    load = [0.0] * jobs
    for b in sorted(bundles.values(), key=lambda b: -sum(u["seconds"] for u in b)):
        i = load.index(min(load))
        parts[i] += [u["key"] for u in b]
        load[i] += sum(u["seconds"] for u in b)
    return [sorted(p) for p in parts if p]


def _side_by_side(args, parts: list[list[str]]) -> int:
    """Run each part in its own process at once and merge their files into ``args.json``."""
    with tempfile.TemporaryDirectory() as tmp:
        procs, files = [], []
        for i, keys in enumerate(parts):
            files.append(Path(tmp) / f"part{i}.json")
            cmd = [sys.executable, str(Path(__file__).resolve()), "--keys", ",".join(keys),
                   "--units", str(args.units), "--cache", str(args.cache),
                   "--json", str(files[-1])]
            if args.keep is not None:
                cmd += ["--keep", str(args.keep)]
            procs.append(subprocess.Popen(cmd))
        codes = [p.wait() for p in procs]
        got = [json.loads(f.read_text()) for f in files if f.exists()]
    if len(got) < len(parts):
        print(f"{len(parts) - len(got)} of {len(parts)} processes wrote no file",
              file=sys.stderr)
        return max(codes) or 1
    merged = {"provenance": {**got[0]["provenance"], "jobs": len(parts)},
              "units": {k: v for g in got for k, v in sorted(g["units"].items())}}
    if args.json is not None:
        write(args.json, merged, args.section)
    return max(codes)


def main(argv=None) -> int:
    from experiments import run as R

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default=None,
                    help="comma-separated unit keys (default: the cheapest of every kind)")
    ap.add_argument("--units", type=Path, default=UNITS)
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--json", type=Path, default=None,
                    help="write each unit's verdict, timings and differences here")
    ap.add_argument("--task-seeds", action="store_true",
                    help="re-run every task seed behind the k/n counts (task_seeds)")
    ap.add_argument("--section", default=None,
                    help="write the report as this section of the --json file, keeping "
                         "the file's other sections")
    ap.add_argument("--results", type=Path, default=ROOT / "experiments" / "results.json",
                    help="the results file --task-seeds reads")
    ap.add_argument("--keep", type=Path, default=None,
                    help="a folder to keep the re-run units in (default: none kept)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="processes side by side, one thread each, as the CPU tier runs "
                         "(default 1); each takes whole models with the units that read "
                         "them")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be >= 1, got {args.jobs}")
    if args.section is not None and args.json is None:
        ap.error("--section names a section of the --json file; give --json too")
    if args.task_seeds and args.keys:
        ap.error("--task-seeds and --keys each choose the units; give one of them")
    if args.task_seeds:
        try:
            args.keys = ",".join(task_seeds(json.loads(args.results.read_text())))
        except (OSError, ValueError) as e:
            ap.error(f"--results {args.results}: {e}")
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
    if args.jobs > 1:
        return _side_by_side(args, split([by_key[k] for k in check], args.jobs))
    sampled = {by_key[k]["digest"] for k in check}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "cache").mkdir()
        for d, p in cached.items():  # a sampled model is trained again, not read
            if d not in sampled:
                shutil.copy2(p, tmp / "cache" / p.name)
        store = TimedStore(tmp / "units", units, check)
        R.torch.set_num_threads(1)
        if all(k.startswith(TASKS) for k in check):
            rerun_tasks(R, store, tmp / "cache", [by_key[k] for k in check])
        else:
            _rerun_protocol(R, store, tmp / "cache", check)
        if args.keep is not None:
            shutil.copytree(tmp / "units", args.keep, dirs_exist_ok=True)
        new_units = {p.stem: json.loads(p.read_text()) for p in (tmp / "units").glob("*.json")}
    if args.json is not None:
        write(args.json, report(store, by_key, new_units, R), args.section)
    missing = sorted(set(check) - set(store.checked))
    bad = {k: v for k, v in store.checked.items() if v}
    old = sum(t[0] for t in store.times.values())
    new = sum(t[1] for t in store.times.values())
    print(f"{len(store.checked) - len(bad)} of {len(check)} equal; not run {missing}; "
          f"differing {bad}; {old:.0f} s stored, {new:.0f} s now")
    return 1 if missing or bad else 0


def _rerun_protocol(R, store, cache: Path, check: list[str]) -> None:
    """Re-run ``check`` the way a whole run computes them: the protocol's stages over the
    store, which computes only the sampled units."""
    kinds = {stage_of(k) for k in check}
    tasks = tuple(t for t in R.STAGES if any(k.startswith(t) for k in check))
    extra = R.CPU.get("lm_more_seeds") or {"seeds": []}
    with_more = any(k.startswith("lm-") and k.rsplit("-s", 1)[1]
                    in {str(s) for s in extra["seeds"]} for k in check)
    R.run(copy.deepcopy(R.CPU), cache=cache, device="cpu", progress=False,
          stages=tasks, store=store, corpus=C.load_corpus(),
          with_finetune="finetune" in kinds, with_more_seeds=with_more)


def rerun_tasks(R, store, cache: Path, units: list[dict]) -> None:
    """Re-run task units one by one at their own stored encoding, seed, rate, cap and
    warm-up, each under its own key, so that a re-run which would move a rate choice still
    compares every seed with its stored self (the digest check in ``store`` shows that
    the parameters are the stored ones)."""
    from experiments.stage_tasks import task_unit

    runner = R.PartRunner(copy.deepcopy(R.CPU), cache, "cpu", False, store=store,
                          corpus=C.load_corpus())
    chosen = runner.lm()["chosen"]
    for u in units:
        name = "copy" if u["key"].startswith("copy") else "passkey"
        sec = u["params"][name]
        task_unit(runner, name, u["key"], u["encoding"], u["seed"], u["lr"], chosen,
                  steps=sec["steps"], warmup=sec.get("warmup"))


if __name__ == "__main__":
    sys.exit(main())
