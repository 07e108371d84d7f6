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
  setting for every seed; every other grid point within one seed standard deviation of it
  on seed 0 is trained and tested on every seed too (``experiments/stage_lmrates.py``).
  Evaluation on fixed test chunks: every length predicts the same
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
* **Fine-tuning at 4x the length** (``experiments/stage_finetune.py``): the RoPE models
  trained further with PI, static NTK, YaRN and no scaling (the control), a rate grid on
  seed 0 per arm (the arms of ``finetune_more_seeds`` fine-tuned from five more seeds'
  models: a comparison with the control was too close to call on five), and a passkey
  probe in real text
  (:mod:`posenc.analysis.experiments.probe`) of every fine-tuned model, of the RoPE and
  ALiBi models at ``L``, and of the references.
* **References**: RoPE and ALiBi trained at 2x and 4x the length with the same bytes per
  step and the same steps (ten seeds: each one's reading at its own length against at
  ``L`` was too close to call on five): what longer context is worth on the fixed targets
  (and on the far-identifier ones) for a model trained to use it; read again at every
  shorter length
  (``experiments/stage_context.py``), and their rate checked on a grid
  (``experiments/stage_refrates.py``).
* **RoPE ablation**: base 500, 10^4 and 10^6 at head widths 16 and 64 (ten seeds), so
  the wavelength explanation of RoPE's failure past ``L`` is tested; each arm's rate
  checked on a grid (``experiments/stage_ablrates.py``).
* **Budget**: every encoding trained for half and twice the steps (five seeds), to show
  whether the ranking holds as training goes on.
* **Copy** (induction, string lengths varied in training, 200 symbols) and **passkey**
  (a key at several depths in random filler): trained short, tested up to 8x and 16x, with
  the embedding scale tuned on the language model; a rate grid on seed 0; every run trained
  until its in-distribution accuracy reaches the target (0.99) or the step cap, and marked
  learned or not; exact match and per-symbol accuracy, and for copy the same strings
  written free-running (``experiments/stage_tasks.py``).
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import json
import os
import platform
import sys
import time
from collections.abc import Collection
from pathlib import Path

_START = time.perf_counter()
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from posenc.analysis.experiments import corpus as C  # noqa: E402
from posenc.analysis.experiments.markdown import gpu_markdown, write_markdown  # noqa: E402
from posenc.analysis.experiments.models import ENCODINGS  # noqa: E402
from posenc.analysis.experiments.rules import matched_kinds, scaling_parameters  # noqa: E402,F401
from posenc.analysis.experiments.units import (  # noqa: E402
    STAGES as CODE_STAGES, UnitStore, code_hash, cpu_name, git_commit, stage_code, stage_of,
    unit_kind, work_group)
from experiments.stage_finetune import finetune  # noqa: E402
from experiments.stage_gpu import GpuPlan  # noqa: E402
from experiments.stage_lm import Runner  # noqa: E402
from experiments.stage_context import reference_context  # noqa: E402
from experiments.stage_refrates import reference_rates  # noqa: E402
from experiments.stage_ablrates import ablation_rates  # noqa: E402
from experiments.stage_lmrates import rivals  # noqa: E402
from experiments.stage_taskrates import task_caps, task_rates, task_warmups  # noqa: E402
from experiments.stage_tasks import task  # noqa: E402
from experiments.taskgrid import refine  # noqa: E402

SCHEMA = 3

