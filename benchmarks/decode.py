"""A decoding step on the CPU: the Python around RoPE, not the arithmetic.

One new token, 8 query heads and 2 key heads of 128 features (q (1, 8, 1, 128), k (1, 2, 1,
128)), at a position read from a tensor, as a cached decoder calls it.  The work is a few
thousand multiplications, so the time is what the code around them costs: validation,
looking up the position's cos and sin, dispatch.  Compared, in one thread, side by side
(interleaved rounds, so that the machine's load drifts over both alike):

* ``posenc``: ``RotaryEmbedding(128, layout="half")(q, k, positions=pos)``;
* ``rotate_half``: transformers' formula ``x * cos + rotate_half(x) * sin`` for q and k,
  given cos and sin already gathered for the position (what a model holds after its
  rotary module ran once for the step) -- the least a caller can do.

The ratio posenc / rotate_half is the number the project's floor asks to be at most 1.5.
"""

from __future__ import annotations

import statistics
import time


def _rotate_half(x):
    import torch

    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def bench_decode(quick: bool = False) -> dict:
    import torch

    from posenc.torch import RotaryEmbedding

    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 8, 1, 128, generator=g)
    k = torch.randn(1, 2, 1, 128, generator=g)
    pos = torch.tensor([1234])
    rope = RotaryEmbedding(128, layout="half", max_seq_len=4096)
    cos = rope.cos[pos].repeat(1, 2)  # (1, 128): the formula's duplicated halves
    sin = rope.sin[pos].repeat(1, 2)

    def formula():
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin

    def ours():
        return rope(q, k, positions=pos)

    # the same numbers first (the formula with float32 tables)
    a, b = ours(), formula()
    err = max(float((x - y).abs().max()) for x, y in zip(a, b))
    calls = 200 if quick else 2000
    rounds = 3 if quick else 15
    times = {"posenc": [], "rotate_half": []}
    for fn in (ours, formula):
        for _ in range(calls // 4):
            fn()
    for _ in range(rounds):
        for name, fn in (("posenc", ours), ("rotate_half", formula)):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - t0) / calls)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratios = [p / r for p, r in zip(times["posenc"], times["rotate_half"])]
    return {"shape_q": [1, 8, 1, 128], "shape_k": [1, 2, 1, 128], "calls": calls,
            "rounds": rounds, "median_us": {k: v * 1e6 for k, v in med.items()},
            "ratio": med["posenc"] / med["rotate_half"],
            "ratio_rounds": [min(ratios), statistics.median(ratios), max(ratios)],
            "max_abs_difference": err, "floor": 1.5,
            "passed": med["posenc"] / med["rotate_half"] <= 1.5}
