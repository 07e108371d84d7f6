"""The claims of the chapters ``rope`` and ``rope-in-practice``, pinned.

Each test states the sentence of the book it protects.  Also the rules of
:mod:`posenc.analysis.rope_extras` and of the figure/table functions in
:mod:`posenc.figures.rope_pages`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.figures import rope_pages
from posenc.figures._style import set_language
from posenc.analysis.rope_extras import KernelTraffic, Traffic, memory_traffic

R = posenc.rope_rotation_matrix
FAST = settings(max_examples=30, deadline=None)


def rot(angle):
    return np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])


def worst_diagonal_std(S):
    T = S.shape[0]
    return max(np.diagonal(S, o).std() for o in range(-(T - 1), T))


# -- rope: two dimensions -----------------------------------------------------------------


@FAST
@given(m=st.integers(-1000, 1000), n=st.integers(-1000, 1000),
       theta=st.floats(1e-4, 3.0), seed=st.integers(0, 2**16))
def test_2d_score_is_re_q_conj_k_exp_i_m_minus_n_theta(m, n, theta, seed):
    """'the score as Re[q conj(k) e^{i(m-n)θ}]' -- and the matrix form has R((n-m)θ)."""
    q, k = np.random.default_rng(seed).normal(size=(2, 2))
    score = (rot(m * theta) @ q) @ (rot(n * theta) @ k)
    qc, kc = complex(*q), complex(*k)
    assert np.isclose((qc * np.conj(kc) * np.exp(1j * (m - n) * theta)).real, score, atol=1e-9)
    assert np.isclose(q @ rot((n - m) * theta) @ k, score, atol=1e-9)


def test_2d_flipped_sign_and_shortcut_formula_are_wrong():
    """The flipped exponent and the shortcut 'q·k·e^{i(m-n)θ}' both miss the score."""
    q, k = np.random.default_rng(0).normal(size=(2, 2))   # the page's query and key
    theta, m, n = 0.3, 7, 3
    score = (rot(m * theta) @ q) @ (rot(n * theta) @ k)
    qc, kc = complex(*q), complex(*k)
    flipped = (qc * np.conj(kc) * np.exp(1j * (n - m) * theta)).real
    shortcut = np.dot(q, k) * np.exp(1j * (m - n) * theta)
    assert abs(flipped - score) > 1e-3
    assert abs(shortcut.real - score) > 1e-3
    assert abs(shortcut.imag) > 1e-3                  # not even a real number
    swapped = (rot(m * theta) @ k) @ (rot(n * theta) @ q)
    assert abs(swapped - score) > 1e-3                    # the score is not symmetric


# -- rope: Su's derivation ------------------------------------------------------------------


def _f(z, m, phase):
    return z * np.exp(1j * phase(np.asarray(m)))


def _offset_spread(qc, kc, phase, ms):
    prod = _f(qc, ms[:, None], phase) * np.conj(_f(kc, ms[None, :], phase))
    return max(np.abs(np.diagonal(prod, o) - np.diagonal(prod, o)[0]).max()
               for o in range(-(len(ms) - 1) // 2, (len(ms) - 1) // 2 + 1))


@FAST
@given(q=st.tuples(st.floats(-3, 3), st.floats(-3, 3)).filter(lambda t: abs(complex(*t)) > 0.1),
       k=st.tuples(st.floats(-3, 3), st.floats(-3, 3)).filter(lambda t: abs(complex(*t)) > 0.1),
       theta=st.floats(1e-3, 3.0))
def test_derivation_solution_meets_the_requirement(q, k, theta):
    """f(q, m) = q e^{imθ}: f(q, 0) = q, |f| = |q|, a constant phase step θ, and
    f(q, m) conj f(k, n) depends on m - n only."""
    qc, kc = complex(*q), complex(*k)
    linear = lambda m: theta * m                          # noqa: E731
    ms = np.arange(-20, 21)
    assert abs(_f(qc, 0, linear) - qc) == 0
    np.testing.assert_allclose(np.abs(_f(qc, ms, linear)), abs(qc), rtol=1e-12)
    steps = np.angle(_f(qc, ms[1:], linear) / _f(qc, ms[:-1], linear))
    np.testing.assert_allclose(steps, np.angle(np.exp(1j * theta)), atol=1e-9)
    assert _offset_spread(qc, kc, linear, ms) < 1e-9 * (1 + abs(qc * kc))


@FAST
@given(q=st.tuples(st.floats(-3, 3), st.floats(-3, 3)).filter(lambda t: abs(complex(*t)) > 0.5),
       k=st.tuples(st.floats(-3, 3), st.floats(-3, 3)).filter(lambda t: abs(complex(*t)) > 0.5),
       theta=st.floats(0.05, 3.0))
def test_derivation_a_phase_not_linear_in_m_breaks_the_requirement(q, k, theta):
    """The quadratic phase θ m²/10 makes the products depend on more than m - n."""
    qc, kc = complex(*q), complex(*k)
    ms = np.arange(-30, 31)
    assert _offset_spread(qc, kc, lambda m: theta * m ** 2 / 10, ms) > 1e-3 * abs(qc * kc)


def test_derivation_numbers_of_the_page():
    """The page's query and key: rounding error for the solution, 0.24 for the quadratic."""
    q, k = np.random.default_rng(0).normal(size=(2, 2))
    qc, kc, theta = complex(*q), complex(*k), 0.3
    ms = np.arange(-30, 31)

    def page_spread(phase):                               # as the page computes it
        prod = _f(qc, ms[:, None], phase) * np.conj(_f(kc, ms[None, :], phase))
        return max(np.abs(np.diagonal(prod, o) - np.diagonal(prod, o)[0]).max()
                   for o in range(-10, 11))

    assert page_spread(lambda m: theta * m) < 1e-14
    assert page_spread(lambda m: theta * m ** 2 / 10) == pytest.approx(0.237, abs=0.005)


