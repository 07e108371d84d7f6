"""Units of work: results kept one per unit, keyed on the configuration *and* the code.

A *unit* is one finished piece of the protocol (a trained model's losses, one scaling arm's
evaluation, ...).  Its result is stored with

* ``key``: its name (``lm-rope-s0``),
* ``digest``: a hash of the parameters it depends on and of its stage's code
  (:func:`stage_code`): a change to either makes it stale, so a code change can never
  silently reuse it,
* ``commit``, ``dirty`` and ``code``: the commit and code hash that produced it.

Each stage of the protocol (:data:`STAGES`: the language models and everything evaluated
on them, the fine-tuning, the synthetic tasks, the GPU tier) is keyed on the files of its
own import closure inside the harness (:func:`stage_files`), so a change to the tasks'
protocol leaves the trained language models valid, while a change to the training loop
they share makes every unit that ran it stale.  ``experiments/rekey.py`` carries units
across a change that moves code without changing what it computes, and only after
re-running a sample of them bit for bit.

:class:`UnitStore` reads units from any number of folders (one ``<key>.json`` per unit, or
``*.jsonl`` files with one unit per line, as a run on a lent machine writes them so that
one file holds them all) and writes new ones as soon as they finish: a run that is killed
loses only the unit in progress, and a later run, here or elsewhere, resumes from the
committed files instead of training again.

:class:`Budget` decides whether a unit of estimated cost still fits a wall-clock budget.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # not on Windows: one process per store file there
    fcntl = None  # type: ignore[assignment]

#: the repository root (the package lives in ``<root>/posenc``)
ROOT = Path(__file__).resolve().parents[3]


#: the harness's presentation modules: they read stored units (or, ``cost.py``, a tier's
#: configuration) and never decide a number
PRESENTATION = frozenset({"report.py", "stats.py", "markdown.py", "cost.py"})


#: bookkeeping modules: where a unit is stored, not what it contains
INFRA = frozenset({"units.py", "__init__.py"})

#: each stage's entry module; a unit's stage is :func:`stage_of` its key
STAGES = {"lm": "experiments/stage_lm.py", "finetune": "experiments/stage_finetune.py",
          "tasks": "experiments/stage_tasks.py", "taskrates": "experiments/stage_taskrates.py",
          "context": "experiments/stage_context.py",
          "refrates": "experiments/stage_refrates.py",
          "ablrates": "experiments/stage_ablrates.py",
          "lmrates": "experiments/stage_lmrates.py", "gpu": "experiments/stage_gpu.py"}

#: the stage of each unit kind (the key's first dash-separated word)
UNIT_STAGE = {"lmgrid": "lm", "lm": "lm", "lmedge": "lm", "test": "lm", "budget": "lm",
              "ref": "lm", "abl": "lm", "scale": "lm", "scalematched": "lm",
              "finetune": "finetune", "finetunegrid": "finetune", "probe": "finetune",
              "copy": "tasks", "copygrid": "tasks",
              "passkey": "tasks", "passkeygrid": "tasks",
              "copyrate": "taskrates", "passkeyrate": "taskrates", "refctx": "context",
              "refgrid": "refrates", "reftuned": "refrates", "refvalid": "refrates",
              "ablgrid": "ablrates", "abltuned": "ablrates", "lmrival": "lmrates"}


def stage_of(key: str) -> str:
    """The stage a CPU-tier unit belongs to, from its key.

    >>> stage_of("test-lmgrid-rope-lr0.01-x7.07"), stage_of("copygrid-rope-lr0.001")
    ('lm', 'tasks')
    """
    kind = key.split("-")[0]
    if kind not in UNIT_STAGE:
        raise ValueError(f"key must start with one of {sorted(UNIT_STAGE)}, got {key!r}")
    return UNIT_STAGE[kind]


def unit_kind(key: str) -> str:
    """A unit's kind, from its key: the key's first part, and for an evaluation
    (``test-``) the kind of model it reads as well.

    >>> unit_kind("lm-rope-lr0.01-x7.07-s3"), unit_kind("test-ref-rope-L512-s2")
    ('lm', 'test-ref')
    """
    parts = key.split("-")
    return parts[0] if parts[0] != "test" else "test-" + parts[1]


def work_group(unit: dict, models: dict) -> tuple[str, int | None]:
    """``(group, steps)``: units of one group do the same work per step, so a re-timed unit
    of the group times them all (:func:`report.rerun_seconds`).  ``steps`` is the training
    steps a unit ran (``None`` for a unit that trains nothing or a fixed number of steps).

    A trained language model's group is its architecture, length and batch (the rate and
    the seed do not change the cost of a step); an evaluation's is the group of the model
    it reads (``models``: stored units by digest); a task run's is the task and encoding
    (its steps are the steps it took to learn, or the cap); a scaling rule's, fine-tuning
    arm's and probe's are their kind and variant; a reference's reading at shorter lengths
    (``refctx``) is its encoding and training length.

    >>> lm = {"key": "lm-rope-s1", "digest": "d1", "steps": 800, "params": {"trained": {
    ...       "batch": 16, "cfg": {"encoding": "rope", "n_heads": 4, "train_length": 128}}}}
    >>> work_group(lm, {})
    ('train-rope-h4-L128-b16', 800)
    >>> work_group({"key": "test-lm-rope-s1", "params": {"model": "d1"}}, {"d1": lm})
    ('test-rope-h4-L128', None)
    >>> work_group({"key": "copygrid-t5-lr0.01", "encoding": "t5", "steps": 1700,
    ...             "params": {}}, {})
    ('copy-t5', 1700)
    >>> work_group({"key": "passkeyrate-learned-lr0.003-s1", "encoding": "learned",
    ...             "steps": 900, "params": {}}, {})
    ('passkey-learned', 900)
    >>> work_group({"key": "refctx-rope-L512-s0", "encoding": "rope", "train_length": 512,
    ...             "params": {"model": "d2"}}, {})
    ('refctx-rope-L512', None)
    >>> work_group({"key": "refvalid-ref-rope-L512-s0", "encoding": "rope", "length": 512,
    ...             "params": {"model": "d2"}}, {})
    ('refvalid-rope-L512', None)
    """
    key, params = unit["key"], unit["params"]
    kind = key.split("-")[0]
    if kind in ("copy", "copygrid", "copyrate", "passkey", "passkeygrid", "passkeyrate"):
        task = kind.removesuffix("grid").removesuffix("rate")
        return f"{task}-{unit['encoding']}", int(unit["steps"])
    if "trained" in params:
        cfg, batch = params["trained"]["cfg"], params["trained"]["batch"]
        return (f"train-{cfg['encoding']}-h{cfg['n_heads']}-L{cfg['train_length']}"
                f"-b{batch}", int(unit["steps"]))
    if kind == "test":
        model = models.get(params.get("model"))
        if model is None:
            raise ValueError(f"{key}: the model it reads ({params.get('model')!r}) must be "
                             "among the stored units")
        return "test-" + work_group(model, models)[0].split("-", 1)[1].rsplit("-b", 1)[0], None
    if kind in ("scale", "scalematched"):
        return f"{kind}-{unit['kind']}", None
    if kind in ("finetune", "finetunegrid"):
        return f"finetune-{unit['arm']}", None
    if kind == "probe":
        return f"probe-{unit['encoding']}-L{unit['train_length']}", None
    if kind == "refctx":
        return f"refctx-{unit['encoding']}-L{unit['train_length']}", None
    if kind == "refvalid":
        return f"refvalid-{unit['encoding']}-L{unit['length']}", None
    raise ValueError(f"unit key must be of a kind with a known work group, got {key!r}")


def _in_scope(path: Path, root: Path) -> bool:
    rel = path.relative_to(root).as_posix()
    return (path.is_file() and path.name not in INFRA | PRESENTATION
            and rel.startswith(("posenc/analysis/experiments/", "experiments/")))


def _imports(path: Path, root: Path) -> set[Path]:
    """The harness and script files ``path`` imports (anywhere in it, function bodies
    included), resolved against ``root``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    pkg = path.relative_to(root).parent.parts
    found: set[Path] = set()

    def add(parts) -> None:
        cand = root.joinpath(*parts).with_suffix(".py") if parts else None
        if cand is not None and _in_scope(cand, root):
            found.add(cand)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name.split("."))
        elif isinstance(node, ast.ImportFrom):
            base = list(pkg[:len(pkg) - (node.level - 1)]) if node.level else []
            mod = base + (node.module.split(".") if node.module else [])
            add(mod)
            for a in node.names:  # ``from package import module``
                add(mod + [a.name])
    return found


