"""A small decoder-only Transformer whose positional encoding is one argument.

Every encoding is posenc's own code, so the experiments use the library as a model would:

=============  ==========================================================================
``nope``       nothing: the causal mask is the only source of order
``learned``    :class:`posenc.torch.LearnedPositionalEmbedding`, added to the tokens
``sinusoidal`` :class:`posenc.torch.SinusoidalPositionalEncoding`, added to the tokens
``rope``       :class:`posenc.torch.RotaryEmbedding` on queries and keys (half layout);
               ``rope_parameters`` select PI, NTK, YaRN or Llama 3.1 scaling at evaluation
``alibi``      :class:`posenc.torch.ALiBiBias`: a fixed linear penalty per head on the scores
``t5``         :class:`posenc.torch.T5RelativePositionBias` (causal buckets), one bias
               shared by all layers, as T5 does
=============  ==========================================================================

Token embeddings are initialised N(0, 0.02²), so a token row has norm about 0.02·√d while a
sinusoidal row has norm √(d/2): ``embed_scale`` (√d in fairseq) sets the balance, and the
experiments tune it per encoding.  The blocks are pre-norm (LayerNorm, attention, LayerNorm, a 4x GELU MLP) with tied input
and output embeddings.  Attention is :func:`torch.nn.functional.scaled_dot_product_attention`
with the causal mask, plus the additive bias for ALiBi and T5.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

import posenc.torch as pt

_BLOCK = 128  # query block of the additive-bias attention path

ENCODINGS = ("nope", "learned", "sinusoidal", "rope", "alibi", "t5")


@dataclass(frozen=True)
class ModelConfig:
    """The shape of the model and its positional encoding."""

    encoding: str
    vocab: int = 256
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    train_length: int = 128  # the longest sequence seen in training
    rope_base: float = 10000.0
    t5_buckets: int = 32
    t5_max_distance: int = 128
    #: multiplies the token embeddings before a position is added (fairseq, the codebase of
    #: Press et al., multiplies by sqrt(d_model)); 1.0 leaves them as initialised
    embed_scale: float = 1.0
    rope_parameters: dict | None = field(default=None, hash=False, compare=False)

    def __post_init__(self):
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {ENCODINGS}, got {self.encoding!r}")
        if not (isinstance(self.embed_scale, (int, float)) and math.isfinite(self.embed_scale)
                and self.embed_scale > 0):
            raise ValueError(f"embed_scale must be a finite number > 0, got {self.embed_scale!r}")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(
                f"d_model ({self.d_model}) must split into n_heads ({self.n_heads}) heads "
                "of even width"
            )

    def to_dict(self) -> dict:
        return asdict(self)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.d_model
        self.n_heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, rope, bias):
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).view(b, t, 3, self.n_heads, d // self.n_heads).permute(
            2, 0, 3, 1, 4
        )
        if rope is not None:
            q, k = rope(q, k)
        if bias is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif t <= _BLOCK:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        else:
            # The same attention, a block of queries at a time, each over the keys it may
            # see (the mask is causal): an additive mask rules out the fused causal kernel,
            # and this keeps the score matrix small and skips the masked half (about 2.5x
            # faster on CPU at 2048 positions).
            a = torch.cat([
                F.scaled_dot_product_attention(q[:, :, i:i + _BLOCK], k[:, :, :i + _BLOCK],
                                               v[:, :, :i + _BLOCK],
                                               attn_mask=bias[..., i:i + _BLOCK, :i + _BLOCK])
                for i in range(0, t, _BLOCK)], dim=2)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def _causal_mask(t: int, device) -> torch.Tensor:
    return torch.full((t, t), float("-inf"), device=device).triu(1)


class TinyDecoder(nn.Module):
    """A causal language model; ``forward(tokens)`` returns logits ``(batch, seq, vocab)``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        d, head = cfg.d_model, cfg.d_model // cfg.n_heads
        # One draw from the global generator, the same for every encoding; the weights come
        # from two generators seeded by it, one for the parameters every encoding shares
        # (drawn first, in a fixed order) and one for the encoding's own (the learned table,
        # the T5 bias), so an encoding's own parameters never shift the others' draws: the
        # same seed gives every encoding the same token embeddings and blocks.
        draw = int(torch.randint(0, 2**62, (1,)).item())
        with torch.random.fork_rng(devices=[]):
            self._build(cfg, d)
        self._head = head
        self._init_weights(draw)

    def _build(self, cfg: ModelConfig, d: int) -> None:
        self.embed = nn.Embedding(cfg.vocab, d)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.position: pt.LearnedPositionalEmbedding | pt.SinusoidalPositionalEncoding | None
        self.position = None
        self.rope: pt.RotaryEmbedding | None = None
        self.t5: pt.T5RelativePositionBias | None = None
        self.alibi: pt.ALiBiBias | None = None
        if cfg.encoding == "learned":
            self.position = pt.LearnedPositionalEmbedding(cfg.train_length, d)
        elif cfg.encoding == "sinusoidal":
            self.position = pt.SinusoidalPositionalEncoding(d, max_len=cfg.train_length)
        elif cfg.encoding == "rope":
            self.set_rope(cfg.rope_parameters)
        elif cfg.encoding == "alibi":
            self.alibi = pt.ALiBiBias(cfg.n_heads, causal=True)
        elif cfg.encoding == "t5":
            self.t5 = pt.T5RelativePositionBias(
                cfg.n_heads, num_buckets=cfg.t5_buckets, max_distance=cfg.t5_max_distance,
                bidirectional=False,
            )

    #: the modules that only some encodings have (initialised from their own generator)
    _OWN = ("position", "t5", "alibi", "rope")

    @torch.no_grad()
    def _init_weights(self, draw: int) -> None:
        """Linear and embedding weights N(0, 0.02²), biases 0, LayerNorms (1, 0): the shared
        parameters from ``Generator(draw)``, the encoding's own from ``Generator(draw + 1)``."""
        shared = torch.Generator().manual_seed(draw)
        own = torch.Generator().manual_seed(draw + 1)
        for name, m in self.named_modules():
            gen = own if name.split(".")[0] in self._OWN else shared
            if isinstance(m, (nn.Linear, nn.Embedding)):
                w = torch.empty(m.weight.shape).normal_(0.0, 0.02, generator=gen)
                m.weight.copy_(w)
                bias = getattr(m, "bias", None)
                if isinstance(bias, torch.Tensor):
                    nn.init.zeros_(bias)
            elif isinstance(m, nn.LayerNorm):
                m.reset_parameters()

    def set_rope(self, rope_parameters: dict | None) -> None:
        """Replace the rotary tables (the model's weights are untouched): how PI, NTK, YaRN
        and Llama 3.1 scaling are applied to a trained model."""
        if self.cfg.encoding != "rope":
            raise ValueError("set_rope needs a model with encoding='rope'")
        params = {"rope_type": "default", "rope_theta": self.cfg.rope_base}
        params.update(rope_parameters or {})
        self.rope = pt.RotaryEmbedding(
            self.cfg.d_model // self.cfg.n_heads, layout="half", rope_parameters=params,
            max_position_embeddings=self.cfg.train_length,
        )

    def _bias(self, t: int, device) -> torch.Tensor | None:
        if self.alibi is not None:
            return self.alibi(t, t, device=device)[0]
        if self.t5 is not None:
            return self.t5(t, t)[0] + _causal_mask(t, device)
        return None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        if self.cfg.embed_scale != 1.0:
            x = x * self.cfg.embed_scale
        if self.position is not None:  # learned or sinusoidal: added to the tokens
            x = self.position(x)
        bias = self._bias(tokens.shape[1], tokens.device)
        for block in self.blocks:
            x = block(x, self.rope, bias)
        return self.ln_f(x) @ self.embed.weight.T

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def sequence_loss(model: TinyDecoder, batch: torch.Tensor, weights=None) -> torch.Tensor:
    """Mean next-token cross-entropy over ``batch[:, 1:]`` (optionally weighted per token)."""
    logits = model(batch[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1),
                           reduction="none")
    if weights is None:
        return loss.mean()
    w = weights[:, 1:].reshape(-1).to(loss.dtype)
    return (loss * w).sum() / w.sum()


def perplexity(loss: float) -> float:
    return float(math.exp(min(loss, 50.0)))
