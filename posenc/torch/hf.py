r"""posenc in transformers models: their calling convention, and a one-call swap.

transformers computes ``cos, sin = model.rotary_emb(x, position_ids)`` once per forward
pass and rotates in every attention layer with its modeling file's
``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)``.  :meth:`RotaryEmbedding.cos_sin
<posenc.torch.RotaryEmbedding.cos_sin>` and :func:`apply_rotary_pos_emb` are those two
calls, computed from float64 angles and rounded once; :func:`patch` puts both into a
loaded model.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import torch
from torch import nn

from .._typing import Layout
from .._validation import check_layout
from ._apply import rotate_tables
from .rope import RotaryEmbedding, _describe, _rope_key

__all__ = ["apply_rotary_pos_emb", "patch", "TransformersRotaryEmbedding"]


def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                         sin: torch.Tensor, unsqueeze_dim: int = 1, *,
                         layout: Layout = "half") -> tuple[torch.Tensor, torch.Tensor]:
    r"""Rotate ``q`` and ``k`` by transformers' ``(cos, sin)``: its signature, one rounding.

    With :math:`r` = ``cos.shape[-1]`` and :math:`c, s` the first :math:`r/2` columns of
    ``cos`` and ``sin`` (transformers writes the half-width table twice), the pair
    :math:`(x_1, x_2)` of the first :math:`r` features becomes

    .. math::

       (x_1 c - x_2 s,\; x_2 c + x_1 s),

    in float32 (float64 if an input is float64) and rounded once to the input's dtype;
    features past :math:`r` pass through (partial rotary).  ``layout="half"`` pairs
    feature :math:`i` with :math:`i + r/2` (``rotate_half``), ``"interleaved"`` pairs
    :math:`2i` with :math:`2i + 1`.

    Parameters
    ----------
    q, k : torch.Tensor
        Floating point, ``(batch, heads, seq, head_dim)`` with ``unsqueeze_dim=1``, or
        ``(batch, seq, heads, head_dim)`` with ``unsqueeze_dim=2``; ``head_dim >= r``.
    cos, sin : torch.Tensor
        Shape ``(batch, seq, r)`` (or ``(seq, r)``), as
        :meth:`RotaryEmbedding.cos_sin <posenc.torch.RotaryEmbedding.cos_sin>` or a
        transformers rotary module returns them.
    unsqueeze_dim : int, default 1
        Where ``cos`` and ``sin`` get the heads axis.
    layout : {"half", "interleaved"}, keyword-only, default "half"
        Which features form a pair.

    Returns
    -------
    tuple of torch.Tensor
        The rotated ``(q, k)``, same shapes and dtypes.

    Raises
    ------
    ValueError
        If ``cos`` and ``sin`` differ in shape, their width is odd, or ``q`` or ``k``
        is narrower than it.

    Examples
    --------
    >>> import torch
    >>> from posenc.torch import RotaryEmbedding
    >>> rope = RotaryEmbedding(64, layout="half")
    >>> q, k = torch.randn(1, 8, 4, 64), torch.randn(1, 2, 4, 64)
    >>> cos, sin = rope.cos_sin(torch.tensor([[10, 11, 12, 13]]))
    >>> q2, k2 = apply_rotary_pos_emb(q, k, cos, sin)
    >>> q2.shape, k2.shape
    (torch.Size([1, 8, 4, 64]), torch.Size([1, 2, 4, 64]))
    """
    layout = check_layout(layout)
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(cos.shape)} "
                         f"and {tuple(sin.shape)}; pass both from one cos_sin call")
    r = cos.shape[-1]
    if r % 2:
        raise ValueError(f"cos must have an even last dimension (the rotated width), got {r}; "
                         "pass the table transformers' format gives, half written twice")
    for name, t in (("q", q), ("k", k)):
        if t.shape[-1] < r:
            raise ValueError(f"{name} must be at least as wide as cos ({r} features), got "
                             f"shape {tuple(t.shape)}; rotate the whole head or its RoPE part")
    return _rotate_qk(q, k, cos[..., :r // 2], sin[..., :r // 2], r, unsqueeze_dim, layout)


def _rotate_qk(q, k, c, s, r, unsqueeze_dim, layout):
    """Rotate the first ``r`` features of q and k by the half-width table (c, s)."""
    wide = torch.float64 in (q.dtype, k.dtype, c.dtype)
    compute = torch.float64 if wide else torch.float32
    c = c.unsqueeze(unsqueeze_dim).to(compute)
    s = s.unsqueeze(unsqueeze_dim).to(compute)
    return rotate_tables(q, (c, s), r, layout), rotate_tables(k, (c, s), r, layout)


class TransformersRotaryEmbedding(nn.Module):
    """A transformers model's ``rotary_emb``, computed by posenc.

    ``forward(x, position_ids, layer_type=None)`` returns float32 ``(cos, sin)`` of
    :meth:`RotaryEmbedding.cos_sin <posenc.torch.RotaryEmbedding.cos_sin>`, one
    :class:`RotaryEmbedding` per layer type that rotates, each built by
    :meth:`RotaryEmbedding.from_config <posenc.torch.RotaryEmbedding.from_config>`.

    Parameters
    ----------
    config : transformers config, mapping, str or path
        As for :meth:`RotaryEmbedding.from_config <posenc.torch.RotaryEmbedding.from_config>`.
    table : {"full", "repeat", "half", "complex"}, default "full"
        The format the model's attention takes: transformers' ``(cos, sin)`` with the
        half-width table written twice; each column written twice in place (Cohere's
        ``repeat_interleave``); the half-width table once (gpt-oss); or ``cos + i sin``
        of the half-width table (Llama 4's ``freqs_cis``).

    Examples
    --------
    >>> import torch
    >>> emb = TransformersRotaryEmbedding({"model_type": "llama", "hidden_size": 64,
    ...                                   "num_attention_heads": 4})
    >>> cos, sin = emb(torch.zeros(1), torch.arange(3)[None])
    >>> cos.shape, emb.layout
    (torch.Size([1, 3, 16]), 'half')
    """

    def __init__(self, config: Any, table: str = "full") -> None:
        super().__init__()
        if table not in _TABLES:
            raise ValueError(f"table must be one of {', '.join(map(repr, _TABLES))}, got "
                             f"{table!r}; 'full' is transformers' (cos, sin)")
        desc = _describe(config)
        types = [layer.layer_type for layer in desc.layers]
        if len({_rope_key(layer) for layer in desc.layers}) == 1:  # one table serves all
            ropes = {None: RotaryEmbedding.from_config(config)}
        else:
            ropes = {t: RotaryEmbedding.from_config(config, t) for t in types}
        self.ropes = nn.ModuleDict({str(t): r for t, r in ropes.items()})
        self.layer_types = tuple(types)
        self.layout = next(iter(ropes.values())).layout
        self.table = table

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor,
                layer_type: str | None = None) -> Any:
        key = "None" if "None" in self.ropes else str(layer_type)
        if key not in self.ropes:
            raise ValueError(f"layer_type must be one of {', '.join(map(repr, self.layer_types))}, "
                             f"got {layer_type!r}; pass the layer type the model passes")
        rope: RotaryEmbedding = self.ropes[key]  # type: ignore[assignment]
        cos, sin = rope.cos_sin(position_ids.to(x.device))
        if self.table == "full":
            return cos, sin
        h = cos.shape[-1] // 2
        if self.table == "half":
            return cos[..., :h], sin[..., :h]
        if self.table == "repeat":
            return cos[..., :h].repeat_interleave(2, -1), sin[..., :h].repeat_interleave(2, -1)
        return torch.complex(cos[..., :h], sin[..., :h])


_TABLES = ("full", "repeat", "half", "complex")


def _apply_freqs_cis(xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama 4's ``apply_rotary_emb``: ``(batch, seq, heads, dim)`` tensors, complex table."""
    return _rotate_qk(xq, xk, freqs_cis.real, freqs_cis.imag, 2 * freqs_cis.shape[-1], 2,
                      "interleaved")


def _apply_half_table(q, k, cos, sin, unsqueeze_dim=1):
    """gpt-oss's ``apply_rotary_pos_emb``: the half-width table, written once."""
    return _rotate_qk(q, k, cos, sin, 2 * cos.shape[-1], unsqueeze_dim, "half")


def _apply_repeat_table(q, k, cos, sin, unsqueeze_dim=1):
    """Cohere's ``apply_rotary_pos_emb``: each column written twice, neighbours paired."""
    return _rotate_qk(q, k, cos[..., ::2], sin[..., ::2], cos.shape[-1], unsqueeze_dim,
                      "interleaved")


def _apply_interleaved(q, k, cos, sin, unsqueeze_dim=1):
    """:func:`apply_rotary_pos_emb` with ``layout="interleaved"``, in transformers' signature."""
    return apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim, layout="interleaved")


