"""One Sphinx configuration for both languages of the book.

Build a language by pointing sphinx-build at its source tree and at this file:

    sphinx-build -c . docs/en _build/html/en
    sphinx-build -c . docs/zh _build/html/zh

The language is taken from the name of the source folder (``en`` or ``zh``), so the
same command shape works for ``sphinx-build``, ``sphinx-autobuild`` and the nox
sessions; ``POSENC_LANG`` overrides it.  Everything that differs between the two
languages is in :data:`LANGUAGES` below; everything else is shared.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
sys.path.insert(0, str(ROOT))

# Where the site is published and the repository it is built from (canonical/hreflang
# URLs, sitemap, Open Graph, the downloaded notebooks' links and install cell): set by
# POSENC_REPO and POSENC_SITE_URL, see docs/_ext/posenc_urls.py.  Links to these never
# load anything at read time.
from posenc_urls import site_urls  # noqa: E402

REPO_URL, SITE_URL = site_urls(os.environ)

LANGUAGES = {
    "en": {
        "sphinx_language": "en",
        "html_lang": "en",
        "title": "Positional encoding, executed",
        "author": "The posenc authors",
        "copyright": "2026, the posenc authors",
        "name": "English",
        "search_language": "en",
        "notfound_title": "Page not found",
        "notfound_body": "Unfortunately we couldn't find the content you were looking for.",
    },
    "zh": {
        "sphinx_language": "zh_CN",
        "html_lang": "zh-CN",
        "title": "可执行的位置编码",
        "author": "posenc 项目组",
        "copyright": "2026，posenc 项目组",
        "name": "中文",
        "search_language": "zh",
        "notfound_title": "找不到这个页面",
        "notfound_body": "抱歉，这里没有你要找的内容：链接可能写错了，或者页面已经改名。"
                         "请从左侧的目录或搜索框找到它。",
    },
}


def _language_from_argv() -> str:
    """The language whose source tree sphinx-build was given (``docs/<lang>``)."""
    env = os.environ.get("POSENC_LANG")
    if env:
        return env
    for arg in sys.argv[1:]:
        path = Path(arg)
        if path.name in LANGUAGES and path.parent.name == "docs":
            return path.name
    return "en"


BOOK_LANG = _language_from_argv()
if BOOK_LANG not in LANGUAGES:
    raise ValueError(f"POSENC_LANG must be one of {sorted(LANGUAGES)}, got {BOOK_LANG!r}")
_L = LANGUAGES[BOOK_LANG]

# -- Project -----------------------------------------------------------------------
project = _L["title"]
author = _L["author"]
copyright = _L["copyright"]
language = _L["sphinx_language"]
root_doc = "index"
numfig = True  # the chapters refer to figures and equations with {numref}

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "posenc_math",  # docs/_ext/posenc_math.py: TeX to MathML at build time, no MathJax
    "sphinx.ext.intersphinx",
    "sphinx_copybutton",
    "sphinxcontrib.bibtex",
    "sphinx_sitemap",
    "sphinxext.opengraph",
    "notfound.extension",
    "posenc_book",  # docs/_ext/posenc_book.py: language switch, hreflang, fresh cache
    "posenc_site",  # docs/_ext/posenc_site.py: image alt text, .ipynb downloads, launch links
    "posenc_assets",  # docs/_ext/posenc_assets.py: unused CSS and icons out, a math font
]
intersphinx_mapping: dict = {}  # no network at build time

exclude_patterns = ["_build", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
templates_path = [str(ROOT / "docs" / "_templates")]
# posenc-interactive.{js,css} ship with the package (posenc/figures/static): an
# interactive figure's output carries them inline for Jupyter and Colab, and the site
# serves them once per page instead (docs/_ext/posenc_figures.py strips the copies).
html_static_path = [str(ROOT / "docs" / "_static"), str(ROOT / "posenc" / "figures" / "static")]
html_css_files = ["posenc.css", "posenc-interactive.css",
                  ("posenc-print.css", {"media": "print"})]  # paper: tools/build_pdf.py
# posenc-interactive.js draws the interactive figures (posenc.figures.interactive) from
# the data the page's cells computed; a few KB of hand-written SVG drawing, no library.
html_js_files = ["posenc.js", ("posenc-interactive.js", {"defer": "defer"})]

# -- MyST and MyST-NB ----------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist", "substitution"]
myst_heading_anchors = 3
nb_execution_mode = os.environ.get("POSENC_NB_EXECUTION_MODE", "cache")
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_timeout = 600
nb_output_stderr = "warn"  # anything a cell writes to stderr is a warning, so an error
nb_merge_streams = True
# Markdown outputs (the benchmark tables) are GitHub-flavoured: CommonMark has no tables.
nb_render_markdown_format = "gfm"
# nb_execution_cache_path is set by posenc_book (docs/_ext/posenc_book.py): each page's
# cached outputs are keyed on its code and on the hashes of the watched files its kernel
# used -- the posenc modules it imported (directly or not) and the data files it opened,
# such as the committed benchmark results.  Editing one module re-executes only the pages
# that imported it.  A data file a page reads must be listed here.
posenc_watch_paths = [
    str(ROOT / "posenc"),
    str(ROOT / "benchmarks" / "results.json"),
    str(ROOT / "benchmarks" / "results-gpu.json"),
    str(ROOT / "experiments" / "results.json"),
    str(ROOT / "experiments" / "results-gpu.json"),
    str(ROOT / "experiments" / "recheck-cpu.json"),
]
# POSENC_BUILD_DIR lets parallel builds (previews, tests) keep separate caches.
BUILD_DIR = Path(os.environ.get("POSENC_BUILD_DIR", ROOT / "_build"))
posenc_cache_root = str(BUILD_DIR / ".jupyter_cache" / BOOK_LANG)
# The disk memo of posenc.analysis._memo: expensive computations that both languages run
# are computed once.  The kernels inherit this variable; without it (library use, pytest)
# nothing is memoised.  POSENC_MEMO_DIR="" builds without it.
os.environ.setdefault("POSENC_MEMO_DIR", str(BUILD_DIR / ".memo"))
# Figures carry their phone variant (served through <picture>, posenc_figures) only in
# the book's build: posenc.figures._style.PHONE_ENV.  A downloaded notebook run in
# Jupyter or Colab gets one PNG per figure.
os.environ["POSENC_PHONE_FIGURES"] = "1"
# The languages build in parallel (nox -s docs); executing the pages in opposite orders
# lets one language find the memo entries the other wrote instead of computing them too.
posenc_read_order = "reversed" if BOOK_LANG == "zh" else "sorted"
posenc_languages = {k: v["name"] for k, v in LANGUAGES.items()}  # link text: the target's name
posenc_book_lang = BOOK_LANG
posenc_site_url = SITE_URL
# Notebook downloads and Colab/Binder links (posenc_site): the converted notebooks are
# published by .github/workflows/pages.yml to this branch as <lang>/<page>.ipynb, and the
# install cell in each pins posenc to the commit that built the site.
posenc_repo_url = REPO_URL


def _commit() -> str:
    """The commit being built: GITHUB_SHA in the workflow, else the checkout's HEAD."""
    sha = os.environ.get("GITHUB_SHA")
    if sha:
        return sha
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "main"  # not a git checkout (an sdist): the newest commit


