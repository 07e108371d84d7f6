"""The implementations posenc is measured against, written the way their authors write them.

Every RoPE candidate is built by a *factory* ``factory(shape, dtype, base) -> fn`` that does
all table work (inverse frequencies, angles, cos/sin, ``freqs_cis``) up front, outside
any timed region, and returns ``fn(x) -> rotated x``.  posenc builds and caches its own
tables on the first call; :func:`posenc_factory` makes that first call before returning,
so no candidate pays for its tables inside the timing (posenc's first-call cost is
measured on its own, in a fresh process, by :mod:`benchmarks.memory`).

Layouts, with ``h = d/2``:

* ``"half"`` -- the pair of feature ``i`` is feature ``i + h`` (GPT-NeoX, Hugging Face
  ``rotate_half``);
* ``"interleaved"`` -- the pair of feature ``2i`` is feature ``2i + 1`` (the RoFormer
  paper, Meta's LLaMA code, ``rotary-embedding-torch``).

Angles are formed in float64 and cast once, like posenc does, except where a peer's own
code forms them differently (``rotary-embedding-torch`` uses its own module to make its
``freqs``, so it is timed and checked as shipped).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

Factory = Callable[[tuple, "object", float], Callable]


# -- sinusoidal ----------------------------------------------------------------------


def sinusoidal_loop(length: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The textbook double loop: one Python iteration per (position, dimension).

    ``PE[p, 2i] = sin(p / base**(2i/d))`` and ``PE[p, 2i+1] = cos(p / base**(2i/d))``
    (Vaswani et al. 2017, section 3.5), float64.
    """
    table = [[0.0] * d_model for _ in range(length)]
    for pos in range(length):
        row = table[pos]
        for j in range(d_model):
            angle = pos / base ** ((j - j % 2) / d_model)
            row[j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return np.array(table, dtype=np.float64)


# -- RoPE tables (shared by the peers below) ------------------------------------------


def _angles(length: int, d: int, base: float):
    """``(length, d/2)`` float64 tensor of ``p * base**(-2i/d)``."""
    import torch

    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    return torch.arange(length, dtype=torch.float64)[:, None] * inv_freq[None, :]


def _check_shape(shape: tuple) -> tuple[int, int]:
    if len(shape) < 2 or shape[-1] % 2:
        raise ValueError(f"shape must be (..., seq_len, d) with even d, got {shape}")
    return shape[-2], shape[-1]


def reference_rope(x, layout: str, base: float = 10000.0):
    """float64 RoPE of ``x`` (any float dtype) in ``layout``: the yardstick for errors."""
    import torch

    length, d = _check_shape(tuple(x.shape))
    ang = _angles(length, d, base)
    c, s = ang.cos(), ang.sin()
    x = x.to(torch.float64)
    if layout == "half":
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    if layout == "interleaved":
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    raise ValueError(f"layout must be 'half' or 'interleaved', got {layout!r}")


# -- the floor --------------------------------------------------------------------------


def clone_factory(shape, dtype, base=10000.0):
    """``x.clone()``: one read and one write of x, the least any out-of-place op can do."""
    return lambda x: x.clone()


def copy_into_factory(shape, dtype, base=10000.0):
    """``out.copy_(x)`` into a tensor allocated once: clone() without the allocation."""
    import torch

    out = torch.empty(shape, dtype=dtype)
    return lambda x: out.copy_(x)


# -- Hugging Face: x * cos + rotate_half(x) * sin ---------------------------------------


def rotate_half(x):
    """Hugging Face's helper: ``[x1, x2] -> [-x2, x1]`` on the two halves of the last dim."""
    import torch

    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rotate_half_rope(x, cos, sin):
    """``x * cos + rotate_half(x) * sin`` -- ``apply_rotary_pos_emb`` in transformers."""
    return (x * cos) + (rotate_half(x) * sin)


def rotate_half_factory(shape, dtype, base=10000.0):
    """Half layout; cos/sin are ``(L, d)`` (each half repeated) in x's dtype, as HF caches them."""
    import torch

    length, d = _check_shape(shape)
    ang = _angles(length, d, base)
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    return lambda x: rotate_half_rope(x, cos, sin)


# -- Meta LLaMA: complex multiplication ----------------------------------------------


def complex_rope(x, freqs_cis):
    """Meta's ``apply_rotary_emb``: view pairs as complex, multiply by ``e^{i p theta}``."""
    import torch

    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis).flatten(-2).type_as(x)


def complex_factory(shape, dtype, base=10000.0):
    """Interleaved layout; ``freqs_cis`` is ``(L, d/2)`` complex64 (``torch.polar``)."""
    import torch

    length, d = _check_shape(shape)
    ang = _angles(length, d, base)
    freqs_cis = torch.polar(torch.ones_like(ang), ang).to(torch.complex64)
    return lambda x: complex_rope(x, freqs_cis)


