"""Does training the seeds of one configuration together save time on this machine?

    python experiments/stacking_speed.py [--steps 30] [--threads 1] [--device cpu]
                                         [--into experiments/recheck-cpu.json]

Times the CPU tier's language-model step (its model, batch and window) for five seeds
trained one after another (:func:`~posenc.analysis.experiments.train.train_lm`) against
the same five stacked (:func:`~posenc.analysis.experiments.stacked.train_lm`, with
``torch.func.vmap`` and with a plain loop over the stack), and against one model compiled
with ``torch.compile`` (its steps after ``WARMUP`` steps of compiling, times five: the
compile time itself is left out, which favours compiling), side by side in one process, and
prints milliseconds per step of all five seeds and the ratios serial / stacked and
serial / compiled as JSON,
with its provenance (commit, machine, versions); ``--into FILE`` also stores that under
``"stacking"`` in an existing JSON file (the recheck's, which times this machine too).
Issue 31 asks for the CPU tier in about three hours of one core by stacking seeds; this is
the measurement that says whether stacking, or compiling, can deliver that here.  It
trains nothing that is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


#: steps a compiled model takes before it is timed (compiling happens in the first)
WARMUP = 5


def measure(steps: int, device: str = "cpu", seeds=(0, 1, 2, 3, 4)) -> dict:
    """Milliseconds per step (all seeds) serial, stacked with vmap, stacked with a loop, and
    compiled (one model's step after :data:`WARMUP` steps, times the number of seeds)."""
    import torch

    from experiments.run import CPU
    from posenc.analysis.experiments import stacked, train
    from posenc.analysis.experiments.corpus import load_corpus
    from posenc.analysis.experiments.models import ModelConfig, TinyDecoder

    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    corpus, lm, model = load_corpus(), CPU["lm"], CPU["model"]
    out: dict = {}
    for enc in ("rope", "alibi", "t5"):
        cfg = ModelConfig(encoding=enc, train_length=lm["train_length"], **model)
        kw = {"steps": steps, "batch": lm["batch"], "lr": 1e-3}
        t = time.perf_counter()
        for s in seeds:
            train.train_lm(cfg, corpus.train, seed=s, device=device, **kw)
        row = {"serial": (time.perf_counter() - t) / steps * 1e3}
        for name, use_vmap in (("stacked_vmap", True), ("stacked_loop", False)):
            st = stacked.build(cfg, seeds, device=device)
            t = time.perf_counter()
            stacked.train_lm(st, corpus.train, use_vmap=use_vmap, **kw)
            row[name] = (time.perf_counter() - t) / steps * 1e3
        torch.manual_seed(seeds[0])
        compiled = torch.compile(TinyDecoder(cfg).to(device))
        train.train_lm(cfg, corpus.train, seed=seeds[0], model=compiled,
                       **{**kw, "steps": WARMUP})
        t = time.perf_counter()
        train.train_lm(cfg, corpus.train, seed=seeds[0], model=compiled, **kw)
        row["compiled"] = (time.perf_counter() - t) / steps * 1e3 * len(seeds)
        row["speedup_vmap"] = row["serial"] / row["stacked_vmap"]
        row["speedup_loop"] = row["serial"] / row["stacked_loop"]
        row["speedup_compiled"] = row["serial"] / row["compiled"]
        out[enc] = {k: round(v, 2) for k, v in row.items()}
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--into", type=Path, default=None,
                    help="an existing JSON file to store the result in, under 'stacking'")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.threads < 1:
        ap.error(f"--steps and --threads must be >= 1, got {args.steps}, {args.threads}")
    if args.into is not None and not args.into.is_file():
        ap.error(f"--into must be an existing JSON file, got {args.into}")
    import torch

    from experiments.run import provenance

    torch.set_num_threads(args.threads)
    res = measure(args.steps, args.device)
    out = {"provenance": provenance(args.threads, args.device), "steps": args.steps,
           "ms_per_step_of_five_seeds": res}
    print(json.dumps(out, indent=1))
    if args.into is not None:
        data = json.loads(args.into.read_text())
        data["stacking"] = out
        args.into.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
