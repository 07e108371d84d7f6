"""House style of the book's figures: language, labels, fonts, a figure factory.

Every figure function in :mod:`posenc.figures` draws its words through :func:`label`, so
one call to :func:`set_language` per page (in the page's hidden setup cell) switches every
figure on that page between English and Chinese.  Chinese glyphs come from the Noto Sans
CJK font shipped by the PyPI package ``noto-cjk-sans-otc``, registered with matplotlib's
font manager, and put in ``font.family`` next to DejaVu Sans: matplotlib falls back glyph
by glyph along that list, so no "Glyph ... missing from font" warning and no tofu boxes.
In English DejaVu Sans comes first (CJK only as a fallback, e.g. for a token 我); in
Chinese Noto Sans CJK comes first, because mathtext draws the plain-text part of a label
such as ``"位置 $p$"`` in the first family only, without fallback.

Figures are :class:`BookFigure` objects (a :class:`matplotlib.figure.Figure` that is not
registered with pyplot, so nothing is shown twice and nothing leaks between cells) with an
opaque white background (readable on a dark theme), a fixed dpi, and deterministic output:
fixed seeds in the figure functions, PNG/SVG/PDF written without dates or version strings
(:func:`save_figure`, :func:`figure_to_png`), so two builds give the same bytes.

Chapter writers adding a figure module: create it with :func:`new_figure`, look words up
with :func:`label` (adding your keys with :func:`add_labels`), and export the function in
the module's ``__all__``; :mod:`posenc.figures` re-exports it.
"""

from __future__ import annotations

import io

import matplotlib
from matplotlib.figure import Figure

from .. import _language
from .._validation import check_bool

__all__ = [
    "LANGUAGES",
    "LABELS",
    "set_language",
    "get_language",
    "label",
    "add_labels",
    "cjk_font_family",
    "apply_style",
    "new_figure",
    "BookFigure",
    "save_figure",
    "figure_to_png",
    "min_font_size",
    "text_problems",
    "reflow_figure",
    "figure_variants",
]

#: The languages of the book.
LANGUAGES = _language.LANGUAGES

#: Figure dpi (fixed, so that pixel sizes do not depend on the machine's settings): one
#: inch of a figure is this many CSS pixels on the page.
DPI = 110

#: The book's PNGs are drawn at this multiple of :data:`DPI` and shown at :data:`DPI`
#: (the ``width`` the notebook output carries), so they stay sharp on 2x screens.
PNG_SCALE = 2

#: The smallest font size (points) a figure draws on the page.  At :data:`DPI` a point
#: is 110/72 CSS px, so 8 pt is 12.2 CSS px where the figure is shown at its drawn size,
#: and still 11 px or more where the theme's column is up to a tenth narrower.
MIN_FONT_PT = 8.0

#: The widest figure (CSS px) the page shows at its drawn size: the text column of the
#: book's theme at 1280 px (672 px with the page's contents beside it).  A wider figure is re-laid out to this width (same words,
#: same size), so the page never shrinks its words.
DESKTOP_WIDTH_PX = 672

#: The width (CSS px) of the text column on a 390 px phone (342 px), where the page shows the
#: phone variant of every figure (panels stacked, words at :data:`MIN_FONT_PT` or more).
PHONE_WIDTH_PX = 342

#: The page serves the phone variant up to this viewport width (CSS px).
PHONE_MAX_VIEWPORT_PX = 600

#: Key of the PNG output metadata that carries the phone variant (base64 PNG and its
#: display width); the book's Sphinx extension serves it through ``<picture>``.
PHONE_KEY = "posenc_phone"

#: The environment variable that asks for the phone variant: the book's build sets it
#: (conf.py) for its kernels.  Elsewhere (Jupyter, Colab) a figure's output is the one
#: PNG, so a notebook run again does not grow by a second image per figure.
PHONE_ENV = "POSENC_PHONE_FIGURES"

#: PNG text chunk with the figure's smallest font size in points, so a test can work
#: out how large its words are drawn at a given page width (tests/browser_site.py).
MIN_FONT_KEY = "posenc-min-font-pt"

#: Metadata written into saved files: no software version, no creation date.
_METADATA = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
}

_state = {"cjk_family": None}

