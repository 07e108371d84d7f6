"""The interactive figures' data equal posenc's functions; their HTML carries the spec;
bad input is refused with the argument named."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import posenc
import posenc.figures as pf
from posenc import alibi, multidim, relative, rope_scaling, sinusoidal
from posenc.analysis.decay import rope_decay_bound
from posenc.figures import interactive as ix


@pytest.fixture(autouse=True)
def _english():
    pf.set_language("en")
    yield
    pf.set_language("en")


def _spec_from_html(fig):
    html = fig._repr_html_()
    m = re.search(r'<script type="application/json" class="posenc-ifig-data">(.*?)</script>',
                  html, re.S)
    assert m, html[:200]
    return json.loads(m.group(1).replace("<\\/", "</"))


def _tol(spec):
    return 0.5 * 10.0 ** -spec["digits"] + 1e-12


def _check_keys(spec):
    """One data entry per combination of the keyed controls, and nothing else."""
    sizes = [len(next(c for c in spec["controls"] if c["id"] == k)["options"])
             for k in spec["keys"]]
    expected = {",".join(map(str, idx)) for idx in np.ndindex(*sizes)}
    assert set(spec["data"]) == expected
    for c in spec["controls"]:
        assert 0 <= c["value"] < len(c["options"]) and c["label"]
        assert c["kind"] in {"range", "select"}


def _option(spec, cid, i):
    return next(c for c in spec["controls"] if c["id"] == cid)["options"][i]["value"]


def test_sinusoidal_data_equal_posenc():
    fig = pf.interactive_sinusoidal(bases=[100, 10_000], widths=[8, 16], n_positions=12)
    spec = _spec_from_html(fig)
    _check_keys(spec)
    for key, entry in spec["data"].items():
        i, j = map(int, key.split(","))
        b, d = _option(spec, "base", i), _option(spec, "width", j)
        np.testing.assert_allclose(entry["pe"], sinusoidal.sinusoidal_encoding(12, d, b),
                                   atol=_tol(spec))
        np.testing.assert_allclose(entry["wl"], sinusoidal.wavelengths(d, b), atol=5e-4)


def test_rope_pair_data_equal_posenc():
    fig = pf.interactive_rope_pair(bases=[100, 10_000], d_model=8, n_positions=10, seed=3)
    spec = fig.spec
    _check_keys(spec)
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(2, 8))
    tol = _tol(spec)
    for key, entry in spec["data"].items():
        b = _option(spec, "base", int(key))
        qs = posenc.apply_rope(np.tile(q, (10, 1)), np.arange(10), base=b)
        ks = posenc.apply_rope(np.tile(k, (10, 1)), np.arange(10), base=b)
        np.testing.assert_allclose(entry["q"], qs, atol=tol)
        np.testing.assert_allclose(entry["k"], ks, atol=tol)
        score = np.asarray(entry["score"])            # (pairs, 2n - 1), offset r = m - n
        assert score.shape == (4, 19)
        for m, n in [(0, 0), (7, 2), (2, 7), (9, 0), (0, 9), (5, 5)]:
            exact = qs[m] * ks[n]
            for i in range(4):
                assert abs(score[i, m - n + 9] - (exact[2 * i] + exact[2 * i + 1])) < 2 * tol


def test_rope_pair_score_depends_only_on_the_offset():
    spec = pf.interactive_rope_pair(bases=[10_000], d_model=8, n_positions=12).spec
    entry = spec["data"]["0"]
    q, k = np.asarray(entry["q"]), np.asarray(entry["k"])
    for i in range(4):
        for r in range(-5, 6):
            vals = [q[m, 2 * i] * k[m - r, 2 * i] + q[m, 2 * i + 1] * k[m - r, 2 * i + 1]
                    for m in range(12) if 0 <= m - r < 12]
            assert np.ptp(vals) < 1e-3
            assert abs(vals[0] - entry["score"][i][r + 11]) < 1e-3


def test_decay_data_equal_posenc_and_oscillate():
    fig = pf.interactive_rope_decay(bases=[500, 10_000, 500_000], widths=[32, 64, 128])
    spec = fig.spec
    _check_keys(spec)
    r = np.arange(512)
    for key, entry in spec["data"].items():
        i, j = map(int, key.split(","))
        b, d = _option(spec, "base", i), _option(spec, "width", j)
        bound = rope_decay_bound(r, d, b)
        np.testing.assert_allclose(entry["bound"], bound / bound[0], atol=_tol(spec))
        ones = posenc.apply_rope(np.ones((512, d)), r, base=b) @ np.ones(d)
        np.testing.assert_allclose(entry["ones"], ones / ones[0], atol=_tol(spec))
        # the page says: neither curve decays monotonically, for every setting shown
        assert np.any(np.diff(entry["bound"]) > 0) and np.any(np.diff(entry["ones"]) > 0)


def test_long_context_data_equal_posenc_and_the_page_claims():
    fig = pf.interactive_long_context(factors=[2, 8, 32], lengths=[2048, 8192], dim=128,
                                      base=10_000)
    spec = fig.spec
    _check_keys(spec)
    theta, _ = rope_scaling.rope_frequencies(128, {"rope_theta": 10_000.0})
    np.testing.assert_allclose(spec["wavelengths"], 2 * np.pi / theta, atol=5e-4)
    assert spec["rules"] == ["PI", "NTK-aware", "YaRN", "llama3"]
    for key, entry in spec["data"].items():
        i, j = map(int, key.split(","))
        s, L = _option(spec, "factor", i), _option(spec, "length", j)
        yarn, _ = rope_scaling.rope_frequencies(128, {
            "rope_type": "yarn", "factor": s, "original_max_position_embeddings": L})
        np.testing.assert_allclose(entry["YaRN"], theta / yarn, rtol=1e-3, atol=_tol(spec))
        llama, _ = rope_scaling.rope_frequencies(128, {
            "rope_type": "llama3", "factor": s, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": L})
        np.testing.assert_allclose(entry["llama3"], theta / llama, rtol=1e-3, atol=_tol(spec))
        ntk, _ = rope_scaling.rope_frequencies(128, {"rope_theta": 10_000 * s ** (128 / 126)})
        np.testing.assert_allclose(entry["NTK-aware"], theta / ntk, rtol=1e-3, atol=_tol(spec))
        np.testing.assert_allclose(entry["PI"], s, atol=_tol(spec))   # flat at s
    # NTK-aware does not depend on L; YaRN's ramp moves with L
    for i in range(3):
        a, b = spec["data"][f"{i},0"], spec["data"][f"{i},1"]
        assert a["NTK-aware"] == b["NTK-aware"] and a["PI"] == b["PI"]
        assert a["YaRN"] != b["YaRN"] and a["llama3"] != b["llama3"]


def test_alibi_data_equal_posenc():
    fig = pf.interactive_alibi(n_heads=4, lengths=[3, 6])
    spec = fig.spec
    _check_keys(spec)
    np.testing.assert_allclose(spec["slopes"], alibi.alibi_slopes(4), atol=1e-6)
    for key, entry in spec["data"].items():
        n = _option(spec, "length", int(key))
        exact = alibi.alibi_bias(n, 4)
        got = np.array([[[np.nan if v is None else v for v in row] for row in head]
                        for head in entry["bias"]])
        assert np.array_equal(np.isnan(got), ~np.isfinite(exact))
        np.testing.assert_allclose(got[np.isfinite(exact)], exact[np.isfinite(exact)],
                                   atol=_tol(spec))
    json.loads(fig.to_json())  # no NaN or infinity in the JSON


def test_t5_data_equal_posenc_and_the_page_claims():
    fig = pf.interactive_t5_buckets(num_buckets=[8, 32], max_distances=[32, 128], length=20)
    spec = fig.spec
    _check_keys(spec)
    rel = relative.relative_positions(20, 20)
    future = rel > 0
    for key, entry in spec["data"].items():
        i, j, k = map(int, key.split(","))
        bidi = _option(spec, "bidi", i)
        nb, md = _option(spec, "buckets", j), _option(spec, "maxdist", k)
        exact = relative.t5_relative_position_bucket(rel, bidirectional=bidi, num_buckets=nb,
                                                     max_distance=md)
        b = np.asarray(entry["b"])
        assert np.array_equal(b, exact)
        if bidi:   # half of the buckets on each side
            assert b[future].min() >= nb // 2 and b[~future].max() < nb // 2
        else:      # every key after the query in bucket 0
            assert np.all(b[future] == 0)


def test_mrope_data_equal_posenc():
    fig = pf.interactive_mrope(heights=[1, 3], widths=[2, 4], text_after=[0, 2], text_before=2)
    spec = fig.spec
    _check_keys(spec)
    assert spec["before"] == 2
    for key, entry in spec["data"].items():
        i, j, k = map(int, key.split(","))
        h, w, t = (_option(spec, c, x) for c, x in zip("hwt", (i, j, k)))
        assert entry["ids"] == multidim.mrope_position_ids([2, (h, w), t]).tolist()


def test_words_follow_the_language():
    pf.set_language("zh")
    spec = pf.interactive_rope_decay(bases=[10_000], widths=[16], max_distance=8).spec
    assert spec["lang"] == "zh" and spec["controls"][0]["label"] == "基数"
    assert "得分" in spec["title"]
    html = pf.interactive_rope_decay(bases=[10_000], widths=[16], max_distance=8)._repr_html_()
    assert 'lang="zh-CN"' in html and "脚本" in html
    pf.set_language("en")
    assert pf.interactive_rope_decay(bases=[10_000], widths=[16],
                                     max_distance=8).spec["controls"][0]["label"] == "base"


def test_html_cannot_close_its_script_early():
    fig = ix.InteractiveFigure({"kind": "x", "title": "</script><b>", "lang": "en"})
    html = fig._repr_html_()
    assert html.count("</script>") == 2  # the data's and the inline renderer's
    html = html[:html.index('<style class="posenc-ifig-inline">')]
    assert html.count("</script>") == 1
    assert json.loads(re.search(r">(\{.*\})</script>", html).group(1).replace("<\\/", "</"))[
        "title"] == "</script><b>"


def test_the_pages_settings_stay_light():
    """Each figure as the chapters call it adds at most ~300 KB to its page."""
    figs = [
        pf.interactive_sinusoidal(bases=[100, 10_000, 1_000_000], widths=[16, 32, 64]),
        pf.interactive_rope_pair(bases=[100, 10_000], d_model=16),
        pf.interactive_rope_decay(bases=[500, 10_000, 500_000], widths=[32, 64, 128]),
        pf.interactive_long_context(factors=[2, 4, 8, 16, 32], lengths=[2048, 4096, 8192],
                                    dim=128, base=10_000),
        pf.interactive_alibi(n_heads=8, lengths=[8, 16, 32]),
        pf.interactive_t5_buckets(num_buckets=[8, 16, 32], max_distances=[32, 64, 128],
                                  length=40),
        pf.interactive_mrope(heights=[1, 2, 3, 4, 5, 6], widths=[1, 2, 3, 4, 5, 6],
                             text_after=[1, 2, 3, 4]),
    ]
    for fig in figs:
        assert len(fig._repr_html_().encode()) < 300_000, fig


@pytest.mark.parametrize(("call", "match"), [
    (lambda: pf.interactive_sinusoidal(bases=[1.0]), "bases"),
    (lambda: pf.interactive_sinusoidal(bases=[]), "bases must not be empty"),
    (lambda: pf.interactive_sinusoidal(bases=[100, 100]), "must not repeat"),
    (lambda: pf.interactive_sinusoidal(widths=[15]), "widths"),
    (lambda: pf.interactive_sinusoidal(n_positions=1), "n_positions"),
    (lambda: pf.interactive_rope_pair(d_model=7), "d_model"),
    (lambda: pf.interactive_rope_decay(max_distance=0), "max_distance"),
    (lambda: pf.interactive_long_context(factors=[1.0]), "factors must be finite and > 1"),
    (lambda: pf.interactive_long_context(dim=2), "dim must be at least 4"),
    (lambda: pf.interactive_alibi(n_heads=0), "n_heads"),
    (lambda: pf.interactive_t5_buckets(length=1), "length"),
    (lambda: pf.interactive_mrope(heights=[0]), "heights"),
])
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_types_are_named():
    with pytest.raises(TypeError, match="bases must be a sequence"):
        pf.interactive_sinusoidal(bases=10_000)
    with pytest.raises(TypeError, match="factors must be real numbers"):
        pf.interactive_long_context(factors=["8"])


def test_the_output_carries_its_renderer_for_jupyter_and_the_site_strips_it():
    """In Jupyter or Colab the figure draws itself: its output holds the renderer and the
    stylesheet shipped with the package; the site, which loads them once per page, takes
    the inline copies out again (docs/_ext/posenc_figures.py)."""
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    static = root / "posenc" / "figures" / "static"
    fig = pf.interactive_alibi(n_heads=4, lengths=[4, 8])
    html = fig._repr_html_()
    js = (static / "posenc-interactive.js").read_text(encoding="utf-8")
    css = (static / "posenc-interactive.css").read_text(encoding="utf-8")
    assert f'<script class="posenc-ifig-inline">{js}</script>' in html
    assert f'<style class="posenc-ifig-inline">{css}</style>' in html
    assert html.index("posenc-ifig-data") < html.index("posenc-ifig-inline")  # data first
    sys.path.insert(0, str(root / "docs" / "_ext"))
    import posenc_figures

    site = posenc_figures.strip_inline_renderer(html)
    assert "posenc-ifig-inline" not in site and js not in site
    assert site.endswith("</script></div>") and _spec_from_html(fig) == fig.spec
