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


#: The calls a transformers user makes, each against the formula with cos and sin given in
#: the input's dtype: (id, q shape, k shape, dtype, positions, floor).  ``positions``:
#: "seq" a (seq,) run, "rows" (batch, seq) rows all equal, "rows-differ" rows shifted by
#: their batch index (left padding).
PATHS = (
    ("decode-fp32", (1, 8, 1, 128), (1, 2, 1, 128), "float32", "seq", 1.5),
    ("decode-bf16", (1, 8, 1, 128), (1, 2, 1, 128), "bfloat16", "seq", 1.5),
    ("decode-bf16-b8-rows", (8, 32, 1, 128), (8, 8, 1, 128), "bfloat16", "rows", 1.5),
    ("prefill-fp32-rows", (4, 32, 256, 128), (4, 8, 256, 128), "float32", "rows", 1.3),
    ("prefill-fp32-rows-differ", (4, 32, 256, 128), (4, 8, 256, 128), "float32",
     "rows-differ", 1.3),
    ("prefill-bf16-rows", (4, 32, 256, 128), (4, 8, 256, 128), "bfloat16", "rows", 1.3),
    ("prefill-bf16-rows-differ", (4, 32, 256, 128), (4, 8, 256, 128), "bfloat16",
     "rows-differ", 1.3),
)


def _case(q_shape, k_shape, dtype, kind, start=1234):
    """(posenc call, formula call) for one path, on the same tensors."""
    import torch

    from posenc.torch import RotaryEmbedding

    g = torch.Generator().manual_seed(0)
    dt = getattr(torch, dtype)
    q = torch.randn(q_shape, generator=g).to(dt)
    k = torch.randn(k_shape, generator=g).to(dt)
    b, seq = q_shape[0], q_shape[2]
    pos = torch.arange(start, start + seq)
    if kind != "seq":
        pos = pos.expand(b, seq).contiguous()
        if kind == "rows-differ":
            pos = pos + torch.arange(b)[:, None]
    rope = RotaryEmbedding(q_shape[-1], layout="half", max_seq_len=4096)
    cos, sin = rope.cos_sin(pos if pos.ndim == 2 else pos[None], dtype=dt)
    cos, sin = cos[:, None], sin[:, None]  # transformers' unsqueeze_dim=1

    def formula():
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin

    def ours():
        return rope(q, k, positions=pos)

    return ours, formula


def _interleaved(fns, calls, rounds):
    """Per-call times of each function, rounds taken in turn (load drifts over all)."""
    times = {name: [] for name in fns}
    for fn in fns.values():
        for _ in range(max(1, calls // 4)):
            fn()
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - t0) / calls)
    return times


def bench_paths(quick: bool = False) -> list[dict]:
    """Every case of :data:`PATHS`: posenc / formula, median of interleaved rounds."""
    out = []
    for case_id, q_shape, k_shape, dtype, kind, floor in PATHS:
        if quick:
            q_shape, k_shape = (q_shape[0], 2, min(q_shape[2], 4), 16), (k_shape[0], 1,
                                                                          min(k_shape[2], 4), 16)
        ours, formula = _case(q_shape, k_shape, dtype, kind)
        small = q_shape[2] <= 8
        calls = (200 if small else 5) if quick else (2000 if small else 20)
        t = _interleaved({"posenc": ours, "formula": formula}, calls, 3 if quick else 11)
        ratios = [p / f for p, f in zip(t["posenc"], t["formula"])]
        med = {k: statistics.median(v) for k, v in t.items()}
        ratio = med["posenc"] / med["formula"]
        out.append({"id": case_id, "q": list(q_shape), "k": list(k_shape), "dtype": dtype,
                    "positions": kind, "median_us": {k: v * 1e6 for k, v in med.items()},
                    "ratio": ratio, "ratio_rounds": [min(ratios), statistics.median(ratios),
                                                     max(ratios)],
                    "floor": floor, "passed": ratio <= floor})
    return out


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
