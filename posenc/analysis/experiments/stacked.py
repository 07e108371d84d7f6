"""Several seeds of one configuration trained and evaluated together, as one batched model.

The seeds' models are stacked with :func:`torch.func.stack_module_state` (each parameter
gains a leading seed dimension) and run with :func:`torch.func.vmap` over
:func:`torch.func.functional_call` of one :class:`~.models.TinyDecoder`: the same module
code as a single model, one kernel launch for all seeds, so a GPU that one small model
leaves mostly idle trains several in about the time of one.

Each seed is the model :func:`.train.train_lm` would train with that seed: the same
initial weights (``torch.manual_seed(seed)`` before building it), the same batches (a NumPy
generator seeded with ``seed``), the same optimiser (AdamW, weight decay 0.01, betas
0.9/0.98, warm-up then cosine decay) and the same gradient clipping at norm 1, *per seed*
(the norm is each seed's own, not the stack's).  Only floating-point summation order
differs, and, where ``bf16`` is asked for, the bfloat16 autocast of the matrix products.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import torch
from torch.nn import functional as F

from .corpus import EvalChunks, Split, lm_batch
from .models import Block, ModelConfig, TinyDecoder
from .train import _schedule, can_read, summarise


@dataclass
class Stack:
    """A template model and the stacked parameters of ``len(seeds)`` models."""

    template: TinyDecoder
    params: dict[str, torch.Tensor]
    seeds: tuple[int, ...]
    losses: list = field(default_factory=list)  # (step, [loss of each seed])
    seconds: float = 0.0
    steps_done: int = 0

    @property
    def n(self) -> int:
        return len(self.seeds)

    def model(self, i: int) -> TinyDecoder:
        """Seed ``i``'s model as a plain :class:`TinyDecoder` (a copy of its weights)."""
        m = TinyDecoder(self.template.cfg).to(next(iter(self.params.values())).device)
        m.load_state_dict({k: v[i].detach().clone() for k, v in self.params.items()},
                          strict=False)
        m.rope = self.template.rope if self.template.rope is not None else m.rope
        return m.eval()


def _attend(q, k, v, bias):
    """Causal attention written out: scores, the causal mask or the additive bias (which
    carries the mask), softmax and the values in float32 (``"written"`` of
    :data:`VMAP_ATTENTION`).  The same function as the fused kernel :class:`.models.Block`
    calls, in plain operations whose vmap batching rules hold on every device.

    Memory: backward keeps one float32 copy of the probabilities (the softmax's output
    is also the product's input), 4 bytes a score; a bfloat16 product would keep a second
    copy beside it (6 bytes).  Several processes share one device, each with every seed's
    scores at once, so this is what decides whether they fit."""
    scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
    if bias is None:
        n = q.shape[-2]
        causal = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
    else:
        scores = scores + bias
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
    with torch.autocast(q.device.type, enabled=False):  # autocast would copy to bfloat16
        return (probs @ v.float()).to(v.dtype)


def _sdpa(q, k, v, bias, dtype):
    """The fused kernel's causal attention (or with the additive ``bias``, which carries
    the mask) on ``q, k, v`` and ``bias`` cast to ``dtype``, autocast aside: the cast is
    the one autocast makes, said once, so that backward can make it again."""
    with torch.autocast(q.device.type, enabled=False):
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
        if bias is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(dtype))


class _SeedsAttention(torch.autograd.Function):
    """Attention for every seed of a vmapped stack in one fused call (``"fused"`` of
    :data:`VMAP_ATTENTION`), without the fused kernels' own batching rules (which, on
    CUDA under torch 2.11, gave NaN gradients for the causal kernel and refused ALiBi's
    float32 bias beside bfloat16 queries).  Under vmap (:meth:`vmap`), the seed dimension
    joins the batch, so one call of the kernel on plain tensors attends for all seeds; a
    bias that differs between the seeds (T5's, learned) takes one call per seed.  Backward
    runs the same call again with gradients, so the memory kept is ``q, k, v`` and the
    bias, linear in the length, where :func:`_attend` keeps every score."""

    @staticmethod
    def forward(q, k, v, bias, dtype):
        return _sdpa(q, k, v, bias, dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        q, k, v, bias, dtype = inputs
        ctx.dtype = dtype
        ctx.save_for_backward(q, k, v, bias)

    @staticmethod
    def backward(ctx, grad):
        saved = ctx.saved_tensors
        want = [i for i, t in enumerate(saved) if t is not None and ctx.needs_input_grad[i]]
        with torch.enable_grad():
            args = [t.detach().requires_grad_(i in want) if t is not None else None
                    for i, t in enumerate(saved)]
            out = _sdpa(*args, ctx.dtype)
            got = torch.autograd.grad(out, [args[i] for i in want], grad)
        grads: list = [None] * 5
        for i, g in zip(want, got):
            grads[i] = g
        return tuple(grads)

    @staticmethod
    def vmap(info, in_dims, q, k, v, bias, dtype):
        n = info.batch_size

        def first(x, d):  # the seed dimension in front
            return x.movedim(d, 0) if d is not None else x.expand(n, *x.shape)

        q, k, v = (first(x, d) for x, d in zip((q, k, v), in_dims[:3]))
        if bias is None or in_dims[3] is None:  # one bias for every seed: one call
            s, b = q.shape[:2]
            out = _SeedsAttention.apply(*(x.reshape(s * b, *x.shape[2:]) for x in (q, k, v)),
                                        bias, dtype)
            return out.reshape(s, b, *out.shape[1:]), 0
        bias = bias.movedim(in_dims[3], 0)
        return torch.stack([_SeedsAttention.apply(q[i], k[i], v[i], bias[i], dtype)
                            for i in range(n)]), 0


def _fused(q, k, v, bias):
    """:class:`_SeedsAttention` in the dtype autocast would give the fused kernel."""
    device = q.device.type
    dtype = (torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device)
             else q.dtype)
    return _SeedsAttention.apply(q, k, v, bias, dtype)


