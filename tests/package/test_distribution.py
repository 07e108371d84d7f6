"""posenc ships like a library, and installs clean.

``python -m build --no-isolation`` makes an sdist and then a wheel *from that sdist* (so
the sdist is shown to build), and the tests read both: the wheel holds the package and
its metadata only (no tests, docs, build outputs, benchmarks or experiments), with
``py.typed``, the license file, one version (``posenc.__version__``), the URLs and the
``torch`` extra.  The wheel is then installed into a fresh virtual environment with
NumPy alone, where the NumPy API runs and ``import posenc.torch`` fails with an
``ImportError`` that names the extra.

Marked ``package`` (slow: a build and a venv); ``nox -s tests`` runs them in its first
pytest run (``-m "not build and not browser"``).  On commit 8049155 the build checks fail
(no ``py.typed``, no license file, a second version literal in pyproject.toml, no URLs)
and so does the clean install's check of the ``posenc.torch`` message.
"""

from __future__ import annotations

import email.parser
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

import posenc

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.package

#: What the clean environment gets besides the wheel (the version the book pins).
NUMPY = "numpy==2.4.6"


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """``(sdist, wheel)`` built from the working tree (the wheel from the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True, text=True, cwd=out,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sdists, wheels = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return sdists[0], wheels[0]


def _metadata(text):
    return email.parser.Parser().parsestr(text)


def test_one_version_source():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"], "the version has one source: posenc.__version__"
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "posenc.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", posenc.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{posenc.__version__}]" in changelog


def test_wheel_holds_the_package_and_its_metadata_only(dists):
    _, wheel = dists
    version = posenc.__version__
    assert wheel.name == f"posenc-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = _metadata(z.read(f"posenc-{version}.dist-info/METADATA").decode())
        license_text = z.read(f"posenc-{version}.dist-info/licenses/LICENSE").decode()
    info = f"posenc-{version}.dist-info/"
    stray = [n for n in names if not (n.startswith("posenc/") or n.startswith(info))]
    assert not stray, f"files outside the package in the wheel: {stray}"
    tops = {n.split("/")[0] for n in names}
    for unwanted in ("tests", "docs", "_build", "benchmarks", "experiments", "tools"):
        assert unwanted not in tops
    assert not [n for n in names if "/tests/" in n or "_build" in n or n.endswith(".pyc")]
    # every module of the source tree is in the wheel, and py.typed with them
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "posenc").rglob("*.py")}
    assert sources <= set(names), sorted(sources - set(names))
    assert "posenc/py.typed" in names
    # the interactive figures' renderer, inlined in their outputs for Jupyter and Colab
    for asset in ("posenc-interactive.js", "posenc-interactive.css"):
        assert f"posenc/figures/static/{asset}" in names, asset
    assert "MIT License" in license_text
    assert meta["Version"] == version
    assert meta["License-Expression"] == "MIT"
    assert meta["License-File"] == "LICENSE"
    assert meta["Summary"] and meta["Requires-Python"] == ">=3.11"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Homepage", "Source", "Documentation", "Changelog"} <= set(urls)
    assert "Typing :: Typed" in meta.get_all("Classifier")
    requires = meta.get_all("Requires-Dist")
    assert any(r.startswith("numpy") and "extra" not in r for r in requires)
    assert any(r.startswith("torch") and 'extra == "torch"' in r for r in requires)
    assert not any(r.startswith("torch") and "extra" not in r for r in requires)


def test_sdist_has_the_sources_and_no_build_outputs(dists):
    sdist, _ = dists
    prefix = f"posenc-{posenc.__version__}/"
    with tarfile.open(sdist) as t:
        names = [m.name for m in t.getmembers()]
    for needed in ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md",
                   "posenc/__init__.py", "posenc/py.typed", "posenc/torch/rope.py"):
        assert prefix + needed in names, needed
    assert not [n for n in names if "/_build/" in n or "/.nox/" in n or ".jupyter_cache" in n]


def _venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return venv / "bin" / "python"


CLEAN_SCRIPT = textwrap.dedent("""
    import importlib.metadata as md, sys
    import numpy as np
    import posenc

    assert posenc.__version__ == md.version("posenc"), (posenc.__version__, md.version("posenc"))
    pe = posenc.sinusoidal_encoding(8, 6)
    assert pe.shape == (8, 6) and pe.dtype == np.float64
    x = np.random.default_rng(0).normal(size=(2, 5, 8))
    y = posenc.apply_rope(x, [3, 4, 5, 6, 7], layout="half")
    # RoPE keeps lengths, and rotating by 0 is the identity
    assert np.allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1))
    assert np.allclose(posenc.apply_rope(x[:, :1], [0]), x[:, :1])
    inv, factor = posenc.rope_frequencies(8, {"rope_type": "linear", "factor": 4.0})
    assert np.allclose(inv, posenc.inverse_frequencies(8) / 4) and factor == 1.0
    rows, cols = posenc.grid_positions(2, 3)
    assert posenc.apply_rope_2d(np.ones((6, 8)), rows, cols).shape == (6, 8)
    assert posenc.alibi_bias(4, 2).shape == (2, 4, 4)
    assert "torch" not in sys.modules, "the NumPy API imported torch"
    try:
        import posenc.torch
    except ImportError as e:
        assert 'pip install "posenc[torch] @ git+https://github.com/posenc/posenc"' in str(e), str(e)
        assert isinstance(e.__cause__, ModuleNotFoundError), repr(e.__cause__)
    else:
        raise AssertionError("posenc.torch imported without torch installed")
    from pathlib import Path
    assert (Path(posenc.__file__).parent / "py.typed").is_file()
    extras = md.metadata("posenc").get_all("Provides-Extra")
    assert "torch" in extras, extras
    assert any(r.startswith("torch") and 'extra == "torch"' in r
               for r in md.requires("posenc")), md.requires("posenc")
    print("CLEAN-OK")
""")


def test_wheel_installs_and_runs_with_numpy_only(dists, tmp_path):
    _, wheel = dists
    python = _venv(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", NUMPY,
         str(wheel)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    frozen = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True,
                            text=True, env=env, check=True).stdout
    installed = {re.split(r"==| @ ", line)[0].lower() for line in frozen.splitlines() if line}
    assert installed == {"numpy", "posenc"}, frozen
    # run from a directory without the source tree, so the installed copy is imported
    proc = subprocess.run([str(python), "-c", CLEAN_SCRIPT], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 0 and "CLEAN-OK" in proc.stdout, proc.stdout + proc.stderr
    where = subprocess.run([str(python), "-c", "import posenc; print(posenc.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path).stdout
    assert str(tmp_path) in where, where
