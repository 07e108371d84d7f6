"""The execution cache re-executes exactly the pages whose code or used files changed.

A tiny book is built several times with the real Sphinx glue (docs/_ext/posenc_book.py)
and a small fake library on the kernels' path:

* page ``a`` imports ``fa``; page ``b`` imports ``fb``; page ``d`` reads ``data.json``;
  page ``n`` imports nothing from the library;
* the watch list is the library folder and the data file, as conf.py's is ``posenc/`` and
  ``benchmarks/results.json``.

Each build's log says which pages were executed ("Executing notebook") and the HTML shows
what they printed.  Editing ``fa`` must re-execute ``a`` alone, and show the new value;
a module that ``fb`` starts importing is picked up; a data file re-executes only its
reader.  The same builds with the watch list emptied show the stale output jupyter-cache
alone would serve, so the test can tell the difference.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HEAD = textwrap.dedent(
    """\
    ---
    file_format: mystnb
    kernelspec:
      name: python3
      display_name: Python 3
    ---

    # Page {name}

    """
)

PAGES = {
    "a": "import fa\nprint('A', fa.answer())\n",
    "b": "import fb\nprint('B', fb.value())\n",
    "d": ("import json, pathlib\n"
          "print('D', json.loads(pathlib.Path({data!r}).read_text())['n'])\n"),
    "n": "print('N', 6 * 7)\n",
}

CONF = textwrap.dedent(
    """\
    import sys
    sys.path.insert(0, {ext!r})
    extensions = ["myst_nb", "posenc_book"]
    nb_execution_mode = "cache"
    nb_execution_raise_on_error = True
    posenc_watch_paths = {watch!r}
    posenc_cache_root = {cache!r}
    posenc_read_order = {order!r}
    html_theme = "basic"
    """
)

_EXECUTING = re.compile(r"(\w+)\.md: Executing notebook")
_READING = re.compile(r"reading sources\.\.\. \[\s*\d+%\] (\w+)")


class Book:
    def __init__(self, tmp: Path, watch: bool = True, order: str = "sorted"):
        self.tmp = tmp
        self.lib = tmp / "lib"
        self.lib.mkdir()
        (self.lib / "fa.py").write_text("def answer():\n    return 41\n")
        (self.lib / "fb.py").write_text("def value():\n    return 'B1'\n")
        (self.lib / "fc.py").write_text("VALUE = 'C1'\n")
        self.data = tmp / "data.json"
        self.data.write_text('{"n": 1}\n')
        self.src = tmp / "src"
        self.src.mkdir()
        (self.src / "index.md").write_text(
            "# Book\n\n```{toctree}\n" + "\n".join(PAGES) + "\n```\n")
        for name, code in PAGES.items():
            self.write_page(name, code.format(data=str(self.data)))
        self.cache = tmp / "cache"
        (self.src / "conf.py").write_text(CONF.format(
            ext=str(ROOT / "docs" / "_ext"),
            watch=[str(self.lib), str(self.data)] if watch else [],
            cache=str(self.cache), order=order))
        self.out = tmp / "html"

    def write_page(self, name: str, code: str) -> None:
        (self.src / f"{name}.md").write_text(
            HEAD.format(name=name) + "```{code-cell} ipython3\n" + code + "```\n")

    def build(self) -> tuple[list[str], dict[str, str]]:
        """Build; return the pages executed (in order) and each page's printed line."""
        env = {**os.environ, "PYTHONPATH": str(self.lib)}
        if not env.get("CI"):
            env.pop("POSENC_LANG", None)
        run = subprocess.run(
            [sys.executable, "-m", "sphinx", "-b", "html", "-W", str(self.src), str(self.out)],
            env=env, capture_output=True, text=True, timeout=300,
        )
        self.log = run.stdout + run.stderr
        assert run.returncode == 0, self.log
        shown = {}
        for name in PAGES:
            html = (self.out / f"{name}.html").read_text()
            m = re.search(r"\b" + name.upper() + r" (\S+?)\n", html)
            shown[name] = m.group(1) if m else None
        return _EXECUTING.findall(self.log), shown


@pytest.fixture
def book(tmp_path):
    return Book(tmp_path)


