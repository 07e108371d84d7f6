"""The book's figures: both languages, no missing glyphs, opaque, deterministic."""

import io
import logging
import re
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure

import posenc
import posenc.figures as pf

CJK = re.compile(r"[\u3400-\u9fff\uff00-\uffef]")
HALF_WIDTH_PUNCT = re.compile(r"[\u4e00-\u9fff（）][,:;]|[,:;]\s*[\u4e00-\u9fff（]")


def _attention_figure():
    attn = posenc.SelfAttention(16, seed=0)
    a = ["dog", "bites", "man"] if pf.get_language() == "en" else ["我", "爱", "你"]
    b = a[::-1]
    out_a, _ = attn(posenc.token_embeddings(a, 16))
    out_b, _ = attn(posenc.token_embeddings(b, 16))
    return pf.permuted_attention_outputs(out_a, a, out_b, b)


def _atlas_descriptions():
    from posenc.atlas import atlas

    return atlas()


FIGURES = {
    "naive_encodings_figure": lambda: pf.naive_encodings_figure(),
    "binary_vs_sinusoid": lambda: pf.binary_vs_sinusoid(),
    "sinusoid_heatmap": lambda: pf.sinusoid_heatmap(),
    "sinusoid_waveforms": lambda: pf.sinusoid_waveforms(),
    "wavelength_spectrum": lambda: pf.wavelength_spectrum(),
    "dot_product_by_offset_figure": lambda: pf.dot_product_by_offset_figure(),
    "row_across_columns_figure": lambda: pf.row_across_columns_figure(),
    "permuted_attention_outputs": _attention_figure,
    "encoding_pipeline": lambda: pf.encoding_pipeline(),
    "model_spectrum_figure": lambda: pf.model_spectrum_figure(
        next(d for d in _atlas_descriptions() if len(d.layers) > 1)),
}