# -- rope: general d --------------------------------------------------------------------------


@FAST
@given(m=st.integers(-5000, 5000), n=st.integers(-5000, 5000), half=st.integers(1, 32),
       base=st.floats(2.0, 1e6))
def test_rotation_matrices_compose_to_the_offset(m, n, half, base):
    """'R_m^T R_n = R_{n-m}, verified numerically.'"""
    d = 2 * half
    assert np.abs(R(m, d, base).T @ R(n, d, base) - R(n - m, d, base)).max() < 1e-9


@FAST
@given(seq=st.integers(1, 20), half=st.integers(1, 16), offset=st.integers(-1000, 1000),
       seed=st.integers(0, 2**16))
def test_elementwise_form_equals_matrix_form(seq, half, offset, seed):
    """'posenc.apply_rope ... agrees with the matrix.'"""
    d = 2 * half
    X = np.random.default_rng(seed).normal(size=(seq, d))
    pos = np.arange(seq) + offset
    by_matrix = np.stack([R(p, d) @ X[i] for i, p in enumerate(pos)])
    assert np.abs(posenc.apply_rope(X, pos) - by_matrix).max() < 1e-12


@FAST
@given(seed=st.integers(0, 2**16), half=st.integers(1, 32))
def test_general_score_is_sum_of_complex_terms(seed, half):
    """Equation rope-general-score: <R_m q, R_n k> = Re sum_j q_j conj(k_j) e^{i(m-n)θ_j}."""
    d = 2 * half
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, d))
    m, n = rng.integers(-3000, 3000, size=2)
    lhs = (R(m, d) @ q) @ (R(n, d) @ k)
    qc, kc = q[0::2] + 1j * q[1::2], k[0::2] + 1j * k[1::2]
    rhs = (qc * np.conj(kc) * np.exp(1j * (m - n) * posenc.inverse_frequencies(d))).sum().real
    assert np.isclose(lhs, rhs, atol=1e-9)