def stage_files(stage: str, root: Path = ROOT) -> list[Path]:
    """The files a stage's units depend on: its entry module (:data:`STAGES`) and every
    harness or script module it imports, directly or not (less :data:`PRESENTATION` and
    :data:`INFRA`).  The library outside the harness (``posenc.torch`` and the rest) is
    not part of it: its own tests pin what it computes."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {sorted(STAGES)}, got {stage!r}")
    todo, seen = [root / STAGES[stage]], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo += sorted(_imports(p, root) - seen)
    return sorted(seen)


def stage_code(stage: str, root: Path = ROOT) -> str:
    """SHA-256 (12 hex digits) of :func:`stage_files`' paths and bytes."""
    return _hash(stage_files(stage, root), root)


def _hash(files, root: Path) -> str:
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def code_files(root: Path = ROOT) -> list[Path]:
    """The files whose text decides every number of the protocol: the harness package
    (less its presentation modules, :data:`PRESENTATION`) and the scripts under
    ``experiments/``."""
    files = sorted(p for p in (root / "posenc" / "analysis" / "experiments").glob("*.py")
                   if p.name not in PRESENTATION)
    files += sorted((root / "experiments").glob("*.py"))
    return files


def code_hash(root: Path = ROOT) -> str:
    """SHA-256 (12 hex digits) of the code files' paths and bytes.

    >>> len(code_hash()) == 12
    True
    """
    return _hash(code_files(root), root)


