"""The language-modelling corpus: real text that is offline and fixed by a hash.

The text is the Python source of one pinned package, docutils (its version is pinned in
``requirements/constraints.txt``): English docstrings and comments mixed with code, about
1.8 MB.  Tokens are bytes (a vocabulary of 256), so no tokenizer is trained or downloaded.

The split is by file, never inside one: the files are sorted by path, and every tenth file
(by that order) goes to evaluation, so no line of the evaluation text is in training.  The
SHA-256 of the concatenated bytes of each split is recorded with the results, together with
the package version, so a different corpus can never pass for the same one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PACKAGE = "docutils"
EVAL_EVERY = 10  # every tenth file (sorted by path) is held out for evaluation


@dataclass(frozen=True)
class Corpus:
    """Token arrays (uint8 bytes) for training and evaluation, and where they came from."""

    train: np.ndarray
    eval: np.ndarray
    package: str
    version: str
    n_files_train: int
    n_files_eval: int
    sha256_train: str
    sha256_eval: str

    def provenance(self) -> dict:
        return {
            "package": self.package, "version": self.version,
            "files_train": self.n_files_train, "files_eval": self.n_files_eval,
            "bytes_train": int(self.train.size), "bytes_eval": int(self.eval.size),
            "sha256_train": self.sha256_train, "sha256_eval": self.sha256_eval,
            "split": f"by file: every {EVAL_EVERY}th .py file (sorted by path) is evaluation",
            "tokens": "bytes (vocabulary 256)",
        }


def load_corpus(package: str = PACKAGE) -> Corpus:
    """Read every ``.py`` file of ``package`` (sorted by relative path) and split by file."""
    import importlib
    import importlib.metadata

    module = importlib.import_module(package)
    if module.__file__ is None:
        raise ValueError(f"package {package!r} has no source files (a namespace package)")
    root = Path(module.__file__).resolve().parent
    files = sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix())
    if len(files) < EVAL_EVERY:
        raise ValueError(f"package {package!r} has too few source files ({len(files)})")
    train_parts: list[bytes] = []
    eval_parts: list[bytes] = []
    for i, path in enumerate(files):
        (eval_parts if i % EVAL_EVERY == EVAL_EVERY - 1 else train_parts).append(path.read_bytes())
    train_b, eval_b = b"\n".join(train_parts), b"\n".join(eval_parts)
    return Corpus(
        train=np.frombuffer(train_b, dtype=np.uint8).copy(),
        eval=np.frombuffer(eval_b, dtype=np.uint8).copy(),
        package=package,
        version=importlib.metadata.version(package),
        n_files_train=len(train_parts),
        n_files_eval=len(eval_parts),
        sha256_train=hashlib.sha256(train_b).hexdigest(),
        sha256_eval=hashlib.sha256(eval_b).hexdigest(),
    )


def lm_batch(tokens: np.ndarray, batch: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """``batch`` random windows of ``length + 1`` tokens (inputs and shifted targets)."""
    if tokens.size < length + 1:
        raise ValueError(f"length {length} needs at least {length + 1} tokens, have {tokens.size}")
    starts = rng.integers(0, tokens.size - length - 1, size=batch)
    return np.stack([tokens[s:s + length + 1] for s in starts]).astype(np.int64)


def eval_windows(tokens: np.ndarray, length: int, n_windows: int) -> np.ndarray:
    """``n_windows`` evenly spaced, non-overlapping windows of ``length + 1`` evaluation tokens.

    The same windows for every model, so perplexities are compared on the same text.
    """
    span = length + 1
    if tokens.size < span * n_windows:
        n_windows = tokens.size // span
    if n_windows < 1:
        raise ValueError(f"the evaluation text is shorter than one window of {span} tokens")
    stride = tokens.size // n_windows
    return np.stack([tokens[i * stride:i * stride + span] for i in range(n_windows)]).astype(
        np.int64
    )
