"""The claims of the chapter ``multidim`` (positions in two dimensions and more), pinned.

Each test names the sentence of the book it protects.  Also the figure functions of
:mod:`posenc.figures.multidim_pages` (both languages, no missing glyph, argument checks).
"""

from __future__ import annotations

import io
import logging
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
import posenc.figures as pf

FAST = settings(max_examples=30, deadline=None)
SIDE = 224 // 16
D = 768


def cosine(table):
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    return unit @ unit.T


@pytest.fixture(scope="module")
def sims():
    return (cosine(posenc.sinusoidal_encoding(SIDE * SIDE, D)),
            cosine(posenc.sinusoidal_encoding_2d(SIDE, SIDE, D)))


# -- raster order -----------------------------------------------------------------------


def test_vertical_neighbours_are_a_row_apart_and_line_breaks_are_adjacent():
    """'the patch just below it comes 14 positions later'; the last patch of a row sits
    right before the first patch of the next."""
    assert SIDE == 14
    rows, cols = posenc.grid_positions(SIDE, SIDE)
    raster = rows * SIDE + cols
    below = raster.reshape(SIDE, SIDE)[1:] - raster.reshape(SIDE, SIDE)[:-1]
    assert (below == SIDE).all()
    ends = raster.reshape(SIDE, SIDE)
    assert (ends[1:, 0] - ends[:-1, -1] == 1).all()


def test_raster_similarity_favours_the_row(sims):
    """'right-hand neighbour 0.973, below 0.657'; the patches more similar than the one
    below are exactly those within 13 raster steps; the line-break pair scores exactly as
    much as true neighbours."""
    sim_1d, _ = sims
    centre = 7 * SIDE + 7
    right, down = sim_1d[centre, centre + 1], sim_1d[centre, centre + SIDE]
    assert right > 0.95 and down < 0.7
    # the patch one row up ties with the one below (the same offset, 14): not closer,
    # whatever the last bit of either sum
    closer = np.flatnonzero(sim_1d[centre] > down + 1e-12)
    closer = set(closer[closer != centre].tolist())
    assert closer == {centre + k for k in range(-13, 14) if k != 0}
    assert sim_1d[SIDE - 1, SIDE] == pytest.approx(right, abs=1e-12)


# -- the 2-D sine-cosine table ------------------------------------------------------------


def test_mae_meshgrid_first_plane_is_the_column():
    """'grid[0] of np.meshgrid(grid_w, grid_h) holds the column index'."""
    h, w = 3, 5
    grid = np.meshgrid(np.arange(w), np.arange(h))
    assert grid[0].shape == (h, w)
    assert (grid[0] == np.arange(w)[None, :]).all()     # varies along the columns
    assert (grid[1] == np.arange(h)[:, None]).all()