#: Words in figures, ``{key: {"en": ..., "zh": ...}}``.  Figure modules add their own
#: keys with :func:`add_labels`; a key must have both languages.
LABELS: dict[str, dict[str, str]] = {
    "position": {"en": "position $p$", "zh": "位置 $p$"},
    # the colon between a name and what follows it in a title: full width in Chinese
    "colon": {"en": ": ", "zh": "："},
    "dimension": {"en": "dimension $j$", "zh": "维度 $j$"},
    "value": {"en": "value", "zh": "取值"},
    "offset": {"en": "offset $k$", "zh": "偏移 $k$"},
}


def set_language(language):
    """Choose the language of every figure drawn from now on.

    Parameters
    ----------
    language : {"en", "zh"}

    Raises
    ------
    ValueError
        If ``language`` is not ``"en"`` or ``"zh"``.

    Examples
    --------
    >>> set_language("zh"); label("position")
    '位置 $p$'
    >>> set_language("en"); label("position")
    'position $p$'
    """
    _language.set_language(language)  # posenc._language: shared with posenc.analysis
    apply_style()


def get_language():
    """The current figure language, ``"en"`` or ``"zh"``.

    Examples
    --------
    >>> get_language() in LANGUAGES
    True
    """
    return _language.get_language()


def label(key, language=None):
    """The word(s) for ``key`` in the current language (or in ``language``).

    Parameters
    ----------
    key : str
        A key of :data:`LABELS`.
    language : {"en", "zh"}, optional
        Defaults to :func:`get_language`.

    Returns
    -------
    str

    Raises
    ------
    KeyError
        If ``key`` is not in :data:`LABELS` (the message says where to add it).
    ValueError
        If ``language`` is not ``"en"`` or ``"zh"``.

    Examples
    --------
    >>> label("offset", "zh")
    '偏移 $k$'
    """
    lang = get_language() if language is None else language
    if lang not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(map(repr, LANGUAGES))}, "
                         f"got {lang!r}")
    if key not in LABELS:
        # figure modules register their words when first imported (posenc.figures imports
        # them on first use): a page may ask for a module's word before calling it
        import posenc.figures

        posenc.figures.load_all()
    try:
        return LABELS[key][lang]
    except KeyError:
        raise KeyError(f"no figure label {key!r}; add it with posenc.figures.add_labels") from None


def add_labels(mapping):
    """Add figure words: ``{key: {"en": ..., "zh": ...}}``; both languages required.

    An empty string is allowed (a deliberately blank label), as long as both languages
    are given.

    Re-adding a key with the same words is allowed (modules may be reloaded); changing
    the words of an existing key is an error, so two figure modules cannot silently
    fight over one key.

    Parameters
    ----------
    mapping : dict

    Raises
    ------
    ValueError
        If an entry lacks a language or redefines an existing key differently.

    Examples
    --------
    >>> add_labels({"doc_example": {"en": "example", "zh": "示例"}})
    >>> label("doc_example", "zh")
    '示例'
    """
    for key, words in mapping.items():
        if set(words) != set(LANGUAGES) or not all(isinstance(w, str) for w in words.values()):
            raise ValueError(f"label {key!r} must have 'en' and 'zh' strings, got {words!r}")
        if key in LABELS and LABELS[key] != words:
            raise ValueError(f"label {key!r} is already defined as {LABELS[key]!r}")
        LABELS[key] = dict(words)


def cjk_font_family():
    """Register Noto Sans CJK with matplotlib (once) and return the Simplified Chinese family.

    Returns
    -------
    str
        ``"Noto Sans CJK SC"``.

    Examples
    --------
    >>> cjk_font_family()
    'Noto Sans CJK SC'
    """
    if _state["cjk_family"] is None:
        from matplotlib import font_manager
        from noto_cjk_sans_otc import FONT_PATH

        names = {f.name for f in font_manager.fontManager.ttflist}
        if "Noto Sans CJK SC" not in names:
            # The .ttc holds every regional face (JP, KR, SC, TC, HK); addfont registers all.
            font_manager.fontManager.addfont(str(FONT_PATH))
            names = {f.name for f in font_manager.fontManager.ttflist}
        family = "Noto Sans CJK SC"
        if family not in names:  # pragma: no cover - a different build of the font
            family = font_manager.FontProperties(fname=str(FONT_PATH)).get_name()
        _state["cjk_family"] = family
    return _state["cjk_family"]


def _families(cjk):
    if get_language() == "zh":
        return [cjk, "DejaVu Sans"]
    return ["DejaVu Sans", cjk]


