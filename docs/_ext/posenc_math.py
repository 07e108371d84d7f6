r"""Math rendered at build time, as MathML: no MathJax in the reader's browser.

MathJax's ``tex-chtml.js`` is 1.16 MB of script (and it fetches fonts), more than a
whole page of the book weighs without it, and every page with an equation paid for it.
Browsers draw MathML themselves (MathML Core: Chromium 109+, Firefox, Safari), so the
TeX of each equation is converted to MathML once, when the site is built, by
``latex2mathml`` (pure Python, pinned in requirements/docs.txt) and written into the
page.  The TeX stays in the page as the MathML's annotation, so it can still be copied.

Registered as the HTML math renderer ``posenc_mathml`` (conf.py: ``html_math_renderer``).
A formula the converter cannot read is a build warning (an error under ``-W``) naming the
page and the formula.  tests/book/test_site.py checks that every page's math is MathML
and that no page loads MathJax; the browser test that every formula is drawn.

**Named functions read as functions.**  The converter writes ``\cos m\theta`` as
``<mi>cos</mi><mi>m</mi><mi>θ</mi>``, which the browser draws "cosmθ": each name is
applied to its argument with ApplyFunction and spaced as TeX spaces it
(``apply_functions``; the web pages and the PDF printed from them alike).

**A narrow form for phones.**  A display too wide for a phone's column (342 px) says
where it may break, in TeX comments, which MathJax (in a downloaded notebook) and TeX
ignore:

* ``%|`` at the end of a line: the narrow form breaks the line there (a chain of
  ``=`` becomes one step per line, the later lines indented; inside an ``aligned`` or
  ``gathered`` display, a new row);
* a line ``%narrow: <TeX>``: the narrow form is that TeX instead (a matrix written by
  blocks, say).

The page then carries both forms: the wide one from 600 px up, the narrow one below
(``posenc.css``).  Both trees mark the same equations the same way (the parity test
compares the TeX, comments included).
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.locale import _
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number

logger = logging.getLogger(__name__)

#: Environments that are a display of their own (amsmath), not wrapped in another.
_OWN_ENVIRONMENT = re.compile(r"^\s*\\begin\{(align|aligned|equation|gather|multline|split|"
                              r"alignat|cases|array)\*?\}")


#: TeX that latex2mathml 3.81 reads differently from MathJax, rewritten first: it has no
#: ``aligned`` (its ``split`` is the same two-column table; ``align`` would number each
#: line), no ``\arg``, no control space at a line's end, and no size command before a
#: floor bracket.
_REWRITES = [
    (re.compile(r"\\(begin|end)\{(aligned|align\*?)\}"), r"\\\1{split}"),
    (re.compile(r"\\arg\b"), r"\\operatorname{arg}"),
    (re.compile(r"(?<!\\)\\\n"), r"\\ "),  # a backslash ending a line: a space
    (re.compile(r"\\[Bb]ig{1,2}[lr]?\s*(?=\\[lr](?:floor|ceil)\b)"), ""),
]
#: What is left of TeX that the converter did not read: a backslash command or an
#: alignment '&' in a token element.
_LEFTOVER = re.compile(r"<(mi|mo|mn|mtext)[^>]*>[^<]*(\\|&(?![#\w]+;))[^<]*</\1>")


#: A TeX comment (to the end of its line), not an escaped ``\\%``.
_COMMENT = re.compile(r"(?<!\\)%[^\n]*")
_NARROW = re.compile(r"^[ \t]*%narrow:(?P<tex>[^\n]*)$", re.M)
_BREAK = re.compile(r"(?<!\\)%\|[^\n]*")


def strip_comments(tex: str) -> str:
    """``tex`` without its ``%`` comments (latex2mathml does not read them)."""
    lines = [line for line in tex.split("\n") if not line.lstrip().startswith("%")]
    return "\n".join(_COMMENT.sub("", line) for line in lines)


def narrow_tex(tex: str) -> str | None:
    """The narrow form that ``tex`` asks for with ``%|`` or ``%narrow:``, else None
    (tests/book/test_site.py: test_narrow_math_forms)."""
    explicit = _NARROW.search(tex)
    if explicit:
        return explicit.group("tex").strip()
    if not _BREAK.search(tex):
        return None
    gathered = re.search(r"\\begin\{gathered\}(?P<body>.*)\\end\{gathered\}", tex, re.S)
    if gathered:  # latex2mathml has no gathered: the rows, left-aligned, in a split
        rows = re.split(r"\\\\|(?<!\\)%\|[^\n]*", gathered.group("body"))
        rows = [strip_comments(row).strip() for row in rows]
        return r"\begin{split}&" + r"\\&".join(row for row in rows if row) + r"\end{split}"
    if _OWN_ENVIRONMENT.match(strip_comments(tex)) or re.search(r"\\begin\{aligned",
                                                                tex):
        lines = _BREAK.split(tex)
        aligned = "&" in tex
        return strip_comments((r"\\ &\qquad " if aligned else r"\\ ").join(lines))
    parts = [strip_comments(part).strip() for part in _BREAK.split(tex)]
    return r"\begin{split}&" + r"\\&\quad ".join(p for p in parts if p) + r"\end{split}"


#: Token elements with a ``mathvariant`` other than ``normal``.  MathML Core (what
#: Chromium draws) reads only ``mathvariant="normal"``: ``\mathbf{q}`` written as
#: ``<mi mathvariant="bold">q</mi>`` comes out as an italic q.  The styled letters have
#: code points of their own (Unicode's Mathematical Alphanumeric Symbols, with a few in
#: Letterlike Symbols, such as the double-struck R), which every browser draws from the
#: math font: those are written instead.
_STYLED = re.compile(r'<(mi|mn|mo|mtext)([^>]*?) mathvariant="(?P<v>bold|italic|bold-italic|'
                     r'double-struck|script|bold-script|fraktur|bold-fraktur|sans-serif|'
                     r'bold-sans-serif|sans-serif-italic|sans-serif-bold-italic|'
                     r'monospace)"([^>]*)>(?P<text>[^<]*)</\1>')


#: Each ``mathvariant`` as Unicode names its letters.
_STYLE_NAMES = {
    "bold": "BOLD", "italic": "ITALIC", "bold-italic": "BOLD ITALIC",
    "double-struck": "DOUBLE-STRUCK", "script": "SCRIPT", "bold-script": "BOLD SCRIPT",
    "fraktur": "FRAKTUR", "bold-fraktur": "BOLD FRAKTUR", "sans-serif": "SANS-SERIF",
    "bold-sans-serif": "SANS-SERIF BOLD", "sans-serif-italic": "SANS-SERIF ITALIC",
    "sans-serif-bold-italic": "SANS-SERIF BOLD ITALIC", "monospace": "MONOSPACE",
}


@functools.lru_cache(maxsize=None)
def styled_char(char: str, variant: str) -> str:
    """``char`` in the mathematical style ``variant`` (a ``mathvariant`` value), or
    ``char`` itself where Unicode has no such letter (``styled_char("q", "bold")`` is
    U+1D42A MATHEMATICAL BOLD SMALL Q)."""
    try:
        name = unicodedata.name(char)
    except ValueError:
        return char
    tail = re.sub(r"^(LATIN|GREEK) (CAPITAL|SMALL) LETTER ", r"\2 ", name)
    tail = re.sub(r"^GREEK (LUNATE )?(\w+) SYMBOL$", r"\2 SYMBOL", tail)
    if tail == name and not name.startswith("DIGIT ") and name not in ("NABLA",
                                                                     "PARTIAL DIFFERENTIAL"):
        return char
    style = _STYLE_NAMES[variant]
    for candidate in (f"MATHEMATICAL {style} {tail}", f"{style} {tail}"):
        try:
            return unicodedata.lookup(candidate)
        except KeyError:
            pass
    if variant == "italic" and tail == "SMALL H":
        return "\u210e"  # PLANCK CONSTANT: the italic h's place in Unicode
    return char


def unicode_styles(mathml: str) -> str:
    """``mathml`` with every styled token's letters written as their styled code points
    (see ``_STYLED``); a ``<mi>`` then says ``mathvariant="normal"``, so the browser
    does not slant the letter a second time."""
    def repl(m: re.Match) -> str:
        tag, before, after = m.group(1), m.group(2), m.group(4)
        text = html.unescape(m.group("text"))
        styled = "".join(styled_char(c, m.group("v")) for c in text)
        if styled == text:  # nothing Unicode can style: the markup stays as it was
            return m.group(0)
        keep = ' mathvariant="normal"' if tag == "mi" else ""
        return f"<{tag}{before}{keep}{after}>{html.escape(styled, quote=False)}</{tag}>"
    return _STYLED.sub(repl, mathml)


_REFERENCE = re.compile(r"&#x([0-9A-Fa-f]+);")


def _character(m: re.Match) -> str:
    char = chr(int(m.group(1), 16))
    return m.group(0) if char in "<>&\"'" or not char.isprintable() else char


#: A prime written as a superscript (``f'`` is ``<msup><mi>f</mi><mi>′</mi></msup>``,
#: ``\theta_i'`` an ``msubsup``).  An OpenType math font's prime (U+2032) is already
#: drawn high and small; raised again as a superscript it floats above the letter
#: (Chromium applies no 'ssty' variant).  The prime is written after its base instead,
#: an operator without spacing, and a subscript goes after both: f′, θ′ᵢ, as TeX sets
#: them.
_TOKEN = r"<(?:mi|mn)\b[^>]*>[^<]*</(?:mi|mn)>"
_PRIME = r'<m[io]>(?P<prime>[\u2032\u2033\u2034]+)</m[io]>'
_PRIME_SUP = re.compile(rf"<msup>(?P<base>{_TOKEN}){_PRIME}</msup>")
_PRIME_SUBSUP = re.compile(rf"<msubsup>(?P<base>{_TOKEN})(?P<sub>{_TOKEN}){_PRIME}</msubsup>")


def primes_after_base(mathml: str) -> str:
    """``mathml`` with superscript primes on a letter written after it (``_PRIME_SUP``)."""
    def prime(m: re.Match) -> str:
        return f'<mo lspace="0" rspace="0">{m.group("prime")}</mo>'
    mathml = _PRIME_SUP.sub(lambda m: f"<mrow>{m.group('base')}{prime(m)}</mrow>", mathml)
    return _PRIME_SUBSUP.sub(
        lambda m: f"<msub><mrow>{m.group('base')}{prime(m)}</mrow>{m.group('sub')}</msub>",
        mathml)


#: TeX's named functions (``\cos``, ``\ln``, ...), which the converter writes as one
#: multi-letter ``<mi>``; ``\max``, ``\lim``, ``\det`` and ``\operatorname{...}`` it
#: writes as a multi-letter ``<mo>`` (``mod`` too, a binary operator, left as it is).
FUNCTION_NAMES = frozenset(
    "arccos arcsin arctan arg cos cosh cot coth csc deg det dim exp gcd hom inf ker lg "
    "lim liminf limsup ln log max min Pr sec sin sinh sup tan tanh".split())
_MATHML_NS = "http://www.w3.org/1998/Math/MathML"
#: Elements whose children are laid out one after the other (a row, inferred or not).
_ROWS = {"math", "mrow", "msqrt", "mstyle", "mtd", "mpadded", "mphantom", "menclose",
         "merror"}
_SCRIPTED = {"msub", "msup", "msubsup", "munder", "mover", "munderover"}
#: TeX's thin space (3 mu), set between a function's name and an argument that is not
#: in brackets, and between an ordinary symbol and a name after it.
THIN = "0.1667em"
APPLY_FUNCTION = "\u2061"


def _local(el) -> str:
    """The element's name without its namespace."""
    return el.tag.rsplit("}", 1)[-1]