def _apply_deepseek_interleave(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    """DeepSeek-V3's ``apply_rotary_pos_emb_interleave``: neighbours paired."""
    return apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim, layout="interleaved")


#: The original functions of the modeling files patch has changed: what the check
#: compares with, however many models of a family are patched.
_ORIGINALS: dict[tuple[str, str], Any] = {}


def _replacements(modeling, family_layout, table):
    """{name in the modeling file: (posenc's function, the original)}, or None.

    Each name keeps its contract whatever the model: ``apply_rotary_pos_emb`` pairs as the
    family does and reads the family's table format; ``apply_rotary_pos_emb_interleave``
    (DeepSeek-V3 with ``rope_interleave``) pairs neighbours.
    """
    def original(name):
        return _ORIGINALS.get((modeling.__name__, name), getattr(modeling, name, None))

    if table == "complex":
        names = {"apply_rotary_emb": _apply_freqs_cis}
    elif table == "half":
        names = {"apply_rotary_pos_emb": _apply_half_table if family_layout == "half" else None}
    elif table == "repeat":
        names = {"apply_rotary_pos_emb":
                 _apply_repeat_table if family_layout == "interleaved" else None}
    else:
        names = {"apply_rotary_pos_emb": (apply_rotary_pos_emb if family_layout == "half"
                                          else _apply_interleaved),
                 "apply_rotary_pos_emb_interleave": _apply_deepseek_interleave}
    out = {n: (f, original(n)) for n, f in names.items() if callable(original(n))}
    first = next(iter(names))
    if first not in out or out[first][0] is None:
        return None
    return out


