"""Put the results of several GPU-tier device calls together, in the order they ran.

    python experiments/merge_gpu_calls.py CALL1 CALL2 ... --out experiments

Each ``CALL`` is a folder a call brought back (``results.json`` and ``units.jsonl``).  The
first call's results are the base (its provenance, configuration and plan); every later
call adds the units it stored that the earlier ones lack (a call run with ``--groups``
completes groups the first one's budget did not reach) and removes those groups from
``skipped``; the ways each call checked (``vmap``) or chose to attend (``attention``) are
added where the earlier calls lack them.  All calls must have run the same GPU-tier code (the stage code of their
units), the same configuration and the same steps, or the merge refuses.  Writes
``<out>/results-gpu.json``, ``<out>/results-gpu.md`` and ``<out>/units/gpu/units.jsonl``;
``provenance.calls`` records each call's commit, date, seconds and units.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from posenc.analysis.experiments.markdown import gpu_markdown  # noqa: E402


def _group(key: str) -> str:
    """A unit's (or a skipped group's) group name as the plan logs it: ``lm-alibi-L2048-s3``
    and ``lm-alibi-L2048-s0,1,2`` -> ``lm-alibi-L2048``."""
    return re.sub(r"-s[0-9,]+$", "", key)


def merge(calls: list[dict]) -> dict:
    """The first call's results with every later call's new units added (see the module's
    docstring).

    >>> a = {"config": {"x": 1}, "steps": 5, "provenance": {"commit": "a", "date": "d1"},
    ...      "seconds": 9.0, "skipped": ["lm-alibi-L2048-s0,1", "copy-t5-lr0.001"],
    ...      "units": [{"key": "lm-rope-L512-s0", "code": "c"}]}
    >>> b = {"config": {"x": 1}, "steps": 5, "provenance": {"commit": "b", "date": "d2"},
    ...      "seconds": 3.0, "skipped": [], "attention": {"alibi@2048": "flex"},
    ...      "units": [{"key": "lm-alibi-L2048-s0", "code": "c"},
    ...                {"key": "lm-alibi-L2048-s1", "code": "c"}]}
    >>> m = merge([a, b])
    >>> [u["key"] for u in m["units"]], m["skipped"]
    (['lm-rope-L512-s0', 'lm-alibi-L2048-s0', 'lm-alibi-L2048-s1'], ['copy-t5-lr0.001'])
    >>> [(c["commit"], c["units"]) for c in m["provenance"]["calls"]], m["attention"]
    ([('a', 1), ('b', 2)], {'alibi@2048': 'flex'})
    >>> merge([a, {**b, "steps": 6}])
    Traceback (most recent call last):
    ...
    ValueError: call 2 ran 6 steps, the first call 5: only calls of one protocol merge
    """
    if not calls:
        raise ValueError("calls must hold at least one results dict")
    base = json.loads(json.dumps(calls[0]))
    codes = {u["code"] for u in base["units"]}
    seen = {u["key"] for u in base["units"]}
    record = [{"commit": base["provenance"]["commit"], "date": base["provenance"]["date"],
               "seconds": base["seconds"], "units": len(base["units"])}]
    for i, call in enumerate(calls[1:], start=2):
        if call["config"] != base["config"]:
            raise ValueError(f"call {i} ran another configuration than the first call: "
                             "only calls of one protocol merge")
        if call["steps"] != base["steps"]:
            raise ValueError(f"call {i} ran {call['steps']} steps, the first call "
                             f"{base['steps']}: only calls of one protocol merge")
        new = [u for u in call["units"] if u["key"] not in seen]
        other = {u["code"] for u in new} - codes if codes else set()
        if other:
            raise ValueError(f"call {i}'s units ran GPU-tier code {sorted(other)}, the first "
                             f"call's {sorted(codes)}: only calls of one code merge")
        base["units"] += new
        seen |= {u["key"] for u in new}
        done = {_group(u["key"]) for u in new}
        base["skipped"] = [s for s in base["skipped"] if _group(s) not in done]
        for record_of in ("vmap", "attention"):  # what each call checked or chose, first kept
            for name, value in call.get(record_of, {}).items():
                base.setdefault(record_of, {}).setdefault(name, value)
        record.append({"commit": call["provenance"]["commit"],
                       "date": call["provenance"]["date"], "seconds": call["seconds"],
                       "units": len(new)})
    base["skipped"] = list(dict.fromkeys(base["skipped"]))
    base["provenance"]["calls"] = record
    return base


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("calls", nargs="+", type=Path, help="the calls' folders, in order")
    ap.add_argument("--out", type=Path, default=ROOT / "experiments")
    args = ap.parse_args(argv)
    calls = []
    for d in args.calls:
        p = d / "results.json"
        if not p.is_file():
            ap.error(f"{p} does not exist (each call's folder holds its results.json)")
        calls.append(json.loads(p.read_text()))
    merged = merge(calls)
    (args.out / "results-gpu.json").write_text(json.dumps(merged) + "\n")
    (args.out / "results-gpu.md").write_text(gpu_markdown(merged))
    units = args.out / "units" / "gpu"
    units.mkdir(parents=True, exist_ok=True)
    (units / "units.jsonl").write_text("".join(json.dumps(u) + "\n" for u in merged["units"]))
    print(f"merged {len(calls)} calls: {len(merged['units'])} units into "
          f"{args.out / 'results-gpu.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
