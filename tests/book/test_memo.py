"""The disk memo (posenc/analysis/_memo.py) never serves a stale entry, and is off by default.

Most tests use a small fake ``posenc`` package written to a temporary folder (the memo's
package root is pointed at it), so that its sources can be edited: a function in
``posenc.work`` that uses ``posenc.helper``, and an unrelated ``posenc.other``.
"""

from __future__ import annotations

import doctest
import hashlib
import inspect
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from posenc.analysis import _memo
from posenc.analysis import uniqueness

ROOT = Path(__file__).resolve().parents[2]

WORK = textwrap.dedent(
    """\
    import numpy as np

    from .helper import SCALE

    CALLS = []


    def scaled(values, factor=1.0):
        CALLS.append(1)
        return np.asarray(values, dtype=np.float64) * factor * SCALE


    def outer(n):
        CALLS.append(1)
        return float(inner(np.arange(n)).sum())


    def inner(values):
        CALLS.append(1)
        return np.asarray(values) * 2
    """
)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A fake posenc package on disk, its functions memoised, the memo on in tmp/memo."""
    pkg = tmp_path / "src" / "posenc"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("SCALE = 2.0\n")
    (pkg / "other.py").write_text("X = 1\n")
    (pkg / "work.py").write_text(WORK)
    monkeypatch.setattr(_memo, "_PACKAGE_ROOT", pkg)
    _memo.clear_source_cache()
    memo = tmp_path / "memo"
    monkeypatch.setenv(_memo.ENV_VAR, str(memo))

    class Fake:
        root = pkg
        folder = memo

        def load(self):
            """(Re-)execute posenc/work.py as module posenc.work; memoise its functions."""
            _memo.clear_source_cache()
            helper = {}
            exec((pkg / "helper.py").read_text(), helper)
            ns = {"__name__": "posenc.work"}
            src = (pkg / "work.py").read_text().replace("from .helper import SCALE", "")
            ns["SCALE"] = helper["SCALE"]
            exec(compile(src, str(pkg / "work.py"), "exec"), ns)
            for name in ("scaled", "outer", "inner"):
                ns[name] = _memo.memoize(ns[name])
            self.ns = ns
            return ns

        def entries(self):
            return sorted(self.folder.rglob("*.pkl"))

    yield Fake()
    _memo.clear_source_cache()


def test_off_by_default_nothing_written(tmp_path, monkeypatch):
    """Without POSENC_MEMO_DIR (library users, pytest) the function runs every time."""
    assert os.environ.get(_memo.ENV_VAR) is None, "pytest must run without the memo"
    monkeypatch.chdir(tmp_path)
    first = uniqueness.collision_summary(500, 8)
    second = uniqueness.collision_summary(500, 8)
    assert first == second
    assert _memo.memo_dir() is None
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv(_memo.ENV_VAR, "")
    assert _memo.memo_dir() is None


def test_hit_returns_the_same_result_without_calling(fake):
    ns = fake.load()
    a = ns["scaled"](np.arange(5.0), 3.0)
    b = ns["scaled"](np.arange(5.0), 3.0)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, np.arange(5.0) * 6.0)
    assert len(ns["CALLS"]) == 1
    assert len(fake.entries()) == 1
    events = (fake.folder / "events.jsonl").read_text().splitlines()
    assert len(events) == 2 and '"miss"' in events[0] and '"hit"' in events[1]
    # A second process (the other language) reads the entry too.
    fresh = fake.load()
    np.testing.assert_array_equal(fresh["scaled"](np.arange(5.0), 3.0), a)
    assert fresh["CALLS"] == []


def test_defaults_are_part_of_the_key_but_spelling_is_not(fake):
    ns = fake.load()
    ns["scaled"]([1.0, 2.0])
    ns["scaled"]([1.0, 2.0], 1.0)
    ns["scaled"]([1.0, 2.0], factor=1.0)
    ns["scaled"](values=[1.0, 2.0])
    assert len(ns["CALLS"]) == 1


@pytest.mark.parametrize(
    "first, second",
    [
        ((np.arange(4.0),), (np.arange(1.0, 5.0),)),          # other values
        ((np.arange(4.0),), (np.arange(4.0).reshape(2, 2),)),  # other shape
        ((np.arange(4.0),), (np.arange(4.0, dtype=np.float32),)),  # other dtype
        (([1, 2],), ([1.0, 2.0],)),                             # int vs float
        (([1.0], 2.0), ([1.0], 2.0000000000000004)),          # one ulp
        (([1.0], 2.0), ([1.0], np.float32(2.0))),              # numpy scalar type
        (((1, 2),), ([1, 2],)),                                # tuple vs list
        (([0.0],), ([-0.0],)),                                 # signed zero
    ],
)
def test_changed_arguments_recompute(fake, first, second):
    ns = fake.load()
    ns["scaled"](*first)
    ns["scaled"](*second)
    assert len(ns["CALLS"]) == 2
    assert len(fake.entries()) == 2


def test_changed_dependency_source_recomputes_unrelated_does_not(fake):
    ns = fake.load()
    np.testing.assert_array_equal(ns["scaled"]([1.0]), [2.0])
    (fake.root / "other.py").write_text("X = 2\n")  # not imported by posenc.work
    ns = fake.load()
    np.testing.assert_array_equal(ns["scaled"]([1.0]), [2.0])
    assert ns["CALLS"] == []
    (fake.root / "helper.py").write_text("SCALE = 5.0\n")  # imported by posenc.work
    ns = fake.load()
    np.testing.assert_array_equal(ns["scaled"]([1.0]), [5.0])  # not the stale 2.0
    assert len(ns["CALLS"]) == 1
    (fake.root / "work.py").write_text(WORK + "\n# a comment changes the source too\n")
    ns = fake.load()
    ns["scaled"]([1.0])
    assert len(ns["CALLS"]) == 1


def test_source_closure_follows_imports_only():
    modules, digest = _memo.source_closure("posenc.analysis.uniqueness")
    assert {"posenc.analysis.uniqueness", "posenc.sinusoidal", "posenc._validation",
            "posenc.analysis._memo"} <= set(modules)
    # Not the figures, not the package __init__ (it imports everything), not other analysis.
    assert not any(m.startswith("posenc.figures") for m in modules)
    assert "posenc" not in modules and "posenc.analysis.closest" not in modules
    assert len(digest) == 64
    with pytest.raises(ValueError, match="posenc module"):
        _memo.source_closure("numpy")


@pytest.mark.parametrize("damage", ["garbage", "truncate", "flip", "empty", "other_key"])
def test_damaged_entry_is_recomputed_and_rewritten(fake, damage):
    ns = fake.load()
    ns["scaled"]([1.0, 2.0])
    ns["scaled"]([3.0])
    entry_a, entry_b = fake.entries()
    data = entry_a.read_bytes()
    if damage == "garbage":
        entry_a.write_bytes(b"not a memo entry at all")
    elif damage == "truncate":
        entry_a.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        entry_a.write_bytes(data[:-5] + bytes([data[-5] ^ 0xFF]) + data[-4:])
    elif damage == "empty":
        entry_a.write_bytes(b"")
    else:  # a sound file of another key under this name
        entry_a.write_bytes(entry_b.read_bytes())
    ns["CALLS"].clear()
    results = {tuple(ns["scaled"](v)) for v in ([1.0, 2.0], [3.0])}
    assert results == {(2.0, 4.0), (6.0,)}
    assert len(ns["CALLS"]) == 1  # the damaged one only
    ns["CALLS"].clear()
    ns["scaled"]([1.0, 2.0]), ns["scaled"]([3.0])
    assert ns["CALLS"] == []  # rewritten soundly


class Renamed:
    pass


def test_entry_with_a_pickle_that_no_longer_loads_is_recomputed(fake):
    ns = fake.load()
    ns["scaled"]([1.0])
    (entry,) = fake.entries()
    # A sound file whose value's class has since been renamed: unpickling fails.
    payload = pickle.dumps({"key": entry.stem, "value": Renamed()}).replace(b"Renamed", b"Vanished")

    entry.write_bytes(_memo._MAGIC + hashlib.sha256(payload).digest() + payload)
    ns["CALLS"].clear()
    np.testing.assert_array_equal(ns["scaled"]([1.0]), [2.0])
    assert len(ns["CALLS"]) == 1


def test_unhashable_arguments_are_not_memoised(fake):
    ns = fake.load()

    class Box:
        pass

    for arg in (lambda: 1, Box(), {1: 2}, np.array([object()])):
        try:
            ns["scaled"](arg)
        except (TypeError, ValueError):
            pass
    assert len(ns["CALLS"]) == 4
    assert fake.entries() == []


def test_only_the_outermost_call_is_stored(fake):
    ns = fake.load()
    assert ns["outer"](4) == 12.0
    assert len(ns["CALLS"]) == 2 and len(fake.entries()) == 1
    assert ns["outer"](4) == 12.0
    assert len(ns["CALLS"]) == 2


def test_errors_propagate_and_are_not_stored(fake):
    ns = fake.load()
    with pytest.raises(ValueError):
        ns["scaled"](["not a number"])
    assert fake.entries() == []


def test_decorator_refuses_what_it_cannot_key():
    with pytest.raises(TypeError, match="module-level"):
        _memo.memoize(lambda x: x)

    def nested(x):
        return x

    nested.__module__ = "posenc.analysis.fake"
    with pytest.raises(TypeError, match="module-level"):
        _memo.memoize(nested)
    with pytest.raises(TypeError, match="plain function"):
        _memo.memoize(len)
    ns = {"__name__": "__main__"}  # a function defined in a page (a notebook kernel)
    exec("def f(x):\n    return x\n", ns)
    with pytest.raises(TypeError, match="posenc module"):
        _memo.memoize(ns["f"])


def test_decorated_functions_keep_signature_docs_and_doctests():
    for fn in (uniqueness.collision_summary, uniqueness.offset_distance):
        assert getattr(fn, "__memoized__", False)
        assert "d_model" in inspect.signature(fn).parameters
        assert fn.__doc__ and fn.__module__ == "posenc.analysis.uniqueness"
    names = {t.name for t in doctest.DocTestFinder().find(uniqueness) if t.examples}
    assert "posenc.analysis.uniqueness.collision_summary" in names
    assert "posenc.analysis.uniqueness.offset_distance" in names


def test_real_functions_same_results_with_and_without_memo(tmp_path, monkeypatch):
    plain_s = uniqueness.collision_summary(3000, 16, 100.0)
    plain_d = uniqueness.offset_distance(np.arange(1, 50), 32)
    monkeypatch.setenv(_memo.ENV_VAR, str(tmp_path))
    for _ in range(2):  # computed, then read back
        assert uniqueness.collision_summary(3000, 16, 100.0) == plain_s
        np.testing.assert_array_equal(uniqueness.offset_distance(np.arange(1, 50), 32), plain_d)
    assert len(list(tmp_path.rglob("*.pkl"))) == 2
    with pytest.raises(ValueError, match="d_model"):
        uniqueness.collision_summary(100, 3)  # errors unchanged, nothing stored for them
    assert len(list(tmp_path.rglob("*.pkl"))) == 2


PARALLEL = textwrap.dedent(
    """\
    import sys, time
    from pathlib import Path
    from posenc.analysis import _memo

    root, log = Path(sys.argv[1]), Path(sys.argv[2])
    _memo._PACKAGE_ROOT = root

    def slow(n):
        with open(log, "a") as f:
            f.write("computed\\n")
        time.sleep(1.0)
        return n * 2

    slow.__module__ = "posenc.work"   # as if defined in the fake package's work.py
    print(_memo.memoize(slow)(21))
    """
)


def test_two_processes_compute_an_entry_once(fake, tmp_path):
    """The languages build in parallel: one computes, the other waits and reads."""
    log = tmp_path / "computed.log"
    env = {**os.environ, _memo.ENV_VAR: str(fake.folder), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", PARALLEL, str(fake.root), str(log)],
                              env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert outs == ["42", "42"]
    assert log.read_text().splitlines() == ["computed"]
