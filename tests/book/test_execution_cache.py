"""A change to the library re-executes the pages: the execution cache cannot go stale.

A tiny book with one notebook page that prints ``fakelib.answer()`` is built three
times with the real Sphinx glue (docs/_ext/posenc_book.py): once cold, once with nothing
changed (served from the cache, nothing executed), once after editing ``fakelib``.  The
last build must show the new answer.  The same three builds with the watch list
emptied show the stale output that jupyter-cache alone would serve, so the test can
tell the difference.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]

PAGE = textwrap.dedent(
    """\
    ---
    file_format: mystnb
    kernelspec:
      name: python3
      display_name: Python 3
    ---

    # Cache test

    ```{code-cell} ipython3
    import fakelib
    print("ANSWER", fakelib.answer())
    ```
    """
)

CONF = textwrap.dedent(
    """\
    import sys
    sys.path.insert(0, {ext!r})
    extensions = ["myst_nb", "posenc_book"]
    nb_execution_mode = "cache"
    nb_execution_raise_on_error = True
    posenc_watch_paths = {watch!r}
    posenc_cache_root = {cache!r}
    html_theme = "basic"
    """
)


def _make_book(tmp: Path, watch: bool) -> tuple[Path, Path]:
    lib = tmp / "lib"
    lib.mkdir()
    (lib / "fakelib.py").write_text("def answer():\n    return 41\n")
    src = tmp / "src"
    src.mkdir()
    (src / "index.md").write_text(PAGE)
    (src / "conf.py").write_text(
        CONF.format(
            ext=str(ROOT / "docs" / "_ext"),
            watch=[str(lib)] if watch else [],
            cache=str(tmp / "cache"),
        )
    )
    return lib, src


def _build(src: Path, out: Path, lib: Path) -> tuple[str, str]:
    env = {**os.environ, "PYTHONPATH": str(lib)}
    if not env.get("CI"):
        env.pop("POSENC_LANG", None)
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", str(src), str(out)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return (out / "index.html").read_text(), run.stdout + run.stderr


def _three_builds(tmp_path: Path, watch: bool) -> list[tuple[str, str]]:
    lib, src = _make_book(tmp_path, watch)
    out = tmp_path / "html"
    results = [_build(src, out, lib), _build(src, out, lib)]
    (lib / "fakelib.py").write_text("def answer():\n    return 42\n")
    results.append(_build(src, out, lib))
    return results


def test_library_change_reexecutes_and_unchanged_build_is_served_from_cache(tmp_path):
    (cold, cold_log), (warm, warm_log), (edited, edited_log) = _three_builds(tmp_path, True)
    assert "ANSWER 41" in cold
    assert "Executing" in cold_log or "executing" in cold_log.lower()
    assert "ANSWER 41" in warm
    # Nothing changed: Sphinx reads nothing, so no kernel runs.
    assert "executing" not in warm_log.lower(), warm_log
    assert "ANSWER 42" in edited and "ANSWER 41" not in edited
    # Only one cache folder survives: the one for the current library sources.
    assert len([p for p in (tmp_path / "cache").iterdir() if p.is_dir()]) == 1


def test_without_the_source_hash_the_stale_output_would_survive(tmp_path):
    """The control: plain jupyter-cache keys on the page's code, so it serves 41 again."""
    (_, _), (_, _), (edited, _) = _three_builds(tmp_path, False)
    assert "ANSWER 41" in edited


def test_source_hash_follows_watched_files_and_library_sources(tmp_path):
    """A watched data file (the benchmark results) moves the cache key like a .py file."""
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from posenc_book import source_hash

    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "mod.py").write_text("x = 1\n")
    (lib / "notes.txt").write_text("not code\n")
    data = tmp_path / "results.json"
    data.write_text('{"a": 1}\n')
    key = source_hash([str(lib), str(data)])
    (lib / "notes.txt").write_text("changed, but not a .py file under a folder\n")
    assert source_hash([str(lib), str(data)]) == key
    data.write_text('{"a": 2}\n')
    moved = source_hash([str(lib), str(data)])
    assert moved != key
    (lib / "mod.py").write_text("x = 2\n")
    assert source_hash([str(lib), str(data)]) != moved
    assert "results.json" in (ROOT / "conf.py").read_text()  # the book watches its results