def patch(model: nn.Module) -> nn.Module:
    """Swap posenc's RoPE into a loaded transformers model, in place; returns the model.

    Each ``rotary_emb`` module becomes a :class:`TransformersRotaryEmbedding` built from
    its config, and the modeling file's rotation (``apply_rotary_pos_emb``, and
    ``apply_rotary_pos_emb_interleave`` or Llama 4's ``apply_rotary_emb`` where there is
    one) becomes :func:`apply_rotary_pos_emb` with the family's pairing: angles in
    float64, one rounding.  The swap is checked first: for every layer type, the
    attention scores of random queries and keys rotated by posenc and by the model's own
    functions, at positions near 0, near the original length and near
    ``max_position_embeddings``, must agree to within transformers' float32 angle error,
    and so must posenc's function fed the model's own table (what an unpatched model of
    the family calls after the swap), or nothing is changed.  Like Liger's ``apply_liger_kernel_to_*``, replacing the
    modeling file's function acts on every model of that family in the process.

    Parameters
    ----------
    model : torch.nn.Module
        A transformers model (``AutoModelForCausalLM.from_pretrained(...)`` or built from
        a config), with real weights (not on the meta device).

    Returns
    -------
    torch.nn.Module
        ``model``, patched.

    Raises
    ------
    ValueError
        If the model has no ``rotary_emb``, its modeling file has no rotation function
        posenc knows, the reader refuses its config, it is on the meta device or was
        cast to a low-precision dtype (its ``inv_freq`` rounded), or the check finds that
        posenc would not rotate as the model does (the message names the layer type, the
        positions and the difference).

    Examples
    --------
    >>> import transformers
    >>> from posenc.torch import patch
    >>> cfg = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4,
    ...                                num_hidden_layers=1, intermediate_size=64, vocab_size=32)
    >>> model = patch(transformers.LlamaForCausalLM(cfg))
    >>> type(model.model.rotary_emb).__name__
    'TransformersRotaryEmbedding'
    """
    found = [(name, m) for name, m in model.named_modules()
             if name.rpartition(".")[2] == "rotary_emb"
             and not isinstance(m, TransformersRotaryEmbedding)]
    if not found:
        raise ValueError(
            f"model ({type(model).__name__}) has no rotary_emb module to replace; patch "
            "transformers models whose attention uses RoPE")
    plans = []
    for name, old in found:
        config = getattr(old, "config", None)
        if config is None:
            raise ValueError(f"{name} ({type(old).__name__}) has no config to build from; "
                             "patch transformers' own rotary modules only")
        buffers = dict(old.named_buffers())
        device = next((b.device for b in buffers.values()), torch.device("cpu"))
        if device.type == "meta":
            raise ValueError(f"{name} is on the meta device (no values to check against); "
                             "patch the model once its weights are loaded")
        cast = [b.dtype for n, b in buffers.items() if "inv_freq" in n
                and b.dtype not in (torch.float32, torch.float64)]
        if cast:
            raise ValueError(
                f"{name}'s inv_freq is {cast[0]} (the model was cast with .to(dtype)), so its "
                "own angles are rounded and cannot be checked against; patch the model "
                "before casting it, or load it with dtype=... (which keeps inv_freq float32)")
        modeling = sys.modules[type(old).__module__]
        desc = _describe(config)
        family_layout = _family_layout(getattr(config, "model_type", None))
        table = _table_format(old, desc, device)
        new = TransformersRotaryEmbedding(config, table)
        funcs = _replacements(modeling, family_layout, table)
        if not funcs:
            raise ValueError(
                f"{modeling.__name__} has no rotation function posenc replaces (its attention "
                "rotates another way); build RotaryEmbedding.from_config for your own attention")
        used = ("apply_rotary_pos_emb_interleave" if getattr(config, "rope_interleave", False)
                and "apply_rotary_pos_emb_interleave" in funcs else next(iter(funcs)))
        try:
            # a fresh module for the check: it may move dynamic NTK's state
            _check(old, funcs[used][1], TransformersRotaryEmbedding(config, table),
                   funcs[used][0], desc, device, table == "complex")
        except Exception as exc:  # the model's own functions refuse the probe's shapes
            if isinstance(exc, ValueError):
                raise
            raise ValueError(
                f"{type(old).__name__} and {modeling.__name__}.{used} cannot be checked with "
                f"posenc's probe ({type(exc).__name__}: {exc}): not patched; build "
                "RotaryEmbedding.from_config for your own attention") from None
        plans.append((name, new.to(device), modeling, funcs))
    for name, new, modeling, funcs in plans:
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, attr, new)
        for n, (ours, theirs) in funcs.items():
            _ORIGINALS.setdefault((modeling.__name__, n), theirs)
            setattr(modeling, n, ours)
    return model


