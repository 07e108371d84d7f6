"""The language-modelling corpus: real text, offline, fixed by a pinned package and a hash.

The text is the Python source of SymPy (its version is pinned in
``requirements/constraints.txt``; PyTorch depends on it, so it is installed wherever the
harness runs): English docstrings and comments mixed with code, about 18 MB outside its test
folders.  Tokens are bytes (a vocabulary of 256), so no tokenizer is trained or downloaded.

How the text becomes three splits:

1. Every ``.py`` file outside ``tests`` folders, read in sorted path order.  Files under
   :data:`MIN_BYTES` are dropped (``__init__`` stubs and the like).
2. Duplicates go: a file whose text, with whitespace removed, equals an earlier file's, and a
   near-duplicate, whose set of stripped non-blank lines has a Jaccard similarity of at
   least :data:`NEAR_DUP` with an earlier file's (checked exactly on the candidate pairs
   that a MinHash index proposes).  So no evaluation file is a light edit of a training file.
3. The split is by file, never inside one: by the file's position in the sorted list, one
   in ten is *validation* (used only to choose learning rates and embedding scales), one in
   ten is *test* (every number the book reports), the rest *training*.

Each split keeps its files apart (:attr:`Split.bounds`), so a training window or an
evaluation window never crosses from one file into the next.  The SHA-256 of each split's
bytes is recorded with the results, with the package version, so a different corpus can
never pass for the same one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PACKAGE = "sympy"
MIN_BYTES = 1024
NEAR_DUP = 0.5
_SPLITS = ("train", "valid", "test")


def _split_of(i: int) -> str:
    return "valid" if i % 10 == 4 else "test" if i % 10 == 9 else "train"


@dataclass(frozen=True)
class Split:
    """The bytes of one split, its files kept apart.

    ``tokens`` is every file of the split concatenated (``uint8``); file ``j`` is
    ``tokens[bounds[j]:bounds[j + 1]]``.
    """

    tokens: np.ndarray
    bounds: np.ndarray
    names: tuple[str, ...]

    @property
    def n_files(self) -> int:
        return len(self.names)

    def sha256(self) -> str:
        return hashlib.sha256(self.tokens.tobytes()).hexdigest()


@dataclass(frozen=True)
class Corpus:
    """The three splits and where they came from."""

    train: Split
    valid: Split
    test: Split
    package: str
    version: str
    dropped_small: int
    dropped_exact: int
    dropped_near: int

    def provenance(self) -> dict:
        out = {"package": self.package, "version": self.version,
               "dropped": {"under_min_bytes": self.dropped_small, "exact_duplicates":
                           self.dropped_exact, "near_duplicates": self.dropped_near},
               "min_bytes": MIN_BYTES, "near_duplicate_jaccard": NEAR_DUP,
               "split": "by file (sorted by path): index % 10 == 4 validation, == 9 test, "
                        "else training; tests folders excluded",
               "tokens": "bytes (vocabulary 256)"}
        for name in _SPLITS:
            s: Split = getattr(self, name)
            out[name] = {"files": s.n_files, "bytes": int(s.tokens.size), "sha256": s.sha256()}
        return out


def _line_set(text: bytes) -> set[int]:
    """Stable 64-bit hashes of the stripped non-blank lines (``hash()`` of bytes changes
    from one process to the next, so it cannot make the split reproducible)."""
    return {int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "little", signed=True)
            for line in (raw.strip() for raw in text.splitlines()) if line}


def _minhash(lines: set[int], seeds: np.ndarray) -> np.ndarray:
    """A MinHash signature of a set of 64-bit line hashes (one row per hash function)."""
    if not lines:
        return np.full(seeds.size, np.iinfo(np.uint64).max, dtype=np.uint64)
    x = np.fromiter(lines, dtype=np.int64, count=len(lines)).view(np.uint64)
    with np.errstate(over="ignore"):
        h = (x[None, :] ^ seeds[:, None]) * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(29)
    return h.min(axis=1)


def _deduplicate(texts: list[bytes]) -> tuple[list[int], int, int]:
    """Indices of the files to keep (the first of each duplicate group), and how many exact
    and near duplicates were dropped."""
    seeds = np.random.default_rng(0).integers(0, 2**63, size=64, dtype=np.int64).view(np.uint64)
    keep: list[int] = []
    seen_exact: set[bytes] = set()
    bands: dict[tuple[int, bytes], list[int]] = {}
    line_sets: dict[int, set[int]] = {}
    exact = near = 0
    for i, text in enumerate(texts):
        key = hashlib.sha256(re.sub(rb"\s+", b"", text)).digest()
        if key in seen_exact:
            exact += 1
            continue
        lines = _line_set(text)
        sig = _minhash(lines, seeds)
        candidates: set[int] = set()
        band_keys = [(b, sig[b * 4:(b + 1) * 4].tobytes()) for b in range(16)]
        for bk in band_keys:
            candidates.update(bands.get(bk, ()))
        if any(len(lines & line_sets[j]) / max(1, len(lines | line_sets[j])) >= NEAR_DUP
               for j in candidates):
            near += 1
            continue
        seen_exact.add(key)
        line_sets[i] = lines
        for bk in band_keys:
            bands.setdefault(bk, []).append(i)
        keep.append(i)
    return keep, exact, near


def _make_split(parts: list[tuple[str, bytes]]) -> Split:
    data = b"".join(t for _, t in parts)
    bounds = np.cumsum([0] + [len(t) for _, t in parts]).astype(np.int64)
    return Split(np.frombuffer(data, dtype=np.uint8).copy(), bounds,
                 tuple(n for n, _ in parts))


_CACHE: dict[str, Corpus] = {}


def load_corpus(package: str = PACKAGE) -> Corpus:
    """Read, clean and split the sources of ``package`` (cached per process)."""
    if package in _CACHE:
        return _CACHE[package]
    import importlib
    import importlib.metadata

    module = importlib.import_module(package)
    if module.__file__ is None:
        raise ValueError(f"package {package!r} has no source files (a namespace package)")
    root = Path(module.__file__).resolve().parent
    files = sorted((p for p in root.rglob("*.py") if "tests" not in p.relative_to(root).parts),
                   key=lambda p: p.relative_to(root).as_posix())
    texts = [(p.relative_to(root).as_posix(), p.read_bytes()) for p in files]
    small = sum(len(t) < MIN_BYTES for _, t in texts)
    texts = [(n, t) for n, t in texts if len(t) >= MIN_BYTES]
    keep, exact, near = _deduplicate([t for _, t in texts])
    kept = [texts[i] for i in keep]
    if len(kept) < 30:
        raise ValueError(f"package {package!r} has too few source files ({len(kept)})")
    parts: dict[str, list[tuple[str, bytes]]] = {s: [] for s in _SPLITS}
    for i, item in enumerate(kept):
        parts[_split_of(i)].append(item)
    corpus = Corpus(train=_make_split(parts["train"]), valid=_make_split(parts["valid"]),
                    test=_make_split(parts["test"]), package=package,
                    version=importlib.metadata.version(package), dropped_small=small,
                    dropped_exact=exact, dropped_near=near)
    _CACHE[package] = corpus
    return corpus


def lm_batch(split: Split, batch: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """``batch`` random windows of ``length + 1`` tokens, each inside one file.

    A window start is drawn uniformly from every start that keeps the window inside its file,
    so every byte of a long file is equally likely to be seen.
    """
    sizes = np.diff(split.bounds) - length
    if (sizes < 1).all():
        raise ValueError(f"length {length} needs a file of at least {length + 1} bytes")
    counts = np.clip(sizes, 0, None)
    cum = np.cumsum(counts)
    pick = rng.integers(0, cum[-1], size=batch)
    f = np.searchsorted(cum, pick, side="right")
    starts = split.bounds[f] + pick - np.concatenate([[0], cum[:-1]])[f]
    return np.stack([split.tokens[s:s + length + 1] for s in starts]).astype(np.int64)


@dataclass(frozen=True)
class EvalChunks:
    """Fixed evaluation chunks: every length predicts the same target bytes.

    Chunk ``i`` ends at ``ends[i]`` (exclusive) inside one file; its *targets* are the last
    ``target`` bytes before that end.  At evaluation length ``n`` the model reads the ``n``
    bytes before each target-span end and the loss is taken on the targets (and, for the
    per-position view, on every position of the window).  A longer length only adds history
    before the same targets.  The chunks' longest windows (``max_length + 1`` bytes) do not
    overlap and never cross a file boundary.
    """

    ends: np.ndarray
    files: np.ndarray
    target: int
    max_length: int

    def windows(self, split: Split, length: int) -> np.ndarray:
        """The ``(n_chunks, length + 1)`` token windows for evaluation length ``length``."""
        if not self.target <= length <= self.max_length:
            raise ValueError(f"length must be in [target, max_length] = [{self.target}, "
                             f"{self.max_length}], got {length}")
        return np.stack([split.tokens[e - length - 1:e] for e in self.ends]).astype(np.int64)


def eval_chunks(split: Split, *, max_length: int, target: int, n_chunks: int) -> EvalChunks:
    """Choose ``n_chunks`` fixed chunks, spread evenly over every file long enough.

    Each file long enough holds ``len // (max_length + 1)`` non-overlapping candidate windows
    (laid from its end); the chunks are taken evenly spaced from all candidates in file
    order, so they come from as many files as possible.
    """
    if not 1 <= target <= max_length:
        raise ValueError(f"target must be in [1, max_length], got {target}")
    span = max_length + 1
    cands: list[tuple[int, int]] = []
    for j in range(split.n_files):
        lo, hi = int(split.bounds[j]), int(split.bounds[j + 1])
        for k in range((hi - lo) // span):
            cands.append((hi - k * span, j))
    if len(cands) < n_chunks:
        raise ValueError(f"the split has room for {len(cands)} windows of {span} bytes, "
                         f"n_chunks={n_chunks} asked for more")
    idx = np.linspace(0, len(cands) - 1, n_chunks).round().astype(int)
    chosen = sorted(cands[i] for i in idx)
    return EvalChunks(np.array([e for e, _ in chosen]), np.array([j for _, j in chosen]),
                      target, max_length)


# -- the prepared corpus as one file (a machine whose SymPy differs reads this instead) ----

def save_corpus(corpus: Corpus, path: Path | str) -> Path:
    """Write ``corpus`` (every split's bytes, file bounds and names, and its provenance) to
    one compressed ``.npz`` file, which :func:`load_corpus_file` reads back unchanged."""
    import json

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    for name in _SPLITS:
        s: Split = getattr(corpus, name)
        arrays[f"{name}_tokens"] = s.tokens
        arrays[f"{name}_bounds"] = s.bounds
        arrays[f"{name}_names"] = np.frombuffer("\n".join(s.names).encode(), dtype=np.uint8)
    meta = {"package": corpus.package, "version": corpus.version,
            "dropped": [corpus.dropped_small, corpus.dropped_exact, corpus.dropped_near],
            "sha256": {n: getattr(corpus, n).sha256() for n in _SPLITS}}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez_compressed(f, **arrays)  # type: ignore[arg-type]
    return path


def load_corpus_file(path: Path | str) -> Corpus:
    """Read a corpus written by :func:`save_corpus`, checking every split's SHA-256."""
    import json

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"corpus file {str(path)!r} does not exist")
    with np.load(path) as z:
        meta = json.loads(z["meta"].tobytes().decode())
        splits = {}
        for name in _SPLITS:
            names = z[f"{name}_names"].tobytes().decode()
            splits[name] = Split(z[f"{name}_tokens"].astype(np.uint8),
                                 z[f"{name}_bounds"].astype(np.int64),
                                 tuple(names.split("\n")) if names else ())
            if splits[name].sha256() != meta["sha256"][name]:
                raise ValueError(f"corpus file {str(path)!r}: the {name} split does not "
                                 "match its recorded SHA-256")
    small, exact, near = meta["dropped"]
    return Corpus(train=splits["train"], valid=splits["valid"], test=splits["test"],
                  package=meta["package"], version=meta["version"], dropped_small=small,
                  dropped_exact=exact, dropped_near=near)


