"""Where the book is published, and the repository it is built from.

Used by conf.py (canonical/hreflang URLs, sitemap, Open Graph, the downloaded notebooks'
links and install cell) and by the tests that check those URLs.  Two environment
variables set them; the Pages workflow (.github/workflows/pages.yml) sets both from the
repository it runs in:

``POSENC_REPO``
    ``owner/name`` on GitHub (the workflow passes ``${{ github.repository }}``).
``POSENC_SITE_URL``
    The published site's root URL (the workflow passes the ``base_url`` that
    ``actions/configure-pages`` reports, which is right for a custom domain too).

Without them a build uses the project's own repository, ``posenc/posenc``, and the
GitHub Pages address that follows from it, ``https://posenc.github.io/posenc/``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

DEFAULT_REPO = "posenc/posenc"


def site_urls(environ: Mapping[str, str]) -> tuple[str, str]:
    """``(repo_url, site_url)``; the site URL ends with ``/``.

    >>> site_urls({})
    ('https://github.com/posenc/posenc', 'https://posenc.github.io/posenc/')
    >>> site_urls({"POSENC_REPO": "Ada/book", "POSENC_SITE_URL": "https://b.example"})
    ('https://github.com/Ada/book', 'https://b.example/')
    """
    repo = environ.get("POSENC_REPO") or DEFAULT_REPO
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ValueError(f"POSENC_REPO must be owner/name on GitHub, got {repo!r}")
    owner, name = repo.split("/")
    site = environ.get("POSENC_SITE_URL") or f"https://{owner.lower()}.github.io/{name}/"
    if not re.match(r"https?://[^/]+", site):
        raise ValueError(f"POSENC_SITE_URL must be an http(s) URL, got {site!r}")
    return f"https://github.com/{repo}", site.rstrip("/") + "/"