#: How the seeds of a vmapped stack attend (:func:`set_vmap_attention`): ``"fused"``, the
#: fused kernel once for all seeds (:class:`_SeedsAttention`), in training and evaluation,
#: memory linear in the length; ``"written"``, in training the attention written out
#: (:func:`_attend`), every score kept for backward, in evaluation the block's own.  The
#: GPU plan checks them in this order on the device.
VMAP_ATTENTION = ("fused", "written")


#: How an additive-bias encoding (ALiBi, T5) attends on the per-seed path, outside vmap:
#: ``"blocked"``, the model's own (:class:`.models.Block`: one fused call per block of 128
#: queries over the bias matrix); ``"full"``, one fused call over the whole bias, in the
#: queries' dtype; ``"flex"``, :func:`torch.nn.attention.flex_attention` compiled, the bias
#: read by distance inside the kernel, so no score or bias matrix is written per call
#: (gradients need CUDA).  The same function each way; which is fastest is a property of
#: the device, so the GPU plan checks and times them there.
BIAS_ATTENTION = ("blocked", "full", "flex")


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


_BLOCK_MASKS: dict = {}


def _block_mask(t: int, device):
    """FlexAttention's causal block mask at length ``t`` (made once per length, device)."""
    from torch.nn.attention.flex_attention import create_block_mask

    key = (t, str(device))
    if key not in _BLOCK_MASKS:
        _BLOCK_MASKS[key] = create_block_mask(_causal, None, None, t, t, device=device)
    return _BLOCK_MASKS[key]


def _flex_toeplitz(q, k, v, rel, block_mask):
    """Causal attention with the additive bias ``rel[h, i - j]`` (key ``j`` at or before
    query ``i``), by FlexAttention; compiled once (:data:`_FLEX`), ``rel`` an input, so a
    new bias (every step of T5, whose bias is learned) reuses the compiled kernel."""
    from torch.nn.attention.flex_attention import flex_attention

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + rel[h, torch.clamp(q_idx - kv_idx, min=0)]

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


_FLEX: list = []  # the compiled _flex_toeplitz, made on first use


def _bias_attention(q, k, v, bias, how: str):
    """Causal attention with the additive ``bias`` (heads, t, t; it carries the mask) the
    way ``how`` (one of :data:`BIAS_ATTENTION` but ``"blocked"``) says.  ``"flex"`` reads
    the bias by distance: ALiBi's and T5's biases depend only on ``i - j``, so its first
    column, ``bias[h, d, 0]``, is the bias at distance ``d``."""
    if how == "full":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
    if not _FLEX:
        _FLEX.append(torch.compile(_flex_toeplitz, dynamic=False))
    rel = bias[:, :, 0].float().contiguous()
    return _FLEX[0](q, k, v, rel, _block_mask(q.shape[-2], q.device))


