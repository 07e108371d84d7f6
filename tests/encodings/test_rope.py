"""RoPE: rotation matrices, apply_rope in both layouts, NumPy and torch, precision, caches."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import apply_rope, rope_rotation_matrix

SETTINGS = settings(max_examples=30, deadline=None)
even_d = st.integers(1, 16).map(lambda h: 2 * h)
LAYOUTS = ["interleaved", "half"]


def rng(seed=0):
    return np.random.default_rng(seed)


def hf_rotate_half_reference(x, positions, base=10000.0):
    """Hugging Face's formula: x * cos + rotate_half(x) * sin, cos/sin duplicated halves."""
    d = x.shape[-1]
    ang = posenc.rope_angles(np.asarray(positions), d, base)
    cos = np.concatenate([np.cos(ang), np.cos(ang)], -1)
    sin = np.concatenate([np.sin(ang), np.sin(ang)], -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + np.concatenate([-x2, x1], -1) * sin


def llama_reference(x, positions, base=10000.0):
    """Meta Llama's formula: complex multiply of interleaved pairs by e^{i m theta}."""
    d = x.shape[-1]
    ang = posenc.rope_angles(np.asarray(positions), d, base)
    xc = x[..., 0::2] + 1j * x[..., 1::2]
    yc = xc * np.exp(1j * ang)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = yc.real, yc.imag
    return out


# -- rotation matrices -------------------------------------------------------------


@SETTINGS
@given(st.integers(-10_000, 10_000), st.integers(-10_000, 10_000), even_d)
def test_rotation_matrix_relative(m, n, d):
    Rm, Rn = rope_rotation_matrix(m, d), rope_rotation_matrix(n, d)
    np.testing.assert_allclose(Rm.T @ Rn, rope_rotation_matrix(n - m, d), atol=1e-8)
    np.testing.assert_allclose(Rm.T @ Rm, np.eye(d), atol=1e-12)


def test_rotation_matrix_zero_is_identity():
    np.testing.assert_array_equal(rope_rotation_matrix(0, 6), np.eye(6))


# -- apply_rope against matrices and reference formulas -----------------------------


@SETTINGS
@given(st.integers(0, 6), even_d, st.integers(-1000, 1000), st.sampled_from([10.0, 500.0, 1e4]))
def test_interleaved_matches_rotation_matrix(seq, d, start, base):
    x = rng(seq + d).normal(size=(2, seq, d))
    pos = np.arange(start, start + seq)
    y = apply_rope(x, pos, base=base)
    for s in range(seq):
        R = rope_rotation_matrix(int(pos[s]), d, base)
        np.testing.assert_allclose(y[:, s], x[:, s] @ R.T, atol=1e-10)


@SETTINGS
@given(st.integers(1, 6), even_d, st.integers(0, 100))
def test_half_matches_rotation_matrix_after_permutation(seq, d, start):
    x = rng(seq * d).normal(size=(seq, d))
    pos = np.arange(start, start + seq)
    perm = posenc.layout_permutation(d, "half", "interleaved")
    y = apply_rope(x, pos, layout="half")
    for s in range(seq):
        R = rope_rotation_matrix(int(pos[s]), d)
        np.testing.assert_allclose(y[s, perm], R @ x[s, perm], atol=1e-10)


def test_reference_formulas():
    x = rng(1).normal(size=(3, 7, 16))
    pos = np.arange(5, 12)
    np.testing.assert_allclose(apply_rope(x, pos, layout="half"),
                               hf_rotate_half_reference(x, pos), atol=1e-12)
    np.testing.assert_allclose(apply_rope(x, pos), llama_reference(x, pos), atol=1e-12)


@SETTINGS
@given(even_d, st.integers(1, 8))
def test_layouts_are_the_same_map_up_to_permutation(d, seq):
    x = rng(d).normal(size=(seq, d))
    for source, target in [("half", "interleaved"), ("interleaved", "half")]:
        perm = posenc.layout_permutation(d, source, target)
        np.testing.assert_allclose(apply_rope(x[..., perm], layout=target),
                                   apply_rope(x, layout=source)[..., perm], atol=1e-12)


def test_layouts_differ_without_permutation():
    x = rng(2).normal(size=(6, 8))
    assert not np.allclose(apply_rope(x, layout="half"), apply_rope(x, layout="interleaved"))


def test_rotary_embedding_torch_library_agrees():
    """The third-party rotary-embedding-torch (interleaved pairs) gives the same numbers."""
    from rotary_embedding_torch import RotaryEmbedding

    x = torch.randn(2, 3, 10, 16, dtype=torch.float64)
    ref = RotaryEmbedding(dim=16).rotate_queries_or_keys(x)
    torch.testing.assert_close(apply_rope(x), ref, atol=1e-5, rtol=0)


def test_transformers_apply_rotary_pos_emb_agrees():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q, k = torch.randn(2, 1, 4, 9, 32, dtype=torch.float64).unbind(0)
    ang = torch.from_numpy(posenc.rope_angles(9, 32))
    emb = torch.cat([ang, ang], -1)
    q_ref, k_ref = apply_rotary_pos_emb(q, k, emb.cos()[None], emb.sin()[None])
    torch.testing.assert_close(apply_rope(q, layout="half"), q_ref)
    torch.testing.assert_close(apply_rope(k, layout="half"), k_ref)


# -- properties ----------------------------------------------------------------------


@SETTINGS
@given(st.integers(-5000, 5000), st.integers(-5000, 5000), st.integers(-5000, 5000),
       even_d, st.sampled_from(LAYOUTS))
def test_scores_depend_only_on_offset(m, n, shift, d, layout):
    q, k = rng(d).normal(size=(2, 1, d))
    s1 = apply_rope(q, [m], layout=layout)[0] @ apply_rope(k, [n], layout=layout)[0]
    s2 = apply_rope(q, [m + shift], layout=layout)[0] @ apply_rope(k, [n + shift], layout=layout)[0]
    assert np.isclose(s1, s2, atol=1e-8)


@SETTINGS
@given(st.integers(0, 10), even_d, st.sampled_from(LAYOUTS), st.integers(-10**6, 10**6))
def test_rotation_preserves_norms(seq, d, layout, start):
    x = rng(seq).normal(size=(3, seq, d))
    y = apply_rope(x, np.arange(start, start + seq), layout=layout)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)