# -- targets where long context pays ---------------------------------------------------------

#: the rule of the *far-identifier* targets, fixed before any result was looked at
FAR_GAP = 128
FAR_MIN_LEN = 3
_IDENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def far_identifier_mask(split: Split, *, gap: int = FAR_GAP, min_len: int = FAR_MIN_LEN
                        ) -> np.ndarray:
    """A boolean mask over ``split.tokens``: the bytes where context beyond ``gap`` pays.

    The rule: in each file, take every identifier (``[A-Za-z_][A-Za-z0-9_]*``, not a Python
    keyword) of at least ``min_len`` characters whose previous occurrence *in the same
    file* starts more than ``gap`` bytes before it; select its bytes after the first.  Each
    selected byte can be copied from the same offset in the previous occurrence, which lies
    more than ``gap`` bytes back: a model that reads only ``gap`` bytes cannot see it, one
    that reads further can.  (The first byte is left out: which identifier comes next is
    not a copy.)

    >>> text = b"alpha = 1\\n" + b"#" * 200 + b"\\nbeta = alpha\\nalpha"
    >>> split = Split(np.frombuffer(text, np.uint8).copy(), np.array([0, len(text)]), ("f",))
    >>> m = far_identifier_mask(split)
    >>> bytes(split.tokens[m])   # 'lpha' of the second alpha; the third is 7 bytes after it
    b'lpha'
    """
    import keyword

    if not (isinstance(gap, int) and gap >= 1):
        raise ValueError(f"gap must be an integer >= 1, got {gap!r}")
    if not (isinstance(min_len, int) and min_len >= 2):
        raise ValueError(f"min_len must be an integer >= 2, got {min_len!r}")
    skip = {k.encode() for k in keyword.kwlist}
    mask = np.zeros(split.tokens.size, dtype=bool)
    for j in range(split.n_files):
        lo, hi = int(split.bounds[j]), int(split.bounds[j + 1])
        last: dict[bytes, int] = {}
        for m in _IDENT.finditer(split.tokens[lo:hi].tobytes()):
            name, start = m.group(), m.start()
            prev = last.get(name)
            last[name] = start
            if (prev is not None and start - prev > gap and len(name) >= min_len
                    and name not in skip):
                mask[lo + start + 1:lo + m.end()] = True
    return mask
