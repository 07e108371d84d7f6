"""The book's figures: one function per figure, each returning a matplotlib Figure.

Import it as ``import posenc.figures as pf`` and call ``pf.set_language("en")`` or
``pf.set_language("zh")`` once per page; every figure's words follow.  The house style
(fonts with a CJK fallback, white background, fixed dpi, deterministic bytes) lives in
:mod:`posenc.figures._style`.

Every public module of this package is re-exported: the names in its ``__all__`` are
``pf.<name>``, so a chapter writer adds a figure by adding a module (no edit to this
file); two modules exporting the same name is an error.  The modules are imported on
first use (PEP 562; their ``__all__`` is read from the source without importing them),
so a page imports only the figure modules it calls, and an edit to one of them
re-executes only those pages (a page's execution is keyed on the modules it imported,
``docs/_ext/posenc_book.py``).  :func:`load_all` imports every one.

Examples
--------
>>> import posenc.figures as pf
>>> pf.set_language("en")
>>> fig = pf.sinusoid_heatmap(20, 16)
>>> type(fig).__name__, fig.axes[0].get_xlabel()
('BookFigure', 'dimension $j$')
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

from . import _style
from ._style import *  # noqa: F403

__all__ = list(_style.__all__) + ["load_all"]


def _static_all(path):
    """A module's ``__all__`` read from its source, or None if it is not a literal list."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            try:
                names = ast.literal_eval(node.value)
            except ValueError:
                return None
            return list(names) if isinstance(names, (list, tuple)) else None
    return []


#: exported name -> the submodule that defines it
_OWNER = {name: "_style" for name in _style.__all__}


def _index_submodules():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):  # noqa: F405
        if info.name.startswith("_"):
            continue
        names = _static_all(Path(__file__).with_name(f"{info.name}.py"))
        if names is None:  # not a literal: import the module to read it
            names = list(importlib.import_module(f"{__name__}.{info.name}").__all__)
        for name in names:
            if name in _OWNER:
                raise ImportError(f"posenc.figures: {name!r} is exported by both "
                                  f"{_OWNER[name]} and {info.name}")
            _OWNER[name] = info.name
            __all__.append(name)


_index_submodules()


def __getattr__(name):
    module = _OWNER.get(name)
    if module is None:
        raise AttributeError(f"module 'posenc.figures' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_OWNER))


def load_all():
    """Import every figure module (and so register every figure label).

    Examples
    --------
    >>> import posenc.figures as pf
    >>> pf.load_all()
    >>> "bench_pass" in pf.LABELS
    True
    """
    for module in sorted(set(_OWNER.values()) - {"_style"}):
        importlib.import_module(f"{__name__}.{module}")