def _family_layout(model_type):
    """How the family's own ``apply_rotary_pos_emb`` pairs features."""
    from ..atlas._families import FAMILIES

    return "interleaved" if FAMILIES.get(model_type, {}).get("_interleaved") else "half"


def _table_format(old, desc, device):
    """Which of :data:`_TABLES` the model's own rotary module returns."""
    first_type = desc.layers[0].layer_type if _takes_type(old) else None
    table = _call(old, torch.arange(3)[None], device, first_type)
    if torch.is_tensor(table) and table.is_complex():
        return "complex"
    cos = table[0][..., -1, :]  # position 2: every pair at a different angle
    if 2 * cos.shape[-1] == desc.layers[0].rotary_dim:
        return "half"
    if cos.shape[-1] % 2 == 0 and torch.equal(cos[..., ::2], cos[..., 1::2]):
        return "repeat"
    return "full"


def _takes_type(rotary):
    return "layer_type" in inspect.signature(rotary.forward).parameters


def _call(rotary, positions, device, layer_type):
    x = torch.zeros(1, dtype=torch.float32, device=device)
    if layer_type is None:
        return rotary(x, positions.to(device))
    return rotary(x, positions.to(device), layer_type)


def _scores(rotary, apply, layer_type, width, positions, device, seq_first):
    """Attention scores of fixed random q and k rotated by ``apply`` with ``rotary``'s table."""
    gen = torch.Generator().manual_seed(0)
    shape = (1, positions.shape[-1], 2, width) if seq_first else (1, 2, positions.shape[-1], width)
    q = torch.randn(shape, generator=gen).to(device)
    k = torch.randn(shape, generator=gen).to(device)
    table = _call(rotary, positions, device, layer_type)
    q2, k2 = apply(q, k, table) if seq_first else apply(q, k, *table)
    spec = "bshd,bthd->bhst" if seq_first else "bhsd,bhtd->bhst"
    return torch.einsum(spec, q2.double(), k2.double())


def _check(old, theirs, fresh, ours, desc, device, complex_table):
    """Refuse a swap whose attention scores differ from the model's own (see :func:`patch`)."""
    width = next(iter(fresh.ropes.values())).dim
    length = desc.max_position_embeddings or 4096
    original = desc.training_length or length
    types = [None] if "None" in fresh.ropes else list(fresh.layer_types)
    takes_type = _takes_type(old)
    for start in sorted({0, max(0, original - 16), max(0, length - 32)}):
        positions = torch.arange(start, start + 32)[None]
        for t in types:
            their_t = (t or desc.layers[0].layer_type) if takes_type else None
            want = _scores(old, theirs, their_t, width, positions, device, complex_table)
            got = _scores(fresh, ours, t, width, positions, device, complex_table)
            # the modeling file's function is swapped for every model of the family: it
            # must also rotate right with the tables of models left unpatched
            mixed = _scores(old, ours, their_t, width, positions, device, complex_table)
            for what, scores in (("posenc's rotation", got),
                                 ("posenc's function with the model's own table", mixed)):
                err = float((want - scores).abs().max()) / max(float(want.abs().max()), 1e-30)
                if not err < 1e-5 + (start + 32) * 2.0**-21:  # transformers: float32 angles
                    where = "" if t is None else f" (layer type {t!r})"
                    raise ValueError(
                        f"{what}{where} differs from {type(old).__name__} with its own "
                        f"function at positions {start}..{start + 31} (relative error "
                        f"{err:.2g} in attention scores): not patched; build "
                        "RotaryEmbedding.from_config for your own attention")