def apply_style():
    """Set matplotlib's rcParams to the house style (fonts, white background, dpi, SVG ids).

    Called by :func:`set_language` and :func:`new_figure`; idempotent.

    Examples
    --------
    >>> import matplotlib
    >>> set_language("en"); matplotlib.rcParams["font.family"]
    ['DejaVu Sans', 'Noto Sans CJK SC']
    >>> set_language("zh"); matplotlib.rcParams["font.family"]
    ['Noto Sans CJK SC', 'DejaVu Sans']
    >>> set_language("en")
    """
    family = cjk_font_family()
    matplotlib.rcParams.update({
        # Latin text in DejaVu Sans with a glyph-by-glyph fallback to Noto Sans CJK in
        # English; in Chinese the CJK font comes first, because mathtext renders the
        # non-math part of a string that contains $...$ in the *first* family only
        # (no fallback), so "位置 $p$" needs a first family with CJK glyphs.
        "font.family": _families(family),
        "font.size": 10,
        "axes.unicode_minus": True,
        "figure.facecolor": "white",
        "axes.facecolor": "white",
        "savefig.facecolor": "white",
        "savefig.transparent": False,
        "figure.dpi": DPI,
        "savefig.dpi": DPI,
        "svg.hashsalt": "posenc",
        "image.cmap": "RdBu_r",
        "axes.grid": False,
        "axes.spines.top": False,
        "axes.spines.right": False,
    })


class BookFigure(Figure):
    """A :class:`matplotlib.figure.Figure` that renders itself in Jupyter as a PNG.

    Not registered with pyplot: returning it from a cell (or ``glue``-ing it) shows it
    once, and it never accumulates in pyplot's figure list.  The PNG is drawn at
    ``PNG_SCALE`` times :data:`DPI` and carries its display width (``DPI`` pixels per
    inch) in the output's metadata, so the page shows it at that size, sharp on a 2x
    screen.
    """

    def _repr_png_(self):
        """The page's figure: a PNG for desktops, with the phone variant in its metadata
        where ``$POSENC_PHONE_FIGURES`` is set (the book's build).

        Both are drawn from copies of this figure re-laid out by :func:`figure_variants`
        (the figure itself is left as it is, unless it cannot be copied).
        """
        import base64
        import os
        import warnings

        with warnings.catch_warnings():
            # a narrowed copy may be too small for constrained layout to place every
            # panel; the words are still drawn, and the page offers the wide version
            warnings.filterwarnings("ignore", message=".*(constrained|layout).*")
            variants = figure_variants(self, phone=bool(os.environ.get(PHONE_ENV)))
            desk, phone = variants["desktop"], variants["phone"]
            meta = {"width": int(round(desk.get_size_inches()[0] * DPI))}
            png = figure_to_png(desk)
            if phone is not None:
                meta[PHONE_KEY] = {
                    "png": base64.b64encode(figure_to_png(phone)).decode("ascii"),
                    "width": int(round(phone.get_size_inches()[0] * DPI)),
                    "height": int(round(phone.get_size_inches()[1] * DPI)),
                }
        return png, meta


def min_font_size(fig):
    """The smallest font size (points) of any text drawn in ``fig``.

    Texts that are hidden, empty or outside the figure (tick labels beyond the axes'
    limits) do not count.

    Examples
    --------
    >>> fig, ax = new_figure(); _ = ax.set_title("t", fontsize=14)
    >>> _ = ax.text(0.5, 0.5, "small", fontsize=6)
    >>> min_font_size(fig)
    6.0
    """
    from matplotlib.text import Text

    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    box = fig.bbox
    sizes = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        extent = text.get_window_extent(renderer)
        if extent.width <= 0 or extent.x1 < box.x0 or extent.x0 > box.x1 \
                or extent.y1 < box.y0 or extent.y0 > box.y1:
            continue
        sizes.append(float(text.get_fontsize()))
    return min(sizes) if sizes else float("inf")


def _drawn_texts(fig, renderer):
    """Every visible, non-empty text of ``fig`` with its extent in pixels (tick labels
    whose tick lies outside the axes' limits are not drawn and not listed)."""
    from matplotlib.text import Text

    drawn = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            shown = ax.axison and axis.get_visible()
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not shown or not lo - 1e-9 * (hi - lo) <= tick.get_loc() <= hi + 1e-9 * (hi - lo):
                    for label in (tick.label1, tick.label2):
                        label._posenc_skip = True
    for text in fig.findobj(Text):
        skip = getattr(text, "_posenc_skip", False)
        if skip:
            del text._posenc_skip
        if skip or not text.get_visible() or not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        if box.width > 0 and box.height > 0:
            drawn.append((text, box))
    return drawn


