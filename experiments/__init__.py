"""``nox -s experiments``: the full training runs behind the book's *Experiments* chapter.

The code that trains and evaluates lives in :mod:`posenc.analysis.experiments`; this folder
holds the driver (``run.py``) and the committed results (``results.json``, ``results.md``).
"""
