"""The GPU tier's plan: one device call, units in priority order inside a time budget."""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

from posenc.analysis.experiments import corpus as C
from posenc.analysis.experiments import probe as P
from posenc.analysis.experiments import tasks as K
from posenc.analysis.experiments.models import ENCODINGS, ModelConfig
from posenc.analysis.experiments.rules import matched_kinds, scaling_parameters
from posenc.analysis.experiments.units import UnitStore

#: the encodings that add a bias to the attention scores, so may attend in several ways
BIAS_ENCODINGS = ("alibi", "t5")


def items(config: dict) -> list[tuple]:
    """The groups after priority 1, in priority order (:meth:`GpuPlan.run_item` runs
    one); each names the stack it reads (``"rope"``, ``"alibi"`` or ``None``) as its
    second field."""
    out: list[tuple] = [("scaling", "rope"), ("probe", "rope"), ("probe", "alibi")]
    out += [("reference", None, enc, int(n)) for enc, n in config["plan"]["references"]]
    out += [("finetune", "rope", arm) for arm in config["finetune"]["arms"]]
    out += [("task", None, name, enc, float(lr)) for name in ("copy", "passkey")
            for lr in config[name]["lrs"] for enc in ENCODINGS]
    return out


def item_name(item: tuple) -> str:
    """The name an item's (first) group has in the log and in ``run.py --groups``."""
    kind = item[0]
    if kind == "scaling":
        return "scaling"
    if kind == "probe":
        return f"probe-{item[1]}"
    if kind == "reference":
        return f"lm-{item[2]}-L{item[3]}"
    if kind == "finetune":
        return f"finetune-{item[2]}"
    return f"{item[2]}-{item[3]}-lr{item[4]:g}"


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
    3. the passkey probe of the RoPE and ALiBi models; reference models trained at longer
       lengths (the same bytes per step), to measure what longer context is worth on these
       targets, and their probe; the fine-tuning arms (plain, PI, NTK, YaRN) at
       ``finetune.factor`` times the length, ``ft_steps`` steps each at rate ``ft_lr``;
    4. the synthetic tasks (copy, passkey) for every encoding at each rate of the task's
       ``lrs``, seeds stacked, each seed trained until it reaches the target accuracy or
       the cap (:meth:`task_group`);
    5. the other seeds of every encoding.

    The steps of every language model are the same: ``--steps``, or, with a budget and no
    ``--steps``, as many (a multiple of 50 in ``[min_steps, max_steps]``) as let priority 1
    take ``first_share`` of the budget at the step times measured at the start.

    How the seeds train is decided on the device, each way checked against a reference
    before it is used: vmap over the seeds where it agrees with the per-seed loop
    (:meth:`vmap_for`; a group that then runs out of memory on the shared device loops
    instead), and for ALiBi and T5 looping over seeds the fastest way to attend that
    agrees with the model's own (:meth:`attention_ways`).  A task seed that has learned
    leaves its stack; the probes read every seed at once (:meth:`probe`).
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
        # the far targets' gap: the plan's far_gap where it sets one (the GPU tier sets its
        # training length, so a far target's previous occurrence lies beyond every distance
        # of training and only a read longer than L can see it), else the CPU tier's
        self.far_gap = int(self.plan.get("far_gap", C.FAR_GAP))
        self.far = C.far_identifier_mask(corpus.test, gap=self.far_gap)
        # as the plan says on every device, so the CPU's tests run the GPU's bfloat16 path
        self.bf16 = bool(self.plan["bf16"])
        self.use_vmap = use_vmap
        self.step_time: dict[tuple[str, int, int], float] = {}
        self.first: list[int] = list(self.plan["first_seeds"])
        self.eval_time = 0.0
        self.steps = steps
        self.vmap_ok: dict[str, bool] = {}
        self.vmap_way: dict[str, str] = {}  # how each encoding's vmapped seeds attend
        self.attention_ok: dict[tuple[str, str], bool] = {}
        self.attention: dict[tuple[str, int], str] = {}  # (encoding, length): the way chosen
        self.read_loops: set[tuple[str, str]] = set()  # (encoding, what): vmap failed there
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

    def vmap_for(self, enc: str, length: int | None = None) -> bool:
        """Whether ``enc`` trains under vmap (at ``length``): asked for, and one of the
        plan's ``vmap_attention`` ways
        (:data:`~posenc.analysis.experiments.stacked.VMAP_ATTENTION`), tried in order,
        agrees with the per-seed loop on this device
        (:func:`~posenc.analysis.experiments.stacked.vmap_agrees`, checked once per
        encoding; the first that agrees is kept in :attr:`vmap_way`).  The attention
        written out (``"written"``) keeps every score for backward, so its memory grows
        with the square of the length: it serves up to the plan's ``vmap_max_length``."""
        if not self.use_vmap or enc in self.plan["vmap_off"]:
            return False
        if enc not in self.vmap_ok:
            stack = self.S.build(self.cfg(enc), self.plan["first_seeds"][:2], self.device)
            ok = False
            for way in self.plan.get("vmap_attention", self.S.VMAP_ATTENTION):
                self.S.set_vmap_attention(stack, way)
                ok, why = self.S.vmap_agrees(stack, self.corpus.train, batch=4,
                                             bf16=self.bf16)
                if ok:
                    self.vmap_way[enc] = way
                    break
                self.log(f"  {enc}: vmap attending {way!r} does not agree with the "
                         f"per-seed loop here ({why})")
            self.vmap_ok[enc] = ok
            if not ok:
                self.log(f"  {enc}: looping over the seeds")
        if (length is not None and self.vmap_way.get(enc) == "written"
                and length > self.plan.get("vmap_max_length", length)):
            return False
        return self.vmap_ok[enc]

    def build(self, enc: str, seeds, length: int | None = None):
        """The stack of ``seeds`` of ``enc`` (at ``length``), attending under vmap the way
        :meth:`vmap_for` chose for ``enc``."""
        stack = self.S.build(self.cfg(enc, length), seeds, self.device)
        if self.vmap_for(enc):
            self.S.set_vmap_attention(stack, self.vmap_way[enc])
        return stack

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
                "eval": {"lengths": self.lengths,
                         "n_chunks": lm["n_chunks"], "target": lm["target"],
                         "bucket": lm["bucket"], "valid_chunks": lm["valid_chunks"],
                         "far": [self.far_gap, C.FAR_MIN_LEN]},
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
        stack = self.build(enc, seeds, length)
        attention = self.attention_for(enc, length)
        self.S.set_attention(stack, attention)
        t0 = time.perf_counter()
        short = False
        try:
            self.S.train_lm(stack, self.corpus.train, steps=steps, batch=self.batch(length),
                            lr=self.plan["lr"], length=length, bf16=self.bf16,
                            deadline=self.budget.deadline(),
                            use_vmap=self.vmap_for(enc, length))
        except TimeoutError as e:
            self.skipped.append(name)
            self.log(f"  {name}: stopped, {e}")
            return None
        except torch.OutOfMemoryError:
            if not self.vmap_for(enc, length):
                raise
            short = True
        if short:
            # the device is shared: the other processes left too little for every seed's
            # scores at once, which the measurement had fitted; loop over the seeds instead
            # (out of the handler, so the failed step's tensors are free)
            self.log(f"  {name}: out of memory under vmap, looping over the seeds instead")
            stack.params.clear()
            self._loop_from_now(enc, (enc, length, len(seeds)), len(keys))
            return self.lm_group(enc, length, seeds, steps, keep=keep)
        train_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        # every length, a reference's shorter ones too: the same weights reading less
        # history before the same targets (what the longer history is worth within one
        # model, as experiments/stage_context.py measures on the CPU tier)
        test = self.evaluate(enc, stack, self.corpus.test, self.chunks, self.lengths,
                             self.far)
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
                "vmap": self._vmap_name(enc, length), "attention": attention,
                "valid": valid[i][self.L]["target"],
                "test": test[i]})
        peak = (f", peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB"
                if torch.cuda.is_available() else "")
        self.log(f"  {name}: {steps} steps in {train_s:.0f} s ({1000 * train_s / steps:.1f} "
                 f"ms/step, vmap {self._vmap_name(enc, length)}, attention {attention}{peak}), "
                 "evaluated in "
                 f"{eval_s:.0f} s; loss at {length}: "
                 + ", ".join(f"{t[length]['target']:.3f}" for t in test))
        return stack

    def _vmap_name(self, enc: str, length: int) -> str | bool:
        """How ``enc``'s seeds train at ``length``: the vmapped attention's way, or False
        (looping over the seeds)."""
        return self.vmap_way[enc] if self.vmap_for(enc, length) else False

    def _loop_from_now(self, enc: str, step_key: tuple, n_keys: int) -> None:
        """After vmapped training ran out of memory: ``enc`` loops over its seeds from now
        on, its step is measured again, and the group's keys, which it adds again, are
        taken off :attr:`keys`."""
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        self.vmap_ok[enc] = False
        self.step_time.pop(step_key, None)
        del self.keys[-n_keys:]

    def evaluate(self, enc: str, stack, split, chunks, lengths, far) -> list[dict]:
        """The stack's losses; under vmap where the training check passed, and if vmap
        fails at some length (another attention kernel may serve long inputs), again with
        the per-seed loop."""
        kw = dict(bucket=self.config["lm"]["bucket"], far=far, bf16=self.bf16)
        return self._read(enc, "evaluation", lambda v: self.S.eval_lm(
            stack, split, chunks, lengths, use_vmap=v, **kw))

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
        """Seconds per training step of ``seeds`` stacked (after two warm-up steps).  For
        an additive-bias encoding the seeds run one at a time, the fastest of the ways to
        attend that agree with the model's own is chosen here (:meth:`attention_for`)."""
        key = (enc, length, len(seeds))
        if key not in self.step_time:
            stack = self.build(enc, seeds, length)
            kw = dict(batch=self.batch(length), lr=1e-4, length=length, bf16=self.bf16,
                      use_vmap=self.vmap_for(enc, length))
            ways = self.attention_ways(enc, length)
            if len(ways) > 1:
                self.step_time[key] = self._time_ways(enc, length, stack, ways, kw)
                return self.step_time[key]
            try:
                self.S.train_lm(stack, self.corpus.train, steps=2, **kw)  # type: ignore[arg-type]
            except torch.OutOfMemoryError:
                if not kw["use_vmap"]:
                    raise
                # the written-out scores of every seed at once do not fit: loop instead
                self.log(f"  {enc}: out of memory under vmap at {length}, looping")
                self.vmap_ok[enc] = False
                del stack
                torch.cuda.empty_cache()
                return self.measure(enc, length, seeds)
            t0 = time.perf_counter()
            self.S.train_lm(stack, self.corpus.train, steps=3, **kw)  # type: ignore[arg-type]
            self.step_time[key] = (time.perf_counter() - t0) / 3
            self.log(f"  step time {enc} at {length}, {len(seeds)} seeds: "
                     f"{1000 * self.step_time[key]:.1f} ms")
        return self.step_time[key]

    def attention_ways(self, enc: str, length: int) -> list[str]:
        """The ways ``enc`` may attend at ``length`` (:data:`~posenc.analysis.experiments.
        stacked.BIAS_ATTENTION`): for ALiBi and T5 on the per-seed path, the plan's
        ``bias_attention`` that agree with the model's own attention on this device
        (:func:`~posenc.analysis.experiments.stacked.attention_agrees`, checked once per
        encoding and way); otherwise only the model's own."""
        if enc not in BIAS_ENCODINGS or self.vmap_for(enc, length):
            return ["blocked"]
        ways, stack = [], None
        for way in self.plan.get("bias_attention", ["blocked"]):
            if way != "blocked" and (enc, way) not in self.attention_ok:
                if stack is None:
                    stack = self.S.build(self.cfg(enc), self.plan["first_seeds"][:2],
                                         self.device)
                ok, why = self.S.attention_agrees(stack, self.corpus.train, way, batch=2,
                                                  length=min(self.L, 256), bf16=self.bf16)
                self.attention_ok[(enc, way)] = ok
                if not ok:
                    self.log(f"  {enc}: attention {way!r} does not agree with the model's "
                             f"own here, not used ({why})")
            if way == "blocked" or self.attention_ok[(enc, way)]:
                ways.append(way)
        return ways or ["blocked"]

    def attention_for(self, enc: str, length: int) -> str:
        """The way ``enc`` attends at ``length``: the one :meth:`measure` found fastest."""
        return self.attention.get((enc, length), "blocked")

    def _time_ways(self, enc: str, length: int, stack, ways: list[str], kw: dict) -> float:
        """Each way's step time (one step, then, unless that one step was already three
        times the best step so far, another and three timed); the fastest is kept."""
        times: dict[str, float] = {}
        for way in ways:
            self.S.set_attention(stack, way)
            try:
                t0 = time.perf_counter()
                self.S.train_lm(stack, self.corpus.train, steps=1, **kw)
                first = time.perf_counter() - t0
                if times and first > 3 * min(times.values()):
                    self.log(f"  {enc} at {length}, attention {way!r}: one step took "
                             f"{1000 * first:.0f} ms, not timed further")
                    continue
                self.S.train_lm(stack, self.corpus.train, steps=1, **kw)
                t0 = time.perf_counter()
                self.S.train_lm(stack, self.corpus.train, steps=3, **kw)
                times[way] = (time.perf_counter() - t0) / 3
            except Exception as e:  # noqa: BLE001 - out of memory, a kernel refused: skip
                self.log(f"  {enc} at {length}, attention {way!r} failed: "
                         f"{type(e).__name__}: {str(e)[:300]}")
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
        if not times:
            raise RuntimeError(f"no way to attend trains {enc} at {length}")
        best = min(times, key=times.__getitem__)
        self.attention[(enc, length)] = best
        self.log(f"  step time {enc} at {length}, {stack.n} seeds: " + ", ".join(
            f"{w} {1000 * t:.1f} ms" for w, t in times.items()) + f"; attends {best!r}")
        return times[best]

    def run(self) -> None:
        first, more = self.seeds_for_first()
        self.first = first
        steps = self.steps = self.choose_steps()
        self.log(f"language models: {steps} steps each, {len(first)} seeds stacked, "
                 f"{self.budget.left():.0f} s left")
        kept = {}
        for enc in ENCODINGS:
            stack = self.guard(f"lm-{enc}", self.lm_group, enc, self.L, first, steps)
            if enc in ("rope", "alibi"):
                kept[enc] = stack
        its = items(self.config)
        for j, it in enumerate(its):
            got = self.run_item(it, first, steps, kept.get(it[1]))
            if it[0] == "finetune":
                kept["rope"] = got  # the arm's RoPE models (trained again if they were not)
            for enc in [e for e in kept if all(later[1] != e for later in its[j + 1:])]:
                del kept[enc]  # no later group reads these models
        if more:
            for enc in ENCODINGS:
                self.guard(f"lm-{enc}-more", self.lm_group, enc, self.L, more, steps)

    def run_item(self, item: tuple, seeds, steps: int, stack, call=None):
        """Run one group of :func:`items` (two for a reference: its models, then their
        probe) through ``call(name, fn, *args)`` (default :meth:`guard`); ``stack`` is the
        models it reads, or ``None`` to train them again.  Returns what a fine-tuning arm
        returns (the RoPE models), else ``None``."""
        call = call or self.guard
        kind = item[0]
        if kind == "scaling":
            call("scaling", self.scaling, stack, seeds, steps)
        elif kind == "probe":
            call(f"probe-{item[1]}", self.probe_group, item[1], self.L, seeds, steps, stack)
        elif kind == "reference":
            _, _, enc, n = item
            ref = call(f"lm-{enc}-L{n}", self.lm_group, enc, n, seeds, steps)
            call(f"probe-{enc}-L{n}", self.probe_group, enc, n, seeds, steps, ref)
        elif kind == "finetune":
            return call(f"finetune-{item[2]}", self.finetune_arm, item[2], seeds, steps,
                        stack)
        else:
            _, _, name, enc, lr = item
            call(item_name(item), self.task_group, name, enc, seeds, lr)
        return None

    def task_group(self, name: str, enc: str, seeds, lr: float) -> None:
        """One synthetic task for one encoding at one rate, seeds stacked
        (:func:`~posenc.analysis.experiments.stacked.train_task`): each seed trained until
        its in-distribution accuracy reaches the target or the cap, then tested (copy also
        free-running), as the CPU tier's task stage does for one model."""
        tc = self.config[name]
        if name == "copy":
            maker, length = K.copy_maker(tuple(tc["m"])), 2 * tc["m"][1] + 1
        else:
            maker, length = K.passkey_maker(tuple(tc["total"])), tc["total"][1] - 1
        keys = [(f"{name}-{enc}-lr{lr:g}-s{s}",
                 {"model": self.config["model"], "encoding": enc, "task": name,
                  "config": tc, "seed": s, "lr": lr,
                  "embed_scale": float(self.plan["embed_scale"][enc]), "bf16": self.bf16})
                for s in seeds]
        self.keys += keys
        if all(self.store.get(k, prm) is not None for k, prm in keys):
            return
        group = f"{name}-{enc}-lr{lr:g}"
        key = (f"{name}:{enc}", length, len(seeds))
        if key not in self.step_time:
            if not self._fits(group, 3 * min(self.step_time.values(), default=0.0)):
                return
            probe = self.build(enc, seeds, length)
            self.S.train_task(probe, maker, steps=2, batch=tc["batch"], lr=lr, bf16=self.bf16,
                              use_vmap=self.vmap_for(enc, length))
            t0 = time.perf_counter()
            self.S.train_task(probe, maker, steps=3, batch=tc["batch"], lr=lr, bf16=self.bf16,
                              use_vmap=self.vmap_for(enc, length))
            self.step_time[key] = (time.perf_counter() - t0) / 3
        if not self._fits(group, tc["steps"] * self.step_time[key] + self.eval_time + 1.0):
            return

        def learned(sub) -> list[bool]:  # every seed still training, read at once
            return [a >= tc["target"] for a in self.task_valid(enc, sub, maker, tc)]

        stack = self.build(enc, seeds, length)
        t0 = time.perf_counter()
        short = False
        try:
            got = self.S.train_task(stack, maker, steps=tc["steps"], batch=tc["batch"], lr=lr,
                                    bf16=self.bf16, deadline=self.budget.deadline(),
                                    use_vmap=self.vmap_for(enc, length),
                                    stop_all=learned, check_every=tc["check_every"])
        except TimeoutError as e:
            self.skipped.append(group)
            self.log(f"  {group}: stopped, {e}")
            return
        except torch.OutOfMemoryError:
            if not self.vmap_for(enc, length):
                raise
            short = True
        if short:  # as in lm_group
            self.log(f"  {group}: out of memory under vmap, looping over the seeds instead")
            stack.params.clear()
            self._loop_from_now(enc, key, len(keys))
            return self.task_group(name, enc, seeds, lr)
        train_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        accs, tests = self.task_tests(name, enc, stack, maker)
        for i, (k, prm) in enumerate(keys):
            seed, acc, test = seeds[i], accs[i], tests[i]
            self.store.put(k, prm, {
                "encoding": enc, "task": name, "seed": seed, "lr": lr,
                "task_steps": got[i]["steps"], "valid": acc, "learned": acc >= tc["target"],
                "losses": [(st, ls[i]) for st, ls in stack.losses if ls[i] is not None],
                "train_seconds": train_s, "eval_seconds": time.perf_counter() - t0,
                "test": test})
        self.log(f"  {group}: {train_s:.0f} s; steps " + ", ".join(
            str(g["steps"]) for g in got) + "; learned " + ", ".join(
            str(g["done"]) for g in got))

    def _read(self, enc: str, what: str, fn):
        """``fn(use_vmap)`` for a stack of ``enc`` read without gradients: under vmap
        where the training check passed, looping if vmap fails here (and, for this
        encoding and ``what``, from then on); ``what`` names it in the log."""
        if self.vmap_for(enc) and (enc, what) not in self.read_loops:
            try:
                return fn(True)
            except (RuntimeError, ValueError) as e:
                self.read_loops.add((enc, what))
                self.log(f"  {enc}: {what} under vmap failed ({str(e)[:300]}); looping")
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
        return fn(False)

    def task_valid(self, enc: str, stack, maker, tc: dict) -> list[float]:
        """Every seed's in-distribution accuracy, the stopping rule's: the same
        ``n_valid`` questions for every seed and check (a generator seeded 99,999), read
        by all seeds at once (:func:`~posenc.analysis.experiments.stacked.task_scores`)."""
        def run(use_vmap: bool):
            makers = [lambda b, r=np.random.default_rng(99_999): maker(b, r)
                      for _ in stack.seeds]
            return [v["symbol"] for v in self.S.task_scores(stack, makers, tc["n_valid"],
                                                            use_vmap=use_vmap)]
        return self._read(enc, "the task check", run)

    def task_tests(self, name: str, enc: str, stack, maker) -> tuple[list, list]:
        """Every seed's in-distribution accuracy (:meth:`task_valid`) and tests (copy
        also free-running), read by all seeds at once."""
        tc = self.config[name]

        def run(use_vmap: bool):
            return (self.S.eval_copy(stack, tc["eval_m"], n=tc["n_eval"], free=True,
                                     use_vmap=use_vmap) if name == "copy" else
                    self.S.eval_passkey(stack, tc["eval_totals"], tc["depths"],
                                        n=tc["n_eval"], use_vmap=use_vmap))
        return (self.task_valid(enc, stack, maker, tc),
                self._read(enc, "the task tests", run))

    def _stack(self, enc: str, length: int, seeds, steps: int, stack):
        """``stack`` if it is at hand, else the group trained again (within the budget)."""
        return stack if stack is not None else self.lm_group(enc, length, seeds, steps,
                                                              keep=True)

    def probe_group(self, enc: str, length: int, seeds, steps: int, stack) -> None:
        """The passkey probe (:mod:`posenc.analysis.experiments.probe`) of one group."""
        pr = self.config["finetune"]["probe"]
        keys = [(f"probe-{enc}-L{length}-s{s}",
                 {**self.lm_params(enc, length, s, steps), "probe": pr}) for s in seeds]
        self.keys += keys
        if all(self.store.get(k, prm) is not None for k, prm in keys):
            return
        stack = self._stack(enc, length, seeds, steps, stack)
        if stack is None or not self._fits(f"probe-{enc}-L{length}", self.eval_time + 1.0):
            return
        t0 = time.perf_counter()
        res = self.probe(enc, stack)
        for i, (key, params) in enumerate(keys):
            self.store.put(key, params, {"encoding": enc, "seed": seeds[i],
                                         "train_length": length, "probe": res[i],
                                         "eval_seconds": time.perf_counter() - t0})
        self.log(f"  probe {enc} at {length}: {time.perf_counter() - t0:.0f} s")

    def probe(self, enc: str, stack) -> list[dict]:
        """The passkey probe of every seed of ``stack`` at every length it can read
        (:func:`~posenc.analysis.experiments.stacked.passkey_scores`, the questions of
        :mod:`~posenc.analysis.experiments.probe`); under vmap as :meth:`evaluate` is."""
        pr = self.config["finetune"]["probe"]
        lengths = [n for n in self.lengths if n >= P.MIN_LENGTH]
        return self._read(enc, "the probe", lambda v: self.S.passkey_scores(
            stack, self.corpus.test, lengths, pr["depths"], use_vmap=v, n=pr["n"],
            seed=pr["seed"]))

    def finetune_arm(self, arm: str, seeds, steps: int, rope_stack):
        """One fine-tuning arm on the RoPE models (a copy of them, seeds stacked): the arm's
        scaling for ``finetune.factor``, ``plan.ft_steps`` steps at ``factor * L`` with the
        same bytes per step, then the test losses and the probe.  Returns the RoPE stack
        (trained again if it was not at hand), for the next arm."""
        ft, p = self.config["finetune"], self.plan
        n_ft = self.L * int(ft["factor"])
        ft_steps = int(p["ft_steps"])
        base = self.lm_params("rope", self.L, 0, steps)
        keys = [(f"finetune-{arm}-s{s}",
                 {**base, "seed": s, "arm": arm, "finetune": ft, "ft_steps": ft_steps,
                  "ft_lr": p["ft_lr"]}) for s in seeds]
        self.keys += keys
        if all(self.store.get(k, prm) is not None for k, prm in keys):
            return rope_stack
        name = f"finetune-{arm}"
        if not self._fits(name, ft_steps * min(self.step_time.values(), default=0.0)):
            return rope_stack
        t_step = self.measure("rope", n_ft, seeds)
        if not self._fits(name, ft_steps * t_step + self.eval_time + 1.0):
            return rope_stack
        rope_stack = self._stack("rope", self.L, seeds, steps, rope_stack)
        if rope_stack is None:
            return None
        cfg = self.cfg("rope")
        from experiments.stage_finetune import arm_parameters

        params = arm_parameters(arm, ft["factor"], self.L, cfg.d_model // cfg.n_heads,
                                cfg.rope_base)
        stack = copy.deepcopy(rope_stack)
        stack.losses = []
        self.S.set_rope(stack, params)
        t0 = time.perf_counter()
        try:
            self.S.train_lm(stack, self.corpus.train, steps=ft_steps, batch=self.batch(n_ft),
                            lr=float(p["ft_lr"]), length=n_ft, bf16=self.bf16,
                            deadline=self.budget.deadline(),
                            rng_seeds=[1000 + s for s in seeds],
                            use_vmap=self.vmap_for("rope", n_ft))
        except TimeoutError as e:
            self.skipped.append(name)
            self.log(f"  {name}: stopped, {e}")
            return rope_stack
        train_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        test = self.evaluate("rope", stack, self.corpus.test, self.chunks, self.lengths,
                             self.far)
        probes = self.probe("rope", stack)
        eval_s = time.perf_counter() - t0
        for i, (key, prm) in enumerate(keys):
            self.store.put(key, prm, {
                "arm": arm, "seed": seeds[i], "rope_parameters": params, "ft_steps": ft_steps,
                "losses": [(st, ls[i]) for st, ls in stack.losses], "train_seconds": train_s,
                "eval_seconds": eval_s, "test": test[i], "probe": probes[i]})
        self.log(f"  {name}: {ft_steps} steps in {train_s:.0f} s, evaluated in {eval_s:.0f} s;"
                 f" loss at {n_ft}: " + ", ".join(f"{t[n_ft]['target']:.3f}" for t in test))
        return rope_stack

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
        return {"steps": self.steps, **self.record(), "first_seeds": self.first,
                "far_targets": self.far_share(), "units": units}

    def record(self) -> dict:
        """What the plan measured, checked and chose, and what it skipped or lost: the step
        times (``{"alibi@2048x5": ms}``), the vmap checks, the way each (encoding, length)
        attends (``{"alibi@2048": "flex"}``), the skipped groups and the errors."""
        return {"step_ms": {f"{e}@{n}x{k}": 1000 * t for (e, n, k), t in
                            self.step_time.items()},
                "vmap": {e: self.vmap_way[e] if ok else False
                         for e, ok in self.vmap_ok.items()},
                "attention": {f"{e}@{n}": w for (e, n), w in self.attention.items()},
                "skipped": self.skipped, "errors": self.errors}

    def far_share(self) -> dict:
        m = np.stack([self.far[e - self.chunks.target:e] for e in self.chunks.ends])
        return {"rule": f"identifier bytes after the first, of identifiers of >= "
                        f"{C.FAR_MIN_LEN} characters (not keywords) whose previous "
                        f"occurrence in the file starts > {self.far_gap} bytes back",
                "gap": self.far_gap, "bytes": int(m.sum()), "of": int(m.size)}