# -- rope: relative property and where RoPE goes -------------------------------------------


def test_scores_constant_along_diagonals_only_for_rope_on_q_and_k():
    """'Only the first keeps every diagonal constant' (RoPE on q, k after the projections)."""
    rng = np.random.default_rng(1)
    T, d = 48, 32
    W_q, W_k = rng.normal(size=(2, d, d)) / np.sqrt(d)
    X = np.tile(rng.normal(size=d), (T, 1))
    P = posenc.sinusoidal_encoding(T, d)
    rope = posenc.apply_rope
    assert worst_diagonal_std(rope(X @ W_q.T) @ rope(X @ W_k.T).T) < 1e-12
    assert worst_diagonal_std(((X + P) @ W_q.T) @ ((X + P) @ W_k.T).T) > 0.1
    assert worst_diagonal_std((rope(X) @ W_q.T) @ (rope(X) @ W_k.T).T) > 0.1


@FAST
@given(shift=st.integers(1, 100_000), seed=st.integers(0, 2**16))
def test_shift_invariance_of_attention_needs_values_unrotated(shift, seed):
    """'With queries and keys rotated, the head's output does not notice the shift.'"""
    rng = np.random.default_rng(seed)
    T, d = 16, 16
    X = rng.normal(size=(T, d))
    Wq, Wk, Wv = rng.normal(size=(3, d, d)) / np.sqrt(d)
    Qx, Kx, Vx = X @ Wq.T, X @ Wk.T, X @ Wv.T
    rope = posenc.apply_rope

    def head(pos, rotate_values):
        V = rope(Vx, pos) if rotate_values else Vx
        return posenc.scaled_dot_product_attention(rope(Qx, pos), rope(Kx, pos), V)[0]

    near, far = np.arange(T), np.arange(T) + shift
    assert np.abs(head(near, False) - head(far, False)).max() < 1e-9
    # rotating V: the output is rotated by R_shift, which moves it unless R_shift = I
    moved = np.abs(head(near, True) - head(far, True)).max()
    expected = np.abs(head(near, True) @ (np.eye(d) - R(shift, d).T)).max()
    assert np.isclose(moved, expected, atol=1e-9)


# -- rope: long-term decay ----------------------------------------------------------------------


def test_decay_bound_is_not_monotone_and_rises_far_above_an_earlier_low():
    """'it is not monotone ... at distance r_high it is back well above r_low.'"""
    bound = posenc.rope_decay_bound(np.arange(0, 1025), 128)
    assert bound[0] == pytest.approx(32.5)
    rises = np.flatnonzero(np.diff(bound) > 0)
    assert rises[0] == 18                                   # first rise: 18 -> 19
    rise = bound - np.minimum.accumulate(bound)
    r_high = int(np.argmax(rise))
    r_low = int(np.argmin(bound[: r_high + 1]))
    assert r_low < r_high and bound[r_high] > 2 * bound[r_low]


def test_actual_random_scores_do_not_decay_but_self_scores_do():
    """'the typical score of random pairs has not moved'; 'what does fall is ... itself'."""
    rng = np.random.default_rng(2)
    distances = np.arange(0, 1025)
    qs, ks = rng.normal(size=(2, 1000, 128))
    q_c, k_c = qs[:, 0::2] + 1j * qs[:, 1::2], ks[:, 0::2] + 1j * ks[:, 1::2]
    phases = np.exp(1j * posenc.rope_angles(distances, 128))
    scores = (phases @ (q_c * np.conj(k_c)).T).real
    self_scores = (phases @ (np.abs(q_c) ** 2).T).real
    rms = np.sqrt((scores ** 2).mean(axis=1))
    far = distances >= 512
    assert 0.9 < rms[far].mean() / rms[0] < 1.1
    assert np.abs(self_scores.mean(axis=1)[far]).mean() / self_scores.mean(axis=1)[0] < 0.35
    # and the RoFormer inequality itself holds for every pair and distance
    h = np.concatenate([q_c * np.conj(k_c), np.zeros((q_c.shape[0], 1))], axis=1)  # h_{d/2} = 0
    const = np.abs(np.diff(h, axis=1)).max(axis=1)              # max_j |h_j - h_{j-1}|
    partial = np.abs(np.cumsum(phases, axis=1)).sum(axis=1)     # sum_j |S_j|
    assert np.all(np.abs(scores) <= const[None, :] * partial[:, None] + 1e-9)


