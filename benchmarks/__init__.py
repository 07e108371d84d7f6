"""Benchmarks of posenc against its peers, and of the book build against the clock.

Run ``nox -s bench`` (or ``python benchmarks/run.py``); see ``benchmarks/run.py``.
"""
