"""Each route of posenc's torch RoPE against the plain formula, side by side.

    python benchmarks/route.py [--threads 1] [--rounds 9] [--quick]

For every case, posenc's call and a reference run in interleaved rounds in one process
(so that the machine's load drifts over both alike), and the script prints the median of
the per-round ratios posenc / reference.  The reference is transformers' formula
``x * cos + rotate_half(x) * sin`` with cos and sin given in the input's dtype for the
module's and ``apply_rope``'s out-of-place calls, and ``out.copy_(x)`` for the in-place
and ``out=`` calls (their floor is a multiple of a copy).  Run it on two commits to see
what a change did: the ratios, not the times, are comparable across runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _rotate_half(x):
    import torch

    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def cases(quick):
    """(name, posenc call, reference call) for every route the torch code takes."""
    import torch

    import posenc
    from posenc.torch import RotaryEmbedding, apply_rotary_pos_emb

    g = torch.Generator().manual_seed(0)
    big = (1, 8, 256, 64) if quick else (1, 32, 1024, 128)
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        tag = "fp32" if dtype == torch.float32 else "bf16"
        x = torch.randn(big, generator=g).to(dtype)
        buf, own = torch.empty_like(x), x.clone()
        for layout in ("half", "interleaved"):
            rope = RotaryEmbedding(big[-1], layout=layout)
            cos, sin = rope.cos_sin(torch.arange(big[2])[None], dtype=dtype)
            cos, sin = cos[:, None], sin[:, None]

            def formula(x=x, cos=cos, sin=sin):
                return x * cos + _rotate_half(x) * sin

            out += [
                (f"apply_rope {tag} {layout}",
                 lambda x=x, lo=layout: posenc.apply_rope(x, layout=lo), formula),
                (f"apply_rope out= {tag} {layout}",
                 lambda x=x, lo=layout, b=buf: posenc.apply_rope(x, layout=lo, out=b),
                 lambda x=x, b=buf: b.copy_(x)),
                (f"apply_rope_ {tag} {layout}",
                 lambda lo=layout, o=own: posenc.apply_rope_(o, layout=lo),
                 lambda x=x, b=buf: b.copy_(x)),
            ]
    for dtype in (torch.float32, torch.bfloat16):
        tag = "fp32" if dtype == torch.float32 else "bf16"
        for name, qs, ks, kind in (
                ("prefill", (1, 32, 512, 128), (1, 8, 512, 128), "seq"),
                ("prefill rows", (4, 32, 256, 128), (4, 8, 256, 128), "rows"),
                ("prefill rows-differ", (4, 32, 256, 128), (4, 8, 256, 128), "differ"),
                ("decode", (1, 8, 1, 128), (1, 2, 1, 128), "seq"),
                ("decode b8 rows", (8, 32, 1, 128), (8, 8, 1, 128), "rows")):
            if quick:
                qs, ks = (qs[0], 4, min(qs[2], 16), 64), (ks[0], 2, min(ks[2], 16), 64)
            q = torch.randn(qs, generator=g).to(dtype)
            k = torch.randn(ks, generator=g).to(dtype)
            b, seq = qs[0], qs[2]
            pos = torch.arange(1234, 1234 + seq)
            if kind != "seq":
                pos = pos.expand(b, seq).contiguous()
                if kind == "differ":
                    pos = pos + torch.arange(b)[:, None]
            rope = RotaryEmbedding(qs[-1], layout="half")
            cos, sin = rope.cos_sin(pos if pos.ndim == 2 else pos[None], dtype=dtype)
            cos, sin = cos[:, None], sin[:, None]

            def formula(q=q, k=k, cos=cos, sin=sin):
                return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin

            out.append((f"module {name} {tag}",
                        lambda r=rope, q=q, k=k, p=pos: r(q, k, positions=p), formula))
            if name == "prefill":
                qb, kb = q.clone(), k.clone()
                out.append((f"module inplace {name} {tag}",
                            lambda r=rope, p=pos, qb=qb, kb=kb: r(qb, kb, positions=p,
                                                                  inplace=True),
                            lambda q=q, k=k, qb=qb, kb=kb: (qb.copy_(q), kb.copy_(k))))
            if name in ("prefill rows", "decode b8 rows"):
                c2, s2 = cos[:, 0], sin[:, 0]
                out.append((f"apply_rotary_pos_emb {name} {tag}",
                            lambda q=q, k=k, c=c2, s=s2: apply_rotary_pos_emb(q, k, c, s),
                            formula))
    return out


def measure(fns, calls, rounds):
    """Per-round ratios posenc / reference, rounds taken in turn.

    Times are this thread's CPU time (``time.thread_time``): with one thread PyTorch
    runs every kernel in the calling thread, and time spent descheduled by other load
    on the machine is not counted.
    """
    ours, ref = fns
    for fn in (ours, ref):
        for _ in range(max(1, calls // 4)):
            fn()
    ratios = []
    for _ in range(rounds):
        t = []
        for fn in (ours, ref):
            t0 = time.thread_time()
            for _ in range(calls):
                fn()
            t.append(time.thread_time() - t0)
        ratios.append(t[0] / t[1])
    return statistics.median(ratios), min(ratios), max(ratios)


def main(argv=None):
    import torch

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--only", default="", help="run the cases whose name contains this")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"# torch {torch.__version__}, {args.threads} thread(s), median of "
          f"{args.rounds} rounds (min..max)")
    if args.threads != 1:
        print("# (more than one thread: thread_time misses the other threads' work)")
    for name, ours, ref in cases(args.quick):
        if args.only not in name:
            continue
        small = "decode" in name
        med, lo, hi = measure((ours, ref), 200 if small else 5, args.rounds)
        print(f"{name:42s} {med:6.2f}  ({lo:.2f}..{hi:.2f})", flush=True)


if __name__ == "__main__":
    main()
