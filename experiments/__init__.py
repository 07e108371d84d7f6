"""``nox -s experiments``: the full training runs behind the book's *Experiments* chapter.

The code that trains and evaluates lives in :mod:`posenc.analysis.experiments`; this folder
holds the driver (``run.py``), one module per stage of the protocol (``stage_lm.py``,
``stage_finetune.py``, ``stage_tasks.py``, ``stage_taskrates.py``, ``stage_context.py``,
``stage_refrates.py``, ``stage_ablrates.py``, ``stage_lmrates.py``, ``stage_gpu.py``: each stage's units are keyed
on its own import closure; ``rategrid.py``, the rate checks' shared search), ``rekey.py`` (carries stored units across a change that moves code
without changing a number, after re-running a sample bit for bit), the finished units
(``units/``) and the committed results (``results.json``, ``results.md``).
"""
