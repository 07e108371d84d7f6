"""The disk memo for the book's expensive computations: computed once, for both languages.

This is the one place where posenc caches results.  Its purpose is narrow: the English
and the Chinese books execute the same code cells, and some of them call measurements
that take seconds (collision scans over 10^5 offsets, fits, experiment summaries).  A
function decorated with :func:`memoize` stores its result on disk the first time the
build computes it, and the other language (or the next build after an edit elsewhere)
reads it back instead of computing it again.

**Off unless the book build turns it on.**  Nothing is read or written unless the
environment variable ``POSENC_MEMO_DIR`` names a folder.  The book's ``conf.py`` sets it
to ``_build/.memo`` (``$POSENC_BUILD_DIR/.memo``), and the notebook kernels inherit it
from ``sphinx-build``; a library user, pytest and the doctests never set it, so for them
a decorated function is the plain function (one dictionary lookup more per call).  Set it
to the empty string to build without the memo.

**A stale entry is never served.**  An entry's key is the SHA-256 of

* the function's module and qualified name;
* its arguments, bound to the signature with the defaults filled in (``f(x)`` and
  ``f(x, base=10000.0)`` share an entry) and hashed exactly: NumPy arrays by dtype, shape
  and bytes; NumPy and Python scalars by type and exact value (``repr`` of a float
  round-trips); strings, bytes, ``None``; tuples (named tuples with their type), lists,
  dicts with string keys, sets -- recursively.  A call with any other argument (a
  callable, a tensor, an object) is not memoised: it runs, and nothing is stored;
* the source of every ``posenc`` module the function's module imports, directly or
  through other ``posenc`` modules, found by reading their ``import`` statements
  (a function-level import counts; a package's ``__init__`` counts only when something
  is imported from the package itself, as in ``from posenc import x``);
* the Python version and the installed NumPy and PyTorch versions.

Change any of them and the key changes.  An entry whose checksum, format or stored key
does not match (a truncated or corrupted file) is computed again and rewritten.  Only the
outermost memoised call is stored: a memoised function that calls another computes the
inner one directly, so intermediate arrays do not fill the disk.  Two processes that
want the same entry at once (the two languages build in parallel) take a file lock: one
computes, the other waits and reads.  Each hit or computation appends one line to
``events.jsonl`` in the folder (function, hit or miss, seconds), which the build
benchmark reads.  Removing the folder is always safe.

**What may be decorated.**  A module-level function of a ``posenc`` module whose result
depends only on its arguments and on posenc's code (no randomness without a seed argument,
no files, no clock), and whose result pickles.  Decorating is a one-line change::

    from ._memo import memoize

    @memoize
    def collision_summary(n_positions, d_model, base=10000.0):
        ...

Examples
--------
>>> import os, tempfile
>>> from unittest import mock
>>> from posenc.analysis import _memo
>>> calls = []
>>> def square(x):
...     calls.append(x)
...     return x * x
>>> square.__module__ = "posenc.analysis._memo"   # as if defined in a posenc module
>>> msquare = _memo.memoize(square)
>>> with tempfile.TemporaryDirectory() as tmp:
...     with mock.patch.dict(os.environ, {_memo.ENV_VAR: tmp}):
...         first, second = msquare(3), msquare(3)
>>> first, second, calls          # the second call was read from disk
(9, 9, [3])
>>> with mock.patch.dict(os.environ, {_memo.ENV_VAR: ""}):
...     third = msquare(3)        # memo off: the plain function runs
>>> third, calls
(9, [3, 3])
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import inspect
import json
import os
import pickle
import struct
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import numpy as np

fcntl: types.ModuleType | None
try:  # POSIX; elsewhere two processes may both compute an entry (still never stale)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["ENV_VAR", "memoize", "memo_dir", "source_closure", "clear_source_cache"]

ENV_VAR = "POSENC_MEMO_DIR"
_MAGIC = b"POSENC-MEMO-1\n"
_PACKAGE = "posenc"
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # .../posenc

_state = threading.local()  # .depth: memoised calls in progress in this thread
_closure_cache: dict[str, tuple[tuple[str, ...], str]] = {}
_versions: str | None = None


class _Unhashable(Exception):
    """An argument the memo cannot hash exactly: the call is not memoised."""


def memo_dir() -> Path | None:
    """The memo folder, or ``None`` when the memo is off (``POSENC_MEMO_DIR`` unset/empty)."""
    value = os.environ.get(ENV_VAR, "")
    return Path(value) if value else None


def memoize(fn):
    """Store ``fn``'s results on disk while the book builds (see the module docstring).

    Parameters
    ----------
    fn : function
        A module-level function of a ``posenc`` module.

    Returns
    -------
    function
        A function with ``fn``'s name, signature and docstring; while
        ``POSENC_MEMO_DIR`` is unset it calls ``fn`` and nothing else.

    Raises
    ------
    TypeError
        If ``fn`` is not a plain function, is nested in another function, or is not
        defined in a ``posenc`` module (its sources could not be part of the key).
    """
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"memoize needs a plain function, got {type(fn).__name__}")
    if "<locals>" in fn.__qualname__ or fn.__name__ == "<lambda>":
        raise TypeError(
            f"memoize needs a module-level function (its closure cannot be hashed), "
            f"got {fn.__qualname__}"
        )
    module = fn.__module__ or ""
    if module != _PACKAGE and not module.startswith(_PACKAGE + "."):
        raise TypeError(
            f"memoize needs a function defined in a posenc module (the key hashes posenc's "
            f"sources), got one from {module!r}"
        )
    signature = inspect.signature(fn)
    call = _call

    def wrapper(*args, **kwargs):
        return call(fn, signature, args, kwargs)

    # Rebuilt with fn's globals, so that doctest (which looks for a function's tests
    # only in functions whose globals are their module's) still finds fn's Examples.
    # The body refers to closure cells only, never to a global name.
    wrapped = types.FunctionType(
        wrapper.__code__, fn.__globals__, fn.__name__, None, wrapper.__closure__
    )
    functools.update_wrapper(wrapped, fn)
    wrapped.__memoized__ = True
    return wrapped


def _call(fn, signature, args, kwargs):
    folder = memo_dir()
    depth = getattr(_state, "depth", 0)
    if folder is None or depth:
        return fn(*args, **kwargs)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return fn(*args, **kwargs)  # let the function raise its own error
    bound.apply_defaults()
    try:
        digest = _key(fn, bound)
    except _Unhashable:
        return _compute(fn, args, kwargs)[0]
    qualname = f"{fn.__module__}.{fn.__qualname__}"
    path = folder / qualname / f"{digest}.pkl"
    found, value, seconds = _load(path, digest)
    if found:
        _event(folder, qualname, "hit", seconds)
        return value
    path.parent.mkdir(parents=True, exist_ok=True)
    with _Lock(path.with_suffix(".lock")):
        found, value, seconds = _load(path, digest)  # another process may have written it
        if found:
            _event(folder, qualname, "hit", seconds)
            return value
        value, seconds = _compute(fn, args, kwargs)
        _store(path, digest, qualname, value, seconds)
    _event(folder, qualname, "miss", seconds)
    return value


def _compute(fn, args, kwargs):
    _state.depth = getattr(_state, "depth", 0) + 1
    start = time.perf_counter()
    try:
        value = fn(*args, **kwargs)
    finally:
        _state.depth -= 1
    return value, time.perf_counter() - start


# -- the key ---------------------------------------------------------------------------

def _key(fn, bound) -> str:
    digest = hashlib.sha256()
    digest.update(f"{fn.__module__}\0{fn.__qualname__}\0".encode())
    _, sources = source_closure(fn.__module__)
    digest.update(sources.encode())
    digest.update(_library_versions().encode())
    for name, value in bound.arguments.items():
        digest.update(name.encode() + b"=")
        _feed(digest, value)
    return digest.hexdigest()


def _feed(digest, obj) -> None:
    """Hash ``obj`` exactly, with its type; raise _Unhashable for anything else."""
    t = type(obj)
    if obj is None:
        digest.update(b"N;")
    elif t is bool:
        digest.update(b"b1;" if obj else b"b0;")
    elif t is int:
        digest.update(b"i" + str(obj).encode() + b";")
    elif t is float:
        digest.update(b"f" + repr(obj).encode() + b";")
    elif t is complex:
        digest.update(b"c" + repr(obj).encode() + b";")
    elif t is str:
        data = obj.encode("utf-8", "surrogatepass")
        digest.update(b"s" + struct.pack("<Q", len(data)) + data)
    elif t is bytes:
        digest.update(b"y" + struct.pack("<Q", len(obj)) + obj)
    elif isinstance(obj, np.ndarray) and t is np.ndarray:
        if obj.dtype.hasobject or obj.dtype.fields is not None:
            raise _Unhashable(f"array of dtype {obj.dtype}")
        data = np.ascontiguousarray(obj).tobytes()
        head = f"a{obj.dtype.str}{obj.shape}".encode()
        digest.update(head + struct.pack("<Q", len(data)) + data)
    elif isinstance(obj, np.generic):
        if obj.dtype.hasobject:
            raise _Unhashable(f"scalar of dtype {obj.dtype}")
        digest.update(f"g{obj.dtype.str}".encode() + obj.tobytes() + b";")
    elif isinstance(obj, tuple) and (t is tuple or hasattr(t, "_fields")):
        digest.update(f"t{t.__module__}.{t.__qualname__}[{len(obj)}".encode())
        for item in obj:
            _feed(digest, item)
        digest.update(b"]")
    elif t is list:
        digest.update(f"l[{len(obj)}".encode())
        for item in obj:
            _feed(digest, item)
        digest.update(b"]")
    elif t is dict:
        if not all(type(k) is str for k in obj):
            raise _Unhashable("dict with non-string keys")
        digest.update(f"d{{{len(obj)}".encode())
        for k in sorted(obj):
            _feed(digest, k)
            _feed(digest, obj[k])
        digest.update(b"}")
    elif t in (set, frozenset):
        parts = []
        for item in obj:
            sub = hashlib.sha256()
            _feed(sub, item)
            parts.append(sub.digest())
        digest.update(f"S{len(parts)}".encode() + b"".join(sorted(parts)))
    else:
        raise _Unhashable(type(obj).__name__)


def _library_versions() -> str:
    global _versions
    if _versions is None:
        parts = [f"python {sys.version_info[0]}.{sys.version_info[1]}", f"numpy {np.__version__}"]
        try:
            parts.append(f"torch {importlib.metadata.version('torch')}")
        except importlib.metadata.PackageNotFoundError:
            parts.append("torch none")
        _versions = "; ".join(parts)
    return _versions


def clear_source_cache() -> None:
    """Forget the source hashes computed so far (they are read once per process)."""
    _closure_cache.clear()


def _module_path(name: str) -> Path | None:
    """The file of posenc module ``name`` (``posenc.a.b``), or None if there is none."""
    parts = name.split(".")
    if parts[0] != _PACKAGE:
        return None
    base = _PACKAGE_ROOT.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    file = base.with_suffix(".py")
    return file if parts[1:] and file.is_file() else None


def _imports(name: str, path: Path) -> set[str]:
    """The posenc modules named by the import statements of module ``name``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            # "from pkg import mod" imports the submodule pkg.mod
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if _module_path(m) is not None}