class _FailOnLog(logging.Handler):
    """matplotlib reports a glyph missing from mathtext's font via logging, not warnings."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


@pytest.fixture
def strict_rendering():
    handler = _FailOnLog()
    logger = logging.getLogger("matplotlib")
    logger.addHandler(handler)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield handler
    logger.removeHandler(handler)
    assert handler.records == [], handler.records


@pytest.fixture(autouse=True)
def english_afterwards():
    yield
    pf.set_language("en")


def texts_of(fig):
    out = []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            out += [t.get_text() for t in legend.get_texts()]
    return [t for t in out if t]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_renders_in_both_languages(name, lang, strict_rendering):
    pf.set_language(lang)
    fig = FIGURES[name]()
    assert isinstance(fig, Figure)
    assert fig.get_facecolor()[3] == 1.0 and fig.get_facecolor()[:3] == (1.0, 1.0, 1.0)
    main_axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert main_axes
    for ax in main_axes:
        assert ax.get_facecolor()[3] == 1.0
        words = [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()] + [t.get_text() for t in ax.texts]
        assert any(w.strip() for w in words), f"{name}: an axes without any label"
        if ax.axison:
            assert ax.get_xlabel().strip() and ax.get_ylabel().strip(), name
    texts = " ".join(texts_of(fig))
    if lang == "zh":  # a composed title ("name: layer") takes the Chinese colon too
        half = [t for t in texts_of(fig) if HALF_WIDTH_PUNCT.search(t)]
        assert not half, f"{name}: half-width colon or comma beside Chinese: {half}"
    has_cjk = bool(CJK.search(texts))
    assert has_cjk == (lang == "zh"), texts
    buf = io.BytesIO()
    pf.save_figure(fig, buf)  # draws every glyph: a missing one fails the fixture
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_is_deterministic(name):
    pf.set_language("zh")
    first = pf.figure_to_png(FIGURES[name]())
    second = pf.figure_to_png(FIGURES[name]())
    assert first == second


def test_labels_differ_between_languages():
    pf.set_language("en")
    en = pf.sinusoid_heatmap(10, 8).axes[0].get_xlabel()
    pf.set_language("zh")
    zh = pf.sinusoid_heatmap(10, 8).axes[0].get_xlabel()
    assert en != zh and CJK.search(zh)


def test_every_label_has_both_languages():
    pf.load_all()  # figure modules register their labels when imported
    for key, words in pf.LABELS.items():
        assert set(words) == {"en", "zh"}, key
        assert bool(words["en"]) == bool(words["zh"]), key  # blank in both or in neither


def test_set_language_validates():
    with pytest.raises(ValueError, match=r"language must be one of 'en', 'zh', got 'fr'"):
        pf.set_language("fr")


def test_label_unknown_key():
    with pytest.raises(KeyError, match="no figure label 'nope'"):
        pf.label("nope")


def test_add_labels_rules():
    with pytest.raises(ValueError, match="must have 'en' and 'zh' strings"):
        pf.add_labels({"x_only_en": {"en": "x"}})
    with pytest.raises(ValueError, match="already defined"):
        pf.add_labels({"position": {"en": "pos", "zh": "位置"}})


def test_cjk_font_registered_and_in_family():
    family = pf.cjk_font_family()
    names = {f.name for f in matplotlib.font_manager.fontManager.ttflist}
    assert family in names and "SC" in family
    pf.set_language("zh")
    assert matplotlib.rcParams["font.family"][0] == family
    pf.set_language("en")
    assert matplotlib.rcParams["font.family"] == ["DejaVu Sans", family]


def test_png_has_no_timestamp_or_version():
    png = pf.figure_to_png(pf.sinusoid_heatmap(5, 4))
    assert b"Software" not in png and b"matplotlib" not in png.lower()
    svg = io.BytesIO()
    pf.save_figure(pf.sinusoid_heatmap(5, 4), svg, format="svg")
    assert b"<dc:date>" not in svg.getvalue()


def test_figure_repr_png_without_the_phone_variant_outside_the_book(monkeypatch):
    """In Jupyter or Colab a figure's output is one PNG: run again, a notebook keeps its
    size (the phone variant is for the site's <picture>, asked for by the build)."""
    from posenc.figures import _style

    monkeypatch.delenv(_style.PHONE_ENV, raising=False)
    png, meta = pf.encoding_pipeline()._repr_png_()
    assert png[:4] == b"\x89PNG" and _style.PHONE_KEY not in meta and meta["width"] > 0
    monkeypatch.setenv(_style.PHONE_ENV, "1")
    assert _style.PHONE_KEY in pf.encoding_pipeline()._repr_png_()[1]
    with pytest.raises(TypeError, match="phone"):
        _style.figure_variants(pf.encoding_pipeline(), phone="yes")


def test_figure_repr_png_for_jupyter(monkeypatch):
    """A 2x PNG that the page shows at DPI pixels per inch, with its smallest font, and
    the phone variant in the output's metadata (in the book's build)."""
    import base64

    from PIL import Image

    from posenc.figures import _style

    monkeypatch.setenv(_style.PHONE_ENV, "1")
    fig = pf.encoding_pipeline()
    size_before = tuple(fig.get_size_inches())
    png, meta = fig._repr_png_()
    assert tuple(fig.get_size_inches()) == size_before  # drawn from copies
    assert png[:4] == b"\x89PNG"
    width_in = min(fig.get_size_inches()[0], _style.DESKTOP_WIDTH_PX / _style.DPI)
    assert meta["width"] == round(width_in * _style.DPI)
    image = Image.open(io.BytesIO(png))
    assert image.width == pytest.approx(width_in * _style.DPI * _style.PNG_SCALE, abs=2)
    assert float(image.text[_style.MIN_FONT_KEY]) >= _style.MIN_FONT_PT
    phone = meta[_style.PHONE_KEY]
    assert phone["width"] == _style.PHONE_WIDTH_PX
    small = Image.open(io.BytesIO(base64.b64decode(phone["png"])))
    assert small.width == pytest.approx(phone["width"] * _style.PNG_SCALE, abs=2)
    assert small.height == pytest.approx(phone["height"] * _style.PNG_SCALE, abs=2)
    assert float(small.text[_style.MIN_FONT_KEY]) >= _style.MIN_FONT_PT


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_variants_are_legible(name, lang, strict_rendering):
    """Desktop: at most DESKTOP_WIDTH_PX wide; phone: PHONE_WIDTH_PX wide, panels one
    under the other; both with every word at MIN_FONT_PT or more, no word wider than
    the figure, none overlapping another, leaving the canvas or spilling out of its box,
    and every glyph found (the strict fixture)."""
    from matplotlib.text import Text

    from posenc.figures import _style

    pf.set_language(lang)
    fig = FIGURES[name]()
    variants = pf.figure_variants(fig)
    for kind, width in (("desktop", _style.DESKTOP_WIDTH_PX), ("phone", _style.PHONE_WIDTH_PX)):
        var = variants[kind]
        assert var is not fig
        shown = var.get_size_inches()[0] * _style.DPI
        assert shown <= width + 0.5
        assert pf.min_font_size(var) >= _style.MIN_FONT_PT
        buf = io.BytesIO()
        pf.save_figure(var, buf)
        renderer = var._get_renderer()
        for text in var.findobj(Text):
            if text.get_visible() and text.get_text().strip():
                assert text.get_window_extent(renderer).width <= var.bbox.width + 1, \
                    (kind, text.get_text())
        assert pf.text_problems(var) == [], kind
    phone = variants["phone"]
    lefts = {round(ax.get_position().x0, 2) for ax in phone.axes
             if ax.get_label() != "<colorbar>" and ax.get_subplotspec() is not None}
    assert len(lefts) == 1, f"{name}: phone panels side by side at {sorted(lefts)}"


def test_text_problems_finds_each_fault():
    from matplotlib.patches import FancyBboxPatch

    fig, ax = pf.new_figure(figsize=(3.0, 2.0))
    ax.set_axis_off()
    fig.text(0.98, 0.5, "off the edge")
    ax.add_patch(FancyBboxPatch((0.1, 0.1), 0.1, 0.1, boxstyle="round,pad=0"))
    ax.text(0.15, 0.15, "too long", ha="center", va="center")
    assert sorted(pf.text_problems(fig)) == ["'off the edge' leaves the canvas",
                                     "'too long' spills out of its box"]
    fig, ax = pf.new_figure(figsize=(3.0, 2.0))
    ax.plot([0, 1], [0, 1])
    assert pf.text_problems(fig) == []  # tick labels and a line: nothing collides


def test_reflow_figure_stacks_panels_and_raises_small_words():
    from posenc.figures import _style

    fig, axes = pf.new_figure(2, 3, figsize=(10.0, 5.0), squeeze=False)
    axes[0, 0].set_title("tiny", fontsize=4)
    axes[1, 2].legend(handles=axes[1, 2].plot([0, 1], label="a long legend entry")
                      + axes[1, 2].plot([1, 0], label="another long entry"), ncols=2)
    assert pf.reflow_figure(fig, 300, stack=True) is fig
    assert fig.get_size_inches()[0] == pytest.approx(300 / _style.DPI)
    assert [ax.get_subplotspec().rowspan.start for ax in axes.ravel()] == [0, 1, 2, 3, 4, 5]
    assert pf.min_font_size(fig) == _style.MIN_FONT_PT
    assert axes[1, 2].get_legend()._ncols == 1  # two columns would not fit


@pytest.mark.parametrize("bad", [0, -3, float("nan"), "wide", True])
def test_reflow_figure_rejects_bad_width(bad):
    fig, _ = pf.new_figure()
    with pytest.raises(ValueError, match="width_px must be a positive number"):
        pf.reflow_figure(fig, bad)


def test_wrapped_words_keep_math_and_split_chinese():
    from posenc.figures._style import _wrap_words

    text = "one row against the column index, $d = 512$"
    lines = _wrap_words(text, 2).split("\n")
    assert len(lines) == 2 and " ".join(lines) == text
    assert all(line.count("$") % 2 == 0 for line in lines)  # math never split
    zh = _wrap_words("归一化索引：随序列长度而变，越来越长", 2)
    assert zh.replace("\n", "") == "归一化索引：随序列长度而变，越来越长" and zh.count("\n") == 1


def test_figure_argument_errors():
    with pytest.raises(ValueError, match=r"columns must be in 0 .. 7"):
        pf.sinusoid_waveforms(10, 8, columns=(8,))
    with pytest.raises(ValueError, match=r"out_a must have shape \(len\(tokens\), d\) = \(2, d\)"):
        pf.permuted_attention_outputs(np.ones((3, 4)), ["a", "b"], np.ones((3, 4)), ["a", "b", "c"])


def test_figure_modules_are_imported_on_first_use():
    # a page's execution is keyed on the modules it imported: importing the package must
    # not import every figure module, or an edit to one would re-execute every page
    import json
    import subprocess
    import sys

    code = ("import json, sys, posenc.figures as pf; before = sorted(m for m in sys.modules "
            "if m.startswith('posenc.figures.')); pf.sinusoid_heatmap; after = sorted(m for m "
            "in sys.modules if m.startswith('posenc.figures.')); print(json.dumps([before, "
            "after]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    before, after = json.loads(out)
    assert before == ["posenc.figures._style"]
    assert after == ["posenc.figures._style", "posenc.figures.sinusoidal"]


def test_static_exports_match_the_modules():
    import importlib
    from pathlib import Path

    import posenc.figures as package

    for name, module in package._OWNER.items():
        mod = importlib.import_module(f"posenc.figures.{module}")
        assert name in mod.__all__ and getattr(package, name) is getattr(mod, name)
    for path in Path(package.__file__).parent.glob("[!_]*.py"):
        mod = importlib.import_module(f"posenc.figures.{path.stem}")
        assert package._static_all(path) == list(mod.__all__), path.stem
    with pytest.raises(AttributeError, match="no attribute 'not_a_figure'"):
        package.not_a_figure  # noqa: B018


def test_two_modules_exporting_one_name_is_an_error(tmp_path, monkeypatch):
    import posenc.figures as package

    monkeypatch.setattr(package, "_OWNER", dict(package._OWNER))
    monkeypatch.setattr(package, "__all__", list(package.__all__))
    clash = tmp_path / "clash.py"
    clash.write_text('__all__ = ["sinusoid_heatmap"]\n', encoding="utf-8")
    monkeypatch.setattr(package, "__path__", [str(tmp_path)])
    monkeypatch.setattr(package, "__file__", str(tmp_path / "__init__.py"))
    with pytest.raises(ImportError, match="'sinusoid_heatmap' is exported by both"):
        package._index_submodules()


def test_a_label_of_a_module_not_yet_imported_is_found():
    import subprocess
    import sys

    code = "import posenc.figures as pf; print(pf.label('lc_plain', 'zh'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "不缩放"


# -- Legibility (issue 21) -------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_word_smaller_than_nine_points(name):
    """9 pt is the book's smallest figure text (the browser test measures it on the page)."""
    assert pf.min_font_size(FIGURES[name]()) >= 9


def test_rope_scores_figure_names_score_once_per_panel():
    fig = pf.rope_scores_figure(np.add.outer(np.arange(6.0), -np.arange(6.0)))
    ax_m, ax_o, cbar = fig.axes
    assert cbar.get_ylabel() == ""  # beside the right panel's y label it read "score score"
    assert ax_m.get_title() == pf.label("rope_score") == ax_o.get_ylabel()


def _overlaps(a, b):
    return not (a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0)


def test_waveform_legend_is_outside_the_axes():
    fig = pf.sinusoid_waveforms()
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    (legend,) = fig.legends
    assert not fig.axes[0].get_legend()
    assert not _overlaps(legend.get_window_extent(renderer),
                         fig.axes[0].get_window_extent(renderer))


def test_reach_figure_draws_identical_curves_once():
    lam = [10.0, 100.0, 1e4]
    fig = pf.long_context_reach_figure(
        [("PI", lam, [1.0, 1.0, 1.0]), ("NTK", lam, [1.0, 1.0, 2.0]),
         ("YaRN", lam, [1.0, 1.0, 1.0])], 4096)
    names = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert names == ["PI = YaRN", "NTK"]
    assert len(fig.axes[0].lines) == 3  # two curves and the training-length line


@pytest.mark.parametrize("make", ["gpu_scaling", "length", "scaling", "budget", "finetune"])
def test_a_legend_under_the_axes_stays_out_of_them_on_a_phone(make):
    """A legend placed under the axes (the experiments figures) must not land on the data
    when the phone variant re-lays it out."""
    root = Path(__file__).resolve().parents[2] / "experiments"
    if make == "gpu_scaling":
        fig = pf.experiment_gpu_scaling_figure(
            pf.load_experiment_results_gpu(root / "results-gpu.json"))
    else:
        fig = getattr(pf, f"experiment_{make}_figure")(
            pf.load_experiment_results(root / "results.json"))
    for kind, var in pf.figure_variants(fig).items():
        var.draw_without_rendering()
        renderer = var._get_renderer()
        ax = var.axes[0]
        legends = list(var.legends) + ([ax.get_legend()] if ax.get_legend() else [])
        assert legends, kind
        for legend in legends:
            box = legend.get_window_extent(renderer)
            assert box.y1 <= ax.bbox.y0 + 1 or box.y0 >= ax.bbox.y1 - 1, \
                (kind, box, ax.bbox)