# -- rope: base ------------------------------------------------------------------------------------


def test_pairs_completing_a_turn_for_llama_bases():
    """'With base 10000, 50 ... within 8k and 64 within 128k; with 500000, 35 and 49.'"""
    counts = {b: [int((posenc.wavelengths(128, b) <= c).sum()) for c in (8192, 131072)]
              for b in (10_000.0, 500_000.0)}
    assert counts == {10_000.0: [50, 64], 500_000.0: [35, 49]}
    assert posenc.wavelengths(128, 10_000.0)[-1] < 2 * np.pi * 10_000


# -- rope-in-practice: layouts ----------------------------------------------------------------------


def test_checkpoint_conversion_between_layouts():
    """'scores equal with the permutation, wrong without it'; HF's view/transpose is the same."""
    rng = np.random.default_rng(3)
    d_model, n_heads, T = 64, 4, 12
    d_head = d_model // n_heads
    X = rng.normal(size=(T, d_model))
    W_q, W_k = rng.normal(size=(2, d_model, d_model)) / np.sqrt(d_model)

    def scores(Wq, Wk, layout):
        q = (X @ Wq.T).reshape(T, n_heads, d_head).transpose(1, 0, 2)
        k = (X @ Wk.T).reshape(T, n_heads, d_head).transpose(1, 0, 2)
        q, k = posenc.apply_rope(q, layout=layout), posenc.apply_rope(k, layout=layout)
        return q @ k.transpose(0, 2, 1)

    perm = posenc.layout_permutation(d_head, "interleaved", "half")

    def convert(W):
        return W.reshape(n_heads, d_head, d_model)[:, perm, :].reshape(d_model, d_model)

    ref = scores(W_q, W_k, "interleaved")
    assert np.abs(scores(convert(W_q), convert(W_k), "half") - ref).max() < 1e-12
    assert np.abs(scores(W_q, W_k, "half") - ref).max() > 1.0
    hf = W_q.reshape(n_heads, d_head // 2, 2, d_model).transpose(0, 2, 1, 3).reshape(d_model, d_model)
    assert np.array_equal(hf, convert(W_q))


# -- rope-in-practice: KV cache and partial rotary ------------------------------------------------


@FAST
@given(T=st.integers(2, 64), seed=st.integers(0, 2**16))
def test_kv_cache_step_equals_last_row(T, seed):
    """'Rotating the new token alone at position t gives the last row'; forgetting it does not."""
    X = np.random.default_rng(seed).normal(size=(T, 16))
    full = posenc.apply_rope(X)
    assert np.array_equal(posenc.apply_rope(X[-1:], [T - 1]), full[-1:])
    assert np.abs(posenc.apply_rope(X[-1:]) - full[-1:]).max() > 1e-6


def test_rotary_embedding_module_decodes_like_the_full_sequence():
    from posenc.torch import RotaryEmbedding

    X = torch.from_numpy(np.random.default_rng(4).normal(size=(1, 1, 40, 64))).float()
    rope = RotaryEmbedding(64, layout="half")
    q_all, k_all = rope(X, X)
    _, k_cache = rope(X[..., :-1, :], X[..., :-1, :])
    q_new, k_new = rope(X[..., -1:, :], X[..., -1:, :], positions=torch.tensor([39]))
    assert torch.equal(torch.cat([k_cache, k_new], dim=-2), k_all)
    assert torch.equal(q_new, q_all[..., -1:, :])


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_partial_rotary(layout):
    """'rotated exactly as a RoPE of width r ... the others pass through unchanged.'"""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(40, 96))
    y = posenc.apply_rope(x, layout=layout, rotary_dim=24)
    assert np.array_equal(y[:, 24:], x[:, 24:])
    assert np.abs(y[:, :24] - posenc.apply_rope(x[:, :24], layout=layout)).max() < 1e-15
    q, k = rng.normal(size=(2, 96))
    Q = posenc.apply_rope(np.tile(q, (40, 1)), layout=layout, rotary_dim=24)
    K = posenc.apply_rope(np.tile(k, (40, 1)), layout=layout, rotary_dim=24)
    assert worst_diagonal_std(Q @ K.T) < 1e-12