def function_name(el) -> str | None:
    """The name if ``el`` is a named function (``<mi>cos</mi>``, ``<mo>max</mo>``) or one
    carrying scripts (``\\cos^2``, ``\\max_i``), else None."""
    while _local(el) in _SCRIPTED and len(el):
        el = el[0]
    if len(el) or not el.text:
        return None
    text = el.text.strip()
    if _local(el) == "mi" and text in FUNCTION_NAMES:
        return text
    if _local(el) == "mo" and len(text) > 1 and text.isalpha() and text != "mod":
        return text
    return None


def _first_token(el):
    while len(el) and _local(el) in _ROWS | _SCRIPTED:
        el = el[0]
    return el


def _opens(el) -> bool:
    """Whether ``el`` starts with an opening bracket (TeX sets no space before one)."""
    first = _first_token(el)
    text = (first.text or "").strip()
    return _local(first) == "mo" and len(text) == 1 and text in "([{\u27e8\u230a\u2308"


def _ordinary(el) -> bool:
    """Whether ``el`` is what TeX calls an ordinary atom (not an operator), or a closing
    bracket: TeX puts a thin space between it and a function's name after it."""
    if _local(el) != "mo":
        return _local(el) != "mspace"
    text = (el.text or "").strip()
    return len(text) == 1 and text in ")]}\u27e9\u230b\u2309"


