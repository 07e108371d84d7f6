"""The book's figures: one function per figure, each returning a matplotlib Figure.

Import it as ``import posenc.figures as pf`` and call ``pf.set_language("en")`` or
``pf.set_language("zh")`` once per page; every figure's words follow.  The house style
(fonts with a CJK fallback, white background, fixed dpi, deterministic bytes) lives in
:mod:`posenc.figures._style`.

Every public module of this package is imported here and the names in its ``__all__``
are re-exported, so a chapter writer adds a figure by adding a module (no edit to this
file); two modules exporting the same name is an error.

Examples
--------
>>> import posenc.figures as pf
>>> pf.set_language("en")
>>> fig = pf.sinusoid_heatmap(20, 16)
>>> type(fig).__name__, fig.axes[0].get_xlabel()
('BookFigure', 'dimension $j$')
"""

from __future__ import annotations

import importlib
import pkgutil

from . import _style
from ._style import *  # noqa: F403

__all__ = list(_style.__all__)


def _export_submodules():
    owner = {name: "_style" for name in __all__}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):  # noqa: F405
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for name in getattr(module, "__all__", ()):
            if name in owner:
                raise ImportError(
                    f"posenc.figures: {name!r} is exported by both {owner[name]} and {info.name}"
                )
            owner[name] = info.name
            globals()[name] = getattr(module, name)
            __all__.append(name)


_export_submodules()
