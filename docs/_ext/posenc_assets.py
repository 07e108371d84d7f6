"""What a page loads, trimmed to what the book uses, when the site is built.

The theme ships its whole stylesheet (Bootstrap and Font Awesome's 2,000 icon classes:
377 KB), two icon fonts of 110 KB each and MyST-NB's stylesheet for widgets the book
does not have.  A page of the book used about 1 MB before its images, most of it these.
At ``build-finished`` this extension rewrites, in the output's ``_static``:

* **every stylesheet without the rules no page can match.**  A rule stays when, in one
  of its selectors, every class name it requires occurs as a word somewhere in the
  site's HTML or in a script the site ships (a class a script adds is in the script's
  text); classes inside ``:not()``, ``:is()``, ``:where()``, ``:has()`` and attribute
  selectors are not required.  License comments (``/*! ... */``), ``@font-face``,
  ``@keyframes`` and the like stay whole.  Custom properties that nothing reads
  (``--bs-*`` by the hundred) go too.
* **the icon fonts, subset** to the code points the remaining rules name (each icon
  class's ``--fa:"\\f002"``, the theme's icon variables): a few KB instead of 225.
* **a math font**: STIX Two Math (SIL Open Font License; ``docs/_fonts``), subset to the
  characters the site's MathML uses, with the variants its stretchy delimiters and big
  operators need (fontTools keeps the OpenType MATH table's closure), served as
  ``_static/fonts/posenc-math.woff2``; ``posenc.css`` gives it to ``math``.  Without a
  math font, browsers draw MathML from the text font: primes float, fractions sit high,
  stretchy brackets do not stretch.
* **figures as lossless WebP** (``_images/*.png`` in every ``src`` and ``srcset``; the
  PNG stays for links to the full-size view): the same pixels in about a third of the
  bytes.  A figure's smallest font size, which the PNG carries in a text chunk, goes
  into the WebP's XMP.
* **Bootstrap's bundle swapped** for ``posenc-bootstrap.js`` (below).

The files Sphinx copied are kept untouched under the doctree folder and put back before
the next build (Sphinx and MyST-NB refuse to overwrite a changed static file), so an
incremental build trims them afresh from the originals: a class a new page uses comes
back.
tests/book/test_site.py checks the trimming rules; the browser test weighs every page
and draws it at 390 and 1280 px.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: The math font the site serves, and the file it is written to.
MATH_FONT = Path(__file__).resolve().parents[1] / "_fonts" / "STIXTwoMath-Regular.woff2"
MATH_FONT_OUT = "fonts/posenc-math.woff2"
#: Scripts in ``_static`` that no page loads (the browser test asserts it): their words
#: must not keep rules alive.  Font Awesome's script draws every icon by name; Bootstrap's
#: bundle is replaced by ``posenc-bootstrap.js`` (below).
UNLOADED_SCRIPTS = {"fontawesome.js", "bootstrap.js"}
#: The theme's Bootstrap bundle (81 KB, with Popper), which every page loads for two
#: things: the header's dropdown menus and one tooltip.  docs/_static/posenc-bootstrap.js
#: does both in 5 KB and takes its place in every page, in the same position (deferred,
#: before the theme's own script, which reads ``window.bootstrap``).
_BOOTSTRAP = re.compile(r'<script defer src="(?P<up>[^"]*?)_static/scripts/bootstrap\.js'
                        r'\?digest=[0-9a-f]+"></script>')  # "../" or the 404 page's "/posenc/en/"


def swap_bootstrap(page_html: str) -> str:
    return _BOOTSTRAP.sub(lambda m: f'<script defer src="{m.group("up")}_static/'
                          f'posenc-bootstrap.js"></script>', page_html)


_WORD = re.compile(r"[A-Za-z_][\w-]*")


# -- CSS ------------------------------------------------------------------------------------

def _blocks(css: str):
    """Top-level items of ``css``: ``(prelude, body)`` for a rule or an at-rule with a
    block (``body`` without its braces), ``(statement, None)`` for ``@charset ...;`` and
    the like, ``(comment, None)`` for a comment.  Strings and comments are respected."""
    i, n, start = 0, len(css), 0
    while i < n:
        c = css[i]
        if c == "/" and css.startswith("/*", i):
            end = css.find("*/", i + 2)
            end = n if end < 0 else end + 2
            if not css[start:i].strip():
                yield css[i:end], None
                start = end
            i = end
        elif c in "\"'":
            i = _string_end(css, i)
        elif c == ";" and css[start:i].lstrip().startswith("@"):
            yield css[start:i + 1].strip(), None
            i += 1
            start = i
        elif c == "{":
            prelude = css[start:i].strip()
            end = _block_end(css, i)
            yield prelude, css[i + 1:end]
            i = start = end + 1
        else:
            i += 1
    if css[start:].strip():
        yield css[start:].strip(), None


def _string_end(css: str, i: int) -> int:
    quote, i = css[i], i + 1
    while i < len(css) and css[i] != quote:
        i += 2 if css[i] == "\\" else 1
    return i + 1


def _block_end(css: str, i: int) -> int:
    """Index of the ``}`` that closes the ``{`` at ``i``."""
    depth = 0
    while i < len(css):
        c = css[i]
        if c in "\"'":
            i = _string_end(css, i)
            continue
        if c == "/" and css.startswith("/*", i):
            end = css.find("*/", i + 2)
            i = len(css) if end < 0 else end + 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError("unbalanced braces in a stylesheet")


def _split_top(selector_list: str) -> list[str]:
    """The selectors of a list, split at commas outside parentheses and brackets."""
    out, depth, cur = [], 0, []
    for c in selector_list:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def _without_groups(selector: str) -> str:
    """``selector`` without attribute selectors and functional pseudo-classes' arguments
    (what they name is not required for a match)."""
    out, depth = [], 0
    for c in selector:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            continue
        if depth == 0:
            out.append(c)
    return "".join(out)


def required_classes(selector: str) -> set[str] | None:
    """The class names an element must have somewhere in ``selector`` for it to match;
    None where the selector is not simple enough to judge (an escaped character)."""
    if "\\" in selector:
        return None
    return set(re.findall(r"\.(-?[A-Za-z_][\w-]*)", _without_groups(selector)))


def selector_alive(selector: str, words: set[str]) -> bool:
    needed = required_classes(selector)
    return needed is None or needed <= words


#: At-rules whose block holds rules (trimmed inside); any other block stays whole.
_NESTING = ("@media", "@supports", "@layer", "@container", "@document")


def _rewrite(css: str, rule, keep_comment=lambda comment: True) -> str:
    """``css`` with each style rule replaced by ``rule(selectors, body)`` (``None``
    drops it), inside nesting at-rules too (an emptied one goes); other at-rules and
    statements stay, comments where ``keep_comment`` says so."""
    out = []
    for prelude, body in _blocks(css):
        if body is None:
            if not prelude.startswith("/*") or keep_comment(prelude):
                out.append(prelude)
        elif not prelude.startswith("@"):
            new = rule(prelude, body)
            if new is not None:
                out.append(new)
        elif prelude.lower().startswith(_NESTING):
            inner = _rewrite(body, rule, keep_comment)
            if inner.strip():
                out.append(f"{prelude}{{{inner}}}")
        else:
            out.append(f"{prelude}{{{body}}}")
    return "\n".join(out) + "\n"


def purge_css(css: str, words: set[str]) -> str:
    """``css`` without the rules whose selectors all need a class that is not in
    ``words``, and without its comments but the license ones (``/*! ... */``)
    (tests/book/test_site.py: test_purge_css_*)."""
    def rule(selectors: str, body: str) -> str | None:
        alive = [s for s in _split_top(selectors) if selector_alive(s, words)]
        return f"{','.join(alive)}{{{body}}}" if alive else None
    return _rewrite(css, rule, keep_comment=lambda comment: comment.startswith("/*!"))


def _declarations(body: str) -> list[str]:
    """A rule body's declarations, split at semicolons outside strings and parentheses
    (a ``url(data:...;base64,...)`` is one value)."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(body):
        c = body[i]
        if c in "\"'":
            i = _string_end(body, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == ";" and depth == 0:
            out.append(body[start:i])
            start = i + 1
        i += 1
    out.append(body[start:])
    return [d for d in (d.strip() for d in out) if d]


_CUSTOM = re.compile(r"^(--[\w-]+)\s*:")
_VAR = re.compile(r"var\(\s*(--[\w-]+)")


def drop_unused_properties(sheets: dict, words: set[str]) -> dict:
    """``sheets`` without the custom properties (``--name: ...``) that nothing reads: no
    ``var(--name)`` in any sheet and ``name`` not a word of the site's pages or scripts
    (a script may set or read it).  Repeated until nothing more goes, since a dropped
    declaration may have been the only reader of another."""
    while True:
        text = "".join(sheets.values())
        read = set(_VAR.findall(text)) | {f"--{w.lstrip('-')}" for w in words}
        dropped = False

        def rule(selectors: str, body: str) -> str | None:
            nonlocal dropped
            decls = _declarations(body)
            kept = [d for d in decls
                    if not (_CUSTOM.match(d) and _CUSTOM.match(d).group(1) not in read)]
            dropped |= len(kept) < len(decls)
            return f"{selectors}{{{';'.join(kept)}}}" if kept else None

        sheets = {name: _rewrite(css, rule) for name, css in sheets.items()}
        if not dropped:
            return sheets


def icon_codepoints(css: str) -> set[int]:
    """The icons a stylesheet can draw: code points in the Private Use Area, where icon
    fonts put their glyphs, written as CSS escapes (Font Awesome's ``--fa:"\\f002"``)
    or as characters (the theme's ``--pst-icon-*`` variables)."""
    named = {int(h, 16) for h in re.findall(r"\\([0-9a-fA-F]{4,6})", css)}
    written = {ord(c) for c in css}
    return {c for c in named | written if 0xE000 <= c <= 0xF8FF or 0xF0000 <= c}


# -- Fonts --------------------------------------------------------------------------------

def subset_font(source: Path, target: Path, codepoints: set[int]) -> None:
    """Write ``source`` subset to ``codepoints`` as WOFF2 at ``target`` (the MATH table's
    variants and assembly parts of the kept glyphs stay)."""
    import logging as std_logging

    from fontTools import subset

    std_logging.getLogger("fontTools").setLevel(std_logging.WARNING)  # its INFO is chatty
    options = subset.Options()
    options.flavor = "woff2"
    options.layout_features = ["*"]
    options.name_IDs = ["*"]
    options.notdef_outline = True
    options.drop_tables = [t for t in options.drop_tables if t != "MATH"]
    font = subset.load_font(str(source), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(codepoints))
    subsetter.subset(font)
    target.parent.mkdir(parents=True, exist_ok=True)
    subset.save_font(font, str(target), options)


_MATH = re.compile(r"<math\b.*?</math>", re.S)
_ANNOTATION = re.compile(r"<annotation\b.*?</annotation>", re.S)
_TAG = re.compile(r"<[^>]+>")
_PLAIN_MI = re.compile(r"<mi>([^<]+)</mi>")


#: glyphs the browser draws for an element rather than for its text: the radical sign of
#: ``<msqrt>`` and ``<mroot>`` (its taller forms come from the MATH table's variants)
_DRAWN_BY = {"msqrt": "\u221a", "mroot": "\u221a"}
_ELEMENT = re.compile(r"<(msqrt|mroot)\b")


def math_characters(page_html: str) -> set[str]:
    """Every character the MathML of ``page_html`` draws (annotations left out): the
    text, the italic forms the browser gives single-letter identifiers, and the glyphs
    elements draw themselves (:data:`_DRAWN_BY`)."""
    chars: set[str] = set()
    for m in _MATH.finditer(page_html):
        body = _ANNOTATION.sub("", m.group(0))
        chars |= {_DRAWN_BY[e] for e in _ELEMENT.findall(body)}
        for text in _PLAIN_MI.findall(body):
            text = html.unescape(text)
            if len(text) == 1:
                chars.add(_italic(text))
        chars |= set(html.unescape(_TAG.sub("", body)))
    return chars


def _italic(char: str) -> str:
    import posenc_math

    return posenc_math.styled_char(char, "italic")


# -- Figures ------------------------------------------------------------------------------

#: A PNG figure's text chunks and resolution, carried into its WebP copy as XMP (WebP has
#: no text chunks): the browser test reads the smallest font size from there.
XMP_NS = "https://posenc.invalid/ns/figure/"
_IMAGE_ATTR = re.compile(r'(\s(?:src|srcset)=")([^"]*)"')
_PNG_REF = re.compile(r"((?:\.\./)*_images/[^\s\",]+)\.png")


def figure_xmp(info: dict, text: dict) -> bytes:
    """An XMP packet holding ``text`` (a PNG's text chunks) and its dpi."""
    attrs = {k: v for k, v in text.items() if re.fullmatch(r"[A-Za-z][\w-]*", k)}
    if "dpi" in info:
        attrs["dpi"] = repr(float(info["dpi"][0]))  # as the PNG reads back, all digits
    body = " ".join(f'posenc:{k}="{html.escape(str(v), quote=True)}"'
                    for k, v in sorted(attrs.items()))
    return ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/'
            '1999/02/22-rdf-syntax-ns#"><rdf:Description xmlns:posenc="' + XMP_NS + '" '
            + body + "/></rdf:RDF></x:xmpmeta>").encode()


def read_figure_xmp(xmp: bytes | str) -> dict[str, str]:
    """The attributes :func:`figure_xmp` wrote."""
    text = xmp.decode() if isinstance(xmp, bytes) else xmp
    return {k: html.unescape(v) for k, v in re.findall(r'posenc:([\w-]+)="([^"]*)"', text)}


def to_webp(png: Path) -> Path:
    """``png`` as lossless WebP beside it (the same pixels, a third of the bytes for the
    book's plots), made once per PNG."""
    from PIL import Image

    target = png.with_suffix(".webp")
    if target.exists() and target.stat().st_mtime >= png.stat().st_mtime:
        return target
    with Image.open(png) as image:
        xmp = figure_xmp(image.info, getattr(image, "text", {}) or {})
        image.save(target, "WEBP", lossless=True, method=4, quality=80, xmp=xmp)
    return target


def webp_figures(folder: Path, page_html: str) -> str:
    """``page_html`` with its figures (``_images/*.png`` in ``src`` and ``srcset``) served
    as WebP; links to the PNG (a figure's full-size view) stay."""
    def attr(m: re.Match) -> str:
        def ref(r: re.Match) -> str:
            png = folder / (r.group(1) + ".png")  # relative to the page's folder
            if not png.exists():
                return r.group(0)
            to_webp(png)
            return r.group(1) + ".webp"
        return m.group(1) + _PNG_REF.sub(ref, m.group(2)) + '"'
    return _IMAGE_ATTR.sub(attr, page_html)


# -- The build step -----------------------------------------------------------------------

def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Originals:
    """Sphinx's copies of the static files, kept beside the doctrees: a file whose
    content is not what this step last wrote was copied afresh and becomes the
    original."""

    def __init__(self, app: Sphinx):
        self.root = Path(app.doctreedir) / "posenc-assets"
        self.manifest_path = self.root / "written.json"
        self.written = (json.loads(self.manifest_path.read_text())
                        if self.manifest_path.exists() else {})

    def original(self, static: Path, path: Path) -> Path:
        rel = path.relative_to(static).as_posix()
        kept = self.root / "originals" / rel
        if self.written.get(rel) != _digest(path) or not kept.exists():
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, kept)
        return kept

    def restore(self, static: Path) -> None:
        """Put the originals back where this step left trimmed files, so that Sphinx and
        MyST-NB, which refuse to overwrite a changed static file (a build warning), find
        theirs unchanged in an incremental build."""
        for rel, digest in self.written.items():
            path, kept = static / rel, self.root / "originals" / rel
            if path.exists() and kept.exists() and _digest(path) == digest:
                shutil.copyfile(kept, path)

    def wrote(self, static: Path, path: Path) -> None:
        self.written[path.relative_to(static).as_posix()] = _digest(path)

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.manifest_path.write_text(json.dumps(self.written, indent=1, sort_keys=True))