# -- rotary-embedding-torch ------------------------------------------------------------


def rotary_embedding_torch_factory(shape, dtype, base=10000.0):
    """The package's ``apply_rotary_emb(freqs, t)`` with ``freqs`` made once by its module.

    Interleaved layout.  Its ``freqs`` are float32 angles from ``RotaryEmbedding``; the
    package takes ``cos``/``sin`` of them inside every call -- that is how it works,
    whether called through ``rotate_queries_or_keys`` (cached freqs) or directly.
    """
    import torch
    from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

    length, d = _check_shape(shape)
    module = RotaryEmbedding(dim=d, theta=base, cache_max_seq_len=max(length, 8192))
    freqs = module(torch.arange(length), seq_len=length).detach()
    return lambda x: apply_rotary_emb(freqs, x)


# -- faster eager formulas (prototypes for posenc; see results.md) ---------------------


def fused_half_factory(shape, dtype, base=10000.0):
    """Half layout in three kernels over a preallocated output, no temporaries.

    View x as ``(..., 2, h)``: ``out = x * [cos, cos]`` (one pass), then
    ``out[..., 0, :] -= x2 * sin`` and ``out[..., 1, :] += x1 * sin`` with ``addcmul_``
    (half a pass each).  Bytes moved: 5 half-size passes against HF's 10.
    """
    import torch

    length, d = _check_shape(shape)
    h = d // 2
    ang = _angles(length, d, base)
    cos2 = torch.stack((ang.cos(), ang.cos()), dim=-2).to(dtype)  # (L, 2, h)
    sin = ang.sin().to(dtype)  # (L, h)

    def fn(x):
        out = torch.empty_like(x)
        xv = x.unflatten(-1, (2, h))
        ov = out.unflatten(-1, (2, h))
        torch.mul(xv, cos2, out=ov)
        ov[..., 0, :].addcmul_(xv[..., 1, :], sin, value=-1)
        ov[..., 1, :].addcmul_(xv[..., 0, :], sin)
        return out

    return fn


def fused_interleaved_factory(shape, dtype, base=10000.0):
    """Interleaved layout: one complex multiply for float32; three kernels otherwise.

    float32 (and float64) pairs *are* complex numbers in memory, so ``view_as_complex``
    costs nothing and one multiply reads x once and writes out once.  bfloat16/float16
    have no complex view here, so the same three-kernel scheme as the half layout is used
    on ``(..., h, 2)``.
    """
    import torch

    length, d = _check_shape(shape)
    h = d // 2
    ang = _angles(length, d, base)
    if dtype in (torch.float32, torch.float64):
        cdtype = torch.complex64 if dtype == torch.float32 else torch.complex128
        freqs_cis = torch.polar(torch.ones_like(ang), ang).to(cdtype)

        def fn(x):
            xc = torch.view_as_complex(x.unflatten(-1, (h, 2)))
            return torch.view_as_real(xc * freqs_cis).flatten(-2)

        return fn
    cos2 = torch.stack((ang.cos(), ang.cos()), dim=-1).to(dtype)  # (L, h, 2)
    sin = ang.sin().to(dtype)

    def fn(x):
        out = torch.empty_like(x)
        xv = x.unflatten(-1, (h, 2))
        ov = out.unflatten(-1, (h, 2))
        torch.mul(xv, cos2, out=ov)
        ov[..., 0].addcmul_(xv[..., 1], sin, value=-1)
        ov[..., 1].addcmul_(xv[..., 0], sin)
        return out

    return fn


# -- posenc's opt-in compiled path (timed with its compile cost reported) --------------


def compiled_factory(layout: str) -> Factory:
    """``posenc.torch.compiled_apply_rope(x, layout=...)``: one ``torch.compile`` kernel.

    Math in float32 whatever x's dtype (float64 input: float64), cos/sin from posenc's
    cached tables; Inductor fuses it into one loop that reads x and writes the output
    once.  The factory makes the first call, so the compilation is in ``setup_s``.
    """

    def factory(shape, dtype, base=10000.0):
        import torch

        from posenc.torch import compiled_apply_rope

        compiled_apply_rope(torch.zeros(shape, dtype=dtype), base=base, layout=layout)
        return lambda x: compiled_apply_rope(x, base=base, layout=layout)

    return factory


# -- posenc --------------------------------------------------------------------------