posenc_repo_ref = _commit()
posenc_notebooks_branch = "notebooks"
# Each page's executed notebook and glue values, saved per language for the conversion.
posenc_executed_root = str(BUILD_DIR / ".executed" / BOOK_LANG)

# -- Bibliography ------------------------------------------------------------------
bibtex_bibfiles = [str(ROOT / "docs" / "references.bib")]
# Author-year in the text and on the references page alike: pybtex's plain formatting
# labelled "Su et al., 2021" (a letter after the year where two works would share a
# label), and sphinxcontrib-bibtex's author_year citations with that year (posenc_bib).
bibtex_default_style = "posenc"
bibtex_reference_style = "posenc_author_year"

# -- API docs ----------------------------------------------------------------------
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
# "Attributes" sections become :ivar: fields: autodoc lists the fields of a NamedTuple or
# dataclass as members already, and two descriptions of one name are a warning.
napoleon_use_ivar = True
doctest_global_setup = "import numpy as np\nimport posenc"
# Only the pages' {doctest} examples: the docstring Examples that the API page shows run
# under pytest --doctest-modules, in their modules' namespaces.
doctest_test_doctest_blocks = ""

# -- HTML --------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = _L["title"]
html_baseurl = f"{SITE_URL}{BOOK_LANG}/"
html_last_updated_fmt = None  # no timestamps: builds are reproducible
html_copy_source = True
# A small SVG mark: without it every page asked for /favicon.ico and got a 404.
html_favicon = str(ROOT / "docs" / "_static" / "favicon.svg")
html_show_sourcelink = True
html_search_language = _L["search_language"]
# A chapter whose title names the query comes first (docs/_ext/posenc_scorer.js).
html_search_scorer = str(ROOT / "docs" / "_ext" / "posenc_scorer.js")
if BOOK_LANG == "zh":
    # jieba segments the Chinese search index; the book's own terms are one word each.
    html_search_options = {"dict": str(ROOT / "docs" / "jieba_terms.txt")}
