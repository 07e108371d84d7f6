"""The experiments chapter's study: small byte-level decoders, trained on two CPU cores.

    python experiments/study.py lm [--encodings rope,alibi] [--seeds 0,1]
                                         train and evaluate the language models
    python experiments/study.py scale    RoPE scaling applied to the trained RoPE models
    python experiments/study.py baselines
                                         n-gram, copy-cache and truncation baselines
    python experiments/study.py finetune fine-tuning curves at 4 L
    python experiments/study.py tasks    associative recall and copy, trained short
    python experiments/study.py report   the units -> experiments/study.json

Each finished piece of work (a *unit*: one trained model's evaluation, one fine-tuning
curve) is written at once to ``experiments/units/study/<key>.json``, keyed on its
parameters and on the source of the code that computed it (:func:`code_digest`), with the
commit, the machine and the seconds it took.  Commit the files: a later run resumes from
them and recomputes only what is missing or stale.  Model weights that a later stage needs
stay in ``experiments/.cache/study/`` and are retrained where missing.  Every run uses one
thread per process (two processes share the machine's two cores).

The protocol, fixed before any result was seen (:data:`PROTOCOL`):

* **Data**: SymPy's sources as bytes (:mod:`posenc.analysis.experiments.corpus`): training,
  validation and test splits by file.  Every reported number is on the test split's fixed
  targets: 128 chunks, the last 64 bytes of each, read with ``n`` bytes of history for
  ``n`` = 128 ... 2048, so a longer ``n`` only adds history before the same targets.  The
  *far* targets are the identifier bytes whose previous occurrence lies more than 128 bytes
  back (:func:`~posenc.analysis.experiments.corpus.far_identifier_mask`).
* **Language models**: 4 layers, width 128, 4 heads of width 32 (0.82M parameters),
  trained on windows of L = 128 bytes, 2,800 steps of 8 windows, AdamW at 3e-3 with 10 %
  warm-up and cosine decay, for NoPE, a learned table, sinusoids (token embeddings times
  √128, as Vaswani et al. do), RoPE (base 10⁴), ALiBi and the T5 bias (32 buckets, maximum
  distance 128, T5's own settings).  One rate for every encoding; three seeds, five for
  RoPE (the fine-tuning curves start from each).
* **Baselines** on the same targets: the model itself truncated to its last L bytes (its
  loss at L); an interpolated byte 5-gram counted on the exact windows each seed's models
  saw and on the whole training split; that 5-gram mixed with a copy cache over the last
  ``h`` bytes (:mod:`posenc.analysis.experiments.baselines`).
* **RoPE scaling without training**: PI, NTK-aware, YaRN and Llama 3.1 with the factor
  matched to the length read, s = n / L, and with one fixed factor 16 read at L (the cost
  of a deployed factor on short inputs).  YaRN's β and Llama 3.1's band are moved to this
  scale by :func:`band`: each region holds the same share of the frequency pairs as the
  published defaults give the model they were made for.
* **Fine-tuning at 4 L**: each RoPE model trained further on 512-byte windows (2 per step:
  the same bytes per step as pre-training) with no scaling, PI, NTK-aware or YaRN at
  factor 4, at a constant rate after a 5-step warm-up; loss on the test targets at 512
  after 0, 10, 25, 50, 100 and 200 steps.  The rate is the best of a short grid for the
  unscaled control on seed 0's validation split, so a lead of a scaled arm is not a
  tuning artefact.
* **Tasks where context is required**: copy (strings of 4 to 24 symbols) and passkey
  (a key in 16 to 48 tokens of filler), learned by 2-layer models of width 64 with every
  encoding but the learned table (which cannot read past its table), each trained until
  its in-distribution accuracy reaches 0.99 or 3,000 steps, then tested up to 4x (copy)
  and 16x (passkey) longer.  The rate is chosen per encoding and task on seed 0 (the
  grid's rate that learns in the fewest steps); three seeds.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from posenc.analysis.experiments import baselines as B  # noqa: E402
from posenc.analysis.experiments import corpus as C  # noqa: E402
from posenc.analysis.experiments import tasks as K  # noqa: E402
from posenc.analysis.experiments import train as T  # noqa: E402
from posenc.analysis.experiments.models import (  # noqa: E402
    ENCODINGS, ModelConfig, TinyDecoder, sequence_loss)
from posenc.analysis.experiments.units import UnitStore  # noqa: E402

UNITS = ROOT / "experiments" / "units" / "study"
CACHE = ROOT / "experiments" / ".cache" / "study"
HARNESS = ROOT / "posenc" / "analysis" / "experiments"

PROTOCOL = {
    "model": {"d_model": 128, "n_heads": 4, "n_layers": 4, "train_length": 128},
    "lm": {"steps": 2800, "batch": 8, "lr": 3e-3, "log_every": 50},
    "embed_scale": {"sinusoidal": math.sqrt(128)},
    "seeds": {"rope": [0, 1, 2, 3, 4], "other": [0, 1, 2]},
    "eval": {"lengths": [128, 256, 512, 1024, 2048], "n_chunks": 128, "target": 64,
             "bucket": 128},
    "scale": {"kinds": ["pi", "ntk", "yarn", "llama3"], "lengths": [256, 512, 1024],
              "fixed": 16},
    "finetune": {"factor": 4, "batch": 2, "checkpoints": [0, 10, 25, 50, 100, 200],
                 "warmup": 5, "lrs": [3e-4, 1e-3, 3e-3], "arms": ["plain", "pi", "ntk", "yarn"]},
    "tasks": {
        "model": {"d_model": 64, "n_heads": 4, "n_layers": 2},
        "encodings": ["nope", "sinusoidal", "rope", "alibi", "t5"],
        "seeds": [0, 1, 2],
        "copy": {"train": [4, 24], "test": [8, 16, 24, 32, 48, 96], "steps": 3000,
                 "batch": 64, "lrs": [1e-3, 3e-3, 1e-2], "target": 0.99, "check_every": 100,
                 "n_valid": 128, "n_test": 64},
        "passkey": {"train": [16, 48], "test": [48, 96, 192, 384, 768],
                    "depths": [0.1, 0.5, 0.9], "steps": 3000, "batch": 64,
                    "lrs": [1e-3, 3e-3, 1e-2], "target": 0.99, "check_every": 100,
                    "n_valid": 128, "n_test": 32},
    },
}

#: the protocol's sections a unit records among its parameters when it depends on them
SECTIONS = ("model", "lm", "eval", "scale", "finetune", "tasks")

#: the published defaults and the model each was made for: (turns over L, L, base)
_BANDS = {"yarn": {"beta_fast": (32.0, 4096, 1e4), "beta_slow": (1.0, 4096, 1e4)},
          "llama3": {"high_freq_factor": (4.0, 8192, 5e5), "low_freq_factor": (1.0, 8192, 5e5)}}


def band(kind: str, L: int, base: float) -> dict:
    """YaRN's ``beta_fast``/``beta_slow`` or Llama 3.1's ``high``/``low_freq_factor`` for a
    model trained at ``L`` with RoPE base ``base``.

    Each threshold is a number of turns ``t`` over the training length; a pair whose
    wavelength is ``2π·base^f`` turns ``t`` times over ``L`` at ``f = ln(L / 2πt) / ln base``
    (``f`` is the pair's index over the number of pairs).  The published threshold ``t`` on
    its own model gives ``f``; the threshold here is the one with the same ``f``, so each
    region keeps the same share of the pairs.  With the same base this is ``t · L / L_ref``.

    >>> band("yarn", 128, 1e4)
    {'beta_fast': 1.0, 'beta_slow': 0.03125}
    """
    out = {}
    for name, (t, L_ref, base_ref) in _BANDS[kind].items():
        f = math.log(L_ref / (2 * math.pi * t)) / math.log(base_ref)
        out[name] = round(L / (2 * math.pi * base ** f), 6)
    return out


def scaling(kind: str, s: float, L: int, base: float, head_dim: int) -> dict:
    """The ``rope_parameters`` of scaling rule ``kind`` at factor ``s`` (see :func:`band`)."""
    if kind == "plain":
        return {}
    if kind == "pi":
        return {"rope_type": "linear", "factor": float(s)}
    if kind == "ntk":
        return {"rope_type": "default",
                "rope_theta": float(base * s ** (head_dim / (head_dim - 2)))}
    if kind in ("yarn", "llama3"):
        return {"rope_type": kind, "factor": float(s), "original_max_position_embeddings": L,
                **band(kind, L, base)}
    raise ValueError(f"kind must be one of plain, pi, ntk, yarn, llama3, got {kind!r}")


#: the harness modules every trained model depends on
MODEL_CODE = ("models.py", "train.py", "corpus.py")


def code_digest(files, *functions) -> str:
    """A hash of the harness modules ``files`` and of ``functions``' source: a change to
    either makes the units computed with them stale."""
    h = hashlib.sha256()
    for name in files:
        h.update((HARNESS / name).read_bytes())
    for fn in functions:
        h.update(inspect.getsource(fn).encode())
    return h.hexdigest()[:16]


def code_of(kind: str) -> str:
    """The code digest of the units of ``kind`` (a unit key's first word): each kind's
    own code and the code of the units it reads.  Read once, at import (:data:`CODES`):
    the source of a function is read from its file, which may have changed since."""
    lm = (Study.lm, Study.evaluate, Study.config)
    if kind == "lm":
        return code_digest(MODEL_CODE, *lm)
    if kind == "baseline":
        return code_digest(MODEL_CODE + ("baselines.py",), Study.baselines, Study.seen_windows)
    if kind in ("scale", "finetune"):
        return code_digest(MODEL_CODE, *lm, Study.model, getattr(Study, kind), scaling, band)
    if kind in ("copy", "passkey"):
        return code_digest(MODEL_CODE + ("tasks.py",), Study.task)
    raise ValueError(f"kind must be a unit kind of the study, got {kind!r}")


class Study:
    """The corpus, the fixed targets and the unit store, shared by every stage."""

    def __init__(self, units: Path = UNITS, cache: Path = CACHE, protocol: dict = PROTOCOL):
        self.p = protocol
        self.corpus = C.load_corpus()
        e = protocol["eval"]
        self.chunks = C.eval_chunks(self.corpus.test, max_length=max(e["lengths"]),
                                    target=e["target"], n_chunks=e["n_chunks"])
        self.valid_chunks = C.eval_chunks(self.corpus.valid, max_length=max(e["lengths"]),
                                          target=e["target"], n_chunks=e["n_chunks"])
        self.far = C.far_identifier_mask(self.corpus.test)
        self.store = UnitStore(units)
        self.cache = cache

    def config(self, encoding: str, **rope) -> ModelConfig:
        return ModelConfig(encoding, **self.p["model"],
                           embed_scale=self.p["embed_scale"].get(encoding, 1.0),
                           rope_parameters=rope or None)

    def evaluate(self, model: TinyDecoder, lengths=None, split: str = "test") -> dict:
        e = self.p["eval"]
        if split == "valid":
            return T.eval_lm(model, self.corpus.valid, self.valid_chunks,
                             lengths or e["lengths"], bucket=e["bucket"])
        return T.eval_lm(model, self.corpus.test, self.chunks, lengths or e["lengths"],
                         bucket=e["bucket"], far=self.far)

    # -- language models ---------------------------------------------------------------

    def lm(self, encoding: str, seed: int) -> dict:
        """Train (or read back) the language model ``encoding`` of ``seed`` and evaluate it
        at every length; its weights stay in the cache for the later stages."""
        key = f"lm-{encoding}-s{seed}"
        params = {"encoding": encoding, "seed": seed, "model": self.p["model"],
                  "lm": self.p["lm"], "embed_scale": self.p["embed_scale"].get(encoding, 1.0),
                  "eval": self.p["eval"]}
        code = CODES["lm"]
        unit = self.store.get(key, params, code)
        if unit is not None:
            return unit
        t = self.p["lm"]
        res = T.train_lm(self.config(encoding), self.corpus.train, steps=t["steps"],
                         batch=t["batch"], lr=t["lr"], seed=seed, log_every=t["log_every"])
        self.cache.mkdir(parents=True, exist_ok=True)
        torch.save(res.model.state_dict(), self.cache / f"{key}-{code}.pt")
        result = {"seconds": round(res.seconds, 1), "parameters": res.model.n_parameters(),
                  "train_loss": [[s, round(v, 4)] for s, v in res.losses],
                  "eval": self.evaluate(res.model)}
        return self.store.put(key, params, result, code)

    def model(self, encoding: str, seed: int) -> TinyDecoder:
        """The trained model ``encoding`` of ``seed`` (from the cache, else trained)."""
        unit = self.lm(encoding, seed)
        path = self.cache / f"lm-{encoding}-s{seed}-{unit['code']}.pt"
        if not path.exists():  # the unit came from the committed files: train again
            self.store.units.pop(f"lm-{encoding}-s{seed}@{unit['digest']}")
            unit = self.lm(encoding, seed)
        torch.manual_seed(seed)
        model = TinyDecoder(self.config(encoding))
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval()

    # -- baselines ---------------------------------------------------------------------

    def seen_windows(self, seed: int) -> list[np.ndarray]:
        """The training windows the language models of ``seed`` saw, in order (the data
        order depends on the seed only, :func:`~posenc.analysis.experiments.train.train_lm`)."""
        t, L = self.p["lm"], self.p["model"]["train_length"]
        rng = np.random.default_rng(seed)
        return [w for _ in range(t["steps"])
                for w in C.lm_batch(self.corpus.train, t["batch"], L, rng)]

    def baselines(self, name: str) -> dict:
        """The 5-gram counted on ``name`` (``"split"``: the whole training split, ``"s<k>"``:
        the windows seed k's models saw), alone and with the copy cache over each length."""
        key = f"baseline-{name}"
        params = {"name": name, "order": 5, "max_match": B.MAX_MATCH, "lm": self.p["lm"],
                  "model": self.p["model"], "eval": self.p["eval"]}
        code = CODES["baseline"]
        unit = self.store.get(key, params, code)
        if unit is not None:
            return unit
        start = time.perf_counter()
        if name == "split":
            b = self.corpus.train.bounds
            seqs = [self.corpus.train.tokens[b[i]:b[i + 1]] for i in range(len(b) - 1)]
        else:
            seqs = self.seen_windows(int(name[1:]))
        lm = B.NGram(5, seqs)
        e = self.p["eval"]
        valid, test = self.corpus.valid, self.corpus.test
        out = {"ngram": T.summarise(torch.from_numpy(B.losses(test, self.chunks, lm)),
                                    self.chunks, e["bucket"], self.far)}
        for n in e["lengths"]:
            vt, vs = B.target_positions(self.valid_chunks, n)
            m, q = B.copy_probs(valid.tokens, vt.ravel(), vs.ravel())
            w = B.fit_weights(lm.prob(valid.tokens, vt.ravel()), m, q)
            per = B.losses(test, self.chunks, lm, history=n, weights=w)
            out[f"cache{n}"] = {**T.summarise(torch.from_numpy(per), self.chunks, e["bucket"],
                                              self.far), "weights": w.tolist()}
        result = {"seconds": round(time.perf_counter() - start, 1),
                  "bytes": int(sum(len(s) for s in seqs)), **out}
        return self.store.put(key, params, result, code)

    # -- RoPE scaling without training --------------------------------------------------

    def scale(self, seed: int) -> dict:
        """Each scaling rule applied to the RoPE model of ``seed``: at every length with
        the factor matched to it, and at L with the fixed factor."""
        key = f"scale-s{seed}"
        params = {"seed": seed, "scale": self.p["scale"], "eval": self.p["eval"]}
        code = CODES["scale"]
        unit = self.store.get(key, params, code)
        if unit is not None:
            return unit
        start = time.perf_counter()
        model = self.model("rope", seed)
        L, head = self.p["model"]["train_length"], model.cfg.d_model // model.cfg.n_heads
        sc = self.p["scale"]
        out: dict = {}
        for kind in sc["kinds"]:
            out[kind] = {}
            for n in sc["lengths"]:
                model.set_rope(scaling(kind, n / L, L, model.cfg.rope_base, head))
                out[kind][n] = self.evaluate(model, [n])[n]
            model.set_rope(scaling(kind, sc["fixed"], L, model.cfg.rope_base, head))
            out[kind]["fixed"] = self.evaluate(model, [L])[L]
        return self.store.put(key, params, {"seconds": round(time.perf_counter() - start, 1),
                                            **out}, code)

    # -- fine-tuning at 4 L -------------------------------------------------------------

    def finetune(self, arm: str, seed: int, lr: float, split: str = "test") -> dict:
        """The RoPE model of ``seed`` trained further at ``factor`` L with scaling ``arm``:
        its loss at ``factor`` L (on ``split``'s targets) at each checkpoint."""
        f = self.p["finetune"]
        key = f"finetune-{arm}-s{seed}" + ("" if split == "test" else f"-{split}-lr{lr:g}")
        params = {"arm": arm, "seed": seed, "lr": lr, "split": split, "finetune": f,
                  "eval": self.p["eval"]}
        code = CODES["finetune"]
        unit = self.store.get(key, params, code)
        if unit is not None:
            return unit
        start = time.perf_counter()
        model = self.model("rope", seed)
        L = self.p["model"]["train_length"]
        n = f["factor"] * L
        model.set_rope(scaling(arm, f["factor"], L, model.cfg.rope_base,
                               model.cfg.d_model // model.cfg.n_heads))
        torch.manual_seed(seed)
        rng = np.random.default_rng(10_000 + seed)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01,
                                betas=(0.9, 0.98))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / f["warmup"]))
        curve, train_loss = {}, []
        for step in range(max(f["checkpoints"]) + 1):
            if step in f["checkpoints"]:
                lengths = [L, n] if step in (0, max(f["checkpoints"])) else [n]
                curve[step] = {k: v for k, v in self.evaluate(model, lengths, split).items()}
            if step == max(f["checkpoints"]):
                break
            model.train()
            batch = torch.from_numpy(C.lm_batch(self.corpus.train, f["batch"], n, rng))
            loss = sequence_loss(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            model.eval()
            train_loss.append(round(loss.item(), 4))
        result = {"seconds": round(time.perf_counter() - start, 1), "curve": curve,
                  "train_loss": train_loss}
        return self.store.put(key, params, result, code)

    def finetune_rate(self) -> float:
        """The fine-tuning rate: the grid's best for the unscaled control on seed 0, by its
        mean validation loss over the checkpoints after step 0."""
        f = self.p["finetune"]
        n = str(f["factor"] * self.p["model"]["train_length"])

        def mean_loss(lr):
            curve = self.finetune("plain", 0, lr, "valid")["curve"]
            return np.mean([c[n]["target"] for s, c in curve.items() if s != "0"])

        return min(f["lrs"], key=mean_loss)

    # -- synthetic tasks ---------------------------------------------------------------

    def task(self, name: str, encoding: str, seed: int, lr: float) -> dict:
        """Task ``name`` (``copy`` or ``passkey``) learned by a small model with
        ``encoding``: trained until its in-distribution accuracy reaches the target (or
        the step cap), then tested at every length."""
        tc = self.p["tasks"][name]
        key = f"{name}-{encoding}-s{seed}-lr{lr:g}"
        params = {"encoding": encoding, "seed": seed, "lr": lr, "tasks": self.p["tasks"]}
        code = CODES[name]
        unit = self.store.get(key, params, code)
        if unit is not None:
            return unit
        if name == "copy":
            maker, length = K.copy_maker(tuple(tc["train"])), 2 * tc["train"][1] + 1
        else:
            maker, length = K.passkey_maker(tuple(tc["train"])), tc["train"][1] - 1
        cfg = ModelConfig(encoding, **self.p["tasks"]["model"], train_length=length,
                          embed_scale=self.p["embed_scale"].get(encoding, 1.0)
                          * math.sqrt(self.p["tasks"]["model"]["d_model"] / 128))
        checks: list[float] = []

        def valid(model) -> float:  # drawn like training, from a stream training never uses
            rng = np.random.default_rng(99_999)
            return K.score(model, lambda b: maker(b, rng), tc["n_valid"])["symbol"]

        def stop(model) -> bool:
            checks.append(valid(model))
            return checks[-1] >= tc["target"]

        res = K.train_task(cfg, maker, steps=tc["steps"], batch=tc["batch"], lr=lr, seed=seed,
                           stop=stop, check_every=tc["check_every"], desc=name)
        acc = checks[-1] if checks and res.steps % tc["check_every"] == 0 else valid(res.model)
        test = (K.eval_copy(res.model, tc["test"], n=tc["n_test"], seed=seed)
                if name == "copy" else
                K.eval_passkey(res.model, tc["test"], tc["depths"], n=tc["n_test"], seed=seed))
        return self.store.put(key, params, {
            "seconds": round(res.seconds, 1), "steps": res.steps, "valid": acc,
            "learned": acc >= tc["target"], "test": test}, code)

    def task_rate(self, name: str, encoding: str) -> float:
        """The rate of ``encoding`` on task ``name``: on seed 0, the grid's rate that
        reaches the target in the fewest steps, else the best in-distribution accuracy."""
        runs = [self.task(name, encoding, 0, lr) for lr in self.p["tasks"][name]["lrs"]]
        best = min(runs, key=lambda u: (not u["learned"], u["steps"], -u["valid"]))
        return best["params"]["lr"]

    # -- the report --------------------------------------------------------------------

    def report(self) -> dict:
        """Every stored unit that is current (computed by today's code, under today's
        protocol), with the corpus's provenance: what the chapter reads."""
        units = {}
        for u in sorted(self.store.units.values(), key=lambda u: u["key"]):
            current = u["code"] == CODES.get(u["key"].split("-")[0]) and all(
                v == self.p[k] for k, v in u["params"].items() if k in SECTIONS)
            if current:
                units[u["key"]] = u
        c = self.corpus
        return {"protocol": self.p, "units": units,
                "corpus": {"package": c.package, "version": c.version,
                           "sha256": {n: getattr(c, n).sha256()
                                      for n in ("train", "valid", "test")}}}


#: each unit kind's code digest, as this process imported the code
CODES = {kind: code_of(kind) for kind in ("lm", "baseline", "scale", "finetune", "copy",
                                          "passkey")}


def _seeds(p: dict, encoding: str) -> list[int]:
    return p["seeds"]["rope" if encoding == "rope" else "other"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=("lm", "scale", "baselines", "finetune", "tasks",
                                      "report"))
    ap.add_argument("--encodings", default=",".join(ENCODINGS))
    ap.add_argument("--seeds", default=None, help="comma-separated (default: the protocol's)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    study = Study()
    encodings = args.encodings.split(",")
    if args.stage == "lm":
        order = sorted(((s, e) for e in encodings for s in _seeds(study.p, e)
                        if args.seeds is None or str(s) in args.seeds.split(",")))
        for seed, enc in order:
            start = time.perf_counter()
            unit = study.lm(enc, seed)
            ev = unit["eval"]
            print(f"{unit['key']}: {ev['128']['target']:.3f} at 128, "
                  f"{ev['512']['target'] if ev['512'] else float('nan'):.3f} at 512 "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
        return 0
    if args.stage == "baselines":
        for name in ["split"] + [f"s{s}" for s in study.p["seeds"]["rope"]]:
            unit = study.baselines(name)
            print(f"{unit['key']}: 5-gram {unit['ngram']['target']:.3f}, with the cache over "
                  f"128 {unit['cache128']['target']:.3f} ({unit['seconds']:.0f} s)", flush=True)
        return 0
    if args.stage == "scale":
        for seed in study.p["seeds"]["rope"]:
            unit = study.scale(seed)
            print(f"{unit['key']}: {unit['seconds']:.0f} s", flush=True)
        return 0
    if args.stage == "finetune":
        lr = study.finetune_rate()
        print(f"fine-tuning rate {lr:g}", flush=True)
        for seed in study.p["seeds"]["rope"]:
            for arm in study.p["finetune"]["arms"]:
                unit = study.finetune(arm, seed, lr)
                n = str(study.p["finetune"]["factor"] * study.p["model"]["train_length"])
                print(f"{unit['key']}: " + ", ".join(
                    f"{s}: {c[n]['target']:.3f}" for s, c in unit["curve"].items()), flush=True)
        return 0
    if args.stage == "tasks":
        tp = study.p["tasks"]
        for enc in [e for e in tp["encodings"] if e in encodings]:
            for name in ("copy", "passkey"):
                lr = study.task_rate(name, enc)
                for seed in tp["seeds"]:
                    unit = study.task(name, enc, seed, lr)
                    print(f"{unit['key']}: learned {unit['learned']} in {unit['steps']} "
                          f"steps ({unit['seconds']:.0f} s)", flush=True)
        return 0
    out = ROOT / "experiments" / "study.json"
    report = study.report()
    out.write_text(json.dumps(report, sort_keys=True) + "\n")
    print(f"{out.relative_to(ROOT)}: {len(report['units'])} units", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