def text_problems(fig, *, tolerance=1.0):
    """Where the words of ``fig`` collide: a list of sentences, empty when none do.

    Three faults are found, from the drawn extent of every visible text:

    * a text that leaves the canvas (by more than ``tolerance`` pixels);
    * two texts that overlap (by more than ``tolerance`` pixels each way);
    * a text whose centre lies in a box drawn around words (a
      :class:`~matplotlib.patches.FancyBboxPatch`, as the diagrams draw) that spills out
      of it.

    Examples
    --------
    >>> fig, ax = new_figure(figsize=(3, 2))
    >>> _ = ax.text(0.5, 0.5, "one", fontsize=12); _ = ax.text(0.52, 0.5, "two", fontsize=12)
    >>> text_problems(fig)
    ["'one' overlaps 'two'"]
    """
    from matplotlib.patches import FancyBboxPatch

    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    canvas = fig.bbox
    texts = _drawn_texts(fig, renderer)
    boxes = [p.get_window_extent(renderer) for p in fig.findobj(FancyBboxPatch)
             if p.get_visible() and p.get_figure(root=False) is not None
             and not any(p is getattr(t, "get_bbox_patch", lambda: None)() for t, _ in texts)
             and p.get_label() != "_legend_frame"]
    problems = []
    t = tolerance
    for text, box in texts:
        if (box.x0 < canvas.x0 - t or box.x1 > canvas.x1 + t or box.y0 < canvas.y0 - t
                or box.y1 > canvas.y1 + t):
            problems.append(f"{text.get_text()!r} leaves the canvas")
        cx, cy = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
        for frame in boxes:
            if (frame.x0 <= cx <= frame.x1 and frame.y0 <= cy <= frame.y1
                    and (box.x0 < frame.x0 - t or box.x1 > frame.x1 + t
                         or box.y0 < frame.y0 - t or box.y1 > frame.y1 + t)):
                problems.append(f"{text.get_text()!r} spills out of its box")
                break
    for i, (a, box_a) in enumerate(texts):
        for b, box_b in texts[i + 1:]:
            w = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            h = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if w > t and h > t:
                problems.append(f"{a.get_text()!r} overlaps {b.get_text()!r}")
    return problems


def _copy_figure(fig):
    """A deep copy of ``fig`` (pickled and restored), or None if it cannot be pickled."""
    import pickle

    try:
        return pickle.loads(pickle.dumps(fig))
    except Exception:  # an artist holding a lambda, a generator, ...
        return None


def _stack_panels(fig):
    """Put the panels of each grid of axes one under the other; True if any moved.

    A grid of ``r`` rows and ``c`` columns becomes ``r * c`` rows of one column, in
    reading order; the axes objects stay the same.  A grid with a panel spanning cells
    is left as it is.  Colorbars made with ``fig.colorbar(..., ax=...)`` follow their
    axes (the layout engine places them).
    """
    from matplotlib.gridspec import GridSpec

    grids = {}
    for ax in fig.axes:
        spec = ax.get_subplotspec()
        if spec is None:
            continue
        grid = spec.get_gridspec()
        if not isinstance(grid, GridSpec) or grid.figure is not fig:
            continue  # a nested grid moves with its parent cell
        grids.setdefault(id(grid), (grid, []))[1].append((ax, spec))
    moved = False
    for grid, members in grids.values():
        nrows, ncols = grid.get_geometry()
        if ncols < 2:
            continue
        if any(len(s.rowspan) != 1 or len(s.colspan) != 1 for _, s in members):
            continue
        ratios = grid.get_height_ratios() or [1] * nrows
        stacked = GridSpec(nrows * ncols, 1, figure=fig,
                           height_ratios=[r for r in ratios for _ in range(ncols)])
        for ax, spec in members:
            ax.set_subplotspec(stacked[spec.rowspan.start * ncols + spec.colspan.start, 0])
        moved = True
    return moved


