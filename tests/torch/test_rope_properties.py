"""A property test of the torch paths of RoPE against a float64 reference.

Hypothesis draws shapes (size 0 included), memory layouts (contiguous, an odd storage
offset, transposed, strided, expanded), dtypes, pair layouts, rotary widths, bases and
positions up to +-2**40, and checks that :func:`posenc.apply_rope` and
:class:`posenc.torch.RotaryEmbedding` agree with the reference written below to a few
units in the last place of the output dtype, and never modify their input.

Units in the last place are taken at the norm of each pair ``(x1, x2)``: a rotation
mixes the two, so an output that cancels to nearly zero still carries the absolute
error of its inputs.  float16/bfloat16 are computed in float32 and rounded once, so
their error is half an ulp of the output plus a float32-sized term.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import posenc
from posenc import apply_rope
from posenc.torch import RotaryEmbedding

#: significand bits (with the implicit one) and smallest normal exponent
FORMATS = {
    torch.float16: (11, -14),
    torch.bfloat16: (8, -126),
    torch.float32: (24, -126),
    torch.float64: (53, -1022),
}


def reference(x, positions, base, layout, r):
    """RoPE in float64 NumPy, straight from the definition."""
    x = np.array(x, dtype=np.float64)
    inv_freq = base ** (-np.arange(0, r, 2, dtype=np.float64) / r)  # theta_i = base^(-2i/r)
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(angles), np.sin(angles)
    if layout == "interleaved":
        i1, i2 = np.arange(0, r, 2), np.arange(1, r, 2)
    else:
        i1, i2 = np.arange(r // 2), np.arange(r // 2, r)
    x1, x2 = x[..., i1], x[..., i2]
    y = x.copy()
    y[..., i1] = x1 * cos - x2 * sin
    y[..., i2] = x2 * cos + x1 * sin
    return y, i1, i2, np.hypot(x1, x2)


def ulp(values, dtype):
    """Spacing of ``dtype`` at ``|values|`` (subnormal spacing below the normal range)."""
    p, emin = FORMATS[dtype]
    v = np.abs(values)
    e = np.floor(np.log2(np.where(v > 0, v, 1.0)))
    e = np.maximum(np.where(v > 0, e, emin), emin)
    return np.exp2(e - (p - 1))


def assert_within_ulps(got, want, i1, i2, norm, dtype):
    got = got.detach().double().numpy()
    assert got.shape == want.shape
    r_cols = np.concatenate([i1, i2])
    rest = np.setdiff1d(np.arange(want.shape[-1]), r_cols)
    # features past rotary_dim pass through bit for bit
    np.testing.assert_array_equal(got[..., rest], want[..., rest])
    for cols in (i1, i2):
        err = np.abs(got[..., cols] - want[..., cols])
        if dtype in (torch.float16, torch.bfloat16):
            # one rounding of a float32 result: half an ulp of the output, plus float32
            bound = 0.5 * ulp(np.maximum(np.abs(want[..., cols]), np.abs(got[..., cols])),
                              dtype) + 8 * 2.0**-24 * norm
        else:
            bound = 4 * ulp(norm, dtype)
        assert (err <= bound).all(), (
            f"{dtype}: error {float((err / np.maximum(ulp(norm, dtype), 1e-300)).max()):.2f}"
            f" ulps of the pair norm"
        )


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from(list(FORMATS)))
    layout = draw(st.sampled_from(["interleaved", "half"]))
    d = 2 * draw(st.integers(1, 8))
    rotary_dim = draw(st.one_of(st.none(), st.integers(1, d // 2).map(lambda h: 2 * h)))
    seq = draw(st.integers(0, 6))
    lead = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    base = draw(st.one_of(st.sampled_from([10000.0, 500000.0, 1e6, 2.0]),
                          st.floats(1.01, 1e7)))
    offset = draw(st.one_of(st.integers(-40, 40), st.integers(-2**40, 2**40)))
    kind = draw(st.sampled_from(["default", "run", "scattered"]))
    if kind == "default":
        positions = None
    elif kind == "run":  # a KV-cache offset
        positions = list(range(offset, offset + seq))
    else:
        positions = draw(st.lists(st.one_of(st.integers(-40, 40),
                                            st.integers(-2**40, 2**40)),
                                  min_size=seq, max_size=seq))
    as_ = draw(st.sampled_from(["tensor", "list", "numpy"]))
    memory = draw(st.sampled_from(["contiguous", "odd offset", "transposed", "strided",
                                   "expanded"]))
    scale = draw(st.sampled_from([1.0, 1e-3, 300.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    max_seq_len = draw(st.integers(0, 8))
    return dict(dtype=dtype, layout=layout, d=d, rotary_dim=rotary_dim, seq=seq, lead=lead,
                base=base, positions=positions, as_=as_, memory=memory, scale=scale,
                seed=seed, max_seq_len=max_seq_len)


def make_input(values, dtype, memory):
    """A tensor equal to ``values`` (cast to ``dtype``) with the given memory layout, and
    the tensor that owns its storage (to check that nothing writes into it)."""
    t = torch.from_numpy(values).to(dtype)
    if memory == "odd offset":  # contiguous, but view_as_complex refuses it
        flat = torch.zeros(t.numel() + 1, dtype=dtype)
        flat[1:] = t.reshape(-1)
        return flat[1:].view(t.shape), flat
    if memory == "transposed":  # stride 1 along the sequence, not the features
        owner = t.transpose(-1, -2).contiguous()
        return owner.transpose(-1, -2), owner
    if memory == "strided":  # every other feature of a wider buffer
        owner = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=dtype)
        owner[..., ::2] = t
        return owner[..., ::2], owner
    if memory == "expanded":  # stride 0 along a leading dimension
        owner = t[:1].clone() if t.ndim > 2 and t.shape[0] else t.clone()
        if t.ndim > 2 and t.shape[0]:
            return owner.expand(t.shape), owner
        return owner.unsqueeze(0).expand(3, *t.shape), owner
    return t, t


def as_kind(positions, as_):
    if positions is None or as_ == "list":
        return positions
    arr = np.array(positions, dtype=np.int64)
    return torch.from_numpy(arr) if as_ == "tensor" else arr


def test_reference_frequencies_are_posenc_s():
    # the reference forms theta_i as inverse_frequencies does, so that at 2**40 both
    # round the float64 angle m * theta_i identically
    for r, base in [(2, 10000.0), (16, 500000.0), (128, 10000.0), (96, 1.5)]:
        mine = base ** (-np.arange(0, r, 2, dtype=np.float64) / r)
        np.testing.assert_array_equal(mine, posenc.inverse_frequencies(r, base))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_apply_rope_and_module_match_float64_reference(case):
    dtype, layout, d, seq = case["dtype"], case["layout"], case["d"], case["seq"]
    rng = np.random.default_rng(case["seed"])
    values = rng.standard_normal((*case["lead"], seq, d)) * case["scale"]
    x, owner = make_input(values, dtype, case["memory"])
    before, owner_before = x.clone(), owner.clone()
    pos = np.arange(seq) if case["positions"] is None else np.array(case["positions"])
    r = d if case["rotary_dim"] is None else case["rotary_dim"]
    want, i1, i2, norm = reference(x.double().numpy(), pos, case["base"], layout, r)

    got = apply_rope(x, as_kind(case["positions"], case["as_"]), base=case["base"],
                     layout=layout, rotary_dim=case["rotary_dim"])
    assert got.dtype == dtype and got.shape == x.shape and got.device == x.device
    assert_within_ulps(got, want, i1, i2, norm, dtype)

    # the functional formula (torch.func transforms, forward AD, tracing) obeys the same
    # bound: here under vmap over a leading dimension of one
    got = torch.func.vmap(lambda t: apply_rope(
        t, as_kind(case["positions"], case["as_"]), base=case["base"], layout=layout,
        rotary_dim=case["rotary_dim"]))(x.unsqueeze(0))[0]
    assert got.dtype == dtype and got.shape == x.shape
    assert_within_ulps(got, want, i1, i2, norm, dtype)

    if case["rotary_dim"] in (None, d):  # the module rotates all dim features
        rope = RotaryEmbedding(d, base=case["base"], layout=layout,
                               max_seq_len=case["max_seq_len"])
        q2, k2 = rope(x, x, as_kind(case["positions"], case["as_"]))
        assert q2.dtype == dtype and k2.dtype == dtype and q2.shape == x.shape
        assert_within_ulps(q2, want, i1, i2, norm, dtype)
        assert torch.equal(q2, k2)

    # the input and the memory it views are never written
    assert torch.equal(x, before) and torch.equal(owner, owner_before)