CPU = {
    "seeds": [0, 1, 2, 3, 4],
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2},
    "lm": {"train_length": 128, "steps": 800, "batch": 16, "lrs": [3e-3, 1e-2, 3e-2],
           "embed_scales": [1.0, 7.07, 50.0], "eval_factors": [1, 2, 4, 8, 16],
           "n_chunks": 128, "target": 64, "bucket": 128, "valid_chunks": 128},
    "lm_edge": {"lrs": []},
    "scaling": {"factor": 16, "types": ["pi", "ntk", "yarn", "llama3", "dynamic"]},
    # fine-tuning at 4 L: four arms, a rate grid on seed 0, the same bytes per step as the
    # pre-training; the passkey probe of every fine-tuned and reference model
    "finetune": {"factor": 4, "steps": 1000, "lrs": [3e-4, 1e-3, 3e-3], "max_extensions": 2,
                 "arms": ["plain", "pi", "ntk", "yarn"],
                 "probe": {"depths": [0.1, 0.5, 0.9], "n": 32, "seed": 0}},
    # every encoding, five seeds (the budget claims sat at the edge of the correction with
    # three), half and twice the steps (the budget study)
    "budget": {"encodings": list(ENCODINGS), "seeds": [0, 1, 2, 3, 4], "multipliers": [0.5, 2.0]},
    # models trained at 2 L and 4 L with the same bytes per step, a reference at every
    # evaluation length up to 4 L: what longer context is worth (ten seeds: with three, a
    # paired t test cannot survive the chapter's correction, and with five each reference's
    # own reading at 4 L against at L was a close call, report.close_calls)
    "references": {"encodings": ["rope", "alibi"], "factors": [2, 4],
                   "seeds": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]},
    # RoPE's wavelength explanation tested: base and head width varied (ten seeds: once
    # the family held the predicted steps at head width 64 too, report.close_calls named
    # both as within one seed standard deviation on five)
    "ablation": {"bases": [500.0, 1e4, 1e6], "head_dims": [16, 64],
                 "seeds": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]},
    # tasks: a rate grid on seed 0, each run trained until its in-distribution accuracy
    # reaches ``target`` (checked every ``check_every`` steps) or ``steps`` (the cap); the
    # grids were widened until no encoding's choice is the largest rate: on 1e-3..1e-2 the
    # sinusoidal model and the T5 bias chose copy's largest and the learned table passkey's;
    # at 0.03 NoPE and the T5 bias chose copy's largest again, and no passkey run learned
    "copy": {"m": [4, 24], "eval_m": [8, 16, 24, 48, 96, 192], "steps": 3000, "batch": 64,
             "lrs": [1e-3, 3e-3, 1e-2, 3e-2, 1e-1], "target": 0.99, "check_every": 100,
             "n_valid": 128, "n_eval": 64},
    "passkey": {"total": [16, 48], "eval_totals": [48, 96, 192, 384, 768],
                "depths": [0.1, 0.5, 0.9], "steps": 3000, "batch": 64,
                "lrs": [1e-3, 3e-3, 1e-2, 3e-2], "target": 0.99, "check_every": 100,
                "n_valid": 128, "n_eval": 32},
    # where seed 0 learned a task at no rate of its grid (copy: NoPE; passkey: NoPE and the
    # sinusoidal model), seed 0 also at the log-midpoints around the best rate
    # (experiments/taskgrid.py, rule fixed before these runs)
    "task_refine": ["copy", "passkey"],
    # ten seeds where a ranking at the training length or past it is within about one seed
    # standard deviation on the first five (seed 0's grid and seeds 1-4, code 16262a7eca1f):
    # RoPE and T5 at 128 (gap 0.014, sd 0.012), RoPE and sinusoidal at 256 (0.015, 0.17)
    # and 512 (0.27, 0.23); run after everything else (run(): lm_more_seeds)
    "lm_more_seeds": {"encodings": ["sinusoidal", "rope", "t5"], "seeds": [5, 6, 7, 8, 9]},
    # the same rule over the chapter's whole family of claims (report.close_calls, fixed
    # before these seeds ran, code 16262a7eca1f and the re-keyed stages): each reference
    # read at its own length against at L (gaps 0.000-0.007, sds 0.017-0.068) and the
    # NTK and YaRN arms against the plain one at 4 L (0.002 and 0.000, sds 0.008-0.010)
    # get ten seeds too: the references through references.seeds, the arms here
    "finetune_more_seeds": {"arms": ["plain", "ntk", "yarn"], "seeds": [5, 6, 7, 8, 9]},
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
    "finetune": {"factor": 4, "steps": 1000, "lrs": [1e-4, 3e-4, 1e-3], "max_extensions": 2,
                 "arms": ["plain", "pi", "ntk", "yarn"],
                 "probe": {"depths": [0.1, 0.5, 0.9], "n": 64, "seed": 0}},
    "budget": {"encodings": ["rope", "alibi"], "multipliers": [0.25, 0.5, 2.0]},
    "copy": {"m": [8, 64], "eval_m": [16, 64, 128, 256, 512], "steps": 3000, "batch": 32,
             "lrs": [3e-4, 1e-3], "target": 0.99, "check_every": 200, "n_valid": 128,
             "n_eval": 128},
    "passkey": {"total": [32, 512], "eval_totals": [512, 1024, 2048, 4096, 8192],
                "depths": [0.1, 0.5, 0.9], "steps": 3000, "batch": 32, "lrs": [3e-4, 1e-3],
                "target": 0.99, "check_every": 200, "n_valid": 128, "n_eval": 64},
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
        # priority 3: the fine-tuning arms (one rate: no grid fits one call)
        "ft_steps": 500, "ft_lr": 5e-4,
        "bf16": True,
        # far targets: identifier bytes whose previous occurrence is more than the training
        # length back, so reading 2 L instead of L on them measures history beyond every
        # distance of training (a 128-byte gap, the CPU tier's, could not tell the two apart)
        "far_gap": 512,
        "vmap_off": [],                # encodings that loop over seeds (vmap is also checked)
        # how vmapped training attends, tried in this order on the device until one agrees
        # with the per-seed loop (stacked.VMAP_ATTENTION): the fused kernel once for all
        # seeds, memory linear in the length; or the attention written out
        # (stacked._attend), which keeps every score, so it serves at most this length
        # (five seeds at 512, batch 32, 8 heads: 1.3 GB of float32 probabilities per layer
        # kept for backward, 9.4 GB for the 7 layers of each process)
        "vmap_attention": ["fused", "written"],
        "vmap_max_length": 512,
        # ALiBi and T5 looping over seeds: the ways to attend, each checked against the
        # model's own and timed on the device, the fastest kept (stacked.BIAS_ATTENTION)
        "bias_attention": ["flex", "full", "blocked"],
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
    "finetune": {"factor": 2, "steps": 2, "lrs": [1e-3, 3e-3], "max_extensions": 1,
                 "arms": ["plain", "pi", "ntk", "yarn"],
                 "probe": {"depths": [0.5], "n": 2, "seed": 0}},
    "lm_more_seeds": {"encodings": ["rope"], "seeds": [2]},
    "finetune_more_seeds": {"arms": ["plain"], "seeds": [2]},
    # two seeds wherever the chapter's figures and claims need an interval
    "budget": {"encodings": ["rope", "alibi"], "seeds": [0, 1], "multipliers": [0.5, 2.0]},
    "references": {"encodings": ["rope", "alibi"], "factors": [2], "seeds": [0, 1]},
    "ablation": {"bases": [500.0, 1e4], "head_dims": [16, 32], "seeds": [0, 1]},
    "copy": {"m": [2, 4], "eval_m": [4, 8], "steps": 6, "batch": 4, "lrs": [1e-3, 3e-3],
             "target": 0.99, "check_every": 2, "n_valid": 8, "n_eval": 8},
    "passkey": {"total": [12, 16], "eval_totals": [16, 32], "depths": [0.1, 0.9], "steps": 6,
                "batch": 4, "lrs": [1e-3, 3e-3], "target": 0.99, "check_every": 2,
                "n_valid": 8, "n_eval": 4},
    "task_refine": ["copy"],
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
             "references": [["rope", 64], ["alibi", 128]], "ft_steps": 2, "ft_lr": 1e-3,
             # bfloat16 autocast as on the GPU, so the CPU's tests run the GPU's path
             "bf16": True,
             "far_gap": 32,  # the training length, as on the GPU tier
             "vmap_off": [], "merge_below": None, "vmap_attention": ["fused", "written"],
             # bounds the written-out way only: the fused way vmaps the 128-byte ALiBi
             # reference too (the per-seed ways to attend have their own test)
             "vmap_max_length": 64, "bias_attention": ["flex", "full", "blocked"]},
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