def _floor_fonts(fig, min_pt):
    """Raise every word of ``fig`` drawn under ``min_pt`` points to ``min_pt``."""
    from matplotlib.text import Text

    for ax in fig.axes:  # tick labels are made afresh on each draw: set the axis' size
        for axis in (ax.xaxis, ax.yaxis):
            for which, ticks in (("major", axis.get_major_ticks()),
                                 ("minor", axis.get_minor_ticks())):
                if ticks and ticks[0].label1.get_fontsize() < min_pt:
                    axis.set_tick_params(which=which, labelsize=min_pt)
    for text in fig.findobj(Text):
        if text.get_fontsize() < min_pt:
            text.set_fontsize(min_pt)


_WRAP_TOKENS = None


def _wrap_words(text, parts):
    """``text`` broken into ``parts`` lines of about equal length, between words (or
    between CJK characters), never inside ``$...$`` math."""
    import re

    global _WRAP_TOKENS
    if _WRAP_TOKENS is None:
        _WRAP_TOKENS = re.compile(r"\$[^$]*\$\S*\s*|[\u3000-\u9fff\uff00-\uffef][，。、：；）]?\s*"
                                  r"|[^\s$\u3000-\u9fff\uff00-\uffef]+\s*|\s+")
    tokens = _WRAP_TOKENS.findall(text)
    if "".join(tokens) != text or len(tokens) < 2:
        return text
    goal = len(text) / parts
    lines, line = [], ""
    for token in tokens:
        if line.strip() and len(line) + len(token.rstrip()) > goal * 1.15 \
                and len(lines) < parts - 1:
            lines.append(line.rstrip())
            line = ""
        line += token
    lines.append(line.rstrip())
    return "\n".join(lines)


def _fit_words(fig, min_pt):
    """Break titles, labels and legends wider than the figure into lines or columns."""
    import math

    from matplotlib.text import Text

    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    room = fig.bbox.width * 0.98
    places = ["outside lower center", "outside upper center"]
    for ax in fig.axes:
        # an axes' legend wider than most of the figure: in one column, and if that is
        # still too wide, under the figure (where the layout makes room for it)
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        beside = box.x0 >= ax.bbox.x1 - 1 or box.x1 <= ax.bbox.x0 + 1
        # a legend anchored under (or over) the axes: re-made in one column it would lose
        # its anchor and cover the data, so it goes under the figure instead
        outside = beside or box.y1 <= ax.bbox.y0 + 1 or box.y0 >= ax.bbox.y1 - 1
        if not beside and box.width <= room * 0.75:
            continue
        handles, words = legend.legend_handles, [t.get_text() for t in legend.texts]
        drawn, named = ax.get_legend_handles_labels()
        if named == words:  # the artists themselves: a re-made legend keeps their styles
            handles = drawn
        size = max(legend.prop.get_size_in_points(), min_pt)
        if legend._ncols > 1 and not outside:
            legend = ax.legend(handles, words, loc=legend._loc, ncols=1, fontsize=size,
                               frameon=legend.get_frame_on())
            fig.draw_without_rendering()
            if legend.get_window_extent(renderer).width <= room * 0.75:
                continue
        if places:
            frame = legend.get_frame_on()
            entry = room - 60  # the line or marker drawn before each entry
            words = [_wrap_words(w, math.ceil(t.get_window_extent(renderer).width / entry))
                     if t.get_window_extent(renderer).width > entry else w
                     for w, t in zip(words, legend.texts)]
            legend.remove()
            moved = fig.legend(handles, words, loc=places.pop(0), ncols=1, fontsize=size,
                               frameon=frame)
            fig.draw_without_rendering()
            grow = moved.get_window_extent(renderer).height / fig.dpi
            width_in, height_in = fig.get_size_inches()
            fig.set_size_inches(width_in, height_in + grow)
            fig.draw_without_rendering()
    for legend in list(fig.legends):  # a figure legend beside the panels: under them
        if getattr(legend, "_outside_loc", None) in ("left", "right") and places:
            handles, words = legend.legend_handles, [t.get_text() for t in legend.texts]
            size = max(legend.prop.get_size_in_points(), min_pt)
            frame = legend.get_frame_on()
            legend.remove()
            fig.legend(handles, words, loc=places.pop(0), ncols=1, fontsize=size,
                       frameon=frame)
            fig.draw_without_rendering()
    for legend in list(fig.legends):  # a figure legend under or over the panels, wider
        # than the figure: re-made with fewer columns until it fits (the layout grows)
        side = getattr(legend, "_outside_loc", None)
        ncols = legend._ncols
        while side in ("lower", "upper") and ncols > 1 and \
                legend.get_window_extent(renderer).width > room:
            ncols -= 1
            handles, words = legend.legend_handles, [t.get_text() for t in legend.texts]
            size = max(legend.prop.get_size_in_points(), min_pt)
            frame = legend.get_frame_on()
            old_h = legend.get_window_extent(renderer).height
            legend.remove()
            legend = fig.legend(handles, words, loc=f"outside {side} center", ncols=ncols,
                                fontsize=size, frameon=frame)
            fig.draw_without_rendering()
            grow = (legend.get_window_extent(renderer).height - old_h) / fig.dpi
            width_in, height_in = fig.get_size_inches()
            fig.set_size_inches(width_in, height_in + max(grow, 0.0))
            fig.draw_without_rendering()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes
                                   if ax.get_legend() is not None]
    ylabels = {id(ax.yaxis.label): ax for ax in fig.axes}
    titles = {id(ax.title): ax for ax in fig.axes}
    inside = {id(t) for legend in legends for t in legend.get_texts()}
    # the titles last, once the labels beside their panels have moved the panels
    texts = fig.findobj(Text)
    texts = [t for t in texts if id(t) not in titles] + [t for t in texts if id(t) in titles]
    laid_out = False
    for text in texts:
        words = text.get_text()
        if id(text) in inside or "\n" in words or not text.get_visible() or " " not in \
                words.strip() and not any("\u3000" <= c <= "\u9fff" for c in words):
            continue
        if id(text) in titles and not laid_out:
            fig.draw_without_rendering()
            laid_out = True
        extent = text.get_window_extent(renderer)
        if text.get_rotation() % 180 == 90:  # an upright label: as long as its axes
            ax = ylabels.get(id(text))
            tall = ax.bbox.height * 1.1 if ax is not None else fig.bbox.height * 0.95
            if extent.height > tall:
                text.set_text(_wrap_words(words, math.ceil(extent.height / tall)))
        else:  # a panel's title centred over its panel must stay on the canvas
            box = titles[id(text)].bbox if id(text) in titles else None
            wide = room if box is None else min(
                room, box.width * 1.1, 2 * min(box.x0 + box.x1 - 2 * fig.bbox.x0,
                                               2 * fig.bbox.x1 - box.x0 - box.x1) / 2 * 0.98)
            if extent.width > wide:
                text.set_text(_wrap_words(words, math.ceil(extent.width / wide)))


