"""The book's figures on phones: a narrow variant served through ``<picture>``.

A figure drawn by :mod:`posenc.figures` reaches the page as a PNG output (its
``_repr_png_``), whose output metadata carries a second PNG, the *phone variant*: the
same figure re-laid out by :func:`posenc.figures.figure_variants` for a 342 px column
(panels stacked, words at 8 pt or more).  MyST-NB writes only the first PNG; here its
image renderer is wrapped so that, for the html builder, the phone PNG is written beside
it and the two become one :class:`picture` node::

    <a class="reference internal image-reference" href="DESKTOP.png">
      <picture class="posenc-picture">
        <source media="(max-width: 600px)" srcset="PHONE.png" width="342" height="...">
        <img src="DESKTOP.png" width="672" loading="lazy" ...>
      </picture>
    </a>

so a phone downloads only the phone variant, a desktop only the desktop one, and the
link (and ``posenc.js``'s enlarged view) opens the desktop figure.  Other builders get
the desktop image alone.

The interactive figures' HTML outputs carry their renderer and stylesheet inline (so that
a notebook runs them in Jupyter or Colab); the site loads both once per page
(``html_js_files``, ``html_css_files``), so here the inline copies are taken out of the
page, which renders exactly as before.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import urllib.parse
from binascii import a2b_base64

from docutils import nodes

#: posenc.figures._style.PHONE_KEY and PHONE_MAX_VIEWPORT_PX (not imported: the docs
#: build must not import the package it documents before the kernels do)
PHONE_KEY = "posenc_phone"
PHONE_MAX_VIEWPORT_PX = 600


#: posenc.figures.interactive.INLINE_CLASS: the inline renderer and stylesheet
INLINE = re.compile(r'<(style|script) class="posenc-ifig-inline">.*?</\1>', re.S)


def strip_inline_renderer(html: str) -> str:
    """An interactive figure's HTML output without its inline renderer and stylesheet."""
    return INLINE.sub("", html)


class picture(nodes.General, nodes.Element):
    """A desktop image (the child) and a phone variant (``phone_uri``, ``phone_width``,
    ``phone_height``); the phone image node is the second child, rendered as a source."""


def _phone_image(renderer, data, desktop: nodes.image) -> nodes.image | None:
    info = data.output_metadata.get("image/png", {}).get(PHONE_KEY)
    if not isinstance(info, dict) or not info.get("png"):
        return None
    png = a2b_base64(info["png"])
    name = f"{hashlib.sha256(png).hexdigest()}.png"
    uri = renderer.write_file([name], png, overwrite=False, exists_ok=True)
    phone = nodes.image(uri=uri, classes=["posenc-phone", "no-scaled-link"])
    phone["width"] = str(int(info["width"]))
    phone["height"] = str(int(info["height"]))
    phone["alt"] = desktop.get("alt", "")
    return phone


def _wrap_render_image() -> None:
    from myst_nb.core.render import NbElementRenderer

    if getattr(NbElementRenderer.render_image, "_posenc", False):
        return
    original = NbElementRenderer.render_image

    def render_image(self, data):
        out = original(self, data)
        builder = getattr(getattr(self.renderer, "sphinx_env", None), "app", None)
        builder = getattr(builder, "builder", None)
        if data.mime_type != "image/png" or len(out) != 1 or builder is None \
                or builder.format != "html":
            return out
        desktop = out[0]
        phone = _phone_image(self, data, desktop)
        if phone is None:
            return out
        desktop["classes"] += ["no-scaled-link"]
        return [picture("", desktop, phone)]

    render_image._posenc = True  # type: ignore[attr-defined]
    NbElementRenderer.render_image = render_image


def _src(translator, image: nodes.image) -> str:
    uri = image["uri"]
    images = translator.builder.images
    if uri in images:
        return posixpath.join(translator.builder.imgpath, urllib.parse.quote(images[uri]))
    return uri


def visit_picture_html(self, node: picture) -> None:
    desktop, phone = node.children
    href = _src(self, desktop)
    self.body.append(f'<a class="reference internal image-reference" href="{href}">'
                     f'<picture class="posenc-picture">'
                     f'<source media="(max-width: {PHONE_MAX_VIEWPORT_PX}px)" '
                     f'srcset="{_src(self, phone)}" width="{phone["width"]}" '
                     f'height="{phone["height"]}">')
    start = len(self.body)
    desktop.walkabout(self)
    # figures load as the reader scrolls to them (the browser fetches those in view)
    for i in range(start, len(self.body)):
        if self.body[i].startswith("<img "):
            self.body[i] = '<img loading="lazy" decoding="async" ' + self.body[i][5:]
    self.body.append("</picture></a>\n")
    raise nodes.SkipNode


def visit_picture_other(self, node: picture) -> None:
    node.children[0].walkabout(self)
    raise nodes.SkipNode


def _wrap_render_text_html() -> None:
    from myst_nb.core.render import NbElementRenderer

    if getattr(NbElementRenderer.render_text_html, "_posenc", False):
        return
    original = NbElementRenderer.render_text_html

    def render_text_html(self, data):
        out = original(self, data)
        for i, node in enumerate(out):
            if isinstance(node, nodes.raw) and 'class="posenc-ifig-inline"' in node.astext():
                out[i] = nodes.raw(text=strip_inline_renderer(node.astext()),
                                   format=node.get("format", "html"),
                                   classes=list(node.get("classes", [])))
        return out

    render_text_html._posenc = True  # type: ignore[attr-defined]
    NbElementRenderer.render_text_html = render_text_html


def setup(app) -> None:
    _wrap_render_image()
    _wrap_render_text_html()
    app.add_node(picture, html=(visit_picture_html, None),
                 latex=(visit_picture_other, None), text=(visit_picture_other, None),
                 man=(visit_picture_other, None), texinfo=(visit_picture_other, None))