def posenc_factory(layout: str) -> Factory:
    """``posenc.apply_rope(x, layout=...)``; its table cache is filled before returning."""

    def factory(shape, dtype, base=10000.0):
        import torch

        import posenc

        warm = torch.zeros(shape, dtype=dtype)
        posenc.apply_rope(warm, base=base, layout=layout)  # fills posenc's cache
        return lambda x: posenc.apply_rope(x, base=base, layout=layout)

    return factory


def posenc_out_factory(layout: str) -> Factory:
    """``posenc.apply_rope(x, layout=..., out=buf)`` into a ``buf`` allocated once.

    The counterpart of ``out.copy_(x)``: the same bytes as an out-of-place call, without
    the page faults of a fresh output.
    """

    def factory(shape, dtype, base=10000.0):
        import torch

        import posenc

        out = torch.empty(shape, dtype=dtype)
        posenc.apply_rope(torch.zeros(shape, dtype=dtype), base=base, layout=layout, out=out)
        return lambda x: posenc.apply_rope(x, base=base, layout=layout, out=out)

    return factory


def posenc_inplace_factory(layout: str) -> Factory:
    """``posenc.apply_rope_(buf, layout=...)``: rotates a private copy of ``x`` in place.

    The first call copies ``x`` into ``buf`` (outside any timed region: the harness makes
    that call to check the result) and rotates it, so its result is RoPE of ``x``; every
    later call rotates ``buf`` again, which is what is timed (a rotation keeps norms, so
    the values stay in range).  ``x`` itself is never written.
    """

    def factory(shape, dtype, base=10000.0):
        import torch

        import posenc

        posenc.apply_rope_(torch.zeros(shape, dtype=dtype), base=base, layout=layout)
        state = {}

        def fn(x):
            buf = state.get("buf")
            if buf is None:
                buf = state["buf"] = x.clone()
            return posenc.apply_rope_(buf, base=base, layout=layout)

        return fn

    return factory


# -- the registry ------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One implementation in the RoPE comparison."""

    name: str  # stable key used in results.json
    layout: str  # "half", "interleaved" or "-" (the clone floor)
    kind: str  # "floor", "posenc", "posenc_into" (out=/in place), "peer", "prototype",
    #            "compiled"
    factory: Factory
    source: str  # where its formula comes from, one line


CANDIDATES: tuple[Candidate, ...] = (
    Candidate("clone", "-", "floor", clone_factory, "x.clone(): one read + one write"),
    Candidate("copy_into", "-", "floor", copy_into_factory,
              "out.copy_(x) into a preallocated out: clone() minus the allocation"),
    Candidate("posenc_half", "half", "posenc", posenc_factory("half"),
              "posenc.apply_rope(x, layout='half')"),
    Candidate("posenc_interleaved", "interleaved", "posenc", posenc_factory("interleaved"),
              "posenc.apply_rope(x, layout='interleaved')"),
    Candidate("posenc_half_out", "half", "posenc_into", posenc_out_factory("half"),
              "posenc.apply_rope(x, layout='half', out=buf), buf preallocated"),
    Candidate("posenc_interleaved_out", "interleaved", "posenc_into",
              posenc_out_factory("interleaved"),
              "posenc.apply_rope(x, layout='interleaved', out=buf), buf preallocated"),
    Candidate("posenc_half_inplace", "half", "posenc_into", posenc_inplace_factory("half"),
              "posenc.apply_rope_(buf, layout='half'): in place"),
    Candidate("posenc_interleaved_inplace", "interleaved", "posenc_into",
              posenc_inplace_factory("interleaved"),
              "posenc.apply_rope_(buf, layout='interleaved'): in place"),
    Candidate("rotate_half", "half", "peer", rotate_half_factory,
              "x*cos + rotate_half(x)*sin (Hugging Face transformers)"),
    Candidate("complex", "interleaved", "peer", complex_factory,
              "view_as_complex(x) * freqs_cis (Meta LLaMA)"),
    Candidate("rotary_embedding_torch", "interleaved", "peer", rotary_embedding_torch_factory,
              "rotary_embedding_torch.apply_rotary_emb(freqs, x) 0.9.1"),
    Candidate("fused_half", "half", "prototype", fused_half_factory,
              "benchmarks/peers.py: mul + 2 addcmul_ into one output"),
    Candidate("fused_interleaved", "interleaved", "prototype", fused_interleaved_factory,
              "benchmarks/peers.py: complex multiply (fp32) / mul + 2 addcmul_"),
    Candidate("compiled_half", "half", "compiled", compiled_factory("half"),
              "posenc.torch.compiled_apply_rope(x, layout='half') (Inductor C++)"),
    Candidate("compiled_interleaved", "interleaved", "compiled", compiled_factory("interleaved"),
              "posenc.torch.compiled_apply_rope(x) (Inductor C++)"),
)

BY_NAME = {c.name: c for c in CANDIDATES}