class _StackedBlock(Block):
    """:class:`.models.Block` whose attention under vmap is the way its
    ``vmap_attention`` names (:data:`VMAP_ATTENTION`, set by :func:`set_vmap_attention`)
    and, in training on one seed's plain tensors with an additive bias, the way its
    ``attention`` names (:data:`BIAS_ATTENTION`, set by :func:`set_attention`).  Without
    gradients (evaluation) only the fused way applies: the written-out scores of a long
    input would not fit, and every evaluation length would compile FlexAttention again, so
    otherwise it is the block itself."""

    attention = "blocked"
    vmap_attention = "fused"

    def _heads(self, x, rope):
        b, t, d = x.shape
        heads = self.qkv(self.ln1(x)).view(b, t, 3, self.n_heads, d // self.n_heads)
        q, k, v = heads.permute(2, 0, 3, 1, 4)
        if rope is not None:
            q, k = rope(q, k)
        return q, k, v

    def forward(self, x, rope, bias):
        batched = torch._C._functorch.is_batchedtensor(x)
        written = self.vmap_attention == "written"
        if batched and not (written and not torch.is_grad_enabled()):
            q, k, v = self._heads(x, rope)
            mixed = (_attend if written else _fused)(q, k, v, bias)
        elif not torch.is_grad_enabled():
            return super().forward(x, rope, bias)
        elif bias is not None and self.attention != "blocked":
            q, k, v = self._heads(x, rope)
            mixed = _bias_attention(q, k, v, bias, self.attention)
        else:
            return super().forward(x, rope, bias)
        b, t, d = x.shape
        x = x + self.out(mixed.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def set_attention(stack: Stack, how: str) -> None:
    """Make every block of ``stack`` attend with ``how`` (:data:`BIAS_ATTENTION`) where
    the encoding adds a bias and the seeds train one at a time."""
    if how not in BIAS_ATTENTION:
        raise ValueError(f"how must be one of {BIAS_ATTENTION}, got {how!r}")
    for block in stack.template.blocks:
        cast(_StackedBlock, block).attention = how


def set_vmap_attention(stack: Stack, how: str) -> None:
    """Make every block of ``stack`` attend with ``how`` (:data:`VMAP_ATTENTION`) where
    the seeds train together under vmap."""
    if how not in VMAP_ATTENTION:
        raise ValueError(f"how must be one of {VMAP_ATTENTION}, got {how!r}")
    for block in stack.template.blocks:
        cast(_StackedBlock, block).vmap_attention = how


def build(cfg: ModelConfig, seeds: Sequence[int], device: str = "cpu") -> Stack:
    """Stack the initial models of ``seeds`` (each drawn as :func:`.train.train_lm` draws it)."""
    seeds = tuple(int(s) for s in seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {seeds!r}")
    models = []
    for s in seeds:
        torch.manual_seed(s)
        models.append(TinyDecoder(cfg))
    params, _ = torch.func.stack_module_state(models)
    template = TinyDecoder(cfg).to(device)
    for block in template.blocks:  # the same parameters and code, attention vmap-safe
        block.__class__ = _StackedBlock
    return Stack(template, {k: v.detach().to(device).requires_grad_(True)
                            for k, v in params.items()}, seeds)


def _forward(template: TinyDecoder, params, tokens):
    return torch.func.functional_call(template, params, (tokens,))


def _seed_loss(template, params, window):
    logits = _forward(template, params, window[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                           window[:, 1:].reshape(-1))


def _per_seed(fn, stack_n: int, batched_input: bool, use_vmap: bool):
    """``fn(params, x)`` for every seed: one vmapped call, or (``use_vmap=False``, the
    fallback where a batching rule is missing) a loop over the seeds' parameter slices."""
    if use_vmap:
        return torch.func.vmap(fn, in_dims=(0, 0 if batched_input else None))

    def loop(params, x):
        return torch.stack([fn({k: v[i] for k, v in params.items()},
                               x[i] if batched_input else x) for i in range(stack_n)])
    return loop


def _autocast(device: str, bf16: bool):
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16,
                          enabled=bf16)


def _optimiser(plist, lr: float, steps: int):
    """AdamW and the warm-up-then-cosine schedule of :func:`.train.train`, for the stack."""
    opt = torch.optim.AdamW(plist, lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = max(1, steps // 10)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _schedule(s, steps, warmup))


def _update(stack: Stack, plist, opt, sched, per_seed: torch.Tensor) -> None:
    """One step from the per-seed losses: gradients, clipping at norm 1 with each seed's
    own norm (as ``clip_grad_norm_`` does for one model), the optimiser and the schedule."""
    opt.zero_grad(set_to_none=True)
    per_seed.sum().backward()
    grads = [p.grad for p in plist if p.grad is not None]
    # every seed's norm in two kernels (one copy, one reduction), not three per parameter
    norm = torch.linalg.vector_norm(
        torch.cat([g.reshape(stack.n, -1) for g in grads], dim=1), dim=1, dtype=torch.float32)
    coef = (1.0 / (norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))).to(g.dtype))
    opt.step()
    sched.step()


def train_lm(stack: Stack, split: Split, *, steps: int, batch: int, lr: float,
             length: int | None = None, bf16: bool = False, log_every: int = 10,
             deadline: float | None = None, rng_seeds: Sequence[int] | None = None,
             use_vmap: bool = True) -> Stack:
    """Train every seed of ``stack`` for ``steps`` steps on random windows of ``length``.

    ``deadline`` (a :func:`time.perf_counter` value): raise :class:`TimeoutError` when it
    passes, so a caller with a time budget never keeps a half-trained model.
    ``rng_seeds``: the seeds of the batch streams (default: the model seeds).
    """
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    template = stack.template
    length = length or template.cfg.train_length
    dev = next(iter(stack.params.values())).device
    rngs = [np.random.default_rng(s) for s in (rng_seeds or stack.seeds)]
    plist = list(stack.params.values())
    opt, sched = _optimiser(plist, lr, steps)
    loss_fn = _per_seed(lambda p, w: _seed_loss(template, p, w), stack.n, True, use_vmap)
    start = time.perf_counter()
    template.train()
    for step in range(steps):
        if deadline is not None and time.perf_counter() > deadline:
            raise TimeoutError(f"the time budget ran out at step {step} of {steps}")
        windows = torch.from_numpy(np.stack([lm_batch(split, batch, length, r)
                                             for r in rngs]))
        if dev.type == "cuda":  # from pinned memory the copy does not wait for the device
            windows = windows.pin_memory()
        windows = windows.to(dev, non_blocking=True)
        with _autocast(str(dev), bf16):
            per_seed = loss_fn(stack.params, windows)
        _update(stack, plist, opt, sched, per_seed)
        if step % log_every == 0 or step == steps - 1:
            stack.losses.append((step, [float(v) for v in per_seed.detach().cpu()]))
    template.eval()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    stack.seconds += time.perf_counter() - start
    stack.steps_done += steps
    return stack


def _seed_task_loss(template, params, seq, scored):
    logits = _forward(template, params, seq[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                           seq[:, 1:].reshape(-1), reduction="none")
    w = scored[:, 1:].reshape(-1).to(loss.dtype)
    return (loss * w).sum() / w.sum()


def _keep_members(params: dict, opt, sched, keep: list[int], lr: float, steps: int):
    """The stacked parameters, optimiser and schedule of the members ``keep`` only: each
    member's weights, moments and step count as they were, the schedule where it was."""
    idx = torch.tensor(keep, device=next(iter(params.values())).device)
    new = {k: v.detach()[idx].clone().requires_grad_(True) for k, v in params.items()}
    plist = list(new.values())
    opt2, sched2 = _optimiser(plist, lr, steps)
    n = len(next(iter(params.values())))
    for old_p, new_p in zip(params.values(), plist):
        state = opt.state.get(old_p)
        if state:
            opt2.state[new_p] = {
                k: (v[idx].clone() if torch.is_tensor(v) and v.dim() and len(v) == n
                    else v.clone() if torch.is_tensor(v) else v) for k, v in state.items()}
    sched2.last_epoch = sched.last_epoch
    for g2, g in zip(opt2.param_groups, opt.param_groups):
        g2["lr"] = g["lr"]
    return new, plist, opt2, sched2


def train_task(stack: Stack, make_batch, *, steps: int, batch: int, lr: float,
               bf16: bool = False, log_every: int = 10, deadline: float | None = None,
               use_vmap: bool = True, stop=None, check_every: int = 100,
               stop_all=None) -> list[dict]:
    """Train every seed of ``stack`` on a synthetic task, as
    :func:`.tasks.train_task` trains one: ``make_batch(batch, rng)`` gives ``(tokens,
    scored)`` from each seed's own generator (seeded with the seed), the loss is on the
    scored tokens only.

    ``stop(model)`` (a seed's model, in eval mode) is asked every ``check_every`` steps for
    each seed still training; a seed for which it returns true is *done*: its weights are
    kept as they are at that step (a copy, :meth:`Stack.model`, and in ``stack``) and it
    leaves the stack, which trains on with the others (each seed's weights, moments, clip
    norm and batches are its own, so leaving changes none of theirs) until every seed is
    done or ``steps`` is reached.  ``stack.losses`` has ``None`` for a seed after it left.
    ``stop_all(sub)``, given instead, answers for every seed still training at once:
    ``sub`` is the :class:`Stack` of those seeds, in order, in eval mode, and it returns
    one truth value per seed (so the seeds' checks can be read together, as
    :func:`task_scores` reads them).
    Returns, per seed, ``{"steps": the steps it took, "done": whether ``stop`` said so,
    "model": its model}``.
    """
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    if not (isinstance(check_every, int) and check_every >= 1):
        raise ValueError(f"check_every must be an integer >= 1, got {check_every!r}")
    if stop is not None and stop_all is not None:
        raise ValueError("stop and stop_all are alternatives: give one")
    template = stack.template
    dev = next(iter(stack.params.values())).device
    rngs = [np.random.default_rng(s) for s in stack.seeds]
    active = list(range(stack.n))  # the members still training, as indices of ``stack``
    sub = stack  # the stack of the active members

    def per_seed_loss(n: int):
        # tokens and scored mask travel as one tensor (..., 2), so the per-seed helper applies
        return _per_seed(lambda p, x: _seed_task_loss(template, p, x[..., 0], x[..., 1]),
                         n, True, use_vmap)

    plist = list(sub.params.values())
    opt, sched = _optimiser(plist, lr, steps)
    loss_fn = per_seed_loss(sub.n)
    out: list[dict | None] = [None] * stack.n
    start = time.perf_counter()
    template.train()
    for step in range(steps):
        if deadline is not None and time.perf_counter() > deadline:
            raise TimeoutError(f"the time budget ran out at step {step} of {steps}")
        pairs = [make_batch(batch, rngs[i]) for i in active]
        x = torch.stack([torch.stack(pair, dim=-1) for pair in pairs]).to(dev)
        with _autocast(str(dev), bf16):
            per_seed = loss_fn(sub.params, x)
        _update(sub, plist, opt, sched, per_seed)
        if step % log_every == 0 or step == steps - 1:
            row: list[float | None] = [None] * stack.n
            for j, v in zip(active, per_seed.detach().cpu().tolist()):
                row[j] = float(v)
            stack.losses.append((step, row))
        if (stop is not None or stop_all is not None) and (step + 1) % check_every == 0:
            if stop_all is not None:
                template.eval()
                flags = [bool(f) for f in stop_all(sub)]
                if len(flags) != sub.n:
                    raise ValueError(f"stop_all must answer for each of the {sub.n} seeds "
                                     f"training, got {len(flags)} answers")
            left = []
            for j, i in enumerate(active):
                model = sub.model(j) if stop_all is None or flags[j] else None
                if (stop(model) if stop_all is None else flags[j]):
                    out[i] = {"steps": step + 1, "done": True, "model": model}
                    _write_back(stack, sub, {i: j})
                else:
                    left.append(j)
            template.train()
            if not left:
                break
            if len(left) < len(active):
                params, plist, opt, sched = _keep_members(sub.params, opt, sched, left, lr,
                                                          steps)
                active = [active[j] for j in left]
                sub = Stack(template, params, tuple(stack.seeds[i] for i in active))
                loss_fn = per_seed_loss(sub.n)
    template.eval()
    if sub is not stack:
        _write_back(stack, sub, {i: j for j, i in enumerate(active)})
    for j, i in enumerate(active):
        if out[i] is None:
            out[i] = {"steps": step + 1, "done": False, "model": sub.model(j)}
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    stack.seconds += time.perf_counter() - start
    stack.steps_done += step + 1
    return out  # type: ignore[return-value]


@torch.no_grad()
def _write_back(stack: Stack, sub: Stack, members: dict[int, int]) -> None:
    """Member ``j`` of ``sub``'s weights into member ``i`` of ``stack``, for ``{i: j}``."""
    if sub is stack:
        return
    for k, v in stack.params.items():
        for i, j in members.items():
            v[i].copy_(sub.params[k][j])


@torch.no_grad()
def eval_lm(stack: Stack, split: Split, chunks: EvalChunks, lengths: Sequence[int], *,
            bucket: int, far: np.ndarray | None = None, bf16: bool = False,
            max_batch: int = 8, use_vmap: bool = True) -> list[dict]:
    """:func:`.train.eval_lm` for every seed of the stack, with per-chunk losses.

    Returns one dict per seed, ``{n: {"target", "window", "buckets", "chunks", "far",
    "far_chunks"} or None}``: ``"chunks"`` is the loss on each chunk's targets (so
    intervals can resample the text); with ``far`` (a boolean mask over ``split.tokens``,
    see :func:`.corpus.far_identifier_mask`), ``"far"`` is the mean loss over the target
    bytes the mask selects and ``"far_chunks"`` each chunk's ``[sum, count]`` of them.
    """
    template = stack.template
    dev = next(iter(stack.params.values())).device
    fn = _per_seed(lambda p, w: _forward(template, p, w), stack.n, False, use_vmap)
    out: list[dict] = [{} for _ in range(stack.n)]
    for n in lengths:
        n = int(n)
        if not can_read(template, n):
            for o in out:
                o[n] = None
            continue
        windows = chunks.windows(split, n)
        per = torch.zeros(stack.n, len(windows), n, dtype=torch.float64)
        for i in range(0, len(windows), max_batch):
            w = torch.from_numpy(windows[i:i + max_batch]).to(dev)
            with _autocast(str(dev), bf16):
                logits = fn(stack.params, w[:, :-1])
            loss = F.cross_entropy(logits.float().flatten(0, 1).transpose(1, 2),
                                   w[:, 1:].repeat(stack.n, 1), reduction="none")
            per[:, i:i + len(w)] = loss.view(stack.n, len(w), n).double().cpu()
        for s in range(stack.n):
            out[s][n] = summarise(per[s], chunks, bucket, far)
    return out


@torch.no_grad()
def passkey_scores(stack: Stack, split: Split, lengths: Sequence[int],
                   depths: Sequence[float], *, n: int, seed: int, batch: int = 8,
                   use_vmap: bool = True) -> list[dict]:
    """:func:`.probe.passkey_scores` for every seed of the stack (one dict per seed): the
    same questions, each batch read by every seed at once, in float32 as there."""
    from .probe import passkey_text

    template = stack.template
    template.eval()
    dev = next(iter(stack.params.values())).device
    fn = _per_seed(lambda p, x: _forward(template, p, x), stack.n, False, use_vmap)
    out: list[dict] = [{} for _ in range(stack.n)]
    for length in lengths:
        length = int(length)
        if not can_read(template, length):
            for o in out:
                o[length] = None
            continue
        for o in out:
            o[length] = {}
        for depth in depths:
            w, k = passkey_text(split, length, float(depth), n, seed)
            right = torch.zeros(stack.n, dtype=torch.int64)
            exact = torch.zeros(stack.n, dtype=torch.int64)
            for i in range(0, n, batch):
                x = torch.from_numpy(w[i:i + batch]).to(dev)
                hit = (fn(stack.params, x[:, :-1])[:, :, -k:].argmax(-1) == x[:, -k:]).cpu()
                right += hit.sum((1, 2))
                exact += hit.all(2).sum(1)
            for s, o in enumerate(out):
                o[length][str(depth)] = {"digit": int(right[s]) / (n * k),
                                         "exact": int(exact[s]) / n}
    return out


@torch.no_grad()
def task_scores(stack: Stack, makers: Sequence, n: int, *, batch: int = 32,
                use_vmap: bool = True, tokens: int = 2**15) -> list[dict]:
    """:func:`.tasks.score` for every seed of the stack (one dict per seed):
    ``makers[i](size)`` gives seed ``i``'s sequences and scored masks (from its own
    generator, in the order and batches :func:`.tasks.score` draws them), and every seed
    reads them together, in float32 as there (as many sequences a call as keep each
    seed's input within ``tokens``)."""
    if len(makers) != stack.n:
        raise ValueError(f"makers must have one entry per seed ({stack.n}), got "
                         f"{len(makers)}")
    template = stack.template
    template.eval()
    dev = next(iter(stack.params.values())).device
    fn = _per_seed(lambda p, x: _forward(template, p, x), stack.n, True, use_vmap)
    # drawn in batches of ``batch``, as there, and read all at once
    drawn = [[make(min(batch, n - start)) for start in range(0, n, batch)]
             for make in makers]
    seq = torch.stack([torch.cat([sq for sq, _ in d]) for d in drawn])
    mask = torch.stack([torch.cat([sc for _, sc in d]) for d in drawn])[:, :, 1:].bool()
    right = total = exact = torch.zeros(stack.n, dtype=torch.int64)
    rows = max(1, tokens // seq.shape[2])
    for i in range(0, n, rows):
        x, mk = seq[:, i:i + rows].to(dev), mask[:, i:i + rows].to(dev)
        hit = (fn(stack.params, x[:, :, :-1]).argmax(-1) == x[:, :, 1:]) & mk
        right = right + hit.sum((1, 2)).cpu()
        total = total + mk.sum((1, 2)).cpu()
        exact = exact + (hit.sum(2) == mk.sum(2)).sum(1).cpu()
    return [{"symbol": int(right[i]) / int(total[i]), "exact": int(exact[i]) / n}
            for i in range(stack.n)]


class _Cached(torch.nn.Module):
    """A :class:`~.models.TinyDecoder` (``m``, its weights swapped in by
    :func:`torch.func.functional_call`) reading tokens after cached keys and values:
    ``forward(tokens, keys, values, offset)`` for ``tokens`` at positions ``offset,
    offset + 1, ...`` and per-block caches of the ``offset`` tokens before them (empty
    when ``offset`` is 0) returns the logits and the caches grown by these tokens.  The
    same computation as the decoder's own forward over the whole sequence, so greedy
    decoding with it writes what re-reading the sequence every token would write (a
    test compares the logits), at a cost that grows with the length, not its square."""

    def __init__(self, template: TinyDecoder):
        super().__init__()
        self.m = template

    def forward(self, tokens, keys, values, offset: int):
        m = self.m
        position = cast(torch.nn.Module, m.position)
        b, t = tokens.shape
        x = m.embed(tokens)
        if m.cfg.embed_scale != 1.0:
            x = x * m.cfg.embed_scale
        if m.cfg.encoding == "learned":
            x = position(x, offset=offset)
        elif m.cfg.encoding == "sinusoidal":
            # the table's rows offset .. offset + t - 1 (the module adds rows from 0)
            x = x + position(x.new_zeros(1, offset + t, x.shape[-1]))[:, offset:]
        n = offset + t  # keys after these tokens
        bias = None
        if m.alibi is not None:
            bias = m.alibi(t, n, offset, device=x.device)[0]
        elif m.t5 is not None:
            bias = m.t5(t, n, offset)[0]
            if t > 1:
                later = torch.ones(t, n, dtype=torch.bool, device=x.device).triu(offset + 1)
                bias = bias.masked_fill(later, float("-inf"))
        positions = torch.arange(offset, n, device=x.device)
        new_keys, new_values = [], []
        for i, blk in enumerate(m.blocks):
            block = cast(Block, blk)
            h = block.ln1(x)
            q, k, v = block.qkv(h).view(b, t, 3, block.n_heads, -1).permute(2, 0, 3, 1, 4)
            if m.rope is not None:
                q, k = m.rope(q, k, positions=positions)
            if offset:
                k, v = torch.cat([keys[i], k], dim=2), torch.cat([values[i], v], dim=2)
            new_keys.append(k)
            new_values.append(v)
            if bias is not None:
                a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
            elif t > 1 and offset:  # query i sees the cache and the new tokens up to i
                seen = torch.ones(t, n, dtype=torch.bool, device=x.device).tril(offset)
                a = F.scaled_dot_product_attention(q, k, v, attn_mask=seen)
            else:  # the first tokens, causal; or one token, which sees every key
                a = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
            x = x + block.out(a.transpose(1, 2).reshape(b, t, -1))
            x = x + block.mlp(block.ln2(x))
        return m.ln_f(x) @ m.embed.weight.T, new_keys, new_values


def _cached_step(stack: Stack, use_vmap: bool):
    """``step(params, tokens, keys, values, offset)`` for every seed (:class:`_Cached`)."""
    wrapper = _Cached(stack.template)

    def one(params, tokens, keys, values, offset):
        return torch.func.functional_call(
            wrapper, {f"m.{k}": v for k, v in params.items()}, (tokens, keys, values, offset))

    if use_vmap:
        def step(params, tokens, keys, values, offset):
            return torch.func.vmap(lambda p, x, ks, vs: one(p, x, ks, vs, offset))(
                params, tokens, keys, values)
        return step

    def loop(params, tokens, keys, values, offset):
        outs = [one({k: v[i] for k, v in params.items()}, tokens[i],
                    [c[i] for c in keys], [c[i] for c in values], offset)
                for i in range(stack.n)]
        return (torch.stack([o[0] for o in outs]),
                [torch.stack([o[1][j] for o in outs]) for j in range(len(outs[0][1]))],
                [torch.stack([o[2][j] for o in outs]) for j in range(len(outs[0][2]))])
    return loop


@torch.no_grad()
def generate_copy(stack: Stack, m: int, n: int, rngs: Sequence, *, batch: int = 32,
                  use_vmap: bool = True, tokens: int = 2**15,
                  cache: bool = True) -> list[dict]:
    """:func:`.tasks.generate_copy` for every seed (one dict per seed): seed ``i``'s
    strings from ``rngs[i]`` (drawn ``batch`` at a time, as there), every seed writing
    its own continuations, token by token, in one call per token for as many strings as
    keep each seed's input within ``tokens``.  With ``cache`` each token reads the keys
    and values cached for the ones before it (:class:`_Cached`); without, the whole
    sequence is read again for every token.  The cache holds ``2 · n_layers · d_model``
    floats a token, so ``tokens`` bounds it too: about 0.5 GB a seed for the GPU tier's
    model at the default, and several processes share the device."""
    from .tasks import copy_batch

    template = stack.template
    template.eval()
    dev = next(iter(stack.params.values())).device
    fn = _per_seed(lambda p, x: _forward(template, p, x), stack.n, True, use_vmap)
    step = _cached_step(stack, use_vmap)
    # the strings drawn in batches of ``batch``, as there, and written together
    seq = torch.stack([torch.cat([copy_batch(min(batch, n - start), m, r)[0]
                                  for start in range(0, n, batch)]) for r in rngs])
    right = exact = torch.zeros(stack.n, dtype=torch.int64)
    rows = max(1, tokens // (2 * m + 1))
    for i in range(0, n, rows):
        x = seq[:, i:i + rows].to(dev)
        out = x[:, :, :m + 2]
        if cache:
            logits, keys, values = step(stack.params, out, [], [], 0)
            for j in range(m):
                nxt = logits[:, :, -1].argmax(-1, keepdim=True)
                out = torch.cat([out, nxt], dim=2)
                if j < m - 1:
                    logits, keys, values = step(stack.params, nxt, keys, values,
                                                out.shape[2] - 1)
        else:  # the whole sequence read again for every token, as tasks.generate_copy
            for _ in range(m):
                nxt = fn(stack.params, out)[:, :, -1].argmax(-1, keepdim=True)
                out = torch.cat([out, nxt], dim=2)
        hit = (out[:, :, m + 2:] == x[:, :, 1:m + 1]).cpu()
        right, exact = right + hit.sum((1, 2)), exact + hit.all(2).sum(1)
    return [{"symbol": int(right[i]) / (n * m), "exact": int(exact[i]) / n}
            for i in range(stack.n)]


def eval_copy(stack: Stack, ms: Sequence[int], *, n: int, free: bool = False,
              use_vmap: bool = True, tokens: int = 2**15) -> list[dict]:
    """:func:`.tasks.eval_copy` for every seed of the stack (one dict per seed), each
    seed's strings drawn as there from its own seed."""
    from .tasks import copy_batch

    out: list[dict] = [{} for _ in range(stack.n)]
    for m in (int(k) for k in ms):
        if not can_read(stack.template, 2 * m + 1):
            for o in out:
                o[m] = None
            continue

        def rngs():  # the strings of tasks.eval_copy: they depend on the seed and m only
            return [np.random.default_rng(10_000 + 1000 * s + m) for s in stack.seeds]

        got = task_scores(stack, [lambda b, r=r: copy_batch(b, m, r) for r in rngs()], n,
                          use_vmap=use_vmap, tokens=tokens)
        if free:
            for g, f in zip(got, generate_copy(stack, m, n, rngs(), use_vmap=use_vmap,
                                               tokens=tokens)):
                g["free"] = f
        for o, g in zip(out, got):
            o[m] = g
    return out


def eval_passkey(stack: Stack, totals: Sequence[int], depths: Sequence[float], *, n: int,
                 use_vmap: bool = True, tokens: int = 2**15) -> list[dict]:
    """:func:`.tasks.eval_passkey` for every seed of the stack (one dict per seed), each
    seed's questions drawn as there from its own seed."""
    from .tasks import passkey_batch

    out: list[dict] = [{} for _ in range(stack.n)]
    for total in (int(t) for t in totals):
        if not can_read(stack.template, total - 1):
            for o in out:
                o[total] = None
            continue
        for o in out:
            o[total] = {}
        for j, depth in enumerate(depths):
            rngs = [np.random.default_rng(20_000 + 1000 * s + 10 * total + j)
                    for s in stack.seeds]
            got = task_scores(stack, [lambda b, r=r: passkey_batch(b, total, depth, r)
                                      for r in rngs], n, use_vmap=use_vmap,
                              tokens=tokens)
            for o, g in zip(out, got):
                o[total][str(depth)] = g
    return out


def set_rope(stack: Stack, rope_parameters: dict | None) -> None:
    """Apply a RoPE scaling rule to every seed (the rotary tables are not parameters)."""
    stack.template.set_rope(rope_parameters)
    if stack.template.rope is not None:
        stack.template.rope.to(next(iter(stack.params.values())).device)


def _check_inputs(stack: Stack, split: Split, batch: int, length: int | None):
    """One batch per seed, and weights far from the initial ones, different for every
    seed, so that a rule that mixed the seeds' parameters (the T5 bias starts near zero)
    would show in the loss."""
    length = length or stack.template.cfg.train_length
    dev = next(iter(stack.params.values())).device
    rngs = [np.random.default_rng(10_000 + s) for s in stack.seeds]
    windows = torch.from_numpy(np.stack([lm_batch(split, batch, length, r)
                                         for r in rngs])).to(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    noisy = {k: v.detach() + 0.3 * torch.randn(v.shape, generator=gen, device=dev)
             for k, v in stack.params.items()}
    return windows, noisy


def _loss_and_norms(stack: Stack, noisy, windows, *, use_vmap: bool, bf16: bool):
    """Each seed's loss and gradient norm at the weights ``noisy``."""
    params = {k: v.clone().requires_grad_(True) for k, v in noisy.items()}
    fn = _per_seed(lambda p, w: _seed_loss(stack.template, p, w), stack.n, True, use_vmap)
    with _autocast(str(windows.device), bf16):
        losses = fn(params, windows)
    losses.sum().backward()
    norms = torch.stack([p.grad.float().pow(2).reshape(stack.n, -1).sum(1)
                         for p in params.values() if p.grad is not None]).sum(0).sqrt()
    return losses.detach().float().cpu(), norms.cpu()


def _compare(a, b, names: tuple[str, str], rtol: float) -> tuple[bool, str]:
    (l0, g0), (l1, g1) = a, b
    if not torch.allclose(l0, l1, rtol=rtol, atol=0.0):
        return False, f"losses differ: {names[0]} {l0.tolist()}, {names[1]} {l1.tolist()}"
    if not torch.allclose(g0, g1, rtol=10 * rtol, atol=1e-6):
        return False, (f"gradient norms differ: {names[0]} {g0.tolist()}, "
                       f"{names[1]} {g1.tolist()}")
    return True, "agrees"


def vmap_agrees(stack: Stack, split: Split, *, batch: int, length: int | None = None,
                bf16: bool = False, rtol: float | None = None) -> tuple[bool, str]:
    """Check on one batch that the vmapped step gives each seed the loss and gradient of
    the per-seed loop (a missing or wrong batching rule on some device is found here,
    before it costs a run).  Returns ``(agrees, reason)``; an error counts as disagreement.
    """
    windows, noisy = _check_inputs(stack, split, batch, length)
    rtol = rtol if rtol is not None else (3e-2 if bf16 else 1e-4)
    out = []
    for use_vmap in (False, True):
        try:
            out.append(_loss_and_norms(stack, noisy, windows, use_vmap=use_vmap, bf16=bf16))
        except Exception as e:  # noqa: BLE001 - any failure means: do not use vmap here
            return False, f"{type(e).__name__}: {str(e)[:300]}"
    return _compare(out[0], out[1], ("loop", "vmap"), rtol)


def attention_agrees(stack: Stack, split: Split, how: str, *, batch: int,
                     length: int | None = None, bf16: bool = False,
                     rtol: float | None = None) -> tuple[bool, str]:
    """Check on one batch, seeds one at a time, that attending with ``how``
    (:data:`BIAS_ATTENTION`) gives each seed the loss and gradient norm of the model's own
    attention (``"blocked"``).  Returns ``(agrees, reason)``; an error (FlexAttention's
    gradients on a CPU, say) counts as disagreement.  The stack attends as before after."""
    if how not in BIAS_ATTENTION:
        raise ValueError(f"how must be one of {BIAS_ATTENTION}, got {how!r}")
    before = cast(_StackedBlock, stack.template.blocks[0]).attention
    windows, noisy = _check_inputs(stack, split, batch, length)
    rtol = rtol if rtol is not None else (3e-2 if bf16 else 1e-4)
    out = []
    try:
        for way in ("blocked", how):
            set_attention(stack, way)
            try:
                out.append(_loss_and_norms(stack, noisy, windows, use_vmap=False, bf16=bf16))
            except Exception as e:  # noqa: BLE001 - any failure: do not attend this way
                return False, f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        set_attention(stack, before)
    return _compare(out[0], out[1], ("blocked", how), rtol)
