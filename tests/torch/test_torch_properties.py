"""Property tests over the public torch entry points.

Hypothesis draws shapes (size 0 included: no batch, no heads, no tokens), dtypes
(float64, float32, float16, bfloat16), layouts, rotated widths and per-sample positions,
and every result is compared with a float64 reference written here from the definition
(not with posenc's own kernels).  The RoPE family is also run under ``torch.func.vmap``
with one sequence of positions per sample, where each sample must equal the reference
for its own positions: the class of failure found on commit 8049155 (longrope picked one
factor set for all samples; ``apply_mrope`` and ``apply_rope_2d`` raised).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import posenc
from posenc.torch import (
    ALiBiBias,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    T5RelativePositionBias,
    compiled_apply_rope,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
POS = st.integers(-(10**6), 10**6)


def _tol(dtype, scale=1.0):
    """Absolute tolerance for a result of magnitude ``scale`` rounded once to ``dtype``
    (float64 references; a few units in the last place)."""
    eps = {torch.float64: 1e-13, torch.float32: 4e-7, torch.float16: 2e-3,
           torch.bfloat16: 1.6e-2}[dtype]
    return 4 * eps * max(1.0, scale)


def _close(got, want, dtype, max_angle=0.0):
    """``got`` equals the float64 ``want`` to one rounding to ``dtype``, plus what the
    last float64 bit of a frequency does to an angle of ``max_angle`` (the reference's
    ``base ** (-2i/r)`` and NumPy's may differ in that bit)."""
    assert got.dtype == dtype and got.shape == want.shape
    scale = float(want.abs().max()) if want.numel() else 1.0
    atol = _tol(dtype, scale) + 4e-16 * max_angle * max(1.0, scale)
    torch.testing.assert_close(got.to(torch.float64), want, rtol=0, atol=atol)


def _max(t):
    return float(t.abs().max()) if t.numel() else 0.0


def _rotate64(x, angles, layout):
    """Rotate pairs of ``x`` (float64) by ``angles`` (..., r/2); features past r unchanged."""
    x = x.to(torch.float64)
    r = 2 * angles.shape[-1]
    out = x.clone()
    c, s = torch.cos(angles), torch.sin(angles)
    if layout == "interleaved":
        x1, x2 = x[..., 0:r:2], x[..., 1:r:2]
        out[..., 0:r:2], out[..., 1:r:2] = x1 * c - x2 * s, x2 * c + x1 * s
    else:
        h = r // 2
        x1, x2 = x[..., :h], x[..., h:r]
        out[..., :h], out[..., h:r] = x1 * c - x2 * s, x2 * c + x1 * s
    return out


def _theta(r, base):
    return torch.tensor([base ** (-2.0 * i / r) for i in range(r // 2)], dtype=torch.float64)


@st.composite
def rope_case(draw, max_samples=3):
    samples = draw(st.integers(0, max_samples))
    heads = draw(st.integers(0, 2))
    seq = draw(st.integers(0, 6))
    d = 2 * draw(st.integers(1, 6))
    rotary_dim = draw(st.one_of(st.none(), st.integers(1, d // 2).map(lambda h: 2 * h)))
    layout = draw(st.sampled_from(["interleaved", "half"]))
    dtype = draw(st.sampled_from(DTYPES))
    base = draw(st.sampled_from([10000.0, 500000.0, 1.5]))
    pos = draw(st.lists(st.lists(POS, min_size=seq, max_size=seq), min_size=samples,
                        max_size=samples))
    seed = draw(st.integers(0, 2**31 - 1))
    x = torch.randn(samples, heads, seq, d, generator=torch.Generator().manual_seed(seed))
    pos_t = torch.tensor(pos, dtype=torch.long).reshape(samples, seq)
    return x.to(dtype), pos_t, layout, rotary_dim, base


@SETTINGS
@given(rope_case())
def test_apply_rope_under_vmap_per_sample_positions(case):
    x, pos, layout, rotary_dim, base = case
    got = torch.func.vmap(lambda a, p: posenc.apply_rope(
        a, p, base=base, layout=layout, rotary_dim=rotary_dim))(x, pos)
    r = rotary_dim or x.shape[-1]
    want = _rotate64(x, pos.to(torch.float64)[:, None, :, None] * _theta(r, base), layout)
    _close(got, want, x.dtype, _max(pos))
    # eager, one sample at a time, through the cache and the fast kernels
    for i in range(x.shape[0]):
        _close(posenc.apply_rope(x[i], pos[i], base=base, layout=layout,
                                 rotary_dim=rotary_dim), want[i], x.dtype, _max(pos))


@SETTINGS
@given(rope_case(max_samples=2))
def test_apply_rope_grad_and_jvp_are_the_rotation(case):
    x, pos, layout, rotary_dim, base = case
    x = x.to(torch.float64)
    if x.shape[0] == 0:
        return
    p = pos[0]

    def f(a):
        return posenc.apply_rope(a, p, base=base, layout=layout, rotary_dim=rotary_dim)

    t = torch.ones_like(x[0])
    _, tangent = torch.func.jvp(f, (x[0],), (t,))
    r = rotary_dim or x.shape[-1]
    _close(tangent, _rotate64(t, p.to(torch.float64)[:, None] * _theta(r, base), layout),
           torch.float64, _max(p))
    # a rotation keeps the norm: the gradient of |f(x)|^2 is 2 x
    grad = torch.func.grad(lambda a: f(a).square().sum())(x[0])
    _close(grad, 2 * x[0], torch.float64)


@SETTINGS
@given(rope_case(), st.sampled_from(["default", "linear", "longrope", "yarn"]))
def test_rotary_embedding_under_vmap_per_sample_positions(case, rope_type):
    x, pos, layout, _, base = case
    d = x.shape[-1]
    params = {"rope_type": rope_type, "rope_theta": base}
    if rope_type in ("linear", "yarn"):
        params["factor"] = 4.0
    if rope_type == "longrope":
        params.update(short_factor=[1.0 + i for i in range(d // 2)],
                      long_factor=[5.0 + 2 * i for i in range(d // 2)],
                      original_max_position_embeddings=1000)
    rope = RotaryEmbedding(d, layout=layout, rope_parameters=params,
                           max_position_embeddings=4000)
    got_q, got_k = torch.func.vmap(lambda a, p: rope(a, a, p))(x, pos)
    assert got_q.shape == got_k.shape == x.shape and got_q.dtype == x.dtype
    for i in range(x.shape[0] if pos.shape[1] else 0):
        seq_len = max(int(pos[i].max()) + 1, 1)  # all negative: the short factors
        inv, factor = posenc.rope_frequencies(
            d, params, seq_len=seq_len if rope_type == "longrope" else None,
            max_position_embeddings=4000)
        ang = pos[i].to(torch.float64)[:, None] * torch.from_numpy(inv)
        want = _rotate64(x[i], ang, layout)
        # cos and sin scaled by the attention factor: the rotated part scales by it
        r = d
        want[..., :r] = want[..., :r] * factor
        _close(got_q[i], want, x.dtype, _max(ang))
        _close(got_k[i], want, x.dtype, _max(ang))


@st.composite
def mrope_case(draw):
    samples = draw(st.integers(0, 3))
    batch = draw(st.integers(0, 2))
    heads = draw(st.integers(1, 2))
    seq = draw(st.integers(0, 5))
    section = draw(st.lists(st.integers(0, 3), min_size=3, max_size=3).filter(
        lambda s: sum(s) >= 1))
    dim = 2 * sum(section)
    dtype = draw(st.sampled_from(DTYPES))
    ids = draw(st.lists(POS, min_size=samples * 3 * batch * seq,
                        max_size=samples * 3 * batch * seq))
    seed = draw(st.integers(0, 2**31 - 1))
    x = torch.randn(samples, batch, heads, seq, dim,
                    generator=torch.Generator().manual_seed(seed)).to(dtype)
    return x, torch.tensor(ids, dtype=torch.long).reshape(samples, 3, batch, seq), section


@SETTINGS
@given(mrope_case())
def test_apply_mrope_under_vmap_per_sample_ids(case):
    x, ids, section = case
    got = torch.func.vmap(lambda a, i: posenc.apply_mrope(a, i, mrope_section=section))(x, ids)
    dim = x.shape[-1]
    # Qwen2-VL: the first section[0] pairs follow the time id, then height, then width
    comp = [c for c, n in enumerate(section) for _ in range(n)]
    theta = _theta(dim, 10000.0)
    chosen = ids[:, comp].to(torch.float64)  # (samples, dim/2, batch, seq)
    angles = chosen.permute(0, 2, 3, 1)[:, :, None] * theta  # (samples, batch, 1, seq, dim/2)
    _close(got, _rotate64(x, angles, "half"), x.dtype, _max(angles))


@st.composite
def axial_case(draw):
    samples = draw(st.integers(0, 3))
    heads = draw(st.integers(0, 2))
    seq = draw(st.integers(0, 6))
    d = 4 * draw(st.integers(1, 3))
    layout = draw(st.sampled_from(["interleaved", "half"]))
    dtype = draw(st.sampled_from(DTYPES))
    coords = st.lists(st.lists(st.integers(-1000, 1000), min_size=seq, max_size=seq),
                      min_size=samples, max_size=samples)
    rows, cols = draw(coords), draw(coords)
    seed = draw(st.integers(0, 2**31 - 1))
    x = torch.randn(samples, heads, seq, d, generator=torch.Generator().manual_seed(seed))
    as_t = lambda v: torch.tensor(v, dtype=torch.long).reshape(samples, seq)  # noqa: E731
    return x.to(dtype), as_t(rows), as_t(cols), layout


@SETTINGS
@given(axial_case())
def test_apply_rope_2d_under_vmap_per_sample_rows_and_cols(case):
    x, rows, cols, layout = case
    got = torch.func.vmap(lambda a, r, c: posenc.apply_rope_2d(a, r, c, layout=layout))(
        x, rows, cols)
    d = x.shape[-1]
    omega = torch.tensor([10000.0 ** (-i / (d // 4)) for i in range(d // 4)],
                         dtype=torch.float64)
    # pairs [0, d/4) turn by the column, [d/4, d/2) by the row
    angles = torch.cat((cols.to(torch.float64)[..., None] * omega,
                        rows.to(torch.float64)[..., None] * omega), dim=-1)[:, None]
    _close(got, _rotate64(x, angles, layout), x.dtype, _max(angles))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rope_case(max_samples=1))
def test_compiled_apply_rope_matches_the_reference(case):
    x, pos, layout, rotary_dim, base = case
    if x.shape[0] == 0:
        return
    got = compiled_apply_rope(x[0], pos[0], base=base, layout=layout, rotary_dim=rotary_dim)
    r = rotary_dim or x.shape[-1]
    want = _rotate64(x[0], pos[0].to(torch.float64)[:, None] * _theta(r, base), layout)
    _close(got, want, x.dtype, _max(pos))


@SETTINGS
@given(st.integers(0, 3), st.integers(0, 9), st.integers(1, 5).map(lambda h: 2 * h),
       st.sampled_from([torch.float64, torch.float32]))
def test_sinusoidal_module_is_the_table_plus_x(batch, seq, d, dtype):
    enc = SinusoidalPositionalEncoding(d, max_len=4)  # shorter than some inputs: it grows
    x = torch.randn(batch, seq, d, generator=torch.Generator().manual_seed(seq)).to(dtype)
    p = torch.arange(seq, dtype=torch.float64)[:, None]
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = p * 10000.0 ** (-2 * i / d)
    table = torch.stack((torch.sin(ang), torch.cos(ang)), dim=-1).reshape(seq, d)
    _close(enc(x), x.to(torch.float64) + table, dtype)


@SETTINGS
@given(st.sampled_from([1, 2, 4, 8]), st.integers(0, 6), st.integers(0, 6),
       st.integers(0, 5), st.booleans())
def test_alibi_module_is_the_paper_bias(heads, q_len, k_len, offset, causal):
    got = ALiBiBias(heads, causal=causal)(q_len, k_len, offset, dtype=torch.float64)
    # Press et al.: head h (1-based) of n has slope 2^(-8h/n); query i sits at offset + i
    slopes = torch.tensor([2.0 ** (-8.0 * h / heads) for h in range(1, heads + 1)],
                          dtype=torch.float64)
    i = torch.arange(q_len, dtype=torch.float64)[:, None] + offset
    j = torch.arange(k_len, dtype=torch.float64)[None, :]
    dist = (j - i) if causal else -(j - i).abs()
    want = slopes[:, None, None] * dist
    if causal:
        want = want.masked_fill(j > i, -math.inf)
    assert got.shape == (1, heads, q_len, k_len)
    torch.testing.assert_close(got[0], want, rtol=0, atol=1e-15)


@SETTINGS
@given(st.integers(1, 3), st.integers(0, 6), st.integers(0, 6), st.integers(0, 40),
       st.booleans(), st.sampled_from([(8, 20), (32, 128), (4, 8)]))
def test_t5_module_reads_the_bucket_of_each_offset(heads, q_len, k_len, offset, bidirectional,
                                                   buckets):
    num_buckets, max_distance = buckets
    bias = T5RelativePositionBias(heads, num_buckets=num_buckets, max_distance=max_distance,
                                  bidirectional=bidirectional)
    got = bias(q_len, k_len, offset)
    rel = (np.arange(k_len)[None, :] - (np.arange(q_len)[:, None] + offset))
    # Raffel et al. / Mesh TensorFlow: exact buckets for small offsets, log-spaced up to
    # max_distance, the sign in the upper half when bidirectional
    n = num_buckets // 2 if bidirectional else num_buckets
    ret = np.where(rel > 0, n, 0) if bidirectional else np.zeros_like(rel)
    mag = np.abs(rel) if bidirectional else np.maximum(-rel, 0)
    exact = n // 2
    with np.errstate(divide="ignore"):
        large = exact + (np.log(np.maximum(mag, 1) / exact) / math.log(max_distance / exact)
                         * (n - exact)).astype(np.int64)
    large = np.minimum(large, n - 1)
    want = ret + np.where(mag < exact, mag, large)
    table = bias.relative_attention_bias.weight.detach()  # (num_buckets, heads)
    expect = table[torch.from_numpy(want)].permute(2, 0, 1)[None]
    assert got.shape == (1, heads, q_len, k_len)
    torch.testing.assert_close(got, expect, rtol=0, atol=0)
