"""Carry stored units across a code change that moves code without changing what it computes.

    python experiments/rekey.py --from CODE            check, then rewrite in place
    python experiments/rekey.py --from CODE --dry-run  check only
    python experiments/rekey.py --from A --from B      two stages' code at once

A unit's digest hashes its parameters and its stage's code
(:func:`posenc.analysis.experiments.units.stage_code`), so any edit to the code a stage
imports makes its units stale: that is the point, and most edits should retrain.  Some do
not change a number (code moved between modules, a docstring, the unit layout); this
script re-keys the units stored under code hash ``--from`` (the CPU tier's folder) to the
current code, and only after evidence that nothing changed:

1. every unit's parameters are rewritten to the current layout (:func:`new_params`) and its
   digest recomputed under its stage's current code; units that read a trained model
   follow that model's new digest, and the cached weights are renamed alongside;
2. a sample (the cheapest unit of every kind, and the cheapest evaluation of a model not
   in the sample, so that renamed weights are read too) is run again with the current
   code on this machine, every other unit read from the re-keyed set (and the other
   stages' units from the store as they are), and each sampled
   unit's result must equal the stored one exactly (every field but timings and
   bookkeeping); a unit the current code asks for that the re-keyed set lacks is an error;
3. only then are the units rewritten, each recording ``rekeyed``: the old code hash and
   digest, the sample that was checked, and when.  ``commit`` stays the commit that
   trained it.
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from posenc.analysis.experiments import corpus as C  # noqa: E402
from posenc.analysis.experiments.units import (  # noqa: E402
    UnitStore, digest, stage_code, stage_of, unit_kind)
from experiments.stage_lm import LM_NOT_KEYED  # noqa: E402

#: result fields that are timings or bookkeeping, not outcomes
NOT_COMPARED = frozenset({"key", "digest", "params", "code", "commit", "dirty", "seconds",
                          "train_seconds", "eval_seconds", "rekeyed", "machine"})
#: sections older layouts stored that no unit depends on beyond its own settings
DROPPED = ("seeds", "budget", "references", "ablation", "lm_edge")


def new_params(params: dict, model_digests: dict[str, str], lr: float | None = None) -> dict:
    """The current layout of a unit's parameters (see ``Runner._params``): without the
    seed list and the sections each trained unit's own settings already cover, the
    language-model section without the grid axes, steps and batch, a read model's
    digest mapped to its new one, and a task unit keyed on its own rate ``lr`` (the one
    its result records) and its task's section without the rate grid."""
    p = {k: copy.deepcopy(v) for k, v in params.items() if k not in DROPPED}
    if isinstance(p.get("lm"), dict):
        p["lm"] = {k: v for k, v in p["lm"].items() if k not in LM_NOT_KEYED}
    if isinstance(p.get("model"), str):
        if p["model"] not in model_digests:
            raise KeyError(f"unit {params.get('unit')!r} reads model {p['model']}, which is "
                           "not among the units re-keyed")
        p["model"] = model_digests[p["model"]]
    if stage_of(p["unit"]) == "tasks":
        p.pop("lm", None)
        # keyed on the unit's own rate and its section less the rate grid
        section = p["unit"].split("-")[0].removesuffix("grid")
        if isinstance(p.get(section), dict) and "lrs" in p[section]:
            p[section] = {k: v for k, v in p[section].items() if k != "lrs"}
        if "lr" not in p:
            if lr is None:
                raise ValueError(f"unit {params.get('unit')!r}: a task unit needs its rate "
                                 "(the lr its result records) to be re-keyed")
            p["lr"] = lr
    return p


def rekey(units: list[dict], others=()) -> tuple[list[dict], dict[str, str]]:
    """The units under the current code (trained models first, then what reads them), and
    the map from each old digest to its new one.  A unit may read a model of ``others``
    (the stored units not re-keyed, such as another stage's): that digest stays."""
    codes: dict[str, str] = {}
    moved: dict[str, str] = {}
    keep = {u["digest"]: u["digest"] for u in others}
    out = []
    order = sorted(units, key=lambda u: isinstance(u["params"].get("model"), str))
    for u in order:
        stage = stage_of(u["key"])
        code = codes.setdefault(stage, stage_code(stage))
        params = new_params(u["params"], {**keep, **moved}, u.get("lr"))
        new = {**u, "params": params, "code": code, "digest": digest(params, code),
               "rekeyed": {"from_code": u["code"], "from_digest": u["digest"]}}
        moved[u["digest"]] = new["digest"]
        out.append(new)
    return out, moved


def sample(units: list[dict]) -> list[str]:
    """The cheapest unit of every kind (``test-`` units by the kind of model they read),
    plus the cheapest evaluation of a model outside the sample."""
    kinds: dict[str, dict] = {}
    for u in units:
        kind = unit_kind(u["key"])
        if kind not in kinds or u["seconds"] < kinds[kind]["seconds"]:
            kinds[kind] = u
    keys = {u["key"] for u in kinds.values()}
    trained = {k for k in keys if not k.startswith("test-")}
    outside = [u for u in units if u["key"].startswith("test-")
               and u["key"][len("test-"):] not in trained]
    if outside:
        keys.add(min(outside, key=lambda u: u["seconds"])["key"])
    return sorted(keys)