@SETTINGS
@given(st.integers(1, 20), st.integers(0, 19), even_d, st.sampled_from(LAYOUTS))
def test_kv_cache_offsets_equal_slicing(total, split, d, layout):
    split = min(split, total - 1)
    x = rng(total).normal(size=(2, total, d))
    full = apply_rope(x, layout=layout)
    tail = apply_rope(x[:, split:], np.arange(split, total), layout=layout)
    np.testing.assert_allclose(tail, full[:, split:], atol=1e-12)
    # the torch path too
    tail_t = apply_rope(torch.from_numpy(x[:, split:]), torch.arange(split, total), layout=layout)
    np.testing.assert_allclose(tail_t.numpy(), full[:, split:], atol=1e-12)


def test_partial_rotary():
    x = rng(3).normal(size=(2, 5, 12))
    for layout in LAYOUTS:
        y = apply_rope(x, layout=layout, rotary_dim=8)
        np.testing.assert_array_equal(y[..., 8:], x[..., 8:])
        np.testing.assert_allclose(y[..., :8], apply_rope(x[..., :8], layout=layout))
        yt = apply_rope(torch.from_numpy(x), layout=layout, rotary_dim=8)
        np.testing.assert_allclose(yt.numpy(), y, atol=1e-12)
        yf = apply_rope(torch.from_numpy(x).float(), layout=layout, rotary_dim=8)
        np.testing.assert_allclose(yf.numpy(), y, atol=1e-5)


# -- NumPy and torch agree; kinds and dtypes are kept ---------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_torch_matches_numpy(layout, dtype):
    x = rng(4).normal(size=(2, 3, 17, 32))
    pos = np.arange(100, 117)
    ref = apply_rope(x, pos, layout=layout)
    xt = torch.from_numpy(x).to(dtype)
    y = apply_rope(xt, torch.from_numpy(pos), layout=layout)
    assert isinstance(y, torch.Tensor) and y.dtype == dtype and y.shape == xt.shape
    assert y.device == xt.device
    # float16/bfloat16 are rotated in float32 and cast once: error of one final rounding
    # of the input and one of the output.
    ref_from_rounded = apply_rope(xt.double().numpy(), pos, layout=layout)
    tol = {torch.float64: 1e-12, torch.float32: 2e-6,
           torch.float16: 4e-3, torch.bfloat16: 3e-2}[dtype]
    np.testing.assert_allclose(y.double().numpy(), ref_from_rounded, atol=tol, rtol=0)
    if dtype == torch.float64:
        np.testing.assert_allclose(y.numpy(), ref, atol=1e-12)


def test_numpy_dtypes_kept():
    x = rng(5).normal(size=(4, 8))
    assert apply_rope(x.astype(np.float32)).dtype == np.float32
    assert apply_rope(x).dtype == np.float64
    assert apply_rope(np.ones((4, 8), dtype=np.int32)).dtype == np.float64
    assert isinstance(apply_rope(x.tolist()), np.ndarray)