def reflow_figure(fig, width_px, *, stack=False, min_pt=MIN_FONT_PT):
    """Re-lay ``fig`` out, in place, to be shown ``width_px`` CSS px wide.

    Words under ``min_pt`` points are raised to it; a figure wider than ``width_px`` is
    narrowed to it (constrained layout places the panels again); with ``stack``, panels
    side by side are put one under the other first, each about as tall as it was
    (never flatter than 2.6 inches, or than the figure was).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    width_px : float
        The width at which the page shows the figure (CSS px; :data:`DPI` per inch).
    stack : bool, keyword-only
    min_pt : float, keyword-only

    Returns
    -------
    fig : the same figure

    Raises
    ------
    ValueError
        If ``width_px`` or ``min_pt`` is not a positive number.

    Examples
    --------
    >>> fig, axes = new_figure(1, 2, figsize=(9.0, 3.0))
    >>> _ = axes[0].set_title("small", fontsize=5)
    >>> _ = reflow_figure(fig, PHONE_WIDTH_PX, stack=True)
    >>> [round(float(v), 2) for v in fig.get_size_inches()], min_font_size(fig)
    ([3.11, 5.2], 8.0)
    """
    for value, name in ((width_px, "width_px"), (min_pt, "min_pt")):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    width_in, height_in = (float(v) for v in fig.get_size_inches())
    target = min(width_in, width_px / DPI)
    cols = 1
    stack = check_bool(stack, "stack")
    if stack:
        grids = [ax.get_subplotspec().get_gridspec().get_geometry() for ax in fig.axes
                 if ax.get_subplotspec() is not None]
        cols = max((c for _r, c in grids), default=1)
        if not _stack_panels(fig):
            cols = 1
    panel_w = width_in / cols
    panel_h = height_in  # the height of one row of panels, stacked ``cols`` times
    shrink = target / panel_w
    height = cols * max(panel_h * shrink, min(panel_h, 2.6))
    fig.set_size_inches(target, height if stack else max(height_in * target / width_in,
                                                         min(height_in, 2.6)))
    _floor_fonts(fig, min_pt)
    if stack or target < width_in:
        _fit_words(fig, min_pt)
    return fig