def provenance(threads: int, device: str) -> dict:
    cpu = cpu_name()
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
        "stage_code": {stage: stage_code(stage) for stage in CODE_STAGES},
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


STAGES = ("copy", "passkey")


class Pending(Exception):
    """A unit an assembling run needs is not stored yet (its key is the message)."""


class _NoProbes(Exception):
    """The fine-tuning stage reached its probes in a process told to leave them."""


class PartRunner(Runner):
    """A :class:`Runner` for part of the protocol, keyed exactly as a whole run.

    ``arms`` limits the fine-tuning arms this process trains and ``probes=False`` leaves
    the probes to another process; every unit is still keyed on the protocol's own
    configuration (:meth:`_params` reads the unmodified one), so the units are the ones a
    whole run finds.  ``assemble=True`` trains nothing: a unit not stored raises
    :class:`Pending`, so the results can be assembled from what is finished.
    """

    def __init__(self, *args, arms=None, probes: bool = True, assemble: bool = False,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.keyed = self.config
        if arms is not None:
            unknown = sorted(set(arms) - set(self.config["finetune"]["arms"]))
            if unknown:
                raise ValueError(f"arms must be fine-tuning arms of the protocol "
                                 f"{self.config['finetune']['arms']}, got {unknown}")
            self.config = {**self.config,
                           "finetune": {**self.config["finetune"], "arms": list(arms)}}
        self.probes, self.assemble = probes, assemble
        self.used: dict[str, dict] = {}  # every unit this run read or computed, by key

    def _params(self, key: str, extra: dict | None = None) -> dict:
        own, self.config = self.config, self.keyed
        try:
            return super()._params(key, extra)
        finally:
            self.config = own

    def unit(self, key: str, fn, extra: dict | None = None):
        if not self.probes and key.startswith("probe-"):
            raise _NoProbes(key)
        if self.assemble:
            params, code = self._params(key, extra), self.codes[stage_of(key)]
            out = self.store.get(key, params, code)
            if out is None:
                raise Pending(key)
            self.seconds[key] = out["seconds"]
        else:
            out = super().unit(key, fn, extra)
        self.used[key] = out
        return out


def finished_finetune(r: PartRunner, chosen: dict) -> tuple[dict, dict]:
    """The fine-tuning stage as far as it is stored (``r`` assembles): every arm whose
    rate grid and seeds are all finished, and the probes if they all are.  Each arm runs
    through the stage's own code alone, so its rate is chosen as a whole run chooses it
    (the grid unit with the lowest validation loss).  Returns the stage's results and what
    is pending (an arm, or ``"probes"``, -> the first unit missing)."""
    pending: dict[str, str] = {}
    out: dict = {"grid": [], "rates": {}, "runs": [], "probes": []}
    seen: list[dict] = []
    unit = r.unit

    def logged(key, fn, extra=None):
        got = unit(key, fn, extra)
        seen.append(got)
        return got

    r.unit = logged  # type: ignore[method-assign]
    try:
        for arm in r.keyed["finetune"]["arms"]:
            r.config = {**r.keyed, "finetune": {**r.keyed["finetune"], "arms": [arm]}}
            r.probes, seen[:] = False, []
            try:
                finetune(r, chosen)
            except Pending as e:
                pending[arm] = str(e)
                continue
            except _NoProbes:
                pass
            grid = [u for u in seen if u["key"].startswith("finetunegrid-")]
            best = min(grid, key=lambda u: u["valid"])
            out["grid"] += grid
            out["rates"][arm] = best["lr"]
            out["runs"] += [best] + [u for u in seen if u["key"].startswith("finetune-")]
        r.config = {**r.keyed, "finetune": {**r.keyed["finetune"], "arms": []}}
        r.probes = True
        try:
            out["probes"] = finetune(r, chosen)["probes"]
        except Pending as e:
            pending["probes"] = str(e)
    finally:
        r.unit = unit  # type: ignore[method-assign]
        r.config, r.probes = r.keyed, True
    return out, pending


def more_seeds(r: Runner, config: dict, chosen: dict) -> list:
    """The language models of ``lm_more_seeds``: more seeds of the listed encodings at
    their tuned setting, trained and tested exactly as seeds 1-4 are (the same units'
    code; this only decides which run), after every other stage."""
    extra, lm = config.get("lm_more_seeds") or {}, config["lm"]
    out = []
    for enc in extra.get("encodings", []):
        if enc not in chosen or enc not in r.encodings:
            continue
        setting = chosen[enc]
        for seed in extra["seeds"]:
            out.append(r.lm_test(r.lm_train(r.lm_key(enc, seed, setting),
                                            r.cfg(enc, setting["embed_scale"]), seed,
                                            setting["lr"], lm["steps"])))
    return out


def run(config: dict, *, cache: Path, device: str, progress: bool,
        stages=STAGES, units: Path | None = None, corpus: C.Corpus | None = None,
        encodings=ENCODINGS, store: UnitStore | None = None,
        with_finetune: bool = True, with_more_seeds: bool = True,
        finetune_arms=None, probes: bool = True, assemble: bool = False,
        with_checks: bool | Collection[str] = True) -> dict:
    """Run (or read from the unit store) the protocol's units in priority order: the tuned
    language models and their seeds, RoPE scaling without training (fixed and matched
    factors), the longer-trained references, the RoPE ablation, the budget study, the
    fine-tuning, the tasks named in ``stages`` and their checks of rate, cap and warm-up
    (:mod:`experiments.stage_taskrates`; ``with_checks=False`` leaves them out, a
    collection of ``"rates"``, ``"caps"`` and ``"warmups"`` keeps only those), the rate
    edge check.  ``encodings`` limits
    the run to some encodings' units (RoPE's units come with ``"rope"``); ``store``
    replaces the unit store of ``units`` (``experiments/rekey.py`` passes a checking one);
    ``with_finetune=False`` skips the fine-tuning stage (so two processes can split it from
    the tasks); ``with_more_seeds=False`` skips :func:`more_seeds`; ``finetune_arms`` and
    ``probes=False`` split the fine-tuning stage between processes (:class:`PartRunner`).
    ``assemble=True`` trains nothing: the results hold every section whose units are all
    stored, and ``"pending"`` names the first missing unit of each that is not (the
    fine-tuning stage arm by arm, :func:`finished_finetune`)."""
    checks = ({"rates", "caps", "warmups"} if with_checks is True
              else set(with_checks or ()))
    unknown = checks - {"rates", "caps", "warmups"}
    if unknown:
        raise ValueError(f"with_checks must be a bool or name checks of rates, caps and "
                         f"warmups, got {sorted(unknown)}")
    r = PartRunner(config, cache, device, progress, units=units, corpus=corpus,
                   encodings=encodings, store=store, arms=finetune_arms, probes=probes,
                   assemble=assemble)
    pending: dict[str, str] = {}

    def part(name, fn, default):
        try:
            return fn()
        except Pending as e:
            pending[name] = str(e)
            return default
    lm = r.lm()
    chosen = lm["chosen"]

    def task_part(name):
        # the task's stage, its grid refined where seed 0 learned at no rate (taskgrid)
        return part(name, lambda: refine(r, name, chosen, task(r, name, chosen)), None)

    # does seed 0's choice hold on the other seeds? its close rivals on every seed
    lm_rivals = part("lm_rivals", lambda: rivals(r, lm), {"rivals": [], "runs": []})
    rope = "rope" in chosen
    # in this order: the fine-tuning stage probes the references, so they come first
    scaling = r.scaling(chosen) if rope else []
    matched = r.scaling_matched(chosen) if rope else []
    references = r.references(chosen)
    # each reference read again at every length up to its own (stage_context)
    context = part("references_context", lambda: reference_context(r, references), [])
    # were the references trained at a fair rate? a grid on seed 0 (stage_refrates)
    ref_rates = part("references_rates",
                     lambda: reference_rates(r, chosen, references),
                     {"grid": [], "chosen": [], "tuned": [], "tuned_context": []})
    ablation = r.ablation(chosen)
    # were the ablation's arms trained at a fair rate? a grid on seed 0 (stage_ablrates)
    abl_rates = part("ablation_rates", lambda: ablation_rates(r, chosen, ablation),
                     {"grid": [], "chosen": [], "tuned": []})
    budget = r.budget(chosen)
    ft = {"grid": [], "rates": {}, "runs": [], "probes": []}
    if rope and with_finetune and assemble:
        ft, ft_pending = finished_finetune(r, chosen)
        pending.update({f"finetune-{k}": v for k, v in ft_pending.items()})
    elif rope and with_finetune:
        try:
            ft = finetune(r, chosen)
        except _NoProbes:  # the arms are done; another process runs the probes
            pass
    body = {
        "corpus": r.corpus.provenance(),
        "chunks": {"n": int(r.chunks.ends.size), "files": int(np.unique(r.chunks.files).size),
                   "target": r.chunks.target, "max_length": r.chunks.max_length,
                   "target_bytes": int(r.chunks.ends.size * r.chunks.target),
                   # the test file of each chunk: a bootstrap over the text resamples files
                   "files_of_chunks": [int(f) for f in r.chunks.files]},
        "lm": lm,
        "lm_rivals": lm_rivals,
        "scaling": scaling,
        "scaling_matched": matched,
        "references": references,
        "references_context": context,
        "references_rates": ref_rates,
        "ablation": ablation,
        "ablation_rates": abl_rates,
        "budget": budget,
        "finetune": ft["runs"],
        "finetune_grid": ft["grid"],
        "finetune_rates": ft["rates"],
        "probes": ft["probes"],
        "copy": (task_part("copy")
                 if "copy" in stages else None),
        "passkey": (task_part("passkey")
                    if "passkey" in stages else None),
        "lm_edge": r.lm_edge(chosen),
        "lm_more_seeds": (part("lm_more_seeds", lambda: more_seeds(r, config, chosen), [])
                          if with_more_seeds else []),
        "far_targets": {"bytes": int(sum(r.far[e - r.chunks.target:e].sum()
                                         for e in r.chunks.ends)),
                        "of": int(r.chunks.ends.size * r.chunks.target),
                        "gap": C.FAR_GAP, "min_len": C.FAR_MIN_LEN},
    }
    # the tasks' checks (stage_taskrates): seeds 1-4 at the other rates seed 0 learned at,
    # for an encoding where some seeds did not learn at the chosen one; every seed that did
    # not learn, again with twice the cap; and every seed that learned only then, again at
    # the first cap with the longer cap's warm-up
    for name in ("copy", "passkey"):
        if body[name] is None:
            continue
        if "rates" in checks:
            body[name]["rates"] = part(f"{name}_rates",
                                       lambda: task_rates(r, name, chosen, body[name]), None)
        if checks & {"caps", "warmups"}:
            body[name]["caps"] = part(f"{name}_caps",
                                      lambda: task_caps(r, name, chosen, body[name]), None)
            if "warmups" in checks and body[name]["caps"] is not None:
                body[name]["warmups"] = part(
                    f"{name}_warmups", lambda: task_warmups(r, name, chosen, body[name]),
                    None)
    stage_s: dict[str, float] = {}
    for key, sec in r.seconds.items():
        stage = key.split("-")[0].replace("grid", "")
        stage_s[stage] = stage_s.get(stage, 0.0) + sec
    body["stage_seconds"] = stage_s
    body["pending"] = pending
    body["unit_seconds"] = sum(r.seconds.values())
    # by kind of unit (an evaluation by the kind of model it reads, as recheck.py samples
    # them), so a re-timed sample of each kind can scale the whole (report.rerun_seconds)
    kinds: dict[str, float] = {}
    for key, sec in r.seconds.items():
        kind = unit_kind(key)
        kinds[kind] = kinds.get(kind, 0.0) + sec
    body["kind_seconds"] = kinds
    # each unit's work group and steps (units.work_group), so that one re-timed unit of
    # each group times the whole protocol (report.rerun_seconds)
    models = {u["digest"]: u for u in r.store.units.values()}
    body["unit_work"] = {key: list(work_group(u, models)) for key, u in sorted(r.used.items())}
    return body



def run_gpu(config: dict, args, corpus: C.Corpus, tier: str) -> int:
    from posenc.analysis.experiments.units import Budget

    start = time.perf_counter()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    read = [ROOT / "experiments" / "units" / tier] + list(args.resume_from)
    store = UnitStore(args.units or out, read, jsonl=True, code=stage_code("gpu"))
    budget = Budget(args.time_budget, reserve=args.reserve, start=_START)
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    plan = GpuPlan(config, corpus, store, device=args.device, budget=budget,
                   steps=args.steps, use_vmap=not args.no_vmap)

    def write(body: dict | None = None):
        results = {"schema": 3, "tier": tier, "provenance": provenance(args.threads,
                                                                       args.device),
                   "config": config, "corpus": corpus.provenance(),
                   "chunks": {"n": int(plan.chunks.ends.size),
                              "files": int(np.unique(plan.chunks.files).size),
                              "target": plan.chunks.target,
                              "max_length": plan.chunks.max_length},
                   **(plan.results() if body is None else body),
                   "seconds": time.perf_counter() - _START}
        tmp = out / "results.json.tmp"
        tmp.write_text(json.dumps(results) + "\n")
        tmp.replace(out / "results.json")
        (out / "results.md").write_text(gpu_markdown(results))

    if args.assemble_only:
        # every unit the store holds (this code's or not), assembled without training
        units = sorted(store.units.values(), key=lambda u: u["key"])
        steps = sorted({u["steps"] for u in units if "steps" in u})
        plan.results = lambda: {  # type: ignore[method-assign]
            "steps": steps[0] if len(steps) == 1 else steps, "step_ms": {}, "vmap": {},
            "attention": {}, "first_seeds": None, "skipped": [], "errors": [],
            "far_targets": plan.far_share(), "units": units}
        write()
        print(f"assembled {len(units)} units into {out / 'results.json'}")
        return 0
    if args.workers > 1:
        from experiments.gpu_parallel import run_parallel

        rc = run_parallel(config, args, root=ROOT, start=_START, write=write,
                          plan_meta={"far_targets": plan.far_share()})
        print_pace(config, out, args.units or out)
        return rc
    if args.groups:
        # only the named groups of the plan (GpuPlan.guard's names, e.g. lm-alibi-L2048),
        # every seed of the tier stacked, as --workers trains them: a later call completes
        # groups an earlier one's budget did not reach, under the same code and keys
        only = {g for g in args.groups.split(",") if g}
        from experiments.gpu_parallel import group_names

        unknown = sorted(only - group_names(config))
        if not only or unknown:
            raise SystemExit(f"--groups must name groups of the plan (e.g. lm-alibi-L2048, "
                             f"scaling, finetune-pi), got {unknown or args.groups!r}")
        guard = plan.guard
        plan.guard = lambda name, fn, *a: (  # type: ignore[method-assign]
            guard(name, fn, *a) if name in only else None)
        seeds = list(config["plan"]["first_seeds"]) + list(config["plan"]["more_seeds"])
        plan.seeds_for_first = lambda: (seeds, [])  # type: ignore[method-assign]
    plan.after_group = write
    try:
        plan.run()
    finally:
        write()
    print(f"wrote {out / 'results.json'} ({len(plan.results()['units'])} units) in "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    print_pace(config, out, args.units or out)
    return 0


def print_pace(config: dict, out: Path, units: Path) -> None:
    """The operations of the units this call stored (``units/units.jsonl``), over the
    call's time so far, against the whole plan (:mod:`posenc.analysis.experiments.cost`):
    how many calls like this one the plan needs."""
    from posenc.analysis.experiments import cost

    path, res = units / "units.jsonl", out / "results.json"
    if not (path.is_file() and res.is_file()):
        return
    stored = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    steps = json.loads(res.read_text()).get("steps")
    if not stored or not isinstance(steps, int):
        return
    seconds = time.perf_counter() - _START
    done = cost.gpu_done({"config": config, "steps": steps, "units": stored})
    whole = cost.gpu_protocol(config, steps)["total"]
    print(f"this call stored {len(stored)} units, {done / 1e15:.3g} PFLOP in {seconds:.0f} s "
          f"({done / seconds / 1e12:.3g} TFLOP/s); the whole plan at {steps} steps is "
          f"{whole / 1e15:.3g} PFLOP, {whole / done:.1f} times as much", flush=True)


def print_cost(config: dict, steps: int | None, budget: float | None) -> None:
    """``--cost``: the plan's operations by part, its ten largest groups and, with a
    budget, the pace it needs."""
    from posenc.analysis.experiments import cost

    steps = steps or int(config["plan"]["max_steps"])
    parts = cost.gpu_protocol(config, steps)
    seeds = cost.plan_seeds(config)
    print(f"the gpu plan at {steps} steps, {seeds} seeds a group, tasks at their cap:")
    for part, flops in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {part:<16} {flops / 1e15:10.2f} PFLOP")
    work = cost.gpu_work(config, steps)
    top = sorted(work, key=lambda g: -(work[g]["train"] + work[g]["eval"]))[:10]
    print("largest groups (PFLOP for all seeds: training + evaluation):")
    for g in top:
        print(f"  {g:<24} {seeds * work[g]['train'] / 1e15:8.2f} + "
              f"{seeds * work[g]['eval'] / 1e15:.2f}")
    if budget:
        print(f"to finish in {budget:.0f} s: {parts['total'] / budget / 1e12:.0f} TFLOP/s "
              "sustained")


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
    ap.add_argument("--no-finetune", action="store_true",
                    help="skip the fine-tuning stage (another process runs it); no results "
                         "file is written")
    ap.add_argument("--no-checks", action="store_true",
                    help="skip the tasks' checks of rate, cap and warm-up (stage_taskrates); no "
                         "results file is written")
    ap.add_argument("--no-more-seeds", action="store_true",
                    help="skip the extra seeds of lm_more_seeds (another process runs them)")
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
                    help="write results.json and results.md from the stored units without "
                         "training (gpu tier: --resume-from folders and <out>; cpu tier: "
                         "every section whose units are all stored, the others named under "
                         "'pending')")
    ap.add_argument("--finetune-arms", default=None,
                    help="cpu tier: train only these fine-tuning arms (comma-separated), "
                         "keyed as a whole run keys them, so two processes can split the "
                         "stage; no results file is written")
    ap.add_argument("--no-probes", action="store_true",
                    help="cpu tier: leave the fine-tuning stage's passkey probes to "
                         "another process; no results file is written")
    ap.add_argument("--no-vmap", action="store_true",
                    help="gpu tier: loop over the stacked seeds instead of vmap")
    ap.add_argument("--groups", default=None,
                    help="gpu tier, one process: run only these groups of the plan "
                         "(comma-separated, e.g. lm-alibi-L2048,probe-alibi-L2048), every "
                         "seed stacked; the results list those groups' units "
                         "(experiments/merge_gpu_calls.py puts calls together)")
    ap.add_argument("--workers", type=int, default=1,
                    help="gpu tier: processes that share the device, each launching its "
                         "own groups' kernels (experiments/gpu_parallel.py; 1: the plan in "
                         "this process, in priority order)")
    ap.add_argument("--cost", action="store_true",
                    help="gpu tier: print the plan's operations (PFLOP) by part and its "
                         "largest groups, at --steps (default: the plan's max_steps), and "
                         "with --time-budget the pace that would finish it in that time; "
                         "nothing is trained (posenc.analysis.experiments.cost)")
    args = ap.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        ap.error(f"--steps must be >= 1, got {args.steps}")
    if args.workers < 1:
        ap.error(f"--workers must be >= 1, got {args.workers}")
    if 1 < args.workers < len(ENCODINGS):
        ap.error(f"--workers must be 1 or at least {len(ENCODINGS)} (one process per "
                 f"encoding for priority 1), got {args.workers}")
    if args.workers > 1 and (args.tier == "cpu" or args.quick):
        ap.error("--workers is for the gpu tier (--tier gpu or gpuquick)")
    if args.groups is not None and (args.workers > 1 or args.tier == "cpu" or args.quick):
        ap.error("--groups is for the gpu tier in one process (--workers 1)")
    if args.workers > 1 and args.corpus_file is None:
        ap.error("--workers needs --corpus-file (each process reads the prepared corpus)")
    if args.time_budget is not None and args.time_budget <= 0:
        ap.error(f"--time-budget must be > 0, got {args.time_budget}")
    if args.corpus_file is not None and not args.corpus_file.is_file():
        ap.error(f"--corpus-file {args.corpus_file} does not exist")
    if args.cost:
        if args.tier == "cpu" or args.quick:
            ap.error("--cost is for the gpu tier (--tier gpu or gpuquick)")
        print_cost(TIERS[args.tier], args.steps, args.time_budget)
        return 0
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
    arms = None
    if args.finetune_arms is not None:
        arms = tuple(a for a in args.finetune_arms.split(",") if a)
        if not arms or not set(arms) <= set(config["finetune"]["arms"]):
            ap.error(f"--finetune-arms must name arms of {config['finetune']['arms']}, "
                     f"got {args.finetune_arms!r}")
    try:
        body = run(config, cache=args.cache or args.out / ".cache", device=args.device,
                   progress=not args.no_progress, stages=tasks, units=units, corpus=corpus,
                   encodings=encodings, with_finetune=not args.no_finetune,
                   with_more_seeds=not args.no_more_seeds, finetune_arms=arms,
                   probes=not args.no_probes, assemble=args.assemble_only,
                   with_checks=not args.no_checks)
    except Pending as e:
        ap.error(f"--assemble-only needs every language-model, scaling, reference, ablation "
                 f"and budget unit stored in {units}; the first missing is {e}")
    if (set(tasks) != set(STAGES) or set(encodings) != set(ENCODINGS) or args.no_finetune
            or args.no_more_seeds or arms is not None or args.no_probes or args.no_checks):
        print(f"ran {', '.join(tasks) or 'no task'} for {', '.join(encodings)}; a results "
              "file is written only by a run of every encoding and both tasks")
        return 0
    seconds = time.perf_counter() - start
    results = {"schema": SCHEMA, "tier": tier, "quick": args.quick,
               "provenance": provenance(args.threads, args.device), "config": config, **body,
               "seconds": seconds}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results) + "\n")
    (args.out / "results.md").write_text(write_markdown(results))
    print(f"wrote {args.out / 'results.json'} in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