class CheckStore(UnitStore):
    """A scratch store: the re-keyed units less the sample, and ``others`` (the stored
    units under other code hashes, which a run of one stage's units reads from the other
    stages); a sampled unit is compared with its stored result when the run puts it; any
    other unit the run computes is an error."""

    def __init__(self, folder: Path, rekeyed: list[dict], check: list[str],
                 others: list[dict] = ()):
        super().__init__(folder)
        self.expected = {u["key"]: u for u in rekeyed if u["key"] in check}
        for u in [*others, *rekeyed]:
            if u["key"] not in check:
                self.units[u["key"] + "@" + u["digest"]] = u
        self.checked: dict[str, list[str]] = {}

    def put(self, key, params, result, code=None):
        unit = super().put(key, params, result, code)
        old = self.expected.get(key)
        if old is None:
            raise RuntimeError(f"the current code computes unit {key}, which no re-keyed "
                               "unit matches: its parameters or stage changed, not only "
                               "its layout")
        if unit["digest"] != old["digest"]:
            raise RuntimeError(f"{key}: digest {unit['digest']} != re-keyed {old['digest']}")
        fields = (set(unit) | set(old)) - NOT_COMPARED
        self.checked[key] = sorted(f for f in fields if unit.get(f) != old.get(f))
        print(f"  checked {key}: " + ("equal" if not self.checked[key] else
                                       f"DIFFERS in {self.checked[key]}"), flush=True)
        return unit


def main(argv=None) -> int:
    from experiments import run as R

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="old", required=True, action="append",
                    help="a code hash to re-key from (repeatable: stages whose code changed "
                         "together, one importing the other, are re-keyed in one run)")
    ap.add_argument("--units", type=Path, default=ROOT / "experiments" / "units" / "cpu")
    ap.add_argument("--cache", type=Path, default=ROOT / "experiments" / ".cache",
                    help="cached weights (renamed to the new digests)")
    ap.add_argument("--tier", choices=("cpu", "quick"), default="cpu",
                    help="the configuration the units were run with")
    ap.add_argument("--dry-run", action="store_true", help="check, write nothing")
    args = ap.parse_args(argv)
    files = {p: json.loads(p.read_text()) for p in sorted(args.units.glob("*.json"))}
    missing = [c for c in args.old if not any(u.get("code") == c for u in files.values())]
    if missing:
        ap.error(f"--from {', '.join(missing)}: no unit in {args.units} has that code hash")
    old = {p: u for p, u in files.items() if u.get("code") in args.old}
    # a unit of another stage that reads a model re-keyed here (an evaluation of it) reads
    # that model's new digest, so it is re-keyed as well
    grew = True
    while grew:
        moving = {u["digest"] for u in old.values()}
        readers = {p: u for p, u in files.items()
                   if p not in old and isinstance(u["params"].get("model"), str)
                   and u["params"]["model"] in moving}
        old.update(readers)
        grew = bool(readers)
    others = [u for p, u in files.items() if p not in old]
    rekeyed, moved = rekey(list(old.values()), others)
    check = sample(rekeyed)
    print(f"{len(rekeyed)} units under code {', '.join(args.old)} or reading their models; "
          f"checking "
          f"{len(check)}: "
          + ", ".join(check), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cache = tmp / "cache"
        cache.mkdir()
        for u in rekeyed:  # the weights under their new names, sampled models left out
            src = args.cache / f"{u['key']}-{u['rekeyed']['from_digest']}.pt"
            if src.exists() and u["key"] not in check:
                shutil.copy2(src, cache / f"{u['key']}-{u['digest']}.pt")
        for u in others:  # the models of other stages the sample reads, as they are
            src = args.cache / f"{u['key']}-{u['digest']}.pt"
            if src.exists():
                (cache / src.name).symlink_to(src.resolve())
        store = CheckStore(tmp / "units", rekeyed, check, others)
        R.torch.set_num_threads(1)
        tasks = tuple(t for t in R.STAGES
                      if any(stage_of(u["key"]) in ("tasks", "taskrates")
                             and u["key"].startswith(t) for u in rekeyed))
        # the tasks' checks only where their units are among those re-keyed (a run of
        # the tasks' units alone cannot compute checks stored under another code), and of
        # those only the checks whose units are (a check added since has none to carry)
        checked = [u["key"] for u in rekeyed if stage_of(u["key"]) == "taskrates"]
        with_checks = {"caps" if "-cap" in k else "warmups" if "-warm" in k else "rates"
                       for k in checked}
        # the stages the units come from, no others (a stage whose units are all stale
        # would only ask for units the re-keyed set cannot hold)
        with_finetune = any(stage_of(u["key"]) == "finetune" for u in rekeyed)
        extra = R.TIERS[args.tier].get("lm_more_seeds") or {"seeds": []}
        with_more = any(u["key"].startswith("lm-") and u["key"].rsplit("-s", 1)[1]
                        in {str(s) for s in extra["seeds"]} for u in rekeyed)
        R.run(copy.deepcopy(R.TIERS[args.tier]), cache=cache, device="cpu", progress=False,
              stages=tasks, store=store, corpus=C.load_corpus(), with_finetune=with_finetune,
              with_more_seeds=with_more, with_checks=with_checks)
        missing = sorted(set(check) - set(store.checked))
        bad = {k: v for k, v in store.checked.items() if v}
        if missing or bad:
            print(f"not re-keyed: sample not run {missing}, differing {bad}")
            return 1
        if args.dry_run:
            print("every sampled unit equal; --dry-run: nothing written")
            return 0
        when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        for (path, _), u in zip(sorted(old.items(), key=lambda kv: kv[1]["key"]),
                                sorted(rekeyed, key=lambda u: u["key"]), strict=True):
            u["rekeyed"].update({"checked": check, "date": when})
            assert path.name == f"{u['key']}.json", (path, u["key"])
            path.write_text(json.dumps(u))
        for d_old, d_new in moved.items():
            for w in args.cache.glob(f"*-{d_old}.pt"):
                w.rename(w.with_name(w.name[:-len(f"{d_old}.pt")] + f"{d_new}.pt"))
    print(f"re-keyed {len(rekeyed)} units: every sampled unit equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