def apply_functions(mathml: str) -> str:
    """``mathml`` with each named function applied as MathML says and spaced as TeX sets
    it: ``<mo>&#x2061;</mo>`` (ApplyFunction) after the name, with a thin space after it
    unless a bracket follows (cos mθ, cos(mθ)), and a thin space before the name after an
    ordinary symbol (0.1 ln s).  Chromium draws neither ApplyFunction nor a multi-letter
    ``<mo>`` with TeX's spacing (MathML Core gives ApplyFunction none and an unknown
    ``<mo>`` a thick space on each side), so the spaces are written out."""
    if not re.search(r"<m[io]\b[^>]*>[A-Za-z]{2,}</m[io]>", mathml):
        return mathml
    import xml.etree.ElementTree as ET

    xmlns = f' xmlns="{_MATHML_NS}"'  # parsed without it: the tags are the bare names
    root = ET.fromstring(mathml.replace(xmlns, "", 1))
    changed = False
    for row in root.iter():
        if _local(row) not in _ROWS:
            continue
        children = list(row)
        out = []
        for i, child in enumerate(children):
            name = function_name(child)
            if name is None:
                out.append(child)
                continue
            changed = True
            base = child
            while _local(base) in _SCRIPTED:
                base = base[0]
            if _local(base) == "mo":  # its spaces are the ones written here
                base.set("lspace", "0")
                base.set("rspace", "0")
            if out and _ordinary(out[-1]):
                out.append(ET.Element("mspace", width=THIN))
            out.append(child)
            after = children[i + 1] if i + 1 < len(children) else None
            if after is None or (after.text or "").strip() == APPLY_FUNCTION:
                continue
            apply = ET.Element("mo", lspace="0",
                               rspace="0" if _opens(after) else THIN)
            apply.text = APPLY_FUNCTION
            out.append(apply)
        if len(out) != len(children):
            row[:] = out
    if not changed:
        return mathml
    text = ET.tostring(root, encoding="unicode").replace("<math", "<math" + xmlns, 1)
    return text.replace(APPLY_FUNCTION, "&#x2061;")