def test_positions_as_list_array_or_tensor():
    x = torch.randn(5, 8)
    a = apply_rope(x, [3, 1, 4, 1, 5])
    b = apply_rope(x, np.array([3, 1, 4, 1, 5], dtype=np.int16))
    c = apply_rope(x, torch.tensor([3, 1, 4, 1, 5]))
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a, c)
    expected = apply_rope(x.double().numpy(), [3, 1, 4, 1, 5])
    np.testing.assert_allclose(a.numpy(), expected, atol=2e-6)


def test_non_contiguous_tensor_input():
    base = torch.randn(2, 10, 4, 16)  # (batch, seq, heads, dim)
    x = base.transpose(1, 2)  # (batch, heads, seq, dim), not contiguous
    for layout in LAYOUTS:
        y = apply_rope(x, layout=layout)
        torch.testing.assert_close(y, apply_rope(x.contiguous(), layout=layout))
    xs = torch.randn(3, 8, 20)[..., ::2, :4]  # odd strides
    torch.testing.assert_close(apply_rope(xs), apply_rope(xs.contiguous()))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_autograd(layout):
    x = torch.randn(2, 6, 8, dtype=torch.float64, requires_grad=True)
    y = apply_rope(x, layout=layout)
    (y * torch.arange(8.0, dtype=torch.float64)).sum().backward()
    # a rotation's Jacobian is R, so the gradient is R^T g: check with the NumPy path
    g = np.broadcast_to(np.arange(8.0), (2, 6, 8))
    expected = apply_rope(g, -np.arange(6), layout=layout)  # R_m^T = R_{-m}
    np.testing.assert_allclose(x.grad.numpy(), expected, atol=1e-12)
    assert torch.autograd.gradcheck(
        lambda t: apply_rope(t, layout=layout, rotary_dim=4), (torch.randn(3, 6, dtype=torch.float64,
                                                                            requires_grad=True),))


def test_cache_reuses_tables_and_is_bounded():
    posenc.clear_rope_cache()
    x = torch.randn(1, 2, 9, 8)
    from posenc.torch import _tables as rope_mod

    apply_rope(x)
    apply_rope(x)
    apply_rope(x, torch.arange(0, 9))  # the same run of positions: the same entry
    assert len(rope_mod._cache) == 1
    apply_rope(x, torch.arange(5, 14))
    apply_rope(x, layout="half")
    assert len(rope_mod._cache) == 3
    for start in range(100):
        apply_rope(x, np.arange(start, start + 9) * 3)
    assert len(rope_mod._cache) == rope_mod._CACHE_SIZE
    posenc.clear_rope_cache()
    assert len(rope_mod._cache) == 0


def test_base_changes_result_and_cache_key():
    x = torch.randn(4, 8)
    a = apply_rope(x, base=10000.0)
    b = apply_rope(x, base=500.0)
    assert not torch.allclose(a, b)
    np.testing.assert_allclose(b.numpy(), apply_rope(x.double().numpy(), base=500.0), atol=2e-6)


# -- precision -------------------------------------------------------------------------


def test_float32_accuracy_at_a_million():
    """float64 angles: a float32 result at position ~1e6 is as accurate as float32 allows.

    The usual float32 angles (positions.float() * inv_freq.float()) err by orders of
    magnitude more there.
    """
    d, seq = 128, 256
    gen = torch.Generator().manual_seed(0)
    x64 = torch.randn(4, seq, d, dtype=torch.float64, generator=gen)
    x64 = x64 / x64.norm(dim=-1, keepdim=True) * np.sqrt(d) / 2  # unit-scale entries
    x32 = x64.float()
    pos = torch.arange(1_000_000 - seq + 1, 1_000_001)
    for layout in LAYOUTS:
        ref = apply_rope(x32.double(), pos, layout=layout)  # float64 throughout
        ours = apply_rope(x32, pos, layout=layout)
        err_ours = (ours.double() - ref).abs().max().item()
        assert err_ours <= 1e-5, err_ours

        # the usual way: float32 positions times float32 inverse frequencies
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2).float() / d))
        angles = pos.float()[:, None] * inv_freq[None, :]
        usual = torch.from_numpy(posenc.rotate_pairs(x32.numpy(), angles.numpy(), layout=layout))
        err_usual = (usual - ref).abs().max().item()
        assert err_usual > 1e-3, err_usual
        assert err_usual > 100 * err_ours
    # posenc's float32-angle helper reproduces the usual torch angles
    a32 = posenc.rope_angles_float32(pos.numpy(), d)
    np.testing.assert_allclose(a32, angles.numpy(), rtol=2e-7)


def test_angle_error_grows_with_position():
    err = posenc.angle_error(np.array([10, 1000, 100_000, 1_000_000]), 64).max(axis=1)
    assert np.all(np.diff(err) > 0)
    assert err[-1] > 1e-2 and err[0] < 1e-5


