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
]

#: The languages of the book.
LANGUAGES = _language.LANGUAGES

#: Figure dpi (fixed, so that pixel sizes do not depend on the machine's settings): one
#: inch of a figure is this many CSS pixels on the page.
DPI = 110

#: The book's PNGs are drawn at this multiple of :data:`DPI` and shown at :data:`DPI`
#: (the ``width`` the notebook output carries), so they stay sharp on 2x screens.
PNG_SCALE = 2

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
        width, _height = self.get_size_inches()
        return figure_to_png(self), {"width": int(round(width * DPI))}


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
