"""The gallery of bugs (chapter `pitfalls`): every bug reproduces its error size.

The deliberately wrong functions live in posenc.analysis.pitfalls and are written out again in
the code cells of docs/en/pitfalls.md and docs/zh/pitfalls.md; the first test checks
that page and module agree statement for statement (comments, docstrings and imports
aside), so the numbers pinned here are the numbers the page shows.
"""

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import inverse_frequencies, sinusoidal_encoding
from posenc.analysis import pitfalls as pit
from posenc.analysis.uniqueness import fit_shift

from book_parity import parse_page

DOCS = Path(__file__).resolve().parents[2] / "docs"


# -- the page shows the module's code -------------------------------------------------


def _normalised(node):
    """AST dump of a def/class without docstrings and import statements."""

    class Strip(ast.NodeTransformer):
        def _body(self, n):
            self.generic_visit(n)
            body = [s for s in n.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                body = body[1:]
            n.body = body or [ast.Pass()]
            return n

        visit_FunctionDef = visit_ClassDef = _body

    return ast.dump(Strip().visit(node), include_attributes=False)


def _definitions(source):
    return {n.name: _normalised(n) for n in ast.parse(source).body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_defines_exactly_the_module_functions(lang):
    page = parse_page((DOCS / lang / "pitfalls.md").read_text(encoding="utf-8"))
    on_page = {}
    for cell in page.code_cells:
        on_page.update(_definitions(cell))
    module = _definitions(Path(pit.__file__).read_text(encoding="utf-8"))
    assert set(module) <= set(on_page), f"missing on the page: {set(module) - set(on_page)}"
    for name, dump in module.items():
        assert on_page[name] == dump, f"{name} differs between docs/{lang}/pitfalls.md and the module"


def test_module_is_not_exported_by_posenc():
    assert not hasattr(posenc, "pe_double_step")
    assert "pitfalls" not in posenc.__all__


# -- 1. double-counted step ----------------------------------------------------------


def test_double_step_frequencies_and_dead_columns():
    n, d = 2048, 512
    bad = pit.pe_double_step(n, d)
    good = sinusoidal_encoding(n, d)
    w = np.arctan2(bad[1, 0::2], bad[1, 1::2])
    np.testing.assert_allclose(w, 10000.0 ** (-4 * np.arange(d // 2) / d), rtol=1e-12)
    # first half = every other correct frequency
    np.testing.assert_allclose(w[: d // 4], inverse_frequencies(d)[::2], rtol=1e-12)
    lam = 2 * np.pi / w
    assert np.sum(lam > 2 * np.pi * 10_000) == 127
    assert lam.max() > 5e8
    flat = np.ptp(bad, axis=0) < 0.01
    assert flat.sum() == 208 and np.sum(np.ptp(good, axis=0) < 0.01) == 0
    assert 0.40 < flat.mean() < 0.42     # the summary's fraction: well short of half
    assert np.abs(bad - good).max() > 1.9
    # pairs intact: still a rotation (checked on a smaller table; lstsq is the slow part)
    assert fit_shift(pit.pe_double_step(600, 64), 1).relative_residual < 1e-10


# -- 2. cosine with its own frequency --------------------------------------------------


def test_cos_own_index_has_no_linear_shift():
    n, d = 2048, 64
    good = fit_shift(sinusoidal_encoding(n, d), 1)
    bad = fit_shift(pit.pe_cos_own_index(n, d), 1)
    assert good.relative_residual < 1e-12
    assert 0.2 < bad.relative_residual < 0.25
    assert bad.column_residuals[0] == pytest.approx(np.sin(1.0), abs=0.01)


def test_buggy_loops_share_the_sine_column_0_only():
    good = sinusoidal_encoding(512, 512)
    for table in (pit.pe_square_base1000(512), pit.pe_tutorial_loop(512, 512)):
        same = np.all(np.isclose(table, good, atol=1e-12), axis=0)
        assert same.sum() == 1 and same[0]
    flat = [int(np.sum(np.ptp(t, axis=0) < 0.1))
            for t in (good, pit.pe_tutorial_loop(512, 512), pit.pe_square_base1000(512))]
    assert flat == [78, 295, 223]


def test_buggy_loops_have_no_linear_shift():
    """The tutorial loop and the base-1000 loop, not only the (2i+1)/d variant, lose the shift."""
    n, d = 2048, 64
    r_tutorial = fit_shift(pit.pe_tutorial_loop(n, d), 1).relative_residual
    r_square = fit_shift(pit.pe_base1000_rows(n, d), 1).relative_residual
    assert 0.15 < r_tutorial < 0.19
    assert 0.17 < r_square < 0.21
    assert fit_shift(sinusoidal_encoding(n, d), 1).relative_residual < 1e-10


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 40).map(lambda h: 2 * h), st.integers(0, 60))
def test_base1000_rows_is_the_square_table_extended(d, extra):
    rows = pit.pe_base1000_rows(d + extra, d)
    assert rows.shape == (d + extra, d)
    np.testing.assert_allclose(rows[:d], pit.pe_square_base1000(d), rtol=0, atol=1e-12)
    p = np.arange(d + extra)
    i = d // 2 - 1                               # the last pair, from the formula
    np.testing.assert_allclose(rows[:, -2], np.sin(p / 1000 ** (4 * i / d)), atol=1e-12)
    np.testing.assert_allclose(rows[:, -1], np.cos(p / 1000 ** ((4 * i + 2) / d)), atol=1e-12)


def test_tutorial_loop_is_double_step_plus_next_pair_cosine():
    t = pit.pe_tutorial_loop(50, 16)
    p = np.arange(50)
    for c in range(0, 16, 2):
        np.testing.assert_allclose(t[:, c], np.sin(p / 10000 ** (2 * c / 16)), atol=1e-12)
        np.testing.assert_allclose(t[:, c + 1], np.cos(p / 10000 ** (2 * (c + 1) / 16)),
                                   atol=1e-12)


# -- 3. integer division -----------------------------------------------------------------


def test_floor_exponent_collapses_every_frequency():
    d = 512
    bad = pit.pe_floor_exponent(1000, d)
    good = sinusoidal_encoding(1000, d)
    assert np.unique(bad.round(12), axis=1).shape[1] == 2
    back = np.linalg.norm(bad[1:] - bad[0], axis=1)
    closest = 1 + int(np.argmin(back))
    assert closest == 710                               # the closest return ...
    assert abs(closest / (2 * np.pi) - 113) < 1e-4      # ... is 113 full turns
    assert back[closest - 1] < 1e-3
    assert np.linalg.norm(bad[1] - bad[0]) > 15
    assert np.linalg.norm(good[closest] - good[0]) > 19


def test_old_torch_integer_division_and_the_precedence_slip():
    two_i = torch.arange(0, 8, 2)
    assert torch.equal(two_i.div(8, rounding_mode="floor"), torch.zeros(4, dtype=torch.long))
    assert -math.log(10000.0) / 256 // 2 == -1.0
    assert -math.log(10000.0) / (256 // 2) == pytest.approx(-0.07196, abs=1e-5)


# -- 4. layouts -------------------------------------------------------------------------


def test_concatenated_layout_is_a_permutation_and_a_mismatch_breaks_a_fitted_layer():
    n, d = 2048, 64
    inter = sinusoidal_encoding(n, d)
    halves = pit.pe_concatenated(n, d)
    perm = posenc.layout_permutation(d, "interleaved", "half")
    assert np.abs(inter[:, perm] - halves).max() < 1e-11
    pos = np.arange(n)
    target = pos / (n - 1)
    w = np.linalg.solve(inter.T @ inter + 1e-6 * np.eye(d), inter.T @ target)
    rmse = lambda est: float(np.sqrt(np.mean((est * (n - 1) - pos) ** 2)))  # noqa: E731
    assert rmse(inter @ w) < 0.01
    assert rmse(halves @ w) > 500


# -- 5. low precision --------------------------------------------------------------------


def test_low_precision_positions_merge():
    n = 4096
    true = torch.arange(n)
    for dtype, first, distinct in ((torch.bfloat16, 257, 769), (torch.float16, 2049, 3073)):
        held = true.to(dtype)
        wrong = torch.nonzero(held.double() != true.double())
        assert int(wrong[0, 0]) == first
        assert int(torch.unique(held).numel()) == distinct


def test_low_precision_encoding_errors():
    n, d = 4096, 128
    good = sinusoidal_encoding(n, d)
    bf = pit.pe_in_dtype(n, d, torch.bfloat16).double().numpy()
    fp = pit.pe_in_dtype(n, d, torch.float16).double().numpy()
    assert np.all(bf[1:] == bf[:-1], axis=1).sum() == 3327
    assert np.all(fp[1:] == fp[:-1], axis=1).sum() == 1023
    assert np.abs(bf - good).max() > 1.9
    assert np.abs(bf[100] - good[100]).max() > 0.05   # exact position, rounded frequencies


# -- 6. odd d_model ----------------------------------------------------------------------


def test_odd_width_naive_versions_and_posenc():
    with pytest.raises(IndexError):
        pit.pe_pair_loop(4, 7)
    with pytest.raises(ValueError, match="broadcast"):
        pit.pe_broadcast(4, 7)
    quiet = pit.pe_half_loop(4, 7)
    assert np.all(quiet[:, -1] == 0)
    np.testing.assert_allclose(pit.pe_half_loop(4, 8), sinusoidal_encoding(4, 8), atol=1e-12)
    with pytest.raises(ValueError, match="d_model must be a positive even number"):
        sinusoidal_encoding(4, 7)


def test_float16_positions_overflow_to_infinity_and_nan_angles():
    """float16: largest finite 65,504; every position from 65,520 on is inf; sin(inf) NaN."""
    far = torch.arange(65_000, 66_001, dtype=torch.float64)
    assert float(torch.finfo(torch.float16).max) == 65504.0
    inf = torch.isinf(far.half())
    assert int(far[inf][0]) == 65520 and bool(inf[far >= 65520].all())
    assert bool(torch.isnan(torch.sin(far[-1:].half())).all())


# -- 7. base 1000, table sized by width ------------------------------------------------


def test_base1000_and_table_size():
    assert posenc.wavelengths(512)[-1] == pytest.approx(60611, abs=1)
    assert posenc.wavelengths(512, base=1000)[-1] == pytest.approx(6116, abs=1)
    assert inverse_frequencies(512)[-1] == pytest.approx(1.04e-4, rel=0.01)
    assert inverse_frequencies(512, base=1000)[-1] == pytest.approx(1.03e-3, rel=0.01)
    table = pit.pe_square_base1000(64)
    assert table.shape == (64, 64)
    with pytest.raises(ValueError, match="broadcast"):
        np.zeros((100, 64)) + table[:100]


# -- 8. undefined name -------------------------------------------------------------------


def test_half_renamed_encoder_cannot_be_constructed():
    with pytest.raises(NameError, match="dropout_prob"):
        pit.HalfRenamedEncoder(512)


# -- figures render in both languages ------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_pitfall_figures_render_without_warnings(lang, recwarn):
    import posenc.figures as pf

    pf.set_language(lang)
    p = np.arange(16.0)
    figs = [
        pf.double_step_wavelength_figure(p + 1, (p + 1) ** 2, 8),
        pf.shift_residual_figure(np.full(8, 1e-14), np.linspace(0.01, 0.8, 8)),
        pf.layout_probe_figure(p, p, p[::-1]),
        pf.low_precision_figure(p, {"bf16": p, "fp16": p}, {"bf16": p, "fp16": p}),
        pf.buggy_tables_figure([np.zeros((4, 4))] * 3,
                                ["pit_title_correct", "pit_title_tutorial", "pit_title_square"]),
    ]
    for fig in figs:
        assert pf.figure_to_png(fig)[:4] == b"\x89PNG"
    assert not [w for w in recwarn if "Glyph" in str(w.message)]
    pf.set_language("en")
