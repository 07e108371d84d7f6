"""Small Transformers trained with each positional encoding (the *Experiments* chapter).

The model (:mod:`.models`), the two tasks (:mod:`.tasks`), the corpus (:mod:`.corpus`) and
the training and evaluation loops (:mod:`.train`) live here, so that the chapter's live
demo and the full run (``nox -s experiments``, driven by ``experiments/run.py`` at the top
of the repository) go through the same code.  Needs PyTorch.
"""