def git_commit(root: Path = ROOT) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the working tree.  ``$POSENC_COMMIT``, when set, is the
    commit (the command that sends a tree to another machine names it; ``dirty`` is then
    ``None``, unknown); otherwise git's HEAD, or ``None`` without git.  The code hash
    identifies the code exactly either way."""
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  check=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    if os.environ.get("POSENC_COMMIT"):
        # the command that sent the tree names its commit: a copied tree may carry a .git
        # of another checkout, whose HEAD is not the code that runs (seen on the device
        # machine: it reported the session's first commit, dirty)
        return os.environ["POSENC_COMMIT"], None
    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None, None
    # the package (the model code lives there too) and the scripts, not the results
    status = git("status", "--porcelain", "--", "posenc", ":(glob)experiments/*.py")
    return commit, (None if status is None else bool(status))


def digest(params: dict, code: str) -> str:
    """The hash a unit is stored under: its parameters and the code hash.

    >>> digest({"lr": 1e-3}, "abc") == digest({"lr": 0.001}, "abc") != digest({"lr": 1e-3}, "abd")
    True
    """
    blob = json.dumps({"params": params, "code": code}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


class UnitStore:
    """Finished units: read from ``read`` folders and ``write`` itself, written to ``write``.

    ``jsonl=True`` appends every unit to ``write/units.jsonl`` (one line each, flushed and
    synced), so a run whose files must fit a few slots still keeps each unit the moment it
    ends; otherwise each unit is ``write/<key>.json``.
    """

    def __init__(self, write: Path | str, read: list[Path | str] | tuple = (), *,
                 jsonl: bool = False, code: str | None = None):
        self.write_dir = Path(write)
        self.jsonl = jsonl
        self.code = code or code_hash()
        self.commit, self.dirty = git_commit()
        self.units: dict[str, dict] = {}
        for folder in [*map(Path, read), self.write_dir]:
            self._read(folder)

    def _read(self, folder: Path) -> None:
        if not folder.is_dir():
            return
        for p in sorted(folder.glob("*.json")):
            try:
                u = json.loads(p.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(u, dict) and "key" in u and "digest" in u:
                self.units[u["key"] + "@" + u["digest"]] = u
        for p in sorted(folder.glob("*.jsonl")):
            for line in p.read_text().splitlines():
                try:
                    u = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a killed run
                if isinstance(u, dict) and "key" in u and "digest" in u:
                    self.units[u["key"] + "@" + u["digest"]] = u

    def digest(self, params: dict, code: str | None = None) -> str:
        """The digest of ``params`` under ``code`` (the store's own code hash by default;
        the CPU tier passes each unit's :func:`stage_code`)."""
        return digest(params, code or self.code)

    def get(self, key: str, params: dict, code: str | None = None) -> dict | None:
        """The stored unit ``key`` for these parameters and this code, or ``None``.

        A unit another process has written to ``write`` since this store was made is found
        too (``write/<key>.json`` is read again on a miss), so processes that share a unit
        folder never train the same unit twice in a row."""
        digest = self.digest(params, code)
        found = self.units.get(key + "@" + digest)
        if found is None and not self.jsonl:
            path = self.write_dir / f"{key}.json"
            try:
                u = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                return None
            if isinstance(u, dict) and u.get("key") == key and u.get("digest") == digest:
                self.units[key + "@" + digest] = found = u
        return found

    def put(self, key: str, params: dict, result: dict, code: str | None = None) -> dict:
        """Store a finished unit now; returns it as read back (string keys, like a cached
        unit's)."""
        code = code or self.code
        unit = {"key": key, "digest": self.digest(params, code), "params": params,
                "code": code, "commit": self.commit, "dirty": self.dirty,
                "machine": machine(), **result}
        text = json.dumps(unit)
        self.write_dir.mkdir(parents=True, exist_ok=True)
        if self.jsonl:
            with open(self.write_dir / "units.jsonl", "a") as f:
                # one line at a time where several processes share the file
                # (experiments/gpu_parallel.py)
                if fcntl is not None:
                    try:
                        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
                    except OSError:  # a file system without locks: append unlocked
                        pass
                f.write(text + "\n")
                f.flush()
                os.fsync(f.fileno())
        else:
            path = self.write_dir / f"{key}.json"
            tmp = path.with_suffix(".json.tmp")
            tmp.write_text(text)
            tmp.replace(path)
        unit = json.loads(text)
        self.units[key + "@" + unit["digest"]] = unit
        return unit


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` says."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """Where a unit ran: the CPU's model name, the instruction set PyTorch's CPU kernels
    use, and torch's version.  Floating-point summation order follows the kernels, so a unit
    re-run on a machine with another instruction set can differ in the last bits, and a
    trained model's losses past its training length by more (``experiments/recheck.py``)."""
    import torch

    return {"cpu": cpu_name(), "isa": torch.backends.cpu.get_cpu_capability(),
            "torch": torch.__version__}


class Budget:
    """A wall-clock budget of ``seconds`` from ``start`` (``None``: unlimited), with
    ``reserve`` seconds kept for writing the results at the end.

    >>> b = Budget(100.0, reserve=10.0, start=0.0, clock=lambda: 30.0)
    >>> b.left(), b.fits(60.0), b.fits(61.0)
    (60.0, True, False)
    """

    def __init__(self, seconds: float | None, *, reserve: float = 0.0,
                 start: float | None = None, clock=time.perf_counter):
        if seconds is not None and not seconds > 0:
            raise ValueError(f"seconds must be > 0 or None, got {seconds!r}")
        self.seconds, self.reserve, self.clock = seconds, reserve, clock
        self.start = clock() if start is None else start

    def left(self) -> float:
        if self.seconds is None:
            return float("inf")
        return self.seconds - self.reserve - (self.clock() - self.start)

    def fits(self, estimate: float) -> bool:
        """Whether a unit estimated to take ``estimate`` seconds still fits."""
        return estimate <= self.left()

    def deadline(self) -> float | None:
        """The clock value past which a unit must stop (``None``: no limit)."""
        if self.seconds is None:
            return None
        return self.start + self.seconds - self.reserve