@FAST
@given(st.integers(1, 9), st.integers(1, 9), st.sampled_from([4, 8, 16, 64]))
def test_first_half_column_second_half_row(h, w, d):
    """'Across the rows the first half does not change at all, across the columns the
    second half does not'; each half lists sines first, then cosines."""
    grid = posenc.sinusoidal_encoding_2d(h, w, d).reshape(h, w, d)
    assert np.array_equal(grid[:, :, : d // 2], np.broadcast_to(grid[:1, :, : d // 2],
                                                                (h, w, d // 2)))
    assert np.array_equal(grid[:, :, d // 2:], np.broadcast_to(grid[:, :1, d // 2:],
                                                               (h, w, d // 2)))
    omega = posenc.inverse_frequencies(d // 2)
    c = np.arange(w)
    np.testing.assert_allclose(grid[0, :, : d // 4], np.sin(np.outer(c, omega)), atol=1e-12)
    np.testing.assert_allclose(grid[0, :, d // 4: d // 2], np.cos(np.outer(c, omega)),
                               atol=1e-12)


@FAST
@given(st.integers(0, 13), st.integers(0, 13), st.integers(0, 13), st.integers(0, 13),
       st.sampled_from([8, 64, 768]))
def test_2d_dot_product_is_the_sum_of_cosines(r, c, r2, c2, d):
    """The displayed formula for PE(r, c) . PE(r', c')."""
    pe = posenc.sinusoidal_encoding_2d(14, 14, d)
    omega = posenc.inverse_frequencies(d // 2)
    got = pe[r * 14 + c] @ pe[r2 * 14 + c2]
    want = np.cos((c2 - c) * omega).sum() + np.cos((r2 - r) * omega).sum()
    assert got == pytest.approx(want, abs=1e-9)


def test_2d_neighbours_equal_and_distance_correlation(sims):
    """'Both neighbours now score 0.986, the line-break pair drops'; the correlation with
    distance is stronger (more negative) for the 2-D table than for raster order."""
    sim_1d, sim_2d = sims
    centre = 7 * SIDE + 7
    right, down = sim_2d[centre, centre + 1], sim_2d[centre, centre + SIDE]
    assert right == pytest.approx(down, abs=1e-12)
    assert sim_2d[SIDE - 1, SIDE] < right - 0.1
    rows, cols = posenc.grid_positions(SIDE, SIDE)
    dist = np.hypot(rows[:, None] - rows, cols[:, None] - cols)
    upper = np.triu_indices(SIDE * SIDE, 1)
    corr_1d = np.corrcoef(dist[upper], sim_1d[upper])[0, 1]
    corr_2d = np.corrcoef(dist[upper], sim_2d[upper])[0, 1]
    assert corr_2d < corr_1d < 0


# -- resizing ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def resized():
    side, new = SIDE, 384 // 16
    pe = posenc.sinusoidal_encoding_2d(side, side, D)
    out = posenc.resample_position_grid(pe, (side, side), (new, new))
    u = (np.arange(new) + 0.5) * side / new - 0.5
    r, c = posenc.grid_positions(new, new)
    omega = posenc.inverse_frequencies(D // 2)
    ac, ar = u[c, None] * omega, u[r, None] * omega
    stretched = np.concatenate([np.sin(ac), np.cos(ac), np.sin(ar), np.cos(ar)], axis=1)
    inside = (np.minimum(u[r], u[c]) >= 1) & (np.maximum(u[r], u[c]) <= side - 2)
    err = np.abs(out - stretched)
    return dict(out=out, u=u, new=new, err_all=err.max(0).reshape(4, -1).max(0),
                err_in=err[inside].max(0).reshape(4, -1).max(0), omega=omega)


def test_resize_keeps_slow_features_and_errs_at_the_border(resized):
    """'The slowest features come through almost exactly ... the fastest is off by up to
    0.141, mostly at the border ... away from the border 0.022'."""
    e_all, e_in = resized["err_all"], resized["err_in"]
    assert resized["out"].shape == (24 * 24, D)
    assert e_all[-1] < 1e-4 < 0.1 < e_all[0] < 0.2
    assert e_in[0] < e_all[0] / 3
    assert (e_in <= e_all + 1e-15).all()
    # 'how well it does that depends on how fast a feature varies': the error falls with
    # the wavelength (not strictly at every step, but on the whole, on both curves)
    wl = 2 * np.pi / resized["omega"]
    assert np.corrcoef(np.log(wl), np.log(e_all))[0, 1] < -0.95
    assert np.corrcoef(np.log(wl), np.log(e_in))[0, 1] < -0.95
    assert 2 * np.pi / resized["omega"][0] == pytest.approx(2 * np.pi)


def test_outermost_new_centres_lie_outside_the_old_centres(resized):
    """'the centres of the outermost new cells lie at -0.21 and 13.21 in old-cell units'."""
    u = resized["u"]
    assert u[0] < 0 and u[-1] > SIDE - 1
    assert u[0] == pytest.approx(-(u[-1] - (SIDE - 1)))


def test_resized_table_is_not_the_native_table(resized):
    """'it differs from sinusoidal_encoding_2d built for 24 x 24 patches by up to 2.03'."""
    native = posenc.sinusoidal_encoding_2d(resized["new"], resized["new"], D)
    assert np.abs(native - resized["out"]).max() > 1.5


def test_resize_is_timms_bicubic_interpolation():
    """'reads the other rows in raster order as an image with d channels, resizes it with
    interpolate(mode="bicubic", antialias=True) and flattens it back'; prefix kept."""
    rng = np.random.default_rng(0)
    table = rng.normal(size=(1 + 6 * 6, 5))
    out = posenc.resample_position_grid(table, (6, 6), (9, 9), num_prefix_tokens=1)
    img = torch.from_numpy(table[1:].reshape(1, 6, 6, 5)).permute(0, 3, 1, 2)
    ref = torch.nn.functional.interpolate(img, size=(9, 9), mode="bicubic", antialias=True)
    np.testing.assert_allclose(out[1:], ref.permute(0, 2, 3, 1).reshape(81, 5).numpy(),
                               atol=1e-12)
    np.testing.assert_array_equal(out[0], table[0])


def _cubic(x, a):
    """The cubic convolution kernel of Keys (a = -0.5 in PIL, -0.75 in plain bicubic)."""
    x = np.abs(x)
    return np.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1,
                    np.where(x < 2, (((x - 5) * x + 8) * x - 4) * a, 0.0))


@FAST
@given(st.integers(2, 9), st.integers(2, 9), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_antialiased_enlarging_drops_the_taps_beyond_the_edge(h, w, grow, seed):
    """'with antialias=True, PyTorch drops the kernel's taps that fall outside the grid
    and rescales the others to sum to one' (PIL's kernel, a = -0.5); the plain kernel
    (antialias=False, a = -0.75) repeats the edge values instead, and gives other
    numbers when enlarging."""
    table = np.random.default_rng(seed).normal(size=(h * w, 3))
    h2, w2 = h + grow, w + 2 * grow

    def weights(n, n2, aa):
        centre = (np.arange(n2) + 0.5) * n / n2  # new centres in old pixel units
        if aa:
            wts = _cubic(np.arange(n)[None, :] + 0.5 - centre[:, None], -0.5)
            return wts / wts.sum(axis=1, keepdims=True)
        u = centre - 0.5
        base = np.floor(u)
        taps = base[:, None] + np.arange(-1, 3)
        wts = _cubic(u[:, None] - taps, -0.75)
        out = np.zeros((n2, n))
        idx = np.clip(taps, 0, n - 1).astype(int)
        np.add.at(out, (np.arange(n2)[:, None].repeat(4, 1), idx), wts)
        return out

    grid = table.reshape(h, w, 3)
    for aa in (True, False):
        want = np.einsum("ir,jc,rcf->ijf", weights(h, h2, aa), weights(w, w2, aa), grid)
        got = posenc.resample_position_grid(table, (h, w), (h2, w2), antialias=aa)
        np.testing.assert_allclose(got, want.reshape(h2 * w2, 3), atol=1e-12)
    on = posenc.resample_position_grid(table, (h, w), (h2, w2))
    off = posenc.resample_position_grid(table, (h, w), (h2, w2), antialias=False)
    assert np.abs(on - off).max() > 1e-6


# -- axial 2-D RoPE --------------------------------------------------------------------------


@FAST
@given(st.integers(0, 7), st.integers(0, 7), st.integers(0, 6), st.integers(0, 6),
       st.integers(0, 2**31 - 1), st.sampled_from(["interleaved", "half"]))
def test_score_map_is_shifted_not_changed(r, c, dr, dc, seed, layout):
    """'the map seen from patch (9, 10) is the map seen from (3, 4), shifted'."""
    side = 14
    q, k = np.random.default_rng(seed).normal(size=(2, 16))
    rows, cols = posenc.grid_positions(side, side)
    keys = posenc.apply_rope_2d(np.tile(k, (side * side, 1)), rows, cols, layout=layout)

    def score_map(rr, cc):
        qr = posenc.apply_rope_2d(q[None], [rr], [cc], layout=layout)[0]
        return (keys @ qr).reshape(side, side)

    a, b = score_map(r, c), score_map(r + dr, c + dc)
    np.testing.assert_allclose(a[: side - dr, : side - dc], b[dr:, dc:], atol=1e-9)


def test_rope_2d_base_is_an_argument_10000_by_default():
    """'its base is an argument, 10000 by default' (Heo et al.'s axial models use 100)."""
    x = np.random.default_rng(3).normal(size=(5, 16))
    rows, cols = [0, 1, 2, 3, 4], [4, 0, 3, 1, 2]
    default = posenc.apply_rope_2d(x, rows, cols)
    np.testing.assert_array_equal(default, posenc.apply_rope_2d(x, rows, cols, base=10000.0))
    assert np.abs(default - posenc.apply_rope_2d(x, rows, cols, base=100.0)).max() > 1e-3


def test_rope_2d_column_first_pairs():
    """'pair j < d/4 is rotated by c omega_j and pair d/4 + j by r omega_j'."""
    d = 16
    x = np.zeros((1, d))
    x[0, 0] = 1.0  # pair 0 (interleaved): a column pair
    x[0, d // 2] = 1.0  # pair d/4: the first row pair
    out = posenc.apply_rope_2d(x, [2], [1])
    omega = posenc.inverse_frequencies(d // 2)
    np.testing.assert_allclose(out[0, :2], [np.cos(1 * omega[0]), np.sin(1 * omega[0])])
    np.testing.assert_allclose(out[0, d // 2: d // 2 + 2],
                               [np.cos(2 * omega[0]), np.sin(2 * omega[0])])


@FAST
@given(st.integers(0, 2**31 - 1))
def test_1d_rope_ties_line_break_and_neighbours_2d_does_not(seed):
    """'With 1-D RoPE the two pairs score the same ... with 2-D RoPE they do not'."""
    q, k = np.random.default_rng(seed).normal(size=(2, 64))
    side = 14

    def s1(m, n):
        return float(posenc.apply_rope(q[None], [m])[0] @ posenc.apply_rope(k[None], [n])[0])

    def s2(p, p2):
        return float(posenc.apply_rope_2d(q[None], [p[0]], [p[1]])[0]
                     @ posenc.apply_rope_2d(k[None], [p2[0]], [p2[1]])[0])

    assert s1(side - 1, side) == pytest.approx(s1(0, 1), abs=1e-9)
    assert s2((0, side - 1), (1, 0)) != pytest.approx(s2((0, 0), (0, 1)), abs=1e-6)


# -- M-RoPE ---------------------------------------------------------------------------------


def test_transformers_default_sections():
    """'transformers' default [16, 24, 24] fits a 128-wide head'; Qwen3-VL's [24, 20, 20]."""
    from transformers import Qwen2VLTextConfig, Qwen3VLTextConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding

    cfg2 = Qwen2VLTextConfig(hidden_size=256, num_attention_heads=2, num_key_value_heads=2,
                             bos_token_id=None, eos_token_id=None,
                             rope_parameters={"rope_type": "default", "rope_theta": 1e4})
    assert list(Qwen2VLRotaryEmbedding(cfg2).mrope_section) == [16, 24, 24]
    assert sum([16, 24, 24]) == 128 // 2
    cfg3 = Qwen3VLTextConfig(hidden_size=256, num_attention_heads=2, num_key_value_heads=2,
                             head_dim=128,
                             rope_parameters={"rope_type": "default", "rope_theta": 1e4})
    assert list(Qwen3VLTextRotaryEmbedding(cfg3).mrope_section) == [24, 20, 20]


@FAST
@given(st.lists(st.integers(0, 100), min_size=1, max_size=20).map(sorted),
       st.sampled_from([[4, 2, 2], [6, 1, 1], [8, 0, 0]]), st.booleans())
def test_mrope_on_text_is_1d_rope(positions, section, interleaved):
    """'A text token has the same id in all three, which makes M-RoPE on text the ordinary
    1-D RoPE' (either split)."""
    seq = len(positions)
    x = torch.from_numpy(np.random.default_rng(seq).normal(size=(1, 2, seq, 16)))
    ids = torch.tensor(positions).expand(3, 1, seq)
    got = posenc.apply_mrope(x, ids, mrope_section=section, interleaved=interleaved)
    torch.testing.assert_close(got, posenc.apply_rope(x, positions, layout="half"))


@FAST
@given(st.integers(0, 8), st.integers(1, 6), st.integers(1, 6), st.integers(1, 5),
       st.integers(0, 50))
def test_image_ids_and_text_after(before, h, w, after, start):
    """'(p, p + i, p + j)' for an image starting at p; 'the text after the image continues
    at p + max(h, w), one past the largest id of the image'."""
    ids = posenc.mrope_position_ids([before, (h, w), after], start=start)
    p = start + before
    img = ids[:, before: before + h * w]
    rows, cols = posenc.grid_positions(h, w)
    assert (img[0] == p).all()
    assert (img[1] == p + rows).all() and (img[2] == p + cols).all()
    nxt = ids[:, before + h * w]
    assert (nxt == p + max(h, w)).all() and nxt[0] == img.max() + 1
    # an image uses fewer ids than tokens once it has more than one row and column
    if min(h, w) > 1:
        assert ids.max() + 1 - start < ids.shape[1]


def test_chapter_prompt_ids():
    """The chapter's prompt: image from id 4 to 7, text again at 8, 19 tokens, top id 10."""
    ids = posenc.mrope_position_ids([4, (3, 4), 3])
    assert ids.shape == (3, 19)
    assert ids[0, 4] == 4 and ids[:, 4:16].max() == 7 and ids[0, 16] == 8
    assert ids.max() == 10


def test_blocks_and_interleaving():
    """'With blocks, width owns pairs 40 to 63 ... interleaved, height runs from pair 1 to
    58 and width from 2 to 59, so every component has fast and slow pairs'."""
    blocks = posenc.mrope_pair_components([16, 24, 24])
    dealt = posenc.mrope_pair_components([24, 20, 20], interleaved=True)
    where = lambda owner, c: np.flatnonzero(owner == c)  # noqa: E731
    assert (where(blocks, 0).min(), where(blocks, 0).max()) == (0, 15)
    assert (where(blocks, 2).min(), where(blocks, 2).max()) == (40, 63)
    assert (where(dealt, 1).min(), where(dealt, 1).max()) == (1, 58)
    assert (where(dealt, 2).min(), where(dealt, 2).max()) == (2, 59)
    for comp in range(3):
        pairs = where(dealt, comp)
        assert pairs.min() < 16 and pairs.max() >= 48   # fast and slow quarters
    assert where(blocks, 2).min() >= 32                  # width: slow half only


# -- figures -----------------------------------------------------------------------------------


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _figures():
    eye = np.eye(4)
    ids = posenc.mrope_position_ids([2, (2, 3), 2])
    img = np.r_[np.zeros(2, bool), np.ones(6, bool), np.zeros(2, bool)]
    return {
        "patch_similarity_figure": lambda: pf.patch_similarity_figure(eye, eye, eye, (1, 2)),
        "resample_error_figure": lambda: pf.resample_error_figure([6.3, 60.0, 600.0],
                                                                  [0.1, 0.01, 0.0],
                                                                  [0.02, 1e-3, 1e-6]),
        "mrope_ids_figure": lambda: pf.mrope_ids_figure(ids, img),
        "mrope_sections_figure": lambda: pf.mrope_sections_figure(
            posenc.mrope_pair_components([4, 2, 2]),
            posenc.mrope_pair_components([4, 2, 2], interleaved=True)),
    }


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", sorted(_figures()))
def test_figures_render_in_both_languages(name, lang):
    handler = _Records()
    logger = logging.getLogger("matplotlib")
    logger.addHandler(handler)
    try:
        pf.set_language(lang)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fig = _figures()[name]()
            buf = io.BytesIO()
            pf.save_figure(fig, buf, format="png")
        assert fig.get_facecolor() == (1.0, 1.0, 1.0, 1.0)
        words = [ax.get_title() for ax in fig.axes] + [ax.get_xlabel() for ax in fig.axes]
        words += [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
        if lang == "zh":
            assert any("\u4e00" <= ch <= "\u9fff" for w in words for ch in w), words
    finally:
        pf.set_language("en")
        logger.removeHandler(handler)
    assert handler.messages == []


def test_figures_are_deterministic():
    for name, make in _figures().items():
        assert pf.figure_to_png(make()) == pf.figure_to_png(make()), name


def test_figure_argument_errors():
    eye = np.eye(3)
    with pytest.raises(ValueError, match="same shape"):
        pf.patch_similarity_figure(eye, np.eye(4), eye, (0, 0))
    with pytest.raises(ValueError, match="patch must be inside"):
        pf.patch_similarity_figure(eye, eye, eye, (3, 0))
    with pytest.raises(ValueError, match="raster_1d"):
        pf.patch_similarity_figure(np.ones(3), eye, eye, (0, 0))
    with pytest.raises(ValueError, match="one length"):
        pf.resample_error_figure([1.0, 2.0], [0.1], [0.1, 0.2])
    with pytest.raises(ValueError, match="positive"):
        pf.resample_error_figure([0.0], [0.1], [0.1])
    with pytest.raises(ValueError, match=r"\(3, seq\)"):
        pf.mrope_ids_figure(np.zeros((2, 4)), np.zeros(4, bool))
    with pytest.raises(ValueError, match="0 \\(time\\)"):
        pf.mrope_sections_figure(np.array([0, 3]), np.array([0, 1]))
    with pytest.raises(ValueError, match="one length"):
        pf.mrope_sections_figure(np.array([0, 1]), np.array([0, 1, 2]))


def test_video_rope_split_of_a_64_wide_head():
    # diffusers' get_3d_rotary_pos_embed: t gets d/4, h and w 3d/8 each, each a 1-D RoPE
    head = 64
    widths = (head // 4, head // 8 * 3, head // 8 * 3)
    assert sum(widths) == head and widths == (16, 24, 24)
    for width in widths:
        theta = posenc.inverse_frequencies(width, 1e4)
        ref = 1.0 / (1e4 ** (np.arange(0, width, 2) / width))
        np.testing.assert_allclose(theta, ref, rtol=1e-12)
    slow_t = 2 * np.pi / posenc.inverse_frequencies(16, 1e4)[-1]
    slow_h = 2 * np.pi / posenc.inverse_frequencies(24, 1e4)[-1]
    assert slow_t < slow_h  # fewer pairs: time's slowest pair is faster