# -- rope-in-practice: precision ---------------------------------------------------------------------


def test_float32_angles_lose_accuracy_and_posenc_does_not():
    """Float32 angles: vector error ~1e-2 at 1e5 and ~1e-1 at 1e6; posenc float32 ~1e-7."""
    positions = np.array([100_000, 1_000_000])
    v = np.random.default_rng(6).normal(size=(1, 128))
    V = np.repeat(v, 2, axis=0)
    exact = posenc.apply_rope(V, positions)
    usual = posenc.rotate_pairs(V, posenc.rope_angles_float32(positions, 128)).astype(np.float32)
    ours = posenc.apply_rope(torch.from_numpy(V).float(), positions).numpy()
    err_usual = np.abs(usual - exact).max(axis=1)
    err_ours = np.abs(ours - exact).max(axis=1)
    assert err_usual[0] > 1e-3 and err_usual[1] > 1e-2
    assert np.all(err_ours < 1e-6)
    assert float(np.spacing(np.float32(1e6))) == 2.0 ** -4


@FAST
@given(seed=st.integers(0, 2**16))
def test_float32_angles_move_attention_scores_in_proportion_to_the_position(seed):
    """One query at p against one key at the 1,024 positions up to p: the exact scores
    do not depend on p; float32 angles move them more the larger p (about 1e-1 at a
    million, against a spread of several units), posenc's float32 output does not."""
    qv, kv = np.random.default_rng(seed).normal(size=(2, 128))
    change, reference = {}, None
    for p in (8_192, 100_000, 1_000_000):
        pos_k = np.arange(p - 1023, p + 1)
        keys = np.repeat(kv[None], len(pos_k), axis=0)
        exact = posenc.apply_rope(keys, pos_k) @ posenc.apply_rope(qv[None], [p])[0]
        if reference is None:
            reference = exact
        np.testing.assert_allclose(exact, reference, atol=1e-9)   # offsets only
        k32 = posenc.rotate_pairs(keys, posenc.rope_angles_float32(pos_k, 128))
        q32 = posenc.rotate_pairs(qv[None], posenc.rope_angles_float32([p], 128))
        usual = k32.astype(np.float32) @ q32.astype(np.float32)[0]
        k_ours = posenc.apply_rope(torch.from_numpy(keys).float(), pos_k)
        q_ours = posenc.apply_rope(torch.from_numpy(qv[None]).float(), [p])
        ours = (k_ours @ q_ours[0]).numpy()
        change[p] = (np.abs(usual - exact).max(), np.abs(ours - exact).max())
    assert change[8_192][0] < change[100_000][0] < change[1_000_000][0]
    assert change[1_000_000][0] > 1e-2 * exact.std()
    assert change[1_000_000][1] < 1e-3 * exact.std()
    assert change[1_000_000][0] > 20 * change[1_000_000][1]