def figure_variants(fig, *, phone=True):
    """The desktop and phone versions of ``fig`` that the page shows, as new figures.

    ``"desktop"``: at most :data:`DESKTOP_WIDTH_PX` wide, words at least
    :data:`MIN_FONT_PT`; ``"phone"``: :data:`PHONE_WIDTH_PX` wide, panels stacked, the
    same floor; None where the figure cannot be copied (then the desktop version is
    ``fig`` itself, re-laid out), or when ``phone`` is false.  A figure whose
    ``phone_figure`` attribute is set (a picklable function of no arguments) is drawn
    anew by it for the phone, instead of narrowed: a diagram laid out in a column.
    """
    check_bool(phone, "phone")
    desk = _copy_figure(fig)
    own = getattr(fig, "phone_figure", None)
    if phone and own is not None:  # a figure drawn anew for a phone, not narrowed
        return {"desktop": reflow_figure(desk if desk is not None else fig, DESKTOP_WIDTH_PX),
                "phone": reflow_figure(own(), PHONE_WIDTH_PX)}
    phone = _copy_figure(fig) if desk is not None and phone else None
    desk = reflow_figure(desk if desk is not None else fig, DESKTOP_WIDTH_PX)
    if phone is not None:
        reflow_figure(phone, PHONE_WIDTH_PX, stack=True)
    return {"desktop": desk, "phone": phone}


def new_figure(nrows=1, ncols=1, *, figsize=(6.4, 3.6), squeeze=True, **subplots_kw):
    """A :class:`BookFigure` in the house style, with a grid of axes.

    Parameters
    ----------
    nrows, ncols : int
        Grid of axes (``Figure.subplots``).
    figsize : tuple of float, keyword-only
        Width and height in inches.
    squeeze : bool, keyword-only
        As in ``Figure.subplots``.
    **subplots_kw
        Passed on to ``Figure.subplots`` (``sharex``, ``gridspec_kw``, ...).

    Returns
    -------
    fig : BookFigure
    axes : matplotlib.axes.Axes or numpy.ndarray of them

    Examples
    --------
    >>> fig, ax = new_figure()
    >>> fig.get_facecolor()
    (1.0, 1.0, 1.0, 1.0)
    """
    apply_style()
    fig = BookFigure(figsize=figsize, dpi=DPI, facecolor="white", layout="constrained")
    squeeze = check_bool(squeeze, "squeeze")  # "false" would squeeze (a non-empty str)
    axes = fig.subplots(nrows, ncols, squeeze=squeeze, **subplots_kw)
    return fig, axes


def save_figure(fig, fname, format=None, **kwargs):
    """``fig.savefig`` with the house settings and no dates or version strings.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    fname : str, path-like or binary file object
    format : {"png", "svg", "pdf"}, optional
        Inferred from ``fname`` when not given (PNG for file objects).
    **kwargs
        Passed to ``savefig``.

    Examples
    --------
    >>> import io
    >>> fig, ax = new_figure(); _ = ax.plot([0, 1])
    >>> buf = io.BytesIO(); save_figure(fig, buf)
    >>> buf.getvalue()[:4]
    b'\\x89PNG'
    """
    if format is None:
        name = str(fname) if not hasattr(fname, "write") else ""
        format = name.rsplit(".", 1)[-1].lower() if "." in name else "png"
    kwargs.setdefault("dpi", DPI)
    kwargs.setdefault("facecolor", "white")
    kwargs.setdefault("metadata", _METADATA.get(format))
    apply_style()
    fig.savefig(fname, format=format, **kwargs)


def figure_to_png(fig, scale=PNG_SCALE):
    """The PNG bytes of ``fig`` at ``scale`` times :data:`DPI` (deterministic).

    The PNG carries the figure's smallest font size (:func:`min_font_size`) in a text
    chunk named :data:`MIN_FONT_KEY`.

    Examples
    --------
    >>> fig, ax = new_figure(); _ = ax.plot([0, 1])
    >>> figure_to_png(fig) == figure_to_png(fig)
    True
    """
    buf = io.BytesIO()
    metadata = {**_METADATA["png"], MIN_FONT_KEY: f"{min_font_size(fig):g}"}
    save_figure(fig, buf, format="png", dpi=DPI * scale, metadata=metadata)
    return buf.getvalue()