def source_closure(module: str) -> tuple[tuple[str, ...], str]:
    """The posenc modules ``module`` depends on through imports, and a hash of their sources.

    Parameters
    ----------
    module : str
        A posenc module name, e.g. ``"posenc.analysis.uniqueness"``.

    Returns
    -------
    modules : tuple of str
        ``module`` and every posenc module reachable from its ``import`` statements,
        sorted.
    digest : str
        SHA-256 (hex) of their names and file contents.

    Raises
    ------
    ValueError
        If ``module`` is not a posenc module with a source file.
    """
    cached = _closure_cache.get(module)
    if cached is not None:
        return cached
    if _module_path(module) is None:
        raise ValueError(f"module must be a posenc module with a source file, got {module!r}")
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _module_path(name)
        assert path is not None  # _imports yields only posenc modules with a source file
        todo.extend(_imports(name, path) - seen)
    digest = hashlib.sha256()
    for name in sorted(seen):
        path = _module_path(name)
        assert path is not None
        data = path.read_bytes()
        digest.update(name.encode() + b"\0" + struct.pack("<Q", len(data)) + data)
    result = (tuple(sorted(seen)), digest.hexdigest())
    _closure_cache[module] = result
    return result


# -- the store -------------------------------------------------------------------------

def _load(path: Path, digest: str):
    """(True, value, seconds) for a sound entry; (False, None, 0.0) otherwise."""
    try:
        data = path.read_bytes()
    except OSError:
        return False, None, 0.0
    head = len(_MAGIC) + 32
    if len(data) < head or not data.startswith(_MAGIC):
        return False, None, 0.0
    payload = data[head:]
    if hashlib.sha256(payload).digest() != data[len(_MAGIC):head]:
        return False, None, 0.0
    try:
        entry = pickle.loads(payload)
    except Exception:  # noqa: BLE001 - a class that moved, a truncated pickle: recompute
        return False, None, 0.0
    if not isinstance(entry, dict) or entry.get("key") != digest:
        return False, None, 0.0
    return True, entry["value"], float(entry.get("seconds", 0.0))


def _store(path: Path, digest: str, qualname: str, value, seconds: float) -> None:
    try:
        payload = pickle.dumps(
            {"key": digest, "function": qualname, "seconds": seconds, "value": value},
            protocol=pickle.HIGHEST_PROTOCOL,
        )
    except Exception:  # noqa: BLE001 - a result that does not pickle is simply not stored
        return
    data = _MAGIC + hashlib.sha256(payload).digest() + payload
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)  # readers see the old file or the whole new one
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _event(folder: Path, qualname: str, what: str, seconds: float) -> None:
    line = json.dumps({"function": qualname, "event": what, "seconds": round(seconds, 4),
                       "pid": os.getpid()}) + "\n"
    try:
        with open(folder / "events.jsonl", "a", encoding="utf-8") as log:
            log.write(line)
    except OSError:
        pass


class _Lock:
    """An exclusive ``flock`` on ``path`` (no-op where fcntl is missing)."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = None

    def __enter__(self):
        if fcntl is not None:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
        return False
