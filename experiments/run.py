"""Train small decoders with each positional encoding and measure them past their training length.

    python experiments/run.py                  the full CPU run -> experiments/results.{json,md}
    python experiments/run.py --quick          a tiny version (about a minute): checks the harness
    python experiments/run.py --quick --out DIR          write the results somewhere else
    python experiments/run.py --save-corpus experiments/.corpus/sympy.npz
                                               the prepared corpus as one file (3.5 MiB)
    python experiments/run.py --tier gpu --device cuda --corpus-file FILE --out DIR \
        --time-budget SECONDS                  the GPU tier, one budgeted call (GpuPlan)

``nox -s experiments`` runs the full CPU tier (see each unit's ``seconds`` for what it cost;
``--encodings`` lets two processes share the work, e.g. ``rope,alibi`` in one and the rest in
the other); the results record the commit, the code hash, the machine, the library
versions, every seed and the corpus hashes.  Every finished unit of
work is a file of its own under ``experiments/units/<tier>/`` (``--units``), keyed on the
configuration sections it depends on *and* on a hash of the code
(:mod:`posenc.analysis.experiments.units`), with the commit that produced it: commit them,
and a later run, here or on another machine, resumes instead of training again, while a
code change can never silently reuse a stale unit.  Model weights that later units need
stay in ``experiments/.cache/`` (retrained where missing).  The code that trains and
evaluates is :mod:`posenc.analysis.experiments`, the same code the chapter runs live.

The GPU tier (``--tier gpu``) is sized for one call on a lent accelerator: see
:class:`GpuPlan` (priorities, seeds stacked with vmap, bfloat16 autocast, steps sized to
``--time-budget``, each unit appended to ``<out>/units.jsonl`` the moment it ends).

The protocol (the full tier; ``--quick`` shrinks every number):

* **Corpus**: SymPy's sources, cleaned and split by file into training, validation (for
  tuning only) and test (every reported number); see ``corpus.py``.
* **Language modelling**: one model per encoding (NoPE, learned, sinusoidal, RoPE, ALiBi,
  T5 bias) trained on windows of ``train_length`` bytes.  Tuning on seed 0 and the
  validation split: a joint log-spaced grid of learning rate and embedding scale, extended
  past any edge where the optimum lands (``TUNING_GRID``); the best pair is the encoding's
  setting for every seed.  Evaluation on fixed test chunks: every length predicts the same
  target bytes (the last ``target`` of each chunk), so a longer length only adds history;
  also the mean over all positions of each window and the loss per block of positions.
* **RoPE scaling applied without training**: PI, static NTK (base times s^(d/(d-2))), YaRN
  and Llama 3.1 with one factor s for every length (as a deployed configuration is), and
  dynamic NTK with factor 1 (transformers' meaning: the base grows with the length read);
  and each of PI, NTK, YaRN and Llama 3.1 again with the factor matched to the length,
  s = n / L at each evaluation length n (``scaling_matched``; YaRN so applied is Peng et
  al.'s dynamic YaRN, NTK so applied equals dynamic NTK).
* **Targets where context pays**: every evaluation also reports the loss on the
  far-identifier bytes (:func:`posenc.analysis.experiments.corpus.far_identifier_mask`,
  a rule fixed before any result) and the loss of each chunk, for intervals over the text.
* **Fine-tuning at 4x the length**, the same steps with position interpolation and without
  it (the control).
* **References**: RoPE and ALiBi trained at 4x the length with the same bytes per step
  and the same steps: what longer context is worth on the fixed targets (and on the
  far-identifier ones) for a model trained to use it.
* **RoPE ablation**: base 500, 10^4 and 10^6 at head widths 16 and 64 (three seeds), so
  the wavelength explanation of RoPE's failure past ``L`` is tested.
* **Budget**: every encoding trained for half and twice the steps (three seeds), to show
  whether the ranking holds as training goes on.
* **Copy** (induction, string lengths varied in training, 200 symbols) and **passkey**
  (a key at several depths in random filler): trained short, tested up to 8x and 16x, with
  the embedding scale tuned on the language model and the task's rate grid (one rate in
  the CPU tier), exact match and per-symbol accuracy.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime as _dt
import json
import os
import platform
import sys
import time
from pathlib import Path

_START = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from posenc.analysis.experiments import corpus as C  # noqa: E402
from posenc.analysis.experiments.markdown import gpu_markdown, write_markdown  # noqa: E402
from posenc.analysis.experiments import train as T  # noqa: E402
from posenc.analysis.experiments.models import ENCODINGS, ModelConfig, TinyDecoder  # noqa: E402
from posenc.analysis.experiments.units import UnitStore, code_hash, git_commit  # noqa: E402

SCHEMA = 2

CPU = {
    "seeds": [0, 1, 2, 3, 4],
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2},
    "lm": {"train_length": 128, "steps": 800, "batch": 16, "lrs": [3e-3, 1e-2, 3e-2],
           "embed_scales": [1.0, 7.07, 50.0], "eval_factors": [1, 2, 4, 8, 16],
           "n_chunks": 128, "target": 64, "bucket": 128, "valid_chunks": 128},
    "lm_edge": {"lrs": []},
    "scaling": {"factor": 16, "types": ["pi", "ntk", "yarn", "llama3", "dynamic"]},
    "finetune": {"factor": 4, "steps": 200, "batch": 4, "lr": 1e-3},
    # every encoding, three seeds, half and twice the steps (issue 31's budget study)
    "budget": {"encodings": list(ENCODINGS), "seeds": [0, 1, 2], "multipliers": [0.5, 2.0]},
    # models trained at 4 L with the same bytes per step: what longer context is worth
    "references": {"encodings": ["rope", "alibi"], "factors": [4], "seeds": [0, 1, 2]},
    # RoPE's wavelength explanation tested: base and head width varied (three seeds)
    "ablation": {"bases": [500.0, 1e4, 1e6], "head_dims": [16, 64], "seeds": [0, 1, 2]},
    "copy": {"m": [4, 24], "eval_m": [8, 16, 24, 48, 96, 192], "steps": 1000, "batch": 64,
             "lrs": [3e-3], "n_eval": 64},
    "passkey": {"total": [16, 48], "eval_totals": [48, 96, 192, 384, 768],
                "depths": [0.1, 0.5, 0.9], "steps": 1000, "batch": 64, "lrs": [3e-3],
                "n_eval": 32},
}
GPU = {
    "seeds": [0, 1, 2, 3, 4],
    # 5.6M parameters (7 blocks of 12 d^2 plus the byte embeddings): the floor is 5M
    "model": {"d_model": 256, "n_heads": 8, "n_layers": 7},
    "lm": {"train_length": 512, "steps": 4000, "batch": 32, "lrs": [3e-4, 1e-3, 3e-3],
           "embed_scales": [1.0, 16.0], "eval_factors": [1, 2, 4, 8, 16], "n_chunks": 128,
           "target": 256, "bucket": 512, "valid_chunks": 128},
    "lm_edge": {"lrs": [1e-2]},
    "scaling": {"factor": 16, "types": ["pi", "ntk", "yarn", "llama3", "dynamic"]},
    "finetune": {"factor": 4, "steps": 500, "batch": 8, "lr": 3e-4},
    "budget": {"encodings": ["rope", "alibi"], "multipliers": [0.25, 0.5, 2.0]},
    "copy": {"m": [8, 64], "eval_m": [16, 64, 128, 256, 512], "steps": 3000, "batch": 32,
             "lrs": [3e-4, 1e-3], "n_eval": 128},
    "passkey": {"total": [32, 512], "eval_totals": [512, 1024, 2048, 4096, 8192],
                "depths": [0.1, 0.5, 0.9], "steps": 3000, "batch": 32, "lrs": [3e-4, 1e-3],
                "n_eval": 64},
    # the one-call plan (run_gpu): units in priority order inside a time budget
    "plan": {
        "first_seeds": [0, 1, 2],      # priority 1: every encoding, these seeds, stacked
        "more_seeds": [3, 4],          # priority 4: the other seeds
        "lr": 2e-3,                    # one rate for every encoding (no tuning in one call)
        # the CPU tier's chosen embedding scales, sqrt(d) where it chose sqrt(d)
        "embed_scale": {"nope": 16.0, "learned": 1.0, "sinusoidal": 16.0, "rope": 16.0,
                        "alibi": 1.0, "t5": 1.0},
        "max_steps": 4000, "min_steps": 200,
        "first_share": 0.55,           # priority 1 gets this share of the budget
        # priority 3: reference models trained at longer lengths, the same bytes per step
        "references": [["rope", 2048], ["alibi", 2048], ["rope", 8192], ["alibi", 8192]],
        "bf16": True,
        "vmap_off": [],                # encodings that loop over seeds (vmap is also checked)
        "merge_below": 1.3,            # stack all seeds at once if that costs < 1.3x
    },
}
QUICK = {
    "seeds": [0, 1],
    "model": {"d_model": 32, "n_heads": 2, "n_layers": 1},
    "lm": {"train_length": 32, "steps": 6, "batch": 4, "lrs": [1e-3, 3e-3],
           "embed_scales": [1.0, 4.0], "eval_factors": [1, 2], "n_chunks": 8, "target": 16,
           "bucket": 32, "valid_chunks": 8},
    "lm_edge": {"lrs": [1e-2]},
    "scaling": {"factor": 2, "types": ["pi", "ntk", "yarn", "llama3", "dynamic"]},
    "finetune": {"factor": 2, "steps": 2, "batch": 2, "lr": 1e-3},
    "budget": {"encodings": ["rope", "alibi"], "seeds": [0], "multipliers": [0.5, 2.0]},
    "references": {"encodings": ["rope", "alibi"], "factors": [2], "seeds": [0]},
    "ablation": {"bases": [500.0, 1e4], "head_dims": [16, 32], "seeds": [0]},
    "copy": {"m": [2, 4], "eval_m": [4, 8], "steps": 6, "batch": 4, "lrs": [1e-3, 3e-3],
             "n_eval": 8},
    "passkey": {"total": [12, 16], "eval_totals": [16, 32], "depths": [0.1, 0.9], "steps": 6,
                "batch": 4, "lrs": [1e-3, 3e-3], "n_eval": 4},
}
# The GPU tier's plan at a tiny size, so that its code path is tested on a CPU.
GPUQUICK = {
    **copy.deepcopy(QUICK),
    "model": {"d_model": 32, "n_heads": 2, "n_layers": 1},
    "lm": {**QUICK["lm"], "eval_factors": [1, 2, 4], "n_chunks": 8, "valid_chunks": 8},
    "scaling": {"factor": 4, "types": ["pi", "ntk", "yarn", "llama3", "dynamic"]},
    "plan": {"first_seeds": [0, 1], "more_seeds": [2], "lr": 3e-3,
             "embed_scale": {"nope": 4.0, "learned": 1.0, "sinusoidal": 4.0, "rope": 4.0,
                             "alibi": 1.0, "t5": 1.0},
             "max_steps": 8, "min_steps": 2, "first_share": 0.5,
             "references": [["rope", 64], ["alibi", 128]], "bf16": False,
             "vmap_off": [], "merge_below": None},
}
TIERS = {"cpu": CPU, "gpu": GPU, "quick": QUICK, "gpuquick": GPUQUICK}

# The joint tuning grid (seed 0, validation split): every learning rate of ``lm.lrs`` with
# every embedding scale of ``lm.embed_scales``, both log-spaced, extended by one point past
# any edge where an encoding's optimum lands (at most ``max_extensions`` rounds), so the
# optimum is inside.  50 is the scale at which this model's N(0, 0.02^2) token embeddings
# have entries of variance 1, as fairseq's N(0, 1/d) initialisation times its sqrt(d)
# scale gives: 1 / 0.02, for any d; 7.07 is its geometric midpoint with 1.
TUNING_GRID = {
    "cpu": {"extend_at_edge": True, "max_extensions": 2},
    "gpu": {"extend_at_edge": True, "max_extensions": 2},
    "quick": {"extend_at_edge": False, "max_extensions": 0},
}
for _tier, _grid in TUNING_GRID.items():
    TIERS[_tier]["tuning_grid"] = _grid


def scaling_parameters(kind: str, s: float, L: int, head_dim: int, base: float) -> dict:
    """``rope_parameters`` of each zero-shot scaling arm for factor ``s`` over length ``L``.

    ``ntk`` is the static NTK-aware rule: the base times ``s ** (d / (d - 2))`` for head
    width ``d``.  ``dynamic`` is transformers' dynamic NTK with factor 1, whose base grows
    with the length read: at a length ``n`` past ``L`` it equals the static rule for
    ``s = n / L`` (its factor is not ``s``: a factor ``s`` there would scale twice).
    """
    if kind == "pi":
        return {"rope_type": "linear", "factor": float(s)}
    if kind == "ntk":
        return {"rope_type": "default",
                "rope_theta": float(base * s ** (head_dim / (head_dim - 2)))}
    if kind == "yarn":
        return {"rope_type": "yarn", "factor": float(s), "original_max_position_embeddings": L}
    if kind == "llama3":
        return {"rope_type": "llama3", "factor": float(s), "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": L}
    if kind == "dynamic":
        return {"rope_type": "dynamic", "factor": 1.0}
    raise ValueError(f"kind must be one of pi, ntk, yarn, llama3, dynamic, got {kind!r}")


def matched_kinds(types) -> list[str]:
    """The rules that take a factor (``dynamic`` reads the length itself: its matched form
    is ``ntk``'s)."""
    return [k for k in types if k != "dynamic"]


def provenance(threads: int, device: str) -> dict:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit, dirty = git_commit()
    return {
        "commit": commit,
        "dirty": dirty,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"cpu": cpu, "cores": os.cpu_count(), "threads": threads, "device": device,
                    "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
                    "platform": platform.platform()},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "numpy": np.__version__, "posenc": package_version("posenc"),
                     "sympy": package_version("sympy")},
        "code": code_hash(),
    }