def test_cold_warm_and_an_edit_to_one_module(book):
    executed, shown = book.build()
    assert executed == ["a", "b", "d", "n"]
    assert shown == {"a": "41", "b": "B1", "d": "1", "n": "42"}
    # The two cells added around the page's own leave no trace in the page or notebook.
    html = (book.out / "a.html").read_text()
    assert "_posenc_deps" not in html and "__posenc_deps__" not in html
    nb = json.loads((book.tmp / "jupyter_execute" / "a.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert len(code) == 1 and code[0]["execution_count"] == 1
    assert "_posenc_deps" not in json.dumps(nb)
    executed, shown = book.build()
    assert executed == [], book.log  # nothing changed: nothing read, nothing executed
    (book.lib / "fa.py").write_text("def answer():\n    return 42\n")
    executed, shown = book.build()
    assert executed == ["a"], book.log  # only the page that imported fa
    assert shown == {"a": "42", "b": "B1", "d": "1", "n": "42"}
    # What each page used, as recorded (relative to the folder of conf.py).
    pages = json.loads((book.cache / "deps.json").read_text())["pages"]
    assert set(pages["a"]["deps"]) == {"../lib/fa.py"}
    assert set(pages["b"]["deps"]) == {"../lib/fb.py"}
    assert set(pages["d"]["deps"]) == {"../data.json"}
    assert pages["n"]["deps"] == {}


def test_a_module_source_read_as_text_is_not_a_dependency(book):
    # posenc.figures reads every figure module's __all__ from its source without
    # importing it: that read must not make every page depend on every figure module
    source = book.lib / "fc.py"
    book.write_page("n", f"import pathlib\nprint('N', len(pathlib.Path({str(source)!r})"
                         f".read_text()))\n")
    book.build()
    pages = json.loads((book.cache / "deps.json").read_text())["pages"]
    assert pages["n"]["deps"] == {}
    assert set(pages["d"]["deps"]) == {"../data.json"}  # a data file still counts
    source.write_text("VALUE = 'C2'\n")
    executed, _ = book.build()
    assert executed == [], book.log


def test_a_new_import_is_picked_up_and_the_reversed_order(tmp_path):
    book = Book(tmp_path, order="reversed")
    executed, _ = book.build()
    assert executed == ["n", "d", "b", "a"]  # posenc_read_order = "reversed"
    (book.lib / "fb.py").write_text("import fc\n\ndef value():\n    return fc.VALUE\n")
    executed, shown = book.build()
    assert executed == ["b"] and shown["b"] == "C1"
    (book.lib / "fc.py").write_text("VALUE = 'C2'\n")  # a module only fb imports
    executed, shown = book.build()
    assert executed == ["b"] and shown["b"] == "C2"
    # The page's own code can import a module too.
    book.write_page("n", "import fc\nprint('N', fc.VALUE)\n")
    executed, shown = book.build()
    assert executed == ["n"] and shown["n"] == "C2"
    (book.lib / "fc.py").write_text("VALUE = 'C3'\n")
    executed, shown = book.build()
    assert executed == ["n", "b"] and shown["b"] == shown["n"] == "C3"


def test_a_data_file_reexecutes_its_reader_only(book):
    book.build()
    book.data.write_text('{"n": 2}\n')
    executed, shown = book.build()
    assert executed == ["d"] and shown["d"] == "2"
    (book.lib / "unused.py").write_text("X = 1\n")  # a new module nobody imports
    executed, _ = book.build()
    assert executed == []


def test_cached_outputs_with_unknown_or_changed_files_are_not_served(book):
    """jupyter-cache would match page a by its code; its record must be dropped."""
    book.build()
    # Sphinx's environment is gone, the cache stays, the record of what pages used too:
    shutil.rmtree(book.out)
    executed, shown = book.build()
    assert executed == [], book.log  # everything served from the cache, unchanged
    # The same, but fa changed meanwhile: the record says a used fa, so a runs again.
    shutil.rmtree(book.out)
    (book.lib / "fa.py").write_text("def answer():\n    return 43\n")
    executed, shown = book.build()
    assert executed == ["a"] and shown["a"] == "43"
    # What the pages used is lost (a damaged or deleted deps.json): nothing is served.
    shutil.rmtree(book.out)
    (book.cache / "deps.json").write_text("{not json")
    executed, shown = book.build()
    assert sorted(executed) == ["a", "b", "d", "n"]


def test_without_the_watch_list_the_stale_output_would_survive(tmp_path):
    """The control: plain jupyter-cache keys on the page's code, so it serves 41 again."""
    book = Book(tmp_path, watch=False)
    book.build()
    (book.lib / "fa.py").write_text("def answer():\n    return 42\n")
    shutil.rmtree(book.out)  # even a full re-read gets the cached, stale output
    executed, shown = book.build()
    assert executed == [] and shown["a"] == "41"


def test_watched_files_hashes_folders_py_files_and_listed_files(tmp_path):
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from posenc_book import watched_files

    lib = tmp_path / "lib"
    (lib / "__pycache__").mkdir(parents=True)
    (lib / "mod.py").write_text("x = 1\n")
    (lib / "notes.txt").write_text("not code\n")
    (lib / "__pycache__" / "mod.cpython-311.py").write_text("")
    data = tmp_path / "results.json"
    data.write_text('{"a": 1}\n')
    hashes = watched_files([str(lib), str(data), str(tmp_path / "missing.json")])
    assert set(hashes) == {str((lib / "mod.py").resolve()), str(data.resolve()),
                           str((tmp_path / "missing.json").resolve())}
    assert hashes[str((tmp_path / "missing.json").resolve())] == "absent"
    data.write_text('{"a": 2}\n')
    assert watched_files([str(data)])[str(data.resolve())] != hashes[str(data.resolve())]
    conf = (ROOT / "conf.py").read_text()
    assert '"results.json"' in conf  # the book watches its benchmark results