def rewrite_tex(tex: str) -> str:
    for pattern, replacement in _REWRITES:
        tex = pattern.sub(replacement, tex)
    return tex


@functools.lru_cache(maxsize=None)
def tex_to_mathml(tex: str, display: bool) -> str:
    """``<math>`` for ``tex``, the TeX kept as its annotation.

    Raises
    ------
    ValueError
        If the converter left TeX it did not read in the MathML.
    """
    from latex2mathml.converter import convert

    mathml = convert(rewrite_tex(tex), display="block" if display else "inline")
    mathml = mathml.replace("\\_", "_")  # \text{a\_b}: the underscore itself
    mathml = unicode_styles(mathml)
    leftover = _LEFTOVER.search(mathml)
    if leftover:
        raise ValueError(f"TeX left unconverted: {leftover.group(0)}")
    # latex2mathml writes every operator as a character reference ("+" is &#x0002B;,
    # nine bytes for one): the characters themselves, but for markup's own
    mathml = _REFERENCE.sub(_character, mathml)
    mathml = apply_functions(mathml)
    mathml = primes_after_base(mathml)
    # latex2mathml writes <math ...><mrow>...</mrow></math>; keep the source beside it.
    head, _, rest = mathml.partition(">")
    body = rest.rsplit("</math>", 1)[0]
    return (f'{head}><semantics><mrow>{body}</mrow>'
            f'<annotation encoding="application/x-tex">{html.escape(tex)}</annotation>'
            f"</semantics></math>")


def _convert(self, node, tex: str, display: bool) -> str:
    try:
        return tex_to_mathml(tex, display)
    except Exception as exc:  # noqa: BLE001 - any converter failure is the same warning
        logger.warning("cannot convert this formula to MathML (%s: %s): %s",
                       type(exc).__name__, exc, tex, location=node)
        return f'<code class="posenc-math-error">{html.escape(tex)}</code>'


def html_visit_math(self, node: nodes.math) -> None:
    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate nohighlight"))
    self.body.append(_convert(self, node, node.astext(), display=False))
    self.body.append("</span>")
    raise nodes.SkipNode


def display_tex(node: nodes.math_block) -> str:
    """The TeX of a display as sphinx.ext.mathjax would hand it to MathJax: several
    equations (blank-line separated) aligned, a multi-line one split."""
    text = strip_comments(node.astext())
    if node.get("no-wrap", node.get("nowrap", False)) or _OWN_ENVIRONMENT.match(text):
        return text
    parts = [part for part in text.split("\n\n") if part.strip()]
    parts = [rf"\begin{{split}}{p}\end{{split}}" if r"\\" in p else p for p in parts]
    if len(parts) > 1:
        return r"\begin{aligned}" + r"\\".join(parts) + r"\end{aligned}"
    return parts[0] if parts else ""


def html_visit_displaymath(self, node: nodes.math_block) -> None:
    self.body.append(self.starttag(node, "div", CLASS="math notranslate nohighlight"))
    if node["number"]:
        number = get_node_equation_number(self, node)
        self.body.append(f'<span class="eqno">({number})')
        self.add_permalink_ref(node, _("Link to this equation"))
        self.body.append("</span>")
    tex = display_tex(node)
    narrow = narrow_tex(node.astext())
    wide = _convert(self, node, tex, display=True)
    if narrow is None:
        self.body.append(wide)
    else:
        self.body.append(wide.replace("<math ", '<math class="posenc-math-wide" ', 1))
        self.body.append(_convert(self, node, narrow, display=True)
                         .replace("<math ", '<math class="posenc-math-narrow" ', 1))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app: Sphinx) -> dict:
    app.add_html_math_renderer("posenc_mathml", (html_visit_math, None),
                               (html_visit_displaymath, None))
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