def test_rope_angles_forms():
    np.testing.assert_array_equal(posenc.rope_angles(4, 8), posenc.rope_angles(np.arange(4), 8))
    assert posenc.rope_angles(0, 8).shape == (0, 4)


# -- float16 / bfloat16 on the CPU: blocked, one rounding --------------------------------


def _half_ulp(v, dtype):
    """Half the spacing of ``dtype`` numbers at ``|v|`` (float64 tensor in, float64 out)."""
    mant = {torch.bfloat16: 7, torch.float16: 10}[dtype]
    tiny = {torch.bfloat16: 2.0**-126, torch.float16: 2.0**-14}[dtype]
    e = torch.floor(torch.log2(v.abs().clamp_min(tiny)))
    return 2.0 ** (e - mant) / 2


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("rotary_dim", [None, 8])
def test_low_precision_is_one_rounding_of_the_exact_result(dtype, layout, rotary_dim):
    x = torch.randn(3, 4, 37, 16, generator=torch.Generator().manual_seed(7)).to(dtype)
    pos = np.arange(1000, 1037)
    y = apply_rope(x, pos, layout=layout, rotary_dim=rotary_dim)
    assert y.dtype == dtype and y.shape == x.shape
    exact = torch.from_numpy(apply_rope(x.double().numpy(), pos, layout=layout,
                                        rotary_dim=rotary_dim))
    err = (y.double() - exact).abs()
    # At most half a unit in the last place, plus float32's own rounding on the way (which
    # is relative to the inputs: x1 cos - x2 sin can cancel to far below |x|).
    slack = 1e-6 * x.double().abs().max()
    assert bool((err <= _half_ulp(exact, dtype) + slack).all()), (err - _half_ulp(exact, dtype)).max()


def test_low_precision_beats_rounding_after_every_operation():
    """Hugging Face's formula in bfloat16 (bfloat16 tables, a rounding per operation)
    errs more than posenc's single rounding, on the same input."""
    x = torch.randn(2, 8, 256, 64, generator=torch.Generator().manual_seed(8)).bfloat16()
    exact = torch.from_numpy(apply_rope(x.double().numpy(), layout="half"))
    ang = torch.from_numpy(posenc.rope_angles(256, 64))
    emb = torch.cat([ang, ang], -1)
    cos, sin = emb.cos().bfloat16(), emb.sin().bfloat16()
    hf = x * cos + torch.cat((-x[..., 32:], x[..., :32]), dim=-1) * sin  # all in bfloat16
    ours = apply_rope(x, layout="half")
    err_hf = (hf.double() - exact).abs().max().item()
    err_ours = (ours.double() - exact).abs().max().item()
    assert err_ours < 0.6 * err_hf


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("block", [64, 1000, 16 * 40])
def test_blocking_does_not_change_a_bit(monkeypatch, layout, block):
    """Blocks that split the sequence, group whole slices, or end unevenly: same bits."""
    from posenc.torch import _eager as rope_mod

    base = torch.randn(2, 40, 3, 16, generator=torch.Generator().manual_seed(9)).bfloat16()
    x = base.transpose(1, 2)  # (2, 3, 40, 16), not contiguous
    pos = torch.arange(7, 47)
    whole = apply_rope(x, pos, layout=layout, rotary_dim=12)  # one block
    monkeypatch.setattr(rope_mod, "_BLOCK", block)
    monkeypatch.setattr("posenc.torch._apply._SMALL", 0)
    blocked = apply_rope(x, pos, layout=layout, rotary_dim=12)
    assert torch.equal(blocked, whole)
    assert blocked.is_contiguous()


def test_low_precision_blocks_cover_every_row_once():
    from posenc.torch import _eager as rope_mod
    from posenc.torch._eager import _blocks

    for n_rows, seq, d, block in [(6, 40, 16, 64), (6, 40, 16, 640), (6, 40, 16, 10**6),
                                  (1, 1, 2, 1), (3, 5, 4, 7)]:
        seen = np.zeros((n_rows, seq), dtype=int)
        old = rope_mod._BLOCK
        rope_mod._BLOCK = block
        try:
            for b, s in _blocks(n_rows, seq, d):
                seen[b, s] += 1
        finally:
            rope_mod._BLOCK = old
        assert (seen == 1).all(), (n_rows, seq, d, block)


def test_low_precision_autograd_still_differentiable():
    x = torch.randn(2, 5, 8).bfloat16().requires_grad_()
    y = apply_rope(x, layout="half")
    y.float().sum().backward()
    assert x.grad is not None and x.grad.dtype == torch.bfloat16