def trim_static(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    static = out / "_static"
    originals = Originals(app)
    pages = []
    for path in out.rglob("*.html"):
        if "_static" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        swapped = webp_figures(path.parent, swap_bootstrap(text))
        if swapped != text:
            path.write_text(swapped, encoding="utf-8")
        pages.append(swapped)
    scripts = [p.read_text(encoding="utf-8", errors="replace") for p in static.rglob("*.js")
               if p.name not in UNLOADED_SCRIPTS]
    words: set[str] = set()
    for text in pages + scripts:
        words.update(_WORD.findall(text))
    # the whole book's print page (tools/build_pdf.py, after the build) has classes of its
    # own, styled by the print style sheet: its cover, contents and chapters
    printer = Path(app.confdir) / "tools" / "build_pdf.py"
    if printer.is_file():
        words.update(_WORD.findall(printer.read_text(encoding="utf-8")))

    before = after = 0
    sheets: dict[Path, str] = {}
    for css_path in sorted(static.rglob("*.css")):
        css = originals.original(static, css_path).read_text(encoding="utf-8")
        before += len(css.encode())
        sheets[css_path] = purge_css(css, words)
    sheets = drop_unused_properties(sheets, words)
    icons: set[int] = set()
    for css_path, trimmed in sheets.items():
        css_path.write_text(trimmed, encoding="utf-8")
        originals.wrote(static, css_path)
        icons |= icon_codepoints(trimmed)
        after += len(trimmed.encode())

    for font_path in sorted(static.rglob("vendor/fontawesome/webfonts/*.woff2")):
        source = originals.original(static, font_path)
        before += source.stat().st_size
        subset_font(source, font_path, icons | {0x20})
        originals.wrote(static, font_path)
        after += font_path.stat().st_size

    chars: set[str] = set()
    for page in pages:
        chars |= math_characters(page)
    target = static / MATH_FONT_OUT
    subset_font(MATH_FONT, target, {ord(c) for c in chars} | set(range(0x20, 0x7f)))
    shutil.copyfile(MATH_FONT.with_name("OFL.txt"), target.with_name("OFL.txt"))
    after += target.stat().st_size
    originals.save()
    logger.info("posenc_assets: stylesheets and icon fonts %d KB -> %d KB (math font "
                "included), %d math characters", before // 1000, after // 1000, len(chars))


def restore_static(app: Sphinx) -> None:
    if app.builder.format == "html":
        Originals(app).restore(Path(app.outdir) / "_static")


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", restore_static)
    app.connect("build-finished", trim_static, priority=600)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