def package_version(name: str) -> str | None:
    """The installed distribution's version; where the package is importable but not
    installed as a distribution (a copied tree on ``PYTHONPATH``), its ``__version__``."""
    import importlib
    import importlib.metadata as md

    try:
        return md.version(name)
    except md.PackageNotFoundError:
        try:
            return str(getattr(importlib.import_module(name), "__version__", None))
        except ImportError:
            return None


class Runner:
    """Runs units of work once: each unit's result is kept in ``units`` (one JSON file per
    unit, keyed on everything it depends on and on the code), and model weights, where
    later units need them, under ``cache``.

    A unit's key names it; its stored parameters are the configuration sections its stage
    reads plus ``extra`` (a trained model's full settings; for a unit that reads a trained
    model, that model's digest), so a unit can never be reused for a model it did not see.
    ``encodings`` limits a process to some encodings' units (two processes can share one
    unit folder, each taking half).
    """

    def __init__(self, config: dict, cache: Path, device: str, progress: bool,
                 units: Path | None = None, corpus: C.Corpus | None = None,
                 encodings=ENCODINGS):
        self.config, self.device, self.progress = config, device, progress
        self.encodings = tuple(e for e in ENCODINGS if e in encodings)
        self.cache = cache
        self.cache.mkdir(parents=True, exist_ok=True)
        self.store = UnitStore(units if units is not None else cache / "units")
        self.corpus = corpus if corpus is not None else C.load_corpus()
        lm = config["lm"]
        self.L = lm["train_length"]
        self.lengths = [self.L * f for f in lm["eval_factors"]]
        self.chunks = C.eval_chunks(self.corpus.test, max_length=max(self.lengths),
                                    target=lm["target"], n_chunks=lm["n_chunks"])
        self.valid_chunks = C.eval_chunks(self.corpus.valid, max_length=self.L,
                                          target=lm["target"], n_chunks=lm["valid_chunks"])
        self.far = C.far_identifier_mask(self.corpus.test)
        self.seconds: dict[str, float] = {}  # every unit's own time, cached ones included
        self._trainers: dict[str, object] = {}  # how to rebuild a unit's missing weights
        self._digests: dict[str, str] = {}  # a trained model's unit digest, by key

    def _params(self, key: str, extra: dict | None = None) -> dict:
        """What unit ``key`` depends on: the model and seeds always; the language-model
        section for every LM-derived unit; a task's own section for its units; the stage's
        own section; and ``extra``.  The unit store adds the code hash."""
        stage = key.split("-")[0].replace("grid", "")
        sections = ["seeds", "model"]
        # a task depends on the language model too: it takes the LM's tuned embedding scale
        sections += [stage, "lm"] if stage in ("copy", "passkey") else ["lm"]
        own = {"scale": "scaling", "scalematched": "scaling", "lmedge": "lm_edge",
               "finetune": "finetune", "budget": "budget", "ref": "references",
               "abl": "ablation"}.get(stage)
        if own is not None:
            sections.append(own)
        return {"unit": key, **{k: self.config[k] for k in sections}, **(extra or {})}

    def unit(self, key: str, fn, extra: dict | None = None):
        params = self._params(key, extra)
        out = self.store.get(key, params)
        if out is None:
            t0 = time.perf_counter()
            res = fn()
            res["seconds"] = time.perf_counter() - t0
            out = self.store.put(key, params, res)
            print(f"  {key}: {out['seconds']:.0f} s", flush=True)
        self.seconds[key] = out["seconds"]
        return out

    def model_path(self, key: str) -> Path:
        return self.cache / f"{key}-{self._digests[key]}.pt"

    def load(self, cfg: ModelConfig, key: str) -> TinyDecoder:
        if not self.model_path(key).exists():  # the unit is stored, its weights are not
            self._trainers[key]()
        model = TinyDecoder(cfg).to(self.device)
        model.load_state_dict(torch.load(self.model_path(key), map_location=self.device))
        model.eval()
        return model

    def cfg(self, encoding: str, scale: float = 1.0, train_length: int | None = None,
            **model) -> ModelConfig:
        return ModelConfig(encoding, train_length=train_length or self.L, embed_scale=scale,
                           **{**self.config["model"], **model})

    # -- language modelling --------------------------------------------------------------

    def lm_train(self, key: str, cfg: ModelConfig, seed: int, lr: float, steps: int,
                 batch: int | None = None) -> dict:
        """Train (kept: weights and validation loss at the training length)."""
        lm = self.config["lm"]
        batch = batch or lm["batch"]
        extra = {"trained": {"cfg": {k: v for k, v in dataclasses.asdict(cfg).items()
                                     if k != "rope_parameters"},
                             "seed": seed, "lr": lr, "steps": steps, "batch": batch}}
        self._digests[key] = self.store.digest(self._params(key, extra))

        def fn():
            res = T.train_lm(cfg, self.corpus.train, steps=steps, batch=batch, lr=lr,
                             seed=seed, progress=self.progress, device=self.device)
            torch.save(res.model.state_dict(), self.model_path(key))
            valid = T.eval_lm(res.model, self.corpus.valid, self.valid_chunks, [self.L],
                              bucket=lm["bucket"])[self.L]
            return {"key": key, "encoding": cfg.encoding, "seed": seed, "lr": lr,
                    "embed_scale": cfg.embed_scale, "steps": steps, "batch": batch,
                    "train_length": cfg.train_length, "rope_base": cfg.rope_base,
                    "head_dim": cfg.d_model // cfg.n_heads, "losses": res.losses,
                    "train_seconds": res.seconds, "valid": valid["target"]}
        self._trainers[key] = fn
        return self.unit(key, fn, extra)

    def lm_test(self, run: dict, cfg: ModelConfig | None = None) -> dict:
        """``run`` with its losses on the test chunks at every length it can be asked
        (``"test"``: fixed targets, whole windows, per block, far-identifier targets)."""
        lm = self.config["lm"]
        cfg = cfg or self.cfg(run["encoding"], run["embed_scale"])
        lengths = [n for n in self.lengths if n >= cfg.train_length]

        def fn():
            model = self.load(cfg, run["key"])
            return {"test": T.eval_lm(model, self.corpus.test, self.chunks, lengths,
                                      bucket=lm["bucket"], far=self.far)}
        got = self.unit(f"test-{run['key']}", fn, {"model": self._digests[run["key"]]})
        return {**run, "test": got["test"]}

    @staticmethod
    def _beyond(axis: list, value, up: bool):
        """The next log-spaced point past an edge of a sorted grid axis."""
        ratio = (axis[-1] / axis[-2]) if up else (axis[1] / axis[0])
        nxt = value * ratio if up else value / ratio
        return float(f"{nxt:.3g}")

    def grid(self, enc: str) -> tuple[dict, dict]:
        """The joint grid on seed 0: every rate with every embedding scale, extended past
        an edge where the optimum lands (``tuning_grid``); returns the runs and the best."""
        lm, tg = self.config["lm"], self.config["tuning_grid"]
        lrs, scales = sorted(lm["lrs"]), sorted(lm["embed_scales"])
        runs: dict[tuple[float, float], dict] = {}
        for round_ in range(1 + int(tg["max_extensions"])):
            for lr in lrs:
                for sc in scales:
                    if (lr, sc) not in runs:
                        runs[(lr, sc)] = self.lm_train(f"lmgrid-{enc}-lr{lr:g}-x{sc:g}",
                                                       self.cfg(enc, sc), 0, lr, lm["steps"])
            best = min(runs.values(), key=lambda g: g["valid"])
            if not tg["extend_at_edge"] or round_ == int(tg["max_extensions"]):
                break
            grew = False
            for axis, v in ((lrs, best["lr"]), (scales, best["embed_scale"])):
                if len(axis) > 1 and v == axis[-1]:
                    axis.append(self._beyond(axis, v, True))
                    grew = True
                elif len(axis) > 1 and v == axis[0]:
                    axis.insert(0, self._beyond(axis, v, False))
                    grew = True
            if not grew:
                break
        return runs, best

    def lm(self) -> dict:
        lm = self.config["lm"]
        grid, chosen, runs = [], {}, []
        for enc in self.encodings:
            cands, pick = self.grid(enc)
            chosen[enc] = {"lr": pick["lr"], "embed_scale": pick["embed_scale"]}
            # on the test chunks too: the best rate at each embedding scale (the scale's
            # effect, each at its own best rate)
            tested = {min((g for g in cands.values() if g["embed_scale"] == sc),
                          key=lambda g: g["valid"])["key"]
                      for sc in {g["embed_scale"] for g in cands.values()}}
            grid += [self.lm_test(g) if g["key"] in tested else g for g in cands.values()]
            runs.append(next(g for g in grid if g["key"] == pick["key"]))
            for seed in self.config["seeds"][1:]:
                runs.append(self.lm_test(self.lm_train(
                    self.lm_key(enc, seed, chosen[enc]), self.cfg(enc, pick["embed_scale"]),
                    seed, pick["lr"], lm["steps"])))
        return {"grid": grid, "chosen": chosen, "runs": runs}

    def lm_edge(self, chosen: dict) -> list:
        """Where an encoding's best rate is the largest of the grid, train seed 0 at the
        rates of ``lm_edge`` (embedding scale 1, validation loss only)."""
        lm, out = self.config["lm"], []
        for enc in chosen:
            if chosen[enc]["lr"] != max(lm["lrs"]):
                continue
            for lr in self.config["lm_edge"]["lrs"]:
                out.append(self.lm_train(f"lmedge-{enc}-lr{lr:g}-x1", self.cfg(enc), 0, lr,
                                         lm["steps"]))
        return out

    @staticmethod
    def lm_key(enc: str, seed: int, setting: dict) -> str:
        if seed == 0:
            return f"lmgrid-{enc}-lr{setting['lr']:g}-x{setting['embed_scale']:g}"
        return f"lm-{enc}-lr{setting['lr']:g}-x{setting['embed_scale']:g}-s{seed}"

    def _rope_models(self, chosen: dict):
        """The trained RoPE models of every seed: (seed, key, cfg)."""
        setting = chosen["rope"]
        cfg = self.cfg("rope", setting["embed_scale"])
        return [(seed, self.lm_key("rope", seed, setting), cfg)
                for seed in self.config["seeds"]]

    def scaling(self, chosen: dict) -> list:
        sc, lm = self.config["scaling"], self.config["lm"]
        out = []
        for seed, key, cfg in self._rope_models(chosen):
            head = cfg.d_model // cfg.n_heads
            for kind in sc["types"]:
                def fn(kind=kind, key=key, cfg=cfg, seed=seed, head=head):
                    model = self.load(cfg, key)
                    p = scaling_parameters(kind, sc["factor"], self.L, head, cfg.rope_base)
                    model.set_rope(p)
                    return {"kind": kind, "seed": seed, "factor": sc["factor"],
                            "rope_parameters": p,
                            "test": T.eval_lm(model, self.corpus.test, self.chunks,
                                              self.lengths, bucket=lm["bucket"],
                                              far=self.far)}
                out.append(self.unit(f"scale-{kind}-s{seed}", fn,
                                     {"model": self._digests[key]}))
        return out

    def scaling_matched(self, chosen: dict) -> list:
        """Every rule with its factor matched to the length read: ``s = n / L`` at each
        evaluation length ``n > L`` (YaRN so applied is Peng et al.'s dynamic YaRN; NTK so
        applied equals transformers' dynamic NTK, the ``dynamic`` arm of
        :meth:`scaling`)."""
        sc, lm = self.config["scaling"], self.config["lm"]
        out = []
        for seed, key, cfg in self._rope_models(chosen):
            head = cfg.d_model // cfg.n_heads
            for kind in matched_kinds(sc["types"]):
                def fn(kind=kind, key=key, cfg=cfg, seed=seed, head=head):
                    model = self.load(cfg, key)
                    test, params = {}, {}
                    for n in self.lengths:
                        if n <= self.L:
                            continue
                        p = scaling_parameters(kind, n / self.L, self.L, head, cfg.rope_base)
                        model.set_rope(p)
                        params[str(n)] = p
                        test.update(T.eval_lm(model, self.corpus.test, self.chunks, [n],
                                              bucket=lm["bucket"], far=self.far))
                    return {"kind": kind, "seed": seed, "factor": "n/L",
                            "rope_parameters": params, "test": test}
                out.append(self.unit(f"scalematched-{kind}-s{seed}", fn,
                                     {"model": self._digests[key]}))
        return out

    def finetune(self, chosen: dict) -> list:
        ft, lm = self.config["finetune"], self.config["lm"]
        out = []
        for seed, key, cfg in self._rope_models(chosen):
            for arm in ("pi", "plain"):
                def fn(arm=arm, seed=seed, key=key, cfg=cfg):
                    model = self.load(cfg, key)
                    if arm == "pi":
                        model.set_rope({"rope_type": "linear", "factor": float(ft["factor"])})
                    res = T.train_lm(cfg, self.corpus.train, steps=ft["steps"],
                                     batch=ft["batch"], lr=ft["lr"], seed=1000 + seed,
                                     progress=self.progress, model=model,
                                     length=self.L * ft["factor"])
                    return {"arm": arm, "seed": seed, "losses": res.losses,
                            "train_seconds": res.seconds,
                            "test": T.eval_lm(res.model, self.corpus.test, self.chunks,
                                              self.lengths, bucket=lm["bucket"])}
                out.append(self.unit(f"finetune-{arm}-s{seed}", fn,
                                     {"model": self._digests[key]}))
        return out

    def budget(self, chosen: dict) -> list:
        """Every listed encoding at fewer and more steps than the protocol's, for the
        listed seeds at its tuned setting: does the ranking hold as training goes on?"""
        b, lm = self.config["budget"], self.config["lm"]
        out = []
        for enc in b["encodings"]:
            if enc not in chosen:
                continue
            setting = chosen[enc]
            for mult in b["multipliers"]:
                steps = max(1, int(round(lm["steps"] * mult)))
                for seed in b.get("seeds", [0]):
                    out.append(self.lm_test(self.lm_train(
                        f"budget-{enc}-x{mult:g}-s{seed}",
                        self.cfg(enc, setting["embed_scale"]), seed, setting["lr"], steps)))
        return out

    def references(self, chosen: dict) -> list:
        """Models trained at ``f`` times the training length with the same bytes per step
        (the batch divided by ``f``) and the same steps, at each encoding's tuned setting:
        what longer context is worth on the fixed targets when a model is trained for it."""
        rf, lm = self.config["references"], self.config["lm"]
        out = []
        for enc in rf["encodings"]:
            if enc not in chosen:
                continue
            setting = chosen[enc]
            for f in rf["factors"]:
                n = self.L * int(f)
                cfg = self.cfg(enc, setting["embed_scale"], train_length=n)
                for seed in rf["seeds"]:
                    run = self.lm_train(f"ref-{enc}-L{n}-s{seed}", cfg, seed, setting["lr"],
                                        lm["steps"], batch=max(1, lm["batch"] // int(f)))
                    out.append(self.lm_test(run, cfg))
        return out

    def ablation(self, chosen: dict) -> list:
        """RoPE with its base and head width varied (the model's width fixed, so a wider
        head means fewer heads), each at RoPE's tuned setting: is the failure past ``L``
        the wavelengths' doing?  The protocol's own model (base 10^4 at its head width)
        is not trained again: its seeds are the main runs."""
        ab, lm = self.config["ablation"], self.config["lm"]
        if "rope" not in chosen:
            return []
        setting, d = chosen["rope"], self.config["model"]["d_model"]
        main_head = d // self.config["model"]["n_heads"]
        out = []
        for hd in ab["head_dims"]:
            for base in ab["bases"]:
                if hd == main_head and base == ModelConfig.rope_base:
                    continue
                cfg = self.cfg("rope", setting["embed_scale"], rope_base=float(base),
                               n_heads=d // int(hd))
                for seed in ab["seeds"]:
                    run = self.lm_train(f"abl-rope-b{base:g}-h{hd}-s{seed}", cfg, seed,
                                        setting["lr"], lm["steps"])
                    out.append(self.lm_test(run, cfg))
        return out

    # -- synthetic tasks -----------------------------------------------------------------

    def task(self, name: str, lm_chosen: dict) -> dict:
        """Train and test one synthetic task; each encoding keeps the embedding scale tuned
        on the language model (``lm_chosen``)."""
        tc = self.config[name]
        if name == "copy":
            maker = T.copy_maker(tuple(tc["m"]))
            train_length = 2 * tc["m"][1] + 1
        else:
            maker = T.passkey_maker(tuple(tc["total"]))
            train_length = tc["total"][1] - 1

        def evaluate(model, seed):
            if name == "copy":
                return T.eval_copy(model, tc["eval_m"], n=tc["n_eval"], seed=seed)
            return T.eval_passkey(model, tc["eval_totals"], tc["depths"], n=tc["n_eval"],
                                  seed=seed)

        def valid(model):
            # sequences drawn like the training ones, from a stream no training batch uses
            rng = np.random.default_rng(99_999)
            from posenc.analysis.experiments.tasks import score
            return score(model, lambda b: maker(b, rng), tc["n_eval"])["symbol"]

        def run_one(key, enc, seed, lr):
            def fn():
                cfg = self.cfg(enc, lm_chosen[enc]["embed_scale"], train_length)
                res = T.train_task(cfg, maker, steps=tc["steps"], batch=tc["batch"], lr=lr,
                                   seed=seed, progress=self.progress, device=self.device,
                                   desc=name)
                return {"encoding": enc, "seed": seed, "lr": lr, "losses": res.losses,
                        "train_seconds": res.seconds, "valid": valid(res.model),
                        "test": evaluate(res.model, seed)}
            return self.unit(key, fn, {"embed_scale": lm_chosen[enc]["embed_scale"]})

        grid, chosen, runs = [], {}, []
        for enc in self.encodings:
            cands = [run_one(f"{name}grid-{enc}-lr{lr:g}", enc, 0, lr) for lr in tc["lrs"]]
            grid += cands
            best = max(cands, key=lambda r: r["valid"])
            chosen[enc] = {"lr": best["lr"]}
            runs.append(best)
            for seed in self.config["seeds"][1:]:
                runs.append(run_one(f"{name}-{enc}-s{seed}", enc, seed, best["lr"]))
        return {"grid": grid, "chosen": chosen, "runs": runs}


STAGES = ("copy", "passkey")


def run(config: dict, *, cache: Path, device: str, progress: bool,
        stages=STAGES, units: Path | None = None, corpus: C.Corpus | None = None,
        encodings=ENCODINGS) -> dict:
    """Run (or read from the unit store) the protocol's units in priority order: the tuned
    language models and their seeds, RoPE scaling without training (fixed and matched
    factors), the longer-trained references, the RoPE ablation, the budget study, the
    fine-tuning, the tasks named in ``stages``, the rate edge check.  ``encodings`` limits
    the run to some encodings' units (RoPE's units come with ``"rope"``)."""
    r = Runner(config, cache, device, progress, units=units, corpus=corpus,
               encodings=encodings)
    lm = r.lm()
    chosen = lm["chosen"]
    rope = "rope" in chosen
    body = {
        "corpus": r.corpus.provenance(),
        "chunks": {"n": int(r.chunks.ends.size), "files": int(np.unique(r.chunks.files).size),
                   "target": r.chunks.target, "max_length": r.chunks.max_length,
                   "target_bytes": int(r.chunks.ends.size * r.chunks.target)},
        "lm": lm,
        "scaling": r.scaling(chosen) if rope else [],
        "scaling_matched": r.scaling_matched(chosen) if rope else [],
        "references": r.references(chosen),
        "ablation": r.ablation(chosen),
        "budget": r.budget(chosen),
        "finetune": r.finetune(chosen) if rope else [],
        "copy": r.task("copy", chosen) if "copy" in stages else None,
        "passkey": r.task("passkey", chosen) if "passkey" in stages else None,
        "lm_edge": r.lm_edge(chosen),
        "far_targets": {"bytes": int(sum(r.far[e - r.chunks.target:e].sum()
                                         for e in r.chunks.ends)),
                        "of": int(r.chunks.ends.size * r.chunks.target),
                        "gap": C.FAR_GAP, "min_len": C.FAR_MIN_LEN},
    }
    stage_s: dict[str, float] = {}
    for key, sec in r.seconds.items():
        stage = key.split("-")[0].replace("grid", "")
        stage_s[stage] = stage_s.get(stage, 0.0) + sec
    body["stage_seconds"] = stage_s
    body["unit_seconds"] = sum(r.seconds.values())
    return body


# -- the GPU tier: one device call, units in priority order inside a time budget -------------

class GpuPlan:
    """The protocol for one call on a lent accelerator (``--tier gpu``).

    Units run in priority order, each configuration's seeds trained together
    (:mod:`posenc.analysis.experiments.stacked`), and every finished unit is appended to
    the unit store at once, so a call cut short keeps all it finished.  A unit is started
    only when its estimated time (steps times the measured step time, plus its
    evaluation) fits what is left of the budget, and training stops at the budget's
    deadline (the unit is then dropped, never kept half-trained).

    1. every encoding's language model at the training length, ``first_seeds``;
    2. RoPE scaling applied to those models without training: every rule with one factor
       for all lengths (``fixed``) and with ``s = n / L`` per length (``matched``);
    3. reference models trained at longer lengths (the same bytes per step), to measure
       what longer context is worth on these targets;
    4. the other seeds of every encoding.

    The steps of every language model are the same: ``--steps``, or, with a budget and no
    ``--steps``, as many (a multiple of 50 in ``[min_steps, max_steps]``) as let priority 1
    take ``first_share`` of the budget at the step times measured at the start.
    """

    def __init__(self, config: dict, corpus: C.Corpus, store: UnitStore, *, device: str,
                 budget, steps: int | None, log=print, use_vmap: bool = True):
        from posenc.analysis.experiments import stacked as S

        self.S = S
        self.config, self.corpus, self.store, self.device = config, corpus, store, device
        self.budget, self.log = budget, log
        self.plan = config["plan"]
        lm = config["lm"]
        self.L = lm["train_length"]
        self.lengths = [self.L * f for f in lm["eval_factors"]]
        self.chunks = C.eval_chunks(corpus.test, max_length=max(self.lengths),
                                    target=lm["target"], n_chunks=lm["n_chunks"])
        self.valid_chunks = C.eval_chunks(corpus.valid, max_length=self.L,
                                          target=lm["target"], n_chunks=lm["valid_chunks"])
        self.far = C.far_identifier_mask(corpus.test)
        self.bf16 = bool(self.plan["bf16"]) and device != "cpu"
        self.use_vmap = use_vmap
        self.step_time: dict[tuple[str, int, int], float] = {}
        self.first: list[int] = list(self.plan["first_seeds"])
        self.eval_time = 0.0
        self.steps = steps
        self.vmap_ok: dict[str, bool] = {}
        self.keys: list[tuple[str, dict]] = []  # every unit of the plan, in order
        self.skipped: list[str] = []
        self.errors: list[dict] = []
        self.after_group = None

    # -- pieces ----------------------------------------------------------------------------

    def cfg(self, enc: str, length: int | None = None) -> ModelConfig:
        return ModelConfig(enc, train_length=length or self.L,
                           embed_scale=float(self.plan["embed_scale"][enc]),
                           **self.config["model"])

    def batch(self, length: int) -> int:
        """The batch at ``length``: the same bytes per step as at the training length."""
        return max(1, self.config["lm"]["batch"] * self.L // length)

    def vmap_for(self, enc: str) -> bool:
        """Whether ``enc`` trains under vmap: asked for, and checked once on this device
        against the per-seed loop (:func:`~posenc.analysis.experiments.stacked.vmap_agrees`)."""
        if not self.use_vmap or enc in self.plan["vmap_off"]:
            return False
        if enc not in self.vmap_ok:
            stack = self.S.build(self.cfg(enc), self.plan["first_seeds"][:2], self.device)
            ok, why = self.S.vmap_agrees(stack, self.corpus.train, batch=4, bf16=self.bf16)
            self.vmap_ok[enc] = ok
            if not ok:
                self.log(f"  {enc}: vmap does not agree with the per-seed loop here, looping "
                         f"({why})")
        return self.vmap_ok[enc]

    def choose_steps(self) -> int:
        p = self.plan
        if self.steps is not None:
            return self.steps
        per_step = sum(self.measure(e, self.L, self.first) for e in ENCODINGS)
        left = self.budget.left()
        if left == float("inf"):
            return int(p["max_steps"])
        room = p["first_share"] * left - len(ENCODINGS) * max(self.eval_time, 3.0)
        steps = int(room / per_step // 50 * 50)
        return max(int(p["min_steps"]), min(int(p["max_steps"]), steps))

    def lm_params(self, enc: str, length: int, seed: int, steps: int) -> dict:
        lm = self.config["lm"]
        return {"model": self.config["model"], "encoding": enc, "train_length": length,
                "seed": seed, "steps": steps, "batch": self.batch(length),
                "lr": self.plan["lr"], "embed_scale": float(self.plan["embed_scale"][enc]),
                "eval": {"lengths": [n for n in self.lengths if n >= length],
                         "n_chunks": lm["n_chunks"], "target": lm["target"],
                         "bucket": lm["bucket"], "valid_chunks": lm["valid_chunks"],
                         "far": [C.FAR_GAP, C.FAR_MIN_LEN]},
                "bf16": self.bf16}

    def _fits(self, name: str, estimate: float) -> bool:
        if self.budget.fits(estimate):
            return True
        self.skipped.append(name)
        self.log(f"  skip {name}: needs about {estimate:.0f} s, {self.budget.left():.0f} s "
                 "left")
        return False

    def lm_group(self, enc: str, length: int, seeds, steps: int, *, keep: bool = False):
        """Train ``seeds`` of one encoding at ``length`` together, evaluate, store."""
        keys = [(f"lm-{enc}-L{length}-s{s}", self.lm_params(enc, length, s, steps))
                for s in seeds]
        self.keys += keys
        if all(self.store.get(k, p) is not None for k, p in keys) and not keep:
            return None
        name = f"lm-{enc}-L{length}-s{','.join(map(str, seeds))}"
        if not self._fits(name, steps * min(self.step_time.values(), default=0.0)):
            return None  # no time left even at the fastest step measured: do not measure
        t_step = self.measure(enc, length, seeds)
        if not self._fits(name, steps * t_step + self.eval_time + 1.0):
            return None
        cfg = self.cfg(enc, length)
        stack = self.S.build(cfg, seeds, self.device)
        t0 = time.perf_counter()
        try:
            self.S.train_lm(stack, self.corpus.train, steps=steps, batch=self.batch(length),
                            lr=self.plan["lr"], length=length, bf16=self.bf16,
                            deadline=self.budget.deadline(), use_vmap=self.vmap_for(enc))
        except TimeoutError as e:
            self.skipped.append(name)
            self.log(f"  {name}: stopped, {e}")
            return None
        train_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        lengths = [n for n in self.lengths if n >= length]
        test = self.evaluate(enc, stack, self.corpus.test, self.chunks, lengths, self.far)
        # validation (for tuning) at the training length of the main models
        valid = self.evaluate(enc, stack, self.corpus.valid, self.valid_chunks, [self.L],
                              None)
        eval_s = time.perf_counter() - t0
        self.eval_time = max(self.eval_time, eval_s)
        for i, (key, params) in enumerate(keys):
            self.store.put(key, params, {
                "encoding": enc, "seed": seeds[i], "train_length": length, "steps": steps,
                "losses": [(st, ls[i]) for st, ls in stack.losses],
                "train_seconds": train_s, "eval_seconds": eval_s, "stacked": len(seeds),
                "vmap": self.vmap_for(enc), "valid": valid[i][self.L]["target"],
                "test": test[i]})
        self.log(f"  {name}: {steps} steps in {train_s:.0f} s ({1000 * train_s / steps:.1f} "
                 f"ms/step), evaluated in {eval_s:.0f} s; loss at {length}: "
                 + ", ".join(f"{t[length]['target']:.3f}" for t in test))
        return stack

    def evaluate(self, enc: str, stack, split, chunks, lengths, far) -> list[dict]:
        """The stack's losses; under vmap where the training check passed, and if vmap
        fails at some length (another attention kernel may serve long inputs), again with
        the per-seed loop."""
        kw = dict(bucket=self.config["lm"]["bucket"], far=far, bf16=self.bf16)
        if self.vmap_for(enc):
            try:
                return self.S.eval_lm(stack, split, chunks, lengths, use_vmap=True, **kw)
            except (RuntimeError, ValueError) as e:
                self.log(f"  {enc}: evaluation under vmap failed ({str(e)[:300]}); looping")
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
        return self.S.eval_lm(stack, split, chunks, lengths, use_vmap=False, **kw)

    def scaling_arms(self) -> list[tuple[str, str]]:
        types = self.config["scaling"]["types"]
        return ([(k, "fixed") for k in types]
                + [(k, "matched") for k in matched_kinds(types)])

    def scaling(self, stack, seeds, steps: int) -> None:
        """Priority 2: every scaling rule on the RoPE models, fixed and matched factors."""
        sc = self.config["scaling"]
        cfg = self.cfg("rope")
        head = cfg.d_model // cfg.n_heads
        base_params = self.lm_params("rope", self.L, 0, steps)
        for kind, mode in self.scaling_arms():
            keys = [(f"scale-{kind}-{mode}-s{s}",
                     {**base_params, "seed": s, "kind": kind, "mode": mode,
                      "factor": sc["factor"] if mode == "fixed" else "n/L"}) for s in seeds]
            self.keys += keys
            if all(self.store.get(k, p) is not None for k, p in keys):
                continue
            if stack is None:
                stack = self.lm_group("rope", self.L, seeds, steps, keep=True)
                if stack is None:
                    return
            if not self._fits(f"scale-{kind}-{mode}", self.eval_time + 1.0):
                return
            t0 = time.perf_counter()
            test: list[dict] = [{} for _ in seeds]
            used = {}
            lengths = self.lengths if mode == "fixed" else [n for n in self.lengths
                                                             if n > self.L]
            for n in lengths:
                s_n = sc["factor"] if mode == "fixed" else n / self.L
                params = scaling_parameters(kind, s_n, self.L, head, cfg.rope_base)
                used[str(n)] = params
                self.S.set_rope(stack, params)
                res = self.evaluate("rope", stack, self.corpus.test, self.chunks, [n],
                                    self.far)
                for i in range(len(seeds)):
                    test[i].update(res[i])
            self.S.set_rope(stack, None)
            sec = time.perf_counter() - t0
            for i, (key, params) in enumerate(keys):
                self.store.put(key, params, {"kind": kind, "mode": mode, "seed": seeds[i],
                                             "rope_parameters": used, "test": test[i],
                                             "eval_seconds": sec})
            self.log(f"  scale {kind} {mode}: {sec:.0f} s; at {max(lengths)}: "
                     + ", ".join(f"{t[max(lengths)]['target']:.3f}" for t in test))

    def seeds_for_first(self) -> tuple[list[int], list[int]]:
        """``first_seeds`` and ``more_seeds``; all of them at once where stacking them all
        costs under ``merge_below`` times the step of ``first_seeds`` alone (measured on
        RoPE): on a device that small models leave idle, more seeds are nearly free."""
        p = self.plan
        first, more = list(p["first_seeds"]), list(p["more_seeds"])
        limit = p.get("merge_below")
        if more and limit:
            t_first = self.measure("rope", self.L, first)
            t_all = self.measure("rope", self.L, first + more)
            if t_all < limit * t_first:
                self.log(f"  all {len(first + more)} seeds at once: {1000 * t_all:.1f} ms per "
                         f"step against {1000 * t_first:.1f} ms for {len(first)}")
                return first + more, []
        return first, more

    def measure(self, enc: str, length: int, seeds) -> float:
        """Seconds per training step of ``seeds`` stacked (after two warm-up steps)."""
        key = (enc, length, len(seeds))
        if key not in self.step_time:
            stack = self.S.build(self.cfg(enc, length), seeds, self.device)
            kw = dict(batch=self.batch(length), lr=1e-4, length=length, bf16=self.bf16,
                      use_vmap=self.vmap_for(enc))
            self.S.train_lm(stack, self.corpus.train, steps=2, **kw)  # type: ignore[arg-type]
            t0 = time.perf_counter()
            self.S.train_lm(stack, self.corpus.train, steps=3, **kw)  # type: ignore[arg-type]
            self.step_time[key] = (time.perf_counter() - t0) / 3
            self.log(f"  step time {enc} at {length}, {len(seeds)} seeds: "
                     f"{1000 * self.step_time[key]:.1f} ms")
        return self.step_time[key]

    def run(self) -> None:
        p = self.plan
        first, more = self.seeds_for_first()
        self.first = first
        steps = self.steps = self.choose_steps()
        self.log(f"language models: {steps} steps each, {len(first)} seeds stacked, "
                 f"{self.budget.left():.0f} s left")
        rope_stack = None
        for enc in ENCODINGS:
            stack = self.guard(f"lm-{enc}", self.lm_group, enc, self.L, first, steps)
            if enc == "rope":
                rope_stack = stack
        self.guard("scaling", self.scaling, rope_stack, first, steps)
        rope_stack = None
        for enc, length in p["references"]:
            self.guard(f"lm-{enc}-L{length}", self.lm_group, enc, int(length), first, steps)
        if more:
            for enc in ENCODINGS:
                self.guard(f"lm-{enc}-more", self.lm_group, enc, self.L, more, steps)

    def guard(self, name: str, fn, *args):
        """Run one group; an error (out of memory included) is logged and recorded, and the
        plan goes on with the next group, so one failure does not cost the call."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - one shot on the device: keep going
            import traceback

            self.errors.append({"group": name, "error": f"{type(e).__name__}: {e}"[:2000],
                                "traceback": traceback.format_exc()[-4000:]})
            self.log(f"  {name} failed: {type(e).__name__}: {str(e)[:500]}")
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            return None
        finally:
            if self.after_group is not None:
                self.after_group()  # the assembled results, current after every group

    def results(self) -> dict:
        """Every unit of the plan that is stored (finished in this call or an earlier one)."""
        units = [u for k, prm in self.keys if (u := self.store.get(k, prm)) is not None]
        return {"steps": self.steps,
                "step_ms": {f"{e}@{n}x{k}": 1000 * t for (e, n, k), t in
                            self.step_time.items()},
                "vmap": self.vmap_ok, "first_seeds": self.first,
                "skipped": self.skipped, "errors": self.errors,
                "far_targets": self.far_share(), "units": units}

    def far_share(self) -> dict:
        m = np.stack([self.far[e - self.chunks.target:e] for e in self.chunks.ends])
        return {"rule": f"identifier bytes after the first, of identifiers of >= "
                        f"{C.FAR_MIN_LEN} characters (not keywords) whose previous "
                        f"occurrence in the file starts > {C.FAR_GAP} bytes back",
                "bytes": int(m.sum()), "of": int(m.size)}


def run_gpu(config: dict, args, corpus: C.Corpus, tier: str) -> int:
    from posenc.analysis.experiments.units import Budget

    start = time.perf_counter()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    read = [ROOT / "experiments" / "units" / tier] + list(args.resume_from)
    store = UnitStore(args.units or out, read, jsonl=True)
    budget = Budget(args.time_budget, reserve=args.reserve, start=_START)
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    plan = GpuPlan(config, corpus, store, device=args.device, budget=budget,
                   steps=args.steps, use_vmap=not args.no_vmap)

    def write():
        results = {"schema": 3, "tier": tier, "provenance": provenance(args.threads,
                                                                       args.device),
                   "config": config, "corpus": corpus.provenance(),
                   "chunks": {"n": int(plan.chunks.ends.size),
                              "files": int(np.unique(plan.chunks.files).size),
                              "target": plan.chunks.target,
                              "max_length": plan.chunks.max_length},
                   **plan.results(), "seconds": time.perf_counter() - _START}
        (out / "results.json").write_text(json.dumps(results) + "\n")
        (out / "results.md").write_text(gpu_markdown(results))

    if args.assemble_only:
        # every unit the store holds (this code's or not), assembled without training
        units = sorted(store.units.values(), key=lambda u: u["key"])
        steps = sorted({u["steps"] for u in units if "steps" in u})
        plan.results = lambda: {  # type: ignore[method-assign]
            "steps": steps[0] if len(steps) == 1 else steps, "step_ms": {}, "vmap": {},
            "first_seeds": None, "skipped": [], "errors": [],
            "far_targets": plan.far_share(), "units": units}
        write()
        print(f"assembled {len(units)} units into {out / 'results.json'}")
        return 0
    plan.after_group = write
    try:
        plan.run()
    finally:
        write()
    print(f"wrote {out / 'results.json'} ({len(plan.results()['units'])} units) in "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tiny run that checks the harness")
    ap.add_argument("--tier", choices=("cpu", "gpu", "gpuquick"), default="cpu",
                    help="cpu: the committed run; gpu: a larger model for a lent "
                         "accelerator, in one budgeted call; gpuquick: the gpu tier's code "
                         "at a tiny size (tests)")
    ap.add_argument("--device", default="cpu", help="torch device (cuda for the gpu tier)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: a small model gains little from more, and one "
                         "thread leaves the other core free)")
    ap.add_argument("--out", type=Path, default=ROOT / "experiments",
                    help="folder for results.json and results.md")
    ap.add_argument("--cache", type=Path, default=None,
                    help="folder for finished units (default: <out>/.cache)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    ap.add_argument("--tasks", default=",".join(STAGES),
                    help="which synthetic tasks to run (comma-separated, of copy,passkey): "
                         "two processes can each take one, sharing the cache; a results "
                         "file is written only when both are included")
    ap.add_argument("--encodings", default=",".join(ENCODINGS),
                    help="which encodings' units to run (comma-separated): two processes "
                         "can each take some, sharing the unit folder; RoPE's scaling, "
                         "ablation and fine-tuning units run with rope")
    ap.add_argument("--corpus-file", type=Path, default=None,
                    help="read the prepared corpus from this file (written by "
                         "--save-corpus) instead of the installed SymPy")
    ap.add_argument("--save-corpus", type=Path, default=None,
                    help="write the prepared corpus to this file and stop")
    ap.add_argument("--units", type=Path, default=None,
                    help="folder the finished units are written to (default: "
                         "experiments/units/<tier> for the cpu tier, <out> for the gpu "
                         "tier, <out>/units for --quick)")
    ap.add_argument("--resume-from", type=Path, action="append", default=[],
                    help="a further folder of finished units to reuse (repeatable)")
    ap.add_argument("--time-budget", type=float, default=None,
                    help="gpu tier: seconds from the start after which no unit is started "
                         "or kept training")
    ap.add_argument("--reserve", type=float, default=15.0,
                    help="gpu tier: seconds of the budget kept for writing the results")
    ap.add_argument("--steps", type=int, default=None,
                    help="gpu tier: steps of every language model (default: sized to the "
                         "budget from measured step times)")
    ap.add_argument("--assemble-only", action="store_true",
                    help="gpu tier: write results.json and results.md from the stored units "
                         "(--resume-from folders and <out>) without training")
    ap.add_argument("--no-vmap", action="store_true",
                    help="gpu tier: loop over the stacked seeds instead of vmap")
    args = ap.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        ap.error(f"--steps must be >= 1, got {args.steps}")
    if args.time_budget is not None and args.time_budget <= 0:
        ap.error(f"--time-budget must be > 0, got {args.time_budget}")
    if args.corpus_file is not None and not args.corpus_file.is_file():
        ap.error(f"--corpus-file {args.corpus_file} does not exist")
    if args.save_corpus is not None:
        path = C.save_corpus(C.load_corpus(), args.save_corpus)
        print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB)")
        return 0
    if args.threads < 1:
        ap.error(f"--threads must be >= 1, got {args.threads}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("--device cuda asked for, but torch sees no CUDA device")
    torch.set_num_threads(args.threads)
    tier = "quick" if args.quick else args.tier
    config = copy.deepcopy(TIERS[tier])
    corpus = C.load_corpus_file(args.corpus_file) if args.corpus_file else C.load_corpus()
    if tier in ("gpu", "gpuquick"):
        return run_gpu(config, args, corpus, tier)
    start = time.perf_counter()
    tasks = tuple(t for t in args.tasks.split(",") if t)
    if not set(tasks) <= set(STAGES):
        ap.error(f"--tasks must name tasks of {STAGES}, got {args.tasks!r}")
    units = args.units or (args.out / "units" if args.quick
                           else ROOT / "experiments" / "units" / tier)
    encodings = tuple(e for e in args.encodings.split(",") if e)
    if not encodings or not set(encodings) <= set(ENCODINGS):
        ap.error(f"--encodings must name encodings of {ENCODINGS}, got {args.encodings!r}")
    body = run(config, cache=args.cache or args.out / ".cache", device=args.device,
               progress=not args.no_progress, stages=tasks, units=units, corpus=corpus,
               encodings=encodings)
    if set(tasks) != set(STAGES) or set(encodings) != set(ENCODINGS):
        print(f"ran {', '.join(tasks) or 'no task'} for {', '.join(encodings)}; a results "
              "file is written only by a run of every encoding and both tasks")
        return 0
    seconds = time.perf_counter() - start
    results = {"schema": SCHEMA, "tier": tier, "quick": args.quick,
               "provenance": provenance(args.threads, args.device), "config": config, **body,
               "seconds": seconds}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "results.md").write_text(write_markdown(results))
    print(f"wrote {args.out / 'results.json'} in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
