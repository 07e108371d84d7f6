"""The language-model stage of the CPU tier: every unit trained or evaluated on the corpus.

:class:`Runner` trains the tuned language models and their seeds, evaluates them on the
fixed test chunks, and runs what reads those models without training them further (RoPE
scaling at fixed and matched factors) or trains more of them (the longer-trained
references, the RoPE ablation, the budget study).  Its units are keyed on this module's
import closure (:func:`posenc.analysis.experiments.units.stage_code` of ``"lm"``); the
fine-tuning (:mod:`experiments.stage_finetune`) and the tasks
(:mod:`experiments.stage_tasks`) take a :class:`Runner` and have their own keys.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch

from posenc.analysis.experiments import corpus as C
from posenc.analysis.experiments import train as T
from posenc.analysis.experiments.models import ENCODINGS, ModelConfig, TinyDecoder
from posenc.analysis.experiments.rules import matched_kinds, scaling_parameters
from posenc.analysis.experiments.units import STAGES, UnitStore, stage_code, stage_of

#: what a language-model unit does not depend on: the tuning grid's axes (a unit's rate
#: and scale are its own ``trained`` settings) and the steps and batch (likewise)
LM_NOT_KEYED = ("lrs", "embed_scales", "steps", "batch")

#: the configuration section each unit kind reads besides the model's
OWN_SECTION = {"scale": "scaling", "scalematched": "scaling", "finetune": "finetune",
               "finetunegrid": "finetune", "probe": "finetune",
               "copy": "copy", "copygrid": "copy", "passkey": "passkey",
               "passkeygrid": "passkey"}


class Runner:
    """Runs units of work once: each unit's result is kept in ``units`` (one JSON file per
    unit, keyed on everything it depends on and on its stage's code), and model weights, where
    later units need them, under ``cache``.

    A unit's key names it; its stored parameters are the configuration it reads plus
    ``extra`` (a trained model's full settings; for a unit that reads a trained
    model, that model's digest), so a unit can never be reused for a model it did not see.
    ``encodings`` limits a process to some encodings' units (two processes can share one
    unit folder, each taking half).
    """

    def __init__(self, config: dict, cache: Path, device: str, progress: bool,
                 units: Path | None = None, corpus: C.Corpus | None = None,
                 encodings=ENCODINGS, store: UnitStore | None = None):
        self.config, self.device, self.progress = config, device, progress
        self.encodings = tuple(e for e in ENCODINGS if e in encodings)
        self.cache = cache
        self.cache.mkdir(parents=True, exist_ok=True)
        self.store = store if store is not None else UnitStore(
            units if units is not None else cache / "units")
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
        #: each stage's code hash (its units' key): computed once, at the start
        self.codes = {stage: stage_code(stage) for stage in STAGES}

    def _params(self, key: str, extra: dict | None = None) -> dict:
        """What unit ``key`` depends on: the model's shape; for a language-model or
        fine-tuning unit the language-model section less what each unit carries itself
        (:data:`LM_NOT_KEYED`); the unit kind's own section (:data:`OWN_SECTION`); and
        ``extra`` (a trained model's settings, or the digest of the model a unit reads).
        The store adds the stage's code hash."""
        params = {"unit": key, "model": self.config["model"]}
        if stage_of(key) in ("lm", "finetune"):
            params["lm"] = {k: v for k, v in self.config["lm"].items()
                            if k not in LM_NOT_KEYED}
        own = OWN_SECTION.get(key.split("-")[0])
        if own is not None:
            params[own] = self.config[own]
        return {**params, **(extra or {})}

    def digest(self, key: str, extra: dict | None = None) -> str:
        """The digest unit ``key`` is stored under (its parameters and its stage's code)."""
        return self.store.digest(self._params(key, extra), self.codes[stage_of(key)])

    def unit(self, key: str, fn, extra: dict | None = None):
        params, code = self._params(key, extra), self.codes[stage_of(key)]
        out = self.store.get(key, params, code)
        if out is None:
            t0 = time.perf_counter()
            res = fn()
            res["seconds"] = time.perf_counter() - t0
            out = self.store.put(key, params, res, code)
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
        self._digests[key] = self.digest(key, extra)

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

