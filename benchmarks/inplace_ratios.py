"""The issue-16 RoPE goals at one shape, quickly: in place and ``out=`` against ``copy_``.

    python benchmarks/inplace_ratios.py [--repeats 7] [--shape 1,32,2048,128]

For float32 and bfloat16 it times, interleaved round by round (each round runs every
candidate once in a rotating order, ~``--block`` seconds each with
``torch.utils.benchmark``): ``out.copy_(x)`` into a preallocated tensor, ``x.clone()``,
``apply_rope(x)`` out of place, ``apply_rope(x, out=buf)`` and ``apply_rope_(buf)``
(rotating a private copy again and again: a rotation keeps norms), for both layouts, and
prints the median over rounds of each per-round ratio to ``copy_``.  The full harness
(``benchmarks/run.py``) records the same candidates; this script is for a quick check.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

GOALS = {("float32", "interleaved"): 1.5, ("float32", "half"): 2.5,
         ("bfloat16", "interleaved"): 3.0, ("bfloat16", "half"): 3.0}


def candidates(shape, dtype):
    import torch

    import posenc

    buf, own = torch.empty(shape, dtype=dtype), None
    fns = {"copy_": lambda x: buf.copy_(x), "clone": lambda x: x.clone()}
    for layout in ("interleaved", "half"):
        out = torch.empty(shape, dtype=dtype)
        own = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(dtype)
        posenc.apply_rope(own, layout=layout)  # fill the table cache
        fns[f"apply_rope {layout}"] = lambda x, lo=layout: posenc.apply_rope(x, layout=lo)
        fns[f"out= {layout}"] = lambda x, lo=layout, o=out: posenc.apply_rope(x, layout=lo,
                                                                              out=o)
        fns[f"apply_rope_ {layout}"] = lambda x, lo=layout, o=own: posenc.apply_rope_(
            o, layout=lo)
    return fns


def main(argv=None):
    import torch
    from torch.utils.benchmark import Timer

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--block", type=float, default=0.2)
    p.add_argument("--shape", default="1,32,2048,128")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    shape = tuple(int(s) for s in args.shape.split(","))
    torch.set_num_threads(args.threads)
    print(f"shape {shape}, {args.threads} threads, {args.repeats} rounds, load average "
          f"{os.getloadavg()[0]:.2f} at start")
    for dname in ("float32", "bfloat16"):
        dtype = getattr(torch, dname)
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
        fns = candidates(shape, dtype)
        names = list(fns)
        timers = {n: Timer("f(x)", globals={"f": f, "x": x}, num_threads=args.threads)
                  for n, f in fns.items()}
        for n in names:
            timers[n].blocked_autorange(min_run_time=args.block)  # warm-up
        per_round = {n: [] for n in names}
        for r in range(args.repeats):
            k = r % len(names)
            order = names[k:] + names[:k]
            for n in (order if r % 2 == 0 else order[::-1]):
                per_round[n].append(timers[n].blocked_autorange(min_run_time=args.block).median)
        copy_t = statistics.median(per_round["copy_"])
        print(f"\n{dname}: copy_ {copy_t * 1e3:.2f} ms (median); ratios are medians of "
              f"per-round ratios")
        for n in names:
            vs_copy = statistics.median(a / b for a, b in zip(per_round[n], per_round["copy_"]))
            vs_clone = statistics.median(a / b for a, b in zip(per_round[n], per_round["clone"]))
            layout = n.split()[-1]
            goal = GOALS.get((dname, layout)) if n.split()[0] != "apply_rope" else None
            mark = "" if goal is None else (f"  goal <= {goal}: "
                                            + ("met" if vs_copy <= goal else "NOT met"))
            print(f"  {n:24s} {statistics.median(per_round[n]) * 1e3:8.2f} ms  "
                  f"x{vs_copy:5.2f} copy_  x{vs_clone:5.2f} clone{mark}")
    print(f"\nload average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
