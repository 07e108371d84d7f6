"""posenc.multidim: 2-D sin-cos, resized grids, axial 2-D RoPE, M-RoPE against transformers."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st

import posenc
from posenc import (
    apply_mrope,
    apply_rope_2d,
    apply_rope_mixed,
    grid_positions,
    mrope_pair_components,
    mrope_position_ids,
    resample_position_grid,
    rope_mixed_frequencies,
    sinusoidal_encoding_2d,
)

SETTINGS = settings(max_examples=30, deadline=None)
LAYOUTS = ["interleaved", "half"]


def rng(seed=0):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------------------
# grid positions and the 2-D sine-cosine table
# --------------------------------------------------------------------------------------


def test_grid_positions_raster_order():
    rows, cols = grid_positions(3, 4)
    assert rows.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert cols.tolist() == [0, 1, 2, 3] * 3
    assert rows.dtype == np.int64 and cols.dtype == np.int64
    assert grid_positions(0, 5)[0].shape == (0,)
    assert grid_positions(5, 0)[0].shape == (0,)


def mae_reference(height, width, d_model):
    """MAE's util/pos_embed.py, written out (meshgrid(grid_w, grid_h): w goes first)."""
    grid_h = np.arange(height, dtype=np.float64)
    grid_w = np.arange(width, dtype=np.float64)
    grid = np.stack(np.meshgrid(grid_w, grid_h), axis=0).reshape(2, 1, height, width)

    def one_d(dim, pos):
        omega = np.arange(dim // 2, dtype=np.float64) / (dim / 2.0)
        omega = 1.0 / 10000**omega
        out = np.einsum("m,d->md", pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    emb_first = one_d(d_model // 2, grid[0])  # MAE calls it emb_h
    emb_second = one_d(d_model // 2, grid[1])
    return np.concatenate([emb_first, emb_second], axis=1)


@pytest.mark.parametrize("shape", [(14, 14), (3, 5), (6, 2), (1, 1)])
@pytest.mark.parametrize("d", [4, 8, 64])
def test_sinusoidal_2d_matches_mae_layout(shape, d):
    got = sinusoidal_encoding_2d(*shape, d)
    assert got.shape == (shape[0] * shape[1], d) and got.dtype == np.float64
    np.testing.assert_allclose(got, mae_reference(*shape, d), atol=1e-12)


def test_sinusoidal_2d_first_half_is_the_column_second_half_the_row():
    h, w, d = 5, 7, 16
    pe = sinusoidal_encoding_2d(h, w, d).reshape(h, w, d)
    # first half: the same in every row (depends on the column only)
    np.testing.assert_array_equal(pe[:, :, : d // 2], np.broadcast_to(pe[:1, :, : d // 2],
                                                                     (h, w, d // 2)))
    # second half: the same in every column (depends on the row only)
    np.testing.assert_array_equal(pe[:, :, d // 2:], np.broadcast_to(pe[:, :1, d // 2:],
                                                                    (h, w, d // 2)))
    # each half is the 1-D table of Vaswani et al. regrouped: sines, then cosines
    one_d = posenc.sinusoidal_encoding(w, d // 2)
    np.testing.assert_allclose(pe[0, :, : d // 4], one_d[:, 0::2], atol=1e-12)
    np.testing.assert_allclose(pe[0, :, d // 4: d // 2], one_d[:, 1::2], atol=1e-12)
    rows_1d = posenc.sinusoidal_encoding(h, d // 2)
    np.testing.assert_allclose(pe[:, 0, d // 2: 3 * d // 4], rows_1d[:, 0::2], atol=1e-12)


@SETTINGS
@given(st.integers(0, 9), st.integers(0, 9), st.integers(0, 9), st.integers(0, 9),
       st.integers(-5, 5), st.integers(-5, 5), st.sampled_from([4, 8, 32]))
def test_sinusoidal_2d_dot_product_depends_only_on_offset(r1, c1, r2, c2, dr, dc, d):
    pe = sinusoidal_encoding_2d(20, 20, d).reshape(20, 20, d)
    a = pe[r1, c1] @ pe[r1 + dr + 5, c1 + dc + 5]
    b = pe[r2, c2] @ pe[r2 + dr + 5, c2 + dc + 5]
    assert a == pytest.approx(b, abs=1e-9)


def test_sinusoidal_2d_bad_input():
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal_encoding_2d(2, 2, 6)
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal_encoding_2d(2, 2, 5)
    with pytest.raises(TypeError, match="height"):
        sinusoidal_encoding_2d(2.0, 2, 8)
    with pytest.raises(ValueError, match="width"):
        sinusoidal_encoding_2d(2, -1, 8)
    with pytest.raises(ValueError, match="base"):
        sinusoidal_encoding_2d(2, 2, 8, base=1.0)


# --------------------------------------------------------------------------------------
# resizing a learned table
# --------------------------------------------------------------------------------------


def test_resample_same_size_is_identity_and_keeps_prefix():
    table = rng().normal(size=(1 + 14 * 14, 8))
    out = resample_position_grid(table, (14, 14), (14, 14), num_prefix_tokens=1)
    np.testing.assert_allclose(out, table, atol=1e-12)
    grown = resample_position_grid(table, (14, 14), (24, 20), num_prefix_tokens=1)
    assert grown.shape == (1 + 24 * 20, 8) and grown.dtype == np.float64
    np.testing.assert_array_equal(grown[0], table[0])


def test_resample_equals_interpolate_on_the_raster_grid():
    # the same computation done by hand: rows of the table -> (1, d, H, W) image
    h, w, d = 5, 7, 3
    table = rng(1).normal(size=(h * w, d))
    image = torch.from_numpy(table.T.reshape(1, d, h, w).copy())
    ref = F.interpolate(image, size=(9, 4), mode="bicubic", align_corners=False,
                        antialias=True)
    expected = ref[0].reshape(d, 9 * 4).T.numpy()
    np.testing.assert_allclose(resample_position_grid(table, (h, w), (9, 4)), expected,
                               atol=1e-12)


@pytest.mark.parametrize("new", [(24, 24), (7, 7), (20, 9)])
def test_resample_keeps_constants_and_axes(new):
    h, w = 14, 14
    const = np.full((h * w, 2), 3.5)
    np.testing.assert_allclose(resample_position_grid(const, (h, w), new), 3.5, atol=1e-12)
    rows, cols = grid_positions(h, w)
    row_only = np.stack([np.sin(rows / 3.0), rows ** 2], axis=1).astype(np.float64)
    out = resample_position_grid(row_only, (h, w), new).reshape(*new, 2)
    # a table that depends on the row only still does: every column of a row equal
    np.testing.assert_allclose(out, np.broadcast_to(out[:, :1], out.shape), atol=1e-12)


def test_resample_tensor_keeps_dtype_and_device():
    t = torch.randn(1 + 16, 4, dtype=torch.float32)
    out = resample_position_grid(t, (4, 4), (6, 6), num_prefix_tokens=1)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert out.shape == (37, 4)
    t16 = t.to(torch.bfloat16)
    assert resample_position_grid(t16, (4, 4), (3, 3), num_prefix_tokens=1).dtype \
        == torch.bfloat16


def test_resample_bad_input():
    table = np.zeros((16, 4))
    with pytest.raises(ValueError, match="rows"):
        resample_position_grid(table, (4, 5), (6, 6))
    with pytest.raises(ValueError, match="rows"):
        resample_position_grid(table, (4, 4), (6, 6), num_prefix_tokens=1)
    with pytest.raises(ValueError, match="old_size"):
        resample_position_grid(table, 4, (6, 6))
    with pytest.raises(ValueError, match="new_size"):
        resample_position_grid(table, (4, 4), (0, 6))
    with pytest.raises(ValueError, match="table must be 2-D"):
        resample_position_grid(np.zeros((1, 16, 4)), (4, 4), (6, 6))
    with pytest.raises(TypeError, match="table"):
        resample_position_grid(np.zeros((16, 4), dtype=bool), (4, 4), (6, 6))
    with pytest.raises(TypeError, match="table"):
        resample_position_grid(torch.zeros(16, 4, dtype=torch.int64), (4, 4), (6, 6))
    with pytest.raises(TypeError, match="num_prefix_tokens"):
        resample_position_grid(table, (4, 4), (6, 6), num_prefix_tokens=1.0)


# --------------------------------------------------------------------------------------
# axial 2-D RoPE
# --------------------------------------------------------------------------------------


def rope_vit_axial_reference(x, rows, cols, base):
    """Heo et al.'s compute_axial_cis + apply_rotary_emb, written out with complex numbers."""
    d = x.shape[-1]
    freqs = 1.0 / base ** (np.arange(0, d, 4)[: d // 4] / d)
    angles = np.concatenate([np.outer(cols, freqs), np.outer(rows, freqs)], axis=-1)
    xc = x[..., 0::2] + 1j * x[..., 1::2]
    yc = xc * np.exp(1j * angles)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = yc.real, yc.imag
    return out


@pytest.mark.parametrize("base", [100.0, 10000.0])
def test_rope_2d_interleaved_is_heo_axial(base):
    x = rng(2).normal(size=(2, 3, 12, 16))
    rows, cols = grid_positions(3, 4)
    np.testing.assert_allclose(apply_rope_2d(x, rows, cols, base=base),
                               rope_vit_axial_reference(x, rows, cols, base), atol=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rope_2d_each_half_is_1d_rope(layout):
    # with the row fixed at 0, the column pairs are a 1-D RoPE of width d/2 on the column
    d = 16
    x = rng(3).normal(size=(5, d))
    cols = np.array([0, 3, 7, 11, 40])
    out = apply_rope_2d(x, np.zeros(5, dtype=int), cols, layout=layout)
    if layout == "interleaved":
        np.testing.assert_allclose(out[:, : d // 2], posenc.apply_rope(x[:, : d // 2], cols),
                                   atol=1e-12)
        np.testing.assert_allclose(out[:, d // 2:], x[:, d // 2:], atol=1e-12)
    else:
        col_feats = np.r_[0: d // 4, d // 2: 3 * d // 4]   # pairs (j, j + d/2), j < d/4
        np.testing.assert_allclose(
            out[:, col_feats], posenc.apply_rope(x[:, col_feats], cols, layout="half"),
            atol=1e-12)
        row_feats = np.r_[d // 4: d // 2, 3 * d // 4: d]
        np.testing.assert_allclose(out[:, row_feats], x[:, row_feats], atol=1e-12)


@SETTINGS
@given(st.integers(-50, 50), st.integers(-50, 50), st.integers(-50, 50), st.integers(-50, 50),
       st.integers(-20, 20), st.integers(-20, 20), st.sampled_from(LAYOUTS),
       st.sampled_from([4, 8, 24]), st.integers(0, 2**31 - 1))
def test_rope_2d_score_depends_only_on_row_and_column_offset(r1, c1, r2, c2, dr, dc, layout,
                                                             d, seed):
    q, k = rng(seed).normal(size=(2, 1, d))

    def score(r, c):
        qr = apply_rope_2d(q, [r], [c], layout=layout)
        kr = apply_rope_2d(k, [r + dr], [c + dc], layout=layout)
        return float((qr @ kr.T)[0, 0])

    assert score(r1, c1) == pytest.approx(score(r2, c2), abs=1e-9)


def test_rope_2d_is_not_a_function_of_the_raster_offset():
    # (0, 13) -> (1, 0) and (0, 0) -> (0, 1) are both 1 apart in raster order (width 14)
    q, k = rng(4).normal(size=(2, 1, 32))

    def score(r, c, r2, c2):
        return float((apply_rope_2d(q, [r], [c]) @ apply_rope_2d(k, [r2], [c2]).T)[0, 0])

    assert abs(score(0, 13, 1, 0) - score(0, 0, 0, 1)) > 1e-3


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_rope_2d_torch_matches_numpy(layout, dtype):
    x = torch.randn(2, 3, 20, 16, dtype=torch.float64)
    rows, cols = grid_positions(4, 5)
    ref = apply_rope_2d(x.numpy(), rows, cols, layout=layout)
    out = apply_rope_2d(x.to(dtype), torch.from_numpy(rows), cols, layout=layout)
    assert out.dtype == dtype and out.shape == x.shape
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 3e-2}[dtype]
    np.testing.assert_allclose(out.double().numpy(), ref, atol=tol * 4, rtol=tol)
    with torch.inference_mode():
        again = apply_rope_2d(x.to(dtype), rows, cols, layout=layout)
    assert torch.equal(again, out)


def test_rope_2d_keeps_norms_and_grad():
    x = torch.randn(7, 8, dtype=torch.float64, requires_grad=True)
    rows, cols = np.arange(7), np.arange(7)[::-1].copy()
    out = apply_rope_2d(x, rows, cols)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    out.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape


def test_rope_2d_bad_input():
    x = np.zeros((4, 8))
    with pytest.raises(ValueError, match="multiple of 4"):
        apply_rope_2d(np.zeros((4, 6)), np.arange(4), np.arange(4))
    with pytest.raises(ValueError, match="multiple of 4"):
        apply_rope_2d(np.zeros((4, 5)), np.arange(4), np.arange(4))
    with pytest.raises(ValueError, match="rows"):
        apply_rope_2d(x, np.arange(3), np.arange(4))
    with pytest.raises(ValueError, match="cols"):
        apply_rope_2d(x, np.arange(4), np.arange(4).reshape(2, 2))
    with pytest.raises(TypeError, match="cols"):
        apply_rope_2d(x, np.arange(4), np.arange(4.0))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        apply_rope_2d(np.zeros(8), [0], [0])
    with pytest.raises(ValueError, match="layout"):
        apply_rope_2d(x, np.arange(4), np.arange(4), layout="neox")
    with pytest.raises(TypeError, match="x must"):
        apply_rope_2d(torch.zeros(4, 8, dtype=torch.int32), np.arange(4), np.arange(4))
    with pytest.raises(TypeError, match="x must"):
        apply_rope_2d(np.array([["a"] * 8] * 4), np.arange(4), np.arange(4))


# --------------------------------------------------------------------------------------
# M-RoPE: position ids and rotation, against transformers' Qwen2-VL and Qwen3-VL
# --------------------------------------------------------------------------------------
# RoPE-Mixed
# --------------------------------------------------------------------------------------


def mixed_reference(x, rows, cols, freqs):
    """RoPE-Mixed written with complex numbers: feature pairs (2t, 2t+1) as x + iy,
    multiplied by exp(i (fx_t * col + fy_t * row))."""
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    ang = (torch.as_tensor(cols, dtype=torch.float64)[:, None] * freqs[0][..., None, :]
           + torch.as_tensor(rows, dtype=torch.float64)[:, None] * freqs[1][..., None, :])
    return torch.view_as_real(z * torch.polar(torch.ones_like(ang), ang)).flatten(-2)


def test_rope_mixed_frequencies_shape_and_initialisation():
    f = rope_mixed_frequencies(64, 6, seed=3)
    assert f.shape == (2, 6, 32) and f.dtype == np.float64
    mag = 10.0 ** (-np.arange(0, 64, 4) / 64)
    # every pair's 2-D frequency has the axial magnitude base^(-4j/d) ...
    np.testing.assert_allclose(np.hypot(f[0], f[1]), np.tile(np.r_[mag, mag], (6, 1)))
    # ... the second quarter is the first turned by 90 degrees, one angle per head
    np.testing.assert_allclose(f[0, :, 16:], -f[1, :, :16])
    np.testing.assert_allclose(f[1, :, 16:], f[0, :, :16])
    phi = np.arctan2(f[1, :, 0], f[0, :, 0])
    assert len(set(np.round(phi, 6))) == 6
    np.testing.assert_array_equal(rope_mixed_frequencies(64, 6, seed=3), f)
    assert not np.array_equal(rope_mixed_frequencies(64, 6, seed=4), f)


@pytest.mark.parametrize("base", [10.0, 100.0, 10000.0])
def test_rope_mixed_unrotated_is_axial_rope(base):
    """rotate=False gives angle 0: RoPE-Mixed is then axial 2-D RoPE (interleaved)."""
    f = rope_mixed_frequencies(16, base=base, rotate=False)[:, 0]
    x = rng(1).normal(size=(3, 12, 16))
    rows, cols = grid_positions(3, 4)
    np.testing.assert_allclose(apply_rope_mixed(x, rows, cols, f),
                               apply_rope_2d(x, rows, cols, base=base), atol=1e-12)


@SETTINGS
@given(st.integers(-50, 50), st.integers(-50, 50), st.integers(-50, 50), st.integers(-50, 50),
       st.integers(-30, 30), st.integers(-30, 30), st.integers(0, 10_000))
def test_rope_mixed_score_depends_only_on_offset(r1, c1, r2, c2, dr, dc, seed):
    f = rope_mixed_frequencies(16, seed=seed)[:, 0]
    q, k = rng(seed).normal(size=(2, 1, 16))

    def score(r, c, rr, cc):
        return float(apply_rope_mixed(q, [r], [c], f)[0] @ apply_rope_mixed(k, [rr], [cc], f)[0])

    assert np.isclose(score(r1, c1, r2, c2), score(r1 + dr, c1 + dc, r2 + dr, c2 + dc),
                      atol=1e-9)


def test_rope_mixed_mixes_the_axes():
    """A rotated head is not a sum of a function of the row and one of the column:
    moving along a diagonal changes every pair's angle by fx + fy."""
    f = rope_mixed_frequencies(8, seed=0)[:, 0]
    assert np.all(np.abs(f) > 1e-3)                    # every pair follows both axes
    e = np.eye(8)                                       # token t: unit vector in feature t
    step = apply_rope_mixed(e, np.zeros(8, int), np.ones(8, int), f)   # one column right
    angles = np.arctan2(step[np.arange(0, 8, 2), np.arange(1, 8, 2)],
                        step[np.arange(0, 8, 2), np.arange(0, 8, 2)])
    np.testing.assert_allclose(angles, f[0], atol=1e-12)


def test_rope_mixed_heads_torch_matches_numpy_and_reference():
    f = rope_mixed_frequencies(16, 3, seed=2)
    rows, cols = grid_positions(4, 5)
    x = rng(3).normal(size=(2, 3, 20, 16))
    ours = apply_rope_mixed(x, rows, cols, f)
    ref = mixed_reference(torch.from_numpy(x), rows, cols, torch.from_numpy(f)).numpy()
    np.testing.assert_allclose(ours, ref, atol=1e-12)
    t = apply_rope_mixed(torch.from_numpy(x).float(), torch.from_numpy(rows),
                         torch.from_numpy(cols), torch.from_numpy(f).float())
    assert t.dtype == torch.float32
    np.testing.assert_allclose(t.double().numpy(), ours, atol=1e-5)
    # each head uses its own frequencies
    one = apply_rope_mixed(x[:, 1], rows, cols, f[:, 1])
    np.testing.assert_allclose(ours[:, 1], one, atol=1e-12)


def test_rope_mixed_frequencies_learn():
    """With learnable frequencies (an nn.Parameter), gradients reach them, and the
    norms of the rotated vectors do not change."""
    f = torch.nn.Parameter(torch.from_numpy(rope_mixed_frequencies(8, 2, seed=0)))
    rows, cols = (torch.from_numpy(a) for a in grid_positions(3, 3))
    x = torch.randn(2, 9, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = apply_rope_mixed(x, rows, cols, f)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    (y[:, :-1] * y[:, 1:]).sum().backward()
    assert f.grad is not None and f.grad.abs().sum() > 0


def test_rope_mixed_module_is_the_function_with_learnable_frequencies():
    from posenc.torch import RoPEMixed

    rope = RoPEMixed(16, 3, seed=5)
    assert rope.frequencies.shape == (2, 3, 8) and rope.frequencies.requires_grad
    np.testing.assert_allclose(rope.frequencies.detach().double().numpy(),
                               rope_mixed_frequencies(16, 3, seed=5), rtol=1e-6)
    assert "frequencies" in rope.state_dict()
    rows, cols = (torch.from_numpy(a) for a in grid_positions(2, 4))
    x = torch.randn(2, 3, 8, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = rope(x, rows, cols)
    expected = apply_rope_mixed(x.numpy(), rows.numpy(), cols.numpy(),
                                rope.frequencies.detach().double().numpy())
    np.testing.assert_allclose(y.detach().numpy(), expected, atol=1e-12)
    y.square().mul(torch.arange(16.0, dtype=torch.float64)).sum().backward()
    assert rope.frequencies.grad is not None and rope.frequencies.grad.abs().sum() > 0
    axial = RoPEMixed(16, 1, base=10000.0, rotate=False)
    np.testing.assert_allclose(
        axial(x[:, :1], rows, cols).detach().numpy(),
        apply_rope_2d(x[:, :1].numpy(), rows.numpy(), cols.numpy()), atol=1e-5)
    assert "num_heads=3" in repr(rope)
    with pytest.raises(ValueError, match="frequencies must have shape"):
        rope(torch.randn(2, 2, 8, 16), rows, cols)
    with pytest.raises(TypeError, match="rotate"):
        RoPEMixed(16, 3, rotate="no")


def test_rope_mixed_bad_input():
    f = rope_mixed_frequencies(8)[:, 0]
    with pytest.raises(ValueError, match="frequencies must have shape"):
        apply_rope_mixed(np.zeros((3, 8)), [0, 1, 2], [0, 1, 2], f[:, :3])
    with pytest.raises(ValueError, match="frequencies must have shape"):
        apply_rope_mixed(np.zeros((3, 8)), [0, 1, 2], [0, 1, 2], rope_mixed_frequencies(8, 2))
    with pytest.raises(ValueError, match="even"):
        apply_rope_mixed(np.zeros((3, 7)), [0, 1, 2], [0, 1, 2], f)
    with pytest.raises(ValueError, match="rows"):
        apply_rope_mixed(np.zeros((3, 8)), [0, 1], [0, 1, 2], f)
    with pytest.raises(TypeError, match="cols"):
        apply_rope_mixed(np.zeros((3, 8)), [0, 1, 2], [0.5, 1, 2], f)
    with pytest.raises(TypeError, match="frequencies"):
        apply_rope_mixed(np.zeros((3, 8)), [0, 1, 2], [0, 1, 2], np.ones((2, 4), dtype=complex))
    with pytest.raises(ValueError, match="multiple of 4"):
        rope_mixed_frequencies(6)
    with pytest.raises(ValueError, match="num_heads"):
        rope_mixed_frequencies(8, 0)
    with pytest.raises(ValueError, match="base"):
        rope_mixed_frequencies(8, base=1.0)
    with pytest.raises(TypeError, match="rotate"):
        rope_mixed_frequencies(8, rotate=1)


# --------------------------------------------------------------------------------------

MERGE = 2  # Qwen2-VL's spatial_merge_size: the LLM sees (h / 2) x (w / 2) tokens


@pytest.fixture(scope="module")
def qwen2vl_model():
    """A tiny Qwen2-VL built from a config with random weights (no download)."""
    from transformers import Qwen2VLConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    cfg = Qwen2VLConfig(
        text_config=dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                         intermediate_size=32, num_hidden_layers=1, vocab_size=64,
                         bos_token_id=None, eos_token_id=None,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                          "mrope_section": [2, 3, 3]}),
        vision_config=dict(depth=1, embed_dim=16, hidden_size=32, num_heads=2, mlp_ratio=1,
                           spatial_merge_size=MERGE),
    )
    torch.manual_seed(0)
    return Qwen2VLModel(cfg).eval()


def hf_position_ids(model, prompts):
    """get_rope_index for a batch of prompts (lists of text lengths and (h, w) images)."""
    types, grids = [], []
    for segments in prompts:
        row = []
        for seg in segments:
            if isinstance(seg, int):
                row += [0] * seg
            else:
                row += [1] * (seg[0] * seg[1])
                grids.append([1, MERGE * seg[0], MERGE * seg[1]])
        types.append(row)
    tt = torch.tensor(types)
    ids = torch.zeros_like(tt)
    grid = torch.tensor(grids) if grids else None
    pos, _ = model.get_rope_index(ids, tt, image_grid_thw=grid)
    return pos


@pytest.mark.parametrize("segments", [
    [3, (2, 3), 2],
    [1, (4, 2), 5],
    [5, (1, 1), 1],
    [2, (3, 3), 2, (2, 5), 3],
    [(2, 2), 4],
])
def test_mrope_position_ids_match_get_rope_index(qwen2vl_model, segments):
    expected = hf_position_ids(qwen2vl_model, [segments])[:, 0].numpy()
    got = mrope_position_ids(segments)
    np.testing.assert_array_equal(got, expected)


@SETTINGS
@given(st.integers(1, 6), st.integers(1, 5), st.integers(1, 5), st.integers(1, 6))
def test_mrope_position_ids_match_get_rope_index_hypothesis(qwen2vl_model, before, h, w,
                                                            after):
    segments = [before, (h, w), after]
    expected = hf_position_ids(qwen2vl_model, [segments])[:, 0].numpy()
    np.testing.assert_array_equal(mrope_position_ids(segments), expected)


@pytest.fixture(scope="module")
def qwen25vl_model():
    """A tiny Qwen2.5-VL (random weights, no download), tokens_per_second 2."""
    from transformers import Qwen2_5_VLConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    cfg = Qwen2_5_VLConfig(
        text_config=dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                         intermediate_size=32, num_hidden_layers=1, vocab_size=64,
                         bos_token_id=None, eos_token_id=None,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                          "mrope_section": [2, 3, 3]}),
        vision_config=dict(depth=1, hidden_size=16, out_hidden_size=32, num_heads=2,
                           intermediate_size=16, spatial_merge_size=MERGE,
                           tokens_per_second=2, fullatt_block_indexes=[0]),
    )
    torch.manual_seed(0)
    return Qwen2_5_VLModel(cfg).eval()


def hf25_position_ids(model, segments, seconds):
    """Qwen2.5-VL get_rope_index for one prompt of text runs, images and (t, h, w) videos
    (``seconds``: its second_per_grid_ts as given, a list of floats or a tensor)."""
    types, images, videos = [], [], []
    for seg in segments:
        if isinstance(seg, int):
            types += [0] * seg
        elif len(seg) == 2:
            types += [1] * (seg[0] * seg[1])
            images.append([1, MERGE * seg[0], MERGE * seg[1]])
        else:
            types += [2] * (seg[0] * seg[1] * seg[2])
            videos.append([seg[0], MERGE * seg[1], MERGE * seg[2]])
    tt = torch.tensor([types])
    pos, delta = model.get_rope_index(
        torch.zeros_like(tt), tt,
        image_grid_thw=torch.tensor(images) if images else None,
        video_grid_thw=torch.tensor(videos) if videos else None,
        second_per_grid_ts=seconds if videos else None)
    return pos[:, 0].numpy(), int(delta)


@SETTINGS
@given(st.integers(0, 5), st.integers(1, 6), st.integers(1, 4), st.integers(1, 4),
       st.sampled_from([0.5, 1.0, 1.5, 2.0, 0.3]))
def test_video_position_ids_match_qwen25vl(qwen25vl_model, before, t, h, w, seconds):
    """The ids of the text before a video and of the video itself equal transformers'
    Qwen2.5-VL get_rope_index (tokens_per_second 2): time id start + floor(k * 2 * s)."""
    segments = [before, (t, h, w)]
    expected, delta = hf25_position_ids(qwen25vl_model, segments, [seconds])
    got = mrope_position_ids(segments, time_step=2 * seconds)
    np.testing.assert_array_equal(got, expected)
    # transformers' rope delta puts the next token at the largest id + 1, where ours
    # continues: one text token after the video
    nxt = mrope_position_ids(segments + [1], time_step=2 * seconds)[:, -1]
    assert (nxt == got.shape[1] + delta).all()


@pytest.fixture(scope="module")
def qwen25vl_model_25():
    """The same tiny Qwen2.5-VL with tokens_per_second 25 (the published models' value)."""
    from transformers import Qwen2_5_VLConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    cfg = Qwen2_5_VLConfig(
        text_config=dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                         intermediate_size=32, num_hidden_layers=1, vocab_size=64,
                         bos_token_id=None, eos_token_id=None,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                          "mrope_section": [2, 3, 3]}),
        vision_config=dict(depth=1, hidden_size=16, out_hidden_size=32, num_heads=2,
                           intermediate_size=16, spatial_merge_size=MERGE,
                           tokens_per_second=25, fullatt_block_indexes=[0]),
    )
    torch.manual_seed(0)
    return Qwen2_5_VLModel(cfg).eval()


def test_time_ids_at_two_thirds_of_a_second_equal_get_rope_index(qwen25vl_model_25):
    """A group of 2/3 s at 25 ids per second: group 3's time id is 50, but transformers'
    float product falls short of it with a float64 second_per_grid_ts (49); posenc
    computes it in the precision it is given, as transformers does."""
    from fractions import Fraction

    segments = [1, (4, 1, 1)]
    for dtype, want in ((torch.float64, 49), (torch.float32, 50)):
        seconds = torch.tensor([2 / 3], dtype=dtype)
        theirs, _ = hf25_position_ids(qwen25vl_model_25, segments, seconds)
        ours = mrope_position_ids(segments, time_step=25 * seconds.numpy()[0])
        np.testing.assert_array_equal(ours, theirs)
        assert ours[0, -1] == 1 + want
        for step in (25 * seconds[0], 25 * seconds):  # the tensors themselves
            np.testing.assert_array_equal(mrope_position_ids(segments, time_step=step), ours)
    theirs, _ = hf25_position_ids(qwen25vl_model_25, segments, [2 / 3])  # a list of floats
    np.testing.assert_array_equal(mrope_position_ids(segments, time_step=25 * (2 / 3)), theirs)
    exact = mrope_position_ids(segments, time_step=Fraction(50, 3))
    assert exact[0].tolist() == [0, 1, 17, 34, 51]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 24), st.integers(1, 12), st.integers(1, 8), st.integers(0, 3),
       st.sampled_from(["float64", "float32", "list"]))
@example(p=2, q=3, t=4, before=1, kind="float64")  # group 3: 49, where the time is 50
def test_time_ids_against_get_rope_index(qwen25vl_model_25, p, q, t, before, kind):
    """Time ids for second_per_grid p/q at 25 tokens per second, however transformers is
    given it (a float64 or float32 tensor, or a list of Python floats), equal its own."""
    seconds = [p / q] if kind == "list" else torch.tensor([p / q], dtype=getattr(torch, kind))
    segments = [before, (t, 1, 1)]
    theirs, _ = hf25_position_ids(qwen25vl_model_25, segments, seconds)
    ours = mrope_position_ids(segments, time_step=25 * seconds[0])
    np.testing.assert_array_equal(ours, theirs)


def test_video_position_ids_follow_absolute_time():
    """Two videos of the same 8 s sampled at different rates: same time ids at the same
    second, whatever the number of groups."""
    fast = mrope_position_ids([(8, 1, 1)], time_step=2 * 1.0)[0]    # a group per second
    slow = mrope_position_ids([(2, 1, 1)], time_step=2 * 4.0)[0]    # a group per 4 s
    assert fast.tolist() == [0, 2, 4, 6, 8, 10, 12, 14]
    assert slow.tolist() == [0, 8]
    assert set(slow) <= set(fast)
    # Qwen2-VL's rule (time_step 1) counts groups instead
    assert mrope_position_ids([(2, 1, 1)])[0].tolist() == [0, 1]


def test_video_continuation_is_one_past_the_largest_id():
    ids = mrope_position_ids([1, (3, 2, 2), 2], time_step=5)
    video = ids[:, 1:13]
    assert video[0].tolist() == [1] * 4 + [6] * 4 + [11] * 4
    assert ids[:, 13].tolist() == [12] * 3 and ids[:, 14].tolist() == [13] * 3
    # a single-group video is an image
    np.testing.assert_array_equal(mrope_position_ids([2, (1, 3, 2), 1], time_step=7),
                                  mrope_position_ids([2, (3, 2), 1]))
    # one time step per video
    two = mrope_position_ids([(2, 1, 1), (2, 1, 1)], time_step=[3, 1])
    assert two[0].tolist() == [0, 3, 4, 5]


def test_transformers_5_23_text_after_a_long_video_reuses_time_ids(qwen25vl_model):
    """transformers 5.23's Qwen2.5-VL continues text after a video at start + max(h, w)
    (the spatial extent) while the video's time ids run further, so text ids repeat the
    video's; its own rope delta, and the 4.x code, put the next token one past the
    largest id (posenc's rule)."""
    segments = [2, (4, 2, 2), 3]
    hf, delta = hf25_position_ids(qwen25vl_model, segments, [1.0])
    ours = mrope_position_ids(segments, time_step=2.0)
    video_max = int(ours[:, 2:18].max())
    assert video_max == 2 + 3 * 2
    assert ours[0, 18] == video_max + 1
    assert hf[0, 18] == 2 + 2 and hf[0, 18] <= video_max     # 5.23: overlaps the video
    assert hf.shape[1] + delta == video_max + 1              # its next generated token


def test_mrope_position_ids_rule():
    ids = mrope_position_ids([3, (2, 4), 2])
    assert ids.shape == (3, 3 + 8 + 2) and ids.dtype == np.int64
    np.testing.assert_array_equal(ids[:, :3], np.tile(np.arange(3), (3, 1)))
    img = ids[:, 3:11]
    assert (img[0] == 3).all()                               # time: the image's start
    assert img[1].tolist() == [3, 3, 3, 3, 4, 4, 4, 4]       # height: start + row
    assert img[2].tolist() == [3, 4, 5, 6, 3, 4, 5, 6]       # width: start + column
    assert ids[:, 11].tolist() == [img.max() + 1] * 3        # text continues after the max
    np.testing.assert_array_equal(mrope_position_ids([4], start=7),
                                  np.tile(np.arange(7, 11), (3, 1)))
    assert mrope_position_ids([]).shape == (3, 0)


def test_mrope_pair_components():
    assert mrope_pair_components([16, 24, 24]).tolist() == [0] * 16 + [1] * 24 + [2] * 24
    comp = mrope_pair_components([24, 20, 20], interleaved=True)
    assert np.bincount(comp).tolist() == [24, 20, 20]
    assert comp[:6].tolist() == [0, 1, 2, 0, 1, 2] and comp[60:].tolist() == [0] * 4


def hf_qwen2vl_rotate(x, pos, section, base):
    from transformers import Qwen2VLTextConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import (
        Qwen2VLRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    heads, dim = x.shape[1], x.shape[-1]
    cfg = Qwen2VLTextConfig(hidden_size=heads * dim, num_attention_heads=heads,
                            num_key_value_heads=heads, bos_token_id=None, eos_token_id=None,
                            rope_parameters={"rope_type": "default", "rope_theta": base,
                                             "mrope_section": list(section)})
    emb = Qwen2VLRotaryEmbedding(cfg)
    cos, sin = emb(x, pos)
    q, _ = apply_rotary_pos_emb(x, x, cos, sin)
    return q


def hf_qwen3vl_rotate(x, pos, section, base):
    from transformers import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import (
        Qwen3VLTextRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    heads, dim = x.shape[1], x.shape[-1]
    cfg = Qwen3VLTextConfig(hidden_size=heads * dim, num_attention_heads=heads,
                            num_key_value_heads=heads, head_dim=dim,
                            rope_parameters={"rope_type": "default", "rope_theta": base,
                                             "mrope_section": list(section),
                                             "mrope_interleaved": True})
    emb = Qwen3VLTextRotaryEmbedding(cfg)
    cos, sin = emb(x, pos)
    q, _ = apply_rotary_pos_emb(x, x, cos, sin)
    return q


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_apply_mrope_matches_qwen2vl_on_text_and_image(qwen2vl_model, dtype):
    # two prompts of 11 tokens: text, an image, text (ids from transformers itself)
    prompts = [[3, (2, 3), 2], [1, (2, 4), 2]]
    pos = hf_position_ids(qwen2vl_model, prompts)
    assert pos.shape == (3, 2, 11)
    torch.manual_seed(1)
    x = torch.randn(2, 2, 11, 16, dtype=dtype)
    expected = hf_qwen2vl_rotate(x, pos, [2, 3, 3], 10000.0)
    got = apply_mrope(x, pos, mrope_section=[2, 3, 3])
    assert got.dtype == dtype and got.shape == x.shape
    # transformers forms the angles in float32; posenc in float64
    torch.testing.assert_close(got, expected, atol=2e-6, rtol=1e-5)
    # and posenc's ids give the same rotation
    mine = torch.from_numpy(np.stack([mrope_position_ids(p) for p in prompts], axis=1))
    assert torch.equal(apply_mrope(x, mine, mrope_section=[2, 3, 3]), got)


@pytest.mark.parametrize("section", [[16, 24, 24], [8, 28, 28], [64, 0, 0]])
def test_apply_mrope_matches_qwen2vl_head_dim_128(section):
    ids = torch.from_numpy(mrope_position_ids([7, (5, 9), 4])[:, None, :].copy())
    torch.manual_seed(2)
    x = torch.randn(1, 2, ids.shape[-1], 128, dtype=torch.float64)
    expected = hf_qwen2vl_rotate(x, ids, section, 1_000_000.0)
    got = apply_mrope(x, ids, mrope_section=section, base=1_000_000.0)
    torch.testing.assert_close(got, expected, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("section", [[24, 20, 20], [4, 2, 2]])
def test_apply_mrope_interleaved_matches_qwen3vl(section):
    dim = 2 * sum(section)
    ids = torch.from_numpy(mrope_position_ids([3, (4, 6), 5])[:, None, :].copy())
    torch.manual_seed(3)
    x = torch.randn(1, 2, ids.shape[-1], dim, dtype=torch.float64)
    expected = hf_qwen3vl_rotate(x, ids, section, 5_000_000.0)
    got = apply_mrope(x, ids, mrope_section=section, base=5_000_000.0, interleaved=True)
    torch.testing.assert_close(got, expected, atol=2e-6, rtol=1e-5)
    # the interleaved split is a different rotation from the contiguous one
    other = apply_mrope(x, ids, mrope_section=section, base=5_000_000.0)
    assert not torch.allclose(got, other)


def test_apply_mrope_matches_the_older_doubled_sections_formula():
    """transformers 4.x: apply_multimodal_rotary_pos_emb split the full-width cos/sin by
    mrope_section * 2 (written out here); the same rotation as 5.23.0 and posenc."""
    section = [16, 24, 24]
    ids = torch.from_numpy(mrope_position_ids([5, (6, 7), 3])[:, None, :].copy())
    x = torch.randn(1, 2, ids.shape[-1], 128, dtype=torch.float64)
    inv_freq = torch.from_numpy(posenc.inverse_frequencies(128, 1e6))
    freqs = ids[..., None].double() * inv_freq  # (3, batch, seq, 64)
    emb = torch.cat((freqs, freqs), dim=-1)
    doubled = section * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(emb.cos().split(doubled, dim=-1))], -1)
    sin = torch.cat([m[i % 3] for i, m in enumerate(emb.sin().split(doubled, dim=-1))], -1)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    rotated_half = torch.cat((-x[..., 64:], x[..., :64]), dim=-1)
    expected = x * cos + rotated_half * sin
    got = apply_mrope(x, ids, mrope_section=section, base=1e6)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=1e-12)


def test_apply_mrope_on_text_is_1d_rope():
    ids = torch.arange(9).expand(3, 2, 9)
    x = torch.randn(2, 3, 9, 16, dtype=torch.float64)
    for interleaved in (False, True):
        got = apply_mrope(x, ids, mrope_section=[4, 2, 2], interleaved=interleaved)
        torch.testing.assert_close(got, posenc.apply_rope(x, layout="half"))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_apply_mrope_low_precision_rounds_once(dtype):
    ids = torch.from_numpy(mrope_position_ids([2, (3, 3), 2])[:, None, :].copy())
    x = torch.randn(1, 2, 13, 16, dtype=torch.float64)
    ref = apply_mrope(x, ids, mrope_section=[2, 3, 3])
    got = apply_mrope(x.to(dtype), ids, mrope_section=[2, 3, 3])
    assert got.dtype == dtype
    expected = apply_mrope(x.to(dtype).double(), ids, mrope_section=[2, 3, 3]).to(dtype)
    torch.testing.assert_close(got, expected, atol=0, rtol=0)
    assert (got.double() - ref).abs().max() < 0.05


def test_apply_mrope_inference_mode_and_grad():
    ids = torch.zeros(3, 1, 4, dtype=torch.long) + torch.arange(4)
    x = torch.randn(1, 2, 4, 8, requires_grad=True)
    out = apply_mrope(x, ids, mrope_section=[2, 1, 1])
    out.square().sum().backward()
    assert x.grad.shape == x.shape
    with torch.inference_mode():
        again = apply_mrope(x.detach(), ids, mrope_section=[2, 1, 1])
    torch.testing.assert_close(again, out.detach())


def test_apply_mrope_bad_input():
    x = torch.zeros(1, 2, 5, 8)
    ids = torch.zeros(3, 1, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="mrope_section must sum to dim // 2 = 4"):
        apply_mrope(x, ids, mrope_section=[2, 2, 2])
    with pytest.raises(ValueError, match="mrope_section must be 3"):
        apply_mrope(x, ids, mrope_section=[2, 2])
    with pytest.raises(ValueError, match="mrope_section must be 3"):
        apply_mrope(x, ids, mrope_section=[4, -1, 1])
    with pytest.raises(ValueError, match="mrope_section must be 3"):
        apply_mrope(x, ids, mrope_section=[2, True, 1])
    with pytest.raises(ValueError, match="mrope_section must be 3"):
        apply_mrope(x, ids, mrope_section=4)
    with pytest.raises(ValueError, match="mrope_section .* interleaved"):
        apply_mrope(torch.zeros(1, 2, 5, 16), ids, mrope_section=[0, 4, 4], interleaved=True)
    with pytest.raises(ValueError, match="position_ids must have shape"):
        apply_mrope(x, ids[:, :, :4], mrope_section=[2, 1, 1])
    with pytest.raises(ValueError, match="position_ids must have shape"):
        apply_mrope(x, ids[0], mrope_section=[2, 1, 1])
    with pytest.raises(ValueError, match="position_ids must have shape"):
        apply_mrope(x, torch.zeros(2, 1, 5, dtype=torch.long), mrope_section=[2, 1, 1])
    with pytest.raises(TypeError, match="position_ids"):
        apply_mrope(x, ids.float(), mrope_section=[2, 1, 1])
    with pytest.raises(TypeError, match="position_ids"):
        apply_mrope(x, np.zeros((3, 1, 5)), mrope_section=[2, 1, 1])
    with pytest.raises(ValueError, match="dim"):
        apply_mrope(torch.zeros(1, 2, 5, 7), ids, mrope_section=[2, 1, 0])
    with pytest.raises(ValueError, match="x must be 4-D"):
        apply_mrope(torch.zeros(2, 5, 8), ids, mrope_section=[2, 1, 1])
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        apply_mrope(np.zeros((1, 2, 5, 8)), ids, mrope_section=[2, 1, 1])
    with pytest.raises(TypeError, match="x must be a floating-point"):
        apply_mrope(torch.zeros(1, 2, 5, 8, dtype=torch.long), ids, mrope_section=[2, 1, 1])
    with pytest.raises(ValueError, match="base"):
        apply_mrope(x, ids, mrope_section=[2, 1, 1], base=0.5)
    with pytest.raises(TypeError):
        apply_mrope(x, ids, [2, 1, 1])  # mrope_section is keyword-only


def test_mrope_position_ids_bad_input():
    with pytest.raises(ValueError, match=r"segments\[1\]"):
        mrope_position_ids([2, (2, 0), 1])
    with pytest.raises(ValueError, match=r"segments\[0\]"):
        mrope_position_ids([-1])
    with pytest.raises(ValueError, match=r"segments\[0\]"):
        mrope_position_ids([(1, 2, 3, 4)])
    with pytest.raises(ValueError, match=r"segments\[0\]"):
        mrope_position_ids([(0, 2, 3)])
    with pytest.raises(ValueError, match="time_step must be finite and > 0"):
        mrope_position_ids([(2, 1, 1)], time_step=0)
    with pytest.raises(ValueError, match="time_step must be finite and > 0"):
        mrope_position_ids([(2, 1, 1)], time_step=float("nan"))
    with pytest.raises(ValueError, match="one value per video"):
        mrope_position_ids([(2, 1, 1), (2, 1, 1)], time_step=[1.0])
    with pytest.raises(TypeError, match="time_step"):
        mrope_position_ids([(2, 1, 1)], time_step="2")
    with pytest.raises(TypeError, match="time_step"):
        mrope_position_ids([(2, 1, 1)], time_step=True)
    with pytest.raises(TypeError, match="float16/32/64 number"):
        mrope_position_ids([(2, 1, 1)], time_step=torch.tensor(2.0, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"segments\[0\]"):
        mrope_position_ids([2.0])
    with pytest.raises(ValueError, match="segments must be"):
        mrope_position_ids(5)
    with pytest.raises(TypeError, match="start"):
        mrope_position_ids([2], start=1.5)


def test_apply_mrope_under_jvp_and_vmap_is_the_linear_map():
    """M-RoPE is linear in x: its jvp is the map applied to the tangent, and vmap equals a
    loop (both take the functional formula: out= kernels have no batching rule)."""
    import torch

    torch.manual_seed(0)
    ids = torch.as_tensor(posenc.mrope_position_ids([2, (2, 3), 1]))[:, None]  # (3, 1, 9)
    x = torch.randn(1, 2, 9, 16, dtype=torch.float64)
    t = torch.randn_like(x)
    f = lambda v: posenc.apply_mrope(v, ids, mrope_section=[2, 3, 3])  # noqa: E731
    out, tangent = torch.func.jvp(f, (x,), (t,))
    torch.testing.assert_close(out, f(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(tangent, f(t), rtol=0, atol=1e-12)
    xs = torch.randn(4, 1, 2, 9, 16, dtype=torch.float64)
    torch.testing.assert_close(torch.func.vmap(f)(xs), torch.stack([f(v) for v in xs]),
                               rtol=0, atol=1e-12)