# Without a default colour mode the theme's first script writes data-mode="" and its
# JavaScript logs "Got invalid theme mode" for a reader who never chose one.
html_context = {"default_mode": "auto"}
html_theme_options = {
    "repository_url": REPO_URL,
    "repository_branch": "main",
    "path_to_docs": f"docs/{BOOK_LANG}",
    "use_repository_button": True,
    "use_edit_page_button": True,
    "use_source_button": True,
    "use_download_button": True,
    "use_issues_button": False,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "article_header_end": ["lang-switch.html", "article-header-buttons.html"],
    "launch_buttons": {
        "notebook_interface": "jupyterlab",
        "binderhub_url": "https://mybinder.org",
        "colab_url": "https://colab.research.google.com",
    },
}

# Math is MathML written into the pages when they are built (posenc_math, latex2mathml):
# the browser draws it, offline too, and no page loads a 1.16 MB MathJax bundle.
html_math_renderer = "posenc_mathml"

# -- Sitemap, Open Graph, 404 --------------------------------------------------------
sitemap_url_scheme = "{link}"
sitemap_show_lastmod = False
# Pages a search engine should not list; posenc_site puts every other page in the sitemap
# (sphinx-sitemap alone lists only the pages an incremental build rewrote).
sitemap_excludes = ["search.html", "genindex.html", "404.html", "py-modindex.html"]
ogp_site_url = html_baseurl
ogp_social_cards = {"enable": False}
ogp_enable_meta_description = True
_OG_LOCALES = {"en": "en_US", "zh": "zh_CN"}
ogp_custom_meta_tags = [
    f'<meta property="og:locale" content="{_OG_LOCALES[BOOK_LANG]}" />',
    *(f'<meta property="og:locale:alternate" content="{loc}" />'
      for code, loc in _OG_LOCALES.items() if code != BOOK_LANG),
]
notfound_urls_prefix = f"{urlsplit(SITE_URL).path}{BOOK_LANG}/"
# sphinx-notfound-page writes its English words unless told: each language's own.
notfound_context = {
    "title": _L["notfound_title"],
    "body": f"<h1>{_L['notfound_title']}</h1>\n\n<p>{_L['notfound_body']}</p>",
}

suppress_warnings = ["mystnb.unknown_mime_type"]