def test_positions_in_low_precision_collide_and_overflow():
    """bfloat16: first wrong 257, 897 distinct in 8k, error 16; float16: 2049, 4097, 2, inf at 65520."""
    p = torch.arange(70_000, dtype=torch.float64)
    first8k = p < 8192
    facts = {}
    for name, dt in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        s = p.to(dt).double()
        facts[name] = (int(p[s != p][0]), int(torch.unique(s[first8k]).numel()),
                       float((s - p)[first8k].abs().max()))
    assert facts == {"bfloat16": (257, 897, 16.0), "float16": (2049, 4097, 2.0)}
    assert int(p[torch.isinf(p.to(torch.float16))][0]) == 65520


def test_bfloat16_input_error_is_only_the_final_rounding():
    v = torch.from_numpy(np.random.default_rng(7).normal(size=(1, 128))).to(torch.bfloat16)
    out = posenc.apply_rope(v, [1_000_000]).double().numpy()
    exact = posenc.apply_rope(v.double().numpy(), [1_000_000])
    assert np.all(np.abs(out - exact) <= np.abs(exact) * 2.0 ** -8 + 1e-30)


# -- rope-in-practice: traffic --------------------------------------------------------------------


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def test_rotate_half_formula_moves_several_times_more_memory_than_complex():
    """'the rotate_half formula moves 10.25 times the size of x ... the complex form 2.12.'"""
    x = torch.randn(1, 8, 1024, 64)
    ang = torch.outer(torch.arange(1024.0), 1 / 10000 ** (torch.arange(0, 64, 2) / 64))
    emb = torch.cat((ang, ang), -1)
    cos, sin = emb.cos(), emb.sin()
    cis = torch.polar(torch.ones_like(ang), ang)
    xm = x.transpose(1, 2).contiguous()
    half = memory_traffic(lambda t: t * cos + _rotate_half(t) * sin, x)
    cplx = memory_traffic(
        lambda t: torch.view_as_real(
            torch.view_as_complex(t.reshape(*t.shape[:-1], -1, 2)) * cis[None, :, None, :]
        ).flatten(3), xm)
    n = x.nbytes
    assert [k.op.split(".")[0] for k in half.kernels] == ["mul", "neg", "cat", "mul", "add"]
    assert [k.op.split(".")[0] for k in cplx.kernels] == ["mul"]
    assert (half.read_bytes + half.written_bytes) / n == pytest.approx(10.25)
    assert (cplx.read_bytes + cplx.written_bytes) / n == pytest.approx(2.125)


# -- posenc.analysis.rope_extras.memory_traffic rules ------------------------------------------------------


def test_memory_traffic_counts_clone_as_one_read_one_write():
    x = torch.zeros(16, 16)
    t = memory_traffic(torch.clone, x)
    assert (t.read_bytes, t.written_bytes) == (x.nbytes, x.nbytes)


def test_memory_traffic_ignores_views_and_counts_broadcast_tables_once():
    x = torch.zeros(4, 8, 16)
    table = torch.ones(16)
    assert memory_traffic(lambda a: a.transpose(0, 1).reshape(8, 4, 16)[:, 1], x).kernels == ()
    t = memory_traffic(lambda a: a * table.expand(4, 8, 16), x)
    assert t.read_bytes == x.nbytes + table.nbytes


def test_memory_traffic_in_place_reads_and_writes_its_target():
    x = torch.zeros(32)
    t = memory_traffic(lambda a: a.add_(1.0), x)
    assert (t.read_bytes, t.written_bytes) == (x.nbytes, x.nbytes)
    assert isinstance(t, Traffic) and isinstance(t.kernels[0], KernelTraffic)


def test_memory_traffic_rejects_bad_arguments():
    with pytest.raises(TypeError, match="fn must be callable"):
        memory_traffic(3, torch.zeros(2))
    with pytest.raises(TypeError, match="torch.Tensor"):
        memory_traffic(lambda a: a, np.zeros(2))


