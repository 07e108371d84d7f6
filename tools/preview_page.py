"""Build one page (or a few) of the book quickly while writing it.

    python tools/preview_page.py docs/en/sinusoidal.md [docs/zh/sinusoidal.md ...]

Each page is built on its own with the real conf.py into /tmp/posenc-preview/<lang>/,
with its own execution cache, and the path of the HTML is printed.  Links to other
pages cannot resolve in a one-page build, so those warnings are shown but not fatal;
the full `nox -s docs` build is the one that counts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("POSENC_PREVIEW_DIR", "/tmp/posenc-preview"))


def main(pages: list[str]) -> int:
    if not pages:
        print(__doc__)
        return 2
    status = 0
    for page in map(Path, pages):
        page = page.resolve()
        lang = page.parent.name
        if lang not in ("en", "zh") or page.suffix != ".md" or not page.is_file():
            print(f"page must be an existing docs/en/*.md or docs/zh/*.md file, got {page}")
            return 2
        src = OUT / "src" / page.stem / "docs" / lang
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        shutil.copy(page, src / page.name)
        if page.stem != "index":
            (src / "index.md").write_text(f"# Preview\n\n```{{toctree}}\n{page.stem}\n```\n")
        out = OUT / lang
        env = {**os.environ, "POSENC_LANG": lang, "POSENC_BUILD_DIR": str(OUT / "build")}
        cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(ROOT), "-q",
               str(src), str(out)]
        result = subprocess.run(cmd, env=env, cwd=ROOT)
        status |= result.returncode
        print(f"{page.relative_to(ROOT)} -> {out / (page.stem + '.html')}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