# -- posenc.figures.rope_pages ----------------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh"])
def test_figures_draw_in_both_languages(language, recwarn):
    set_language(language)
    try:
        S = np.add.outer(np.arange(6.0), -np.arange(6.0))
        r = np.arange(10.0)
        p = np.arange(300.0)
        figs = [
            rope_pages.rope_scores_figure(S),
            rope_pages.rope_decay_figure(r, 10 - r, np.ones(10), np.cos(r)),
            rope_pages.rope_wavelengths_figure(16, [10_000.0, 500_000.0], [100, 1000]),
            rope_pages.rope_float32_error_figure(p[1:], p[1:] * 1e-9, np.full(299, 1e-7)),
        ]
        for fig in figs:
            assert fig._repr_png_()[0][:4] == b"\x89PNG"
        glyph = [w for w in recwarn if "Glyph" in str(w.message)]
        assert not glyph
    finally:
        set_language("en")


def test_figures_validate_their_input():
    with pytest.raises(ValueError, match="square"):
        rope_pages.rope_scores_figure(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="1-D"):
        rope_pages.rope_decay_figure(np.arange(3.0), np.ones(3), np.ones(4), np.ones(3))
    with pytest.raises(ValueError, match="normalised"):
        rope_pages.rope_decay_figure(np.arange(3.0), np.zeros(3), np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="1-D"):
        rope_pages.rope_float32_error_figure(np.arange(3), np.ones(2), np.ones(3))


def test_book_table_rules_and_rendering():
    t = rope_pages.BookTable(["a", "b"], [["<x>", 1]], code_columns=(0,), note="n")
    assert "<code>&lt;x&gt;</code>" in t._repr_html_()
    assert str(t).splitlines()[2] == "| `<x>` | 1 |"
    with pytest.raises(ValueError, match="every row"):
        rope_pages.BookTable(["a", "b"], [["only one"]])
    with pytest.raises(ValueError, match="align"):
        rope_pages.BookTable(["a", "b"], [], align="lx")
    with pytest.raises(ValueError, match="nbytes"):
        rope_pages.rope_traffic_table({}, 0)


def test_benchmark_table_reads_results_and_says_when_missing():
    set_language("en")
    assert "nox -s bench" in rope_pages.rope_benchmark_table(None).note
    results = {
        "machine": {"cpu_model": "Test CPU", "torch_threads": 2},
        "rope": [{"dtype": "float32", "shape": [1, 2, 3, 4], "candidates": [
            {"name": "rotate_half", "layout": "half", "time": {"median": 2e-3},
             "vs_clone": 4.0, "speedup_vs_rotate_half": 1.0},
            {"name": "posenc_half", "layout": "half", "time": {"median": 1e-3},
             "vs_clone": 2.0, "speedup_vs_rotate_half": 2.0},
            {"name": "fused_half", "layout": "half", "time": {"median": 1e-3}},
            {"name": "complex", "layout": "interleaved", "error": "unavailable"},
        ]}],
    }
    t = rope_pages.rope_benchmark_table(results)
    assert [row[1] for row in t.rows] == ["rotate_half", "posenc_half"]
    assert t.rows[1][3:] == ["1", "2.00", "2.00"]
    assert "Test CPU" in t.note and "2 threads" in t.note


def test_a_constant_forget_gate_is_an_alibi_head():
    # section rope-variants: FoX with one constant gate f adds (i - j) ln f, ALiBi's bias
    for heads in (1, 4, 8, 16):
        n = 7
        slopes = posenc.alibi_slopes(heads)
        bias = posenc.alibi_bias(n, heads)
        rows, cols = np.tril_indices(n)
        for h, slope in enumerate(slopes):
            gate = np.exp(-slope)
            # the product of the i - j gates between key and query, then its log
            product = np.array([np.prod(np.full(r - c, gate)) for r, c in zip(rows, cols)])
            np.testing.assert_allclose(np.log(product), bias[h][rows, cols], atol=1e-12)
