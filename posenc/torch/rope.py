r"""RoPE as a PyTorch module, and the opt-in compiled formula.

Both, like :func:`posenc.apply_rope` on tensors, are meant to be dropped into a real
training or serving stack, and keep these guarantees (each has a test in
``tests/torch/test_robustness.py``):

* **Meta-device init.** ``RotaryEmbedding(...)`` built on the ``meta`` device (or
  moved there) and materialised with ``.to_empty(device=...)`` -- what
  ``torch.device("meta")`` contexts and FSDP do -- has valid tables: the
  non-persistent ``cos``/``sin`` buffers, which ``load_state_dict`` never refills, are
  rebuilt from float64 whenever a conversion (``to_empty``, ``to``, ``half``, ...)
  replaces them, and built on the input's device if a forward pass finds them still on
  ``meta``.
* **float64 in, float64 out, float64 tables**: float64 input is rotated with tables
  computed for the call in float64, as :func:`posenc.apply_rope` does.
* **Memory bounded by the input.** The table grows only to cover a sequence (to the
  next power of two) or positions below ``max(max_seq_len, 32768, 2 * seq)``; other
  positions (far, or negative) are computed for the call only, from float64 angles.
  One token at position ``2**40`` costs one row, not a table of ``2**40`` rows.
* **Inference mode.** Tables are always built outside ``torch.inference_mode()``, so a
  table first built during an evaluation pass can be saved for backward by a later
  training step.
* **Thread-safe.** Threads may share one module: table growth takes a lock, swaps in a
  larger table and never shrinks it, and every call reads one snapshot of it.
* **torch.compile and torch.export.** While a graph is traced (``fullgraph=True``
  included) no Python cache, lock or value-dependent branch is used: cos and sin are
  computed from the positions with tensor operations (float64 angles, the same
  frequencies), which ``torch.export`` records as part of the program, and the rotation
  is one expression that the compiler fuses.
* **torch.func.** Under ``vmap``, ``jvp``, ``grad`` and forward-mode AD the same
  functional formula is used (the eager fast path writes into preallocated outputs,
  which those transforms cannot batch or differentiate).  ``vmap`` over per-sample
  positions gives each sample its own result: ``"longrope"`` picks its factor set per
  sample with tensor operations; ``"dynamic"``, whose state lives between calls,
  refuses per-sample positions with a ``ValueError`` rather than guess (tested in
  ``tests/torch/test_transforms.py``).

Which code rotates a call is decided in one place, :func:`posenc.torch._apply.rope`,
which :func:`posenc.apply_rope` uses too: posenc's Triton kernel for CUDA tensors
(``backend="torch"`` keeps it off), the formula :func:`posenc.torch._eager.rotate` for
traced, transformed, differentiated and small calls, and a blocked CPU kernel for the
rest.  The guarantees above hold on each of them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from .._typing import Layout, Positions
from .._validation import (
    check_base,
    check_bool,
    check_count,
    check_d_model,
    check_layout,
    check_positions,
    check_positions_tensor,
)
from ..sinusoidal import inverse_frequencies
from . import _fused
from ._apply import apply_rope_tensor, rope
from ._eager import Tables
from ._tables import cos_sin64, positions_float64

__all__ = ["RotaryEmbedding", "compiled_apply_rope"]

#: Rows the table may grow to for positions, whatever ``max_seq_len`` and the input (for
#: ``dim=128``, 16 MiB of float32 cos and sin).  Past it, positions are computed per call.
_GROWTH_ROWS = 1 << 15

#: One lock for the table growth of every module: growth is rare, and a lock stored on
#: the module would not survive ``copy.deepcopy`` or pickling.
_GROW_LOCK = threading.Lock()

#: Position dtypes read on their device (``aminmax``, indexing); others go through NumPy.
_FAST_POSITION_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def _ndim(positions):
    return positions.ndim if torch.is_tensor(positions) else np.ndim(positions)


def _next_pow2(n):
    return 1 << max(n - 1, 0).bit_length()


_DYNAMIC_TRACED = (
    "rope_type 'dynamic' cannot be traced into a graph (torch.export refuses it; "
    "torch.compile falls back to eager Python here): its frequencies depend on the "
    "values of the positions and on earlier calls (transformers' "
    "dynamic_rope_update); use a static rope_type to export"
)


@torch.compiler.disable  # eager only: Dynamo cannot trace the functorch queries
def _is_vmapped(t):
    """Whether ``t`` is batched by ``torch.func.vmap`` at some level (under ``grad`` or
    ``jvp`` wrappers too): its per-sample values cannot be read as Python numbers."""
    from torch._C import _functorch

    while True:
        if _functorch.is_batchedtensor(t):
            return True
        if not _functorch.is_functorch_wrapped_tensor(t):
            return False
        t = _functorch.get_unwrapped(t)


def _is_fake(t):
    """Whether ``t`` is a ``FakeTensor`` (shape-only tracing, e.g. ``FakeTensorMode``)."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _describe(config):
    """:func:`posenc.atlas.describe_config` of a transformers config, a dict or a path."""
    from ..atlas import describe_config, load_config

    if hasattr(config, "to_dict") and not isinstance(config, Mapping):
        config = config.to_dict()
    elif isinstance(config, (str, os.PathLike)):
        config = load_config(config)
    elif not isinstance(config, Mapping):
        raise TypeError(
            "config must be a transformers config, a dict or the path of a config.json, "
            f"got {type(config).__name__}")
    return describe_config(config)


def _seq_axis(seq_dim, q, k):
    """``seq_dim`` as a non-negative axis of ``q`` and ``k`` (which have equal ranks)."""
    if isinstance(seq_dim, bool) or not isinstance(seq_dim, int):
        raise TypeError(f"seq_dim must be an int, got {type(seq_dim).__name__}")
    ndim = q.ndim if torch.is_tensor(q) else 0
    if not torch.is_tensor(k) or k.ndim != ndim or not -ndim <= seq_dim < ndim - 1:
        raise ValueError(
            f"seq_dim must be an axis of q and k before the feature axis (q and k of equal "
            f"rank), got seq_dim={seq_dim} for shapes {tuple(getattr(q, 'shape', ()))} and "
            f"{tuple(getattr(k, 'shape', ()))}; use seq_dim=1 for (batch, seq, heads, dim)")
    return seq_dim % ndim


def _rope_key(layer):
    """What makes two layer types rotate alike."""
    return (layer.rotary_dim, layer.rotary_slice,
            tuple(sorted((k, repr(v)) for k, v in layer.rope_parameters.items())))


RotarySlice = Literal["all", "first", "last"]
Backend = Literal["auto", "triton", "torch"]

_NO_TRITON = (
    "backend='triton' needs Triton, which is not installed. Install posenc's triton extra "
    '(pip install "posenc[triton] @ git+https://github.com/posenc/posenc", or ".[triton]" '
    "in a clone); PyTorch's CUDA wheels for Linux bring Triton already"
)


class RotaryEmbedding(nn.Module):
    """RoPE for queries and keys, with a cached cos/sin table.

    ``forward(q, k, positions=None)`` returns ``(apply_rope(q), apply_rope(k))`` with
    the same positions, layout and base (see :func:`posenc.apply_rope`), reading cos and
    sin from buffers ``cos`` and ``sin`` of shape ``(max_seq_len, dim/2)`` (float32,
    computed from float64 angles, non-persistent).  A longer sequence extends the table
    (to the next power of two, from float64 again), and so do positions past it up to
    ``max(max_seq_len, 32768, 2 * seq)`` rows; farther positions and negative ones are
    computed for the call only, so memory is bounded by the input and never by the
    largest position value.  float16/bfloat16 inputs are rotated in float32 and rounded
    once; float64 inputs with float64 tables computed for the call.  If the module
    itself is cast (``.half()``), the table is rebuilt in float32 rather than used in low
    precision.

    Guarantees (see :mod:`posenc.torch.rope`): meta-init safe (``.to("meta")`` or a
    ``torch.device("meta")`` context, then ``.to_empty(device=...)``, gives valid
    tables), thread-safe table growth, tables built outside inference mode, memory
    bounded by the input, ``torch.compile(fullgraph=True)`` and ``torch.export`` of the
    module with positions, and ``torch.func.vmap``/``jvp`` and forward-mode AD.

    **Scaled RoPE.**  With ``rope_parameters`` (a transformers ``config.rope_parameters``
    dict) the frequencies are :func:`posenc.rope_frequencies`' and cos and sin are
    multiplied by its attention factor, so that the output is that of transformers'
    ``LlamaRotaryEmbedding`` followed by ``apply_rotary_pos_emb`` for the same config
    (with ``layout="half"``), computed from float64 angles where transformers uses
    float32 ones.  ``default``, ``linear``, ``yarn`` and ``llama3`` are static: one set
    of frequencies, in the table.  Two types depend on the length, which is
    ``max(positions) + 1`` of the call, as in transformers:

    * ``"longrope"`` uses ``long_factor`` when that length exceeds
      ``original_max_position_embeddings`` and ``short_factor`` otherwise (per call,
      also inside a compiled or exported graph, and per sample under ``vmap``);
    * ``"dynamic"`` (dynamic NTK) follows transformers' ``dynamic_rope_update``, which
      keeps state between calls: when the length grows past the cached length the
      frequencies are recomputed for it and it becomes the cached length; when it falls
      below ``max_position_embeddings`` after having grown past it, the original
      frequencies and length are restored; in between, the last recomputed frequencies
      stay.  A known pitfall: an implementation that computes the "dynamic" frequencies
      once (at load time, or for the first long request) and keeps them runs a *static*
      variant, a different model from the one the config describes.  Being stateful,
      ``"dynamic"`` cannot be traced: ``torch.export`` refuses it with a ``ValueError``,
      and ``torch.compile`` falls back to eager Python where the positions are read
      (same results and state as eager mode, to float32 rounding).  Nor can it be
      vmapped over per-sample positions (a batch of independent calls has no order
      for the state): a ``ValueError``; positions shared by the batch are one call
      and work.

    The table holds the frequencies fixed at construction (the original ones for
    ``"dynamic"``, the short ones for ``"longrope"``); calls that use others compute
    cos and sin for their own positions only.

    Parameters
    ----------
    dim : int
        Number of features per head (the last dimension of ``q`` and ``k``), even.
    base : float, default 10000.0
        Finite and ``> 1``.
    layout : {"interleaved", "half"}, default "interleaved"
        Which features form a pair (see :mod:`posenc.rope`).
    max_seq_len : int, default 4096
        Positions cached at construction, ``>= 0``.
    compiled : bool, default False
        Rotate eager calls with the formula compiled by ``torch.compile`` (dynamic
        shapes), as :func:`compiled_apply_rope` does: one pass over memory, at the price
        of compiling on first use.
    rope_parameters : mapping or None, default None
        A transformers ``config.rope_parameters`` dict (``rope_type`` one of
        :data:`posenc.ROPE_TYPES`, ``rope_theta`` and that type's keys; see
        :func:`posenc.rope_frequencies`).  ``dim`` is the rotated width.  Its
        ``rope_theta`` is the base (``base`` is used when it has none; giving both with
        different values is an error).  None: plain RoPE with ``base``.
    max_position_embeddings : int or None, default None
        The model's ``config.max_position_embeddings``: required by ``"dynamic"`` (the
        length it rescales from); as in transformers, ``"yarn"`` and ``"longrope"``
        derive ``factor`` from it when that is absent, and the scaled types use it when
        ``original_max_position_embeddings`` is absent.
    rotary_slice : {"all", "first", "last"}, default "all"
        Which features of ``q`` and ``k`` are rotated.  ``"all"``: the last dimension is
        ``dim``.  ``"first"`` / ``"last"``: the last dimension may be wider than ``dim``
        and only its first / last ``dim`` features are rotated, the others pass through
        unchanged.  ``"first"`` is partial rotary as GPT-NeoX and GLM place it;
        ``"last"`` is DeepSeek's multi-head latent attention, whose query heads are
        ``[no-position part, rotated part]`` (``qk_nope_head_dim`` then
        ``qk_rope_head_dim``) and whose shared rotated key is ``dim`` wide.  Every
        transform above applies.  DeepSeek-V3 keeps the interleaved layout
        (``rope_interleave``); transformers then reorders the rotated features into the
        half layout's order before rotating, the same reordering for queries and keys,
        so the attention scores are the same as with ``layout="interleaved"`` here.

    backend : {"auto", "triton", "torch"}, default "auto"
        Which code rotates.  ``"auto"``: float16, bfloat16 and float32 CUDA tensors go to
        posenc's fused Triton kernel when Triton is installed (``pip install
        'posenc[triton]'``; PyTorch's CUDA wheels bring it): ``q`` and ``k`` in one
        launch, cos and sin formed in the kernel from float64 angles reduced modulo
        2 pi in float64 and evaluated in float32 (within a few float32 roundings of
        the float64-built tables' values; benchmarks/results-gpu.json records the
        error measured on a GPU), any position that fits in int64, no host
        synchronisation, registered as the operators
        ``posenc::rope_qk`` / ``posenc::rope_qk_`` (``torch.library.triton_op``), so
        that ``torch.export`` keeps one call, ``torch.compile`` hands Inductor the
        Triton kernel itself to launch, and autograd runs the kernel backward (the
        rotation by the opposite angle).  Everything else (CPU tensors, float64,
        ``torch.func`` transforms, forward-mode AD, ``compiled=True``, a traced
        ``"dynamic"`` or ``"longrope"``) takes the torch path described here.
        ``"triton"``: the kernel or a ``ValueError`` (CUDA tensors, or CPU tensors under
        Triton's interpreter ``TRITON_INTERPRET=1``, which is how the tests run it);
        float64 still takes the torch path.  ``"torch"``: never the kernel.

    Attributes
    ----------
    rope_type : str
        ``"default"`` without ``rope_parameters``.
    attention_factor : float
        The multiplier of cos and sin (1.0 unless the rope_type has one).

    Raises
    ------
    TypeError, ValueError
        For bad arguments (a bad ``rope_parameters`` key or value is named), and in
        ``forward`` for tensors whose last dimension is not ``dim`` (narrower than
        ``dim`` with ``rotary_slice`` "first" or "last"), positions of the
        wrong length or dtype, positions that do not fit in int64, or meta positions
        with real ``q``.

    Examples
    --------
    >>> import torch
    >>> from posenc import apply_rope
    >>> rope = RotaryEmbedding(8, layout="half", max_seq_len=16)
    >>> q, k = torch.randn(2, 1, 4, 5, 8).unbind(0)          # (batch, heads, seq, dim)
    >>> q2, k2 = rope(q, k)
    >>> bool(torch.allclose(q2, apply_rope(q, layout="half"), atol=1e-6))
    True
    >>> q3, _ = rope(q, k, positions=torch.arange(100, 105))  # past the table: extended
    >>> rope.cos.shape
    torch.Size([128, 4])
    >>> q4, _ = rope(q[..., :1, :], k[..., :1, :], positions=[2**40])  # far: one row
    >>> rope.cos.shape
    torch.Size([128, 4])

    Built on the meta device and materialised, as large models are:

    >>> meta = RotaryEmbedding(8, layout="half", max_seq_len=16).to("meta")
    >>> real = meta.to_empty(device="cpu")
    >>> bool(torch.equal(real(q, k)[0], rope(q, k)[0]))
    True

    Llama 3.1's scaled RoPE, from its config:

    >>> llama31 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
    ...            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    ...            "original_max_position_embeddings": 8192}
    >>> rope31 = RotaryEmbedding(8, layout="half", rope_parameters=llama31,
    ...                          max_position_embeddings=131072)
    >>> rope31
    RotaryEmbedding(dim=8, base=500000, layout='half', max_seq_len=4096, rope_type='llama3')
    >>> q5, k5 = rope31(q, k, positions=torch.arange(9000, 9005))

    DeepSeek's latent attention rotates the last 8 of a query head's 24 features here
    (64 of 192 in DeepSeek-V3) and a shared key of 8:

    >>> mla = RotaryEmbedding(8, rotary_slice="last")
    >>> q_mla, k_rot = torch.randn(1, 2, 5, 24), torch.randn(1, 1, 5, 8)
    >>> q6, k6 = mla(q_mla, k_rot)
    >>> bool(torch.equal(q6[..., :16], q_mla[..., :16]))
    True
    >>> bool(torch.allclose(q6[..., 16:], apply_rope(q_mla[..., 16:]), atol=1e-6))
    True
    """

    def __init__(self, dim: int, base: float | None = None, layout: Layout = "interleaved",
                 max_seq_len: int = 4096, compiled: bool = False,
                 rope_parameters: Mapping[str, Any] | None = None,
                 max_position_embeddings: int | None = None,
                 rotary_slice: RotarySlice = "all", backend: Backend = "auto",
                 layer_type: str | None = None) -> None:
        super().__init__()
        self.compiled = check_bool(compiled, "compiled")
        if backend not in ("auto", "triton", "torch"):
            raise ValueError(
                f"backend must be 'auto', 'triton' or 'torch', got {backend!r}")
        if backend == "triton" and not _fused.available():
            raise ImportError(_NO_TRITON)
        self.backend = backend
        if rotary_slice not in ("all", "first", "last"):
            raise ValueError(
                f"rotary_slice must be 'all', 'first' or 'last', got {rotary_slice!r}")
        self.rotary_slice = rotary_slice
        self.dim = check_d_model(dim, "dim", even=True)
        self.base = 10000.0 if base is None else check_base(base)
        self.layout = check_layout(layout)
        self._max_seq_len = check_count(max_seq_len, "max_seq_len")
        self._set_frequencies(rope_parameters, max_position_embeddings, layer_type,
                              base_given=base is not None)
        cos, sin = self._tables(np.arange(self._max_seq_len))
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        # the fused kernel's float64 (frequencies, attention factor): a buffer, so that it
        # follows the module's device and is a graph input (not a constant) when compiled
        self.register_buffer("_freqs", _fused.freq_buffer(self._inv_freq, self.attention_factor),
                             persistent=False)

    @classmethod
    def from_config(cls, config: Any, layer_type: str | None = None, *,
                    max_seq_len: int = 4096, backend: Backend = "auto") -> RotaryEmbedding:
        """The RoPE of a transformers model, built from its config.

        Everything is read as transformers reads it, by the reader of
        ``python -m posenc inspect`` (:func:`posenc.atlas.describe_config`): the head
        width, the rotated width and which features rotate (``partial_rotary_factor``:
        the first; ``qk_rope_head_dim``: the last, beside ``qk_nope_head_dim``), the
        pairing (``"half"`` for ``rotate_half`` models, ``"interleaved"`` for the families
        that pair neighbours or set ``rope_interleave``), the rope type and its
        parameters for the layer type, ``max_position_embeddings`` and the attention
        factor.  The module takes ``q`` and ``k`` as the model's attention forms them,
        ``(batch, heads, seq, head_dim)`` with whole heads.

        Parameters
        ----------
        config : transformers config, mapping, str or path
            A ``PretrainedConfig``, a parsed ``config.json``, or the path of a
            ``config.json`` (or of the folder holding one).  A multimodal config's
            ``text_config`` is read.
        layer_type : str, optional
            transformers' layer type (``"full_attention"``, ``"sliding_attention"``,
            ...).  Required when the layer types of the config rotate differently
            (Gemma 3); transformers builds one table per layer type there too.
        max_seq_len, backend
            As for the constructor.

        Returns
        -------
        RotaryEmbedding

        Raises
        ------
        ValueError
            If the reader refuses the config (its message names the key), if the
            config's layer types rotate differently and ``layer_type`` is not given,
            if ``layer_type`` has no RoPE (NoPE layers) or is not in the config, or for
            M-RoPE configs (use :func:`posenc.apply_mrope`).

        Examples
        --------
        >>> import torch
        >>> cfg = {"model_type": "stablelm", "hidden_size": 256, "num_attention_heads": 4,
        ...        "partial_rotary_factor": 0.25, "max_position_embeddings": 4096}
        >>> rope = RotaryEmbedding.from_config(cfg)
        >>> rope
        RotaryEmbedding(dim=16, base=10000, layout='half', max_seq_len=4096, rotary_slice='first')
        >>> q = k = torch.randn(1, 4, 5, 64)                       # whole heads
        >>> q2, k2 = rope(q, k)
        >>> bool(torch.equal(q2[..., 16:], q[..., 16:]))           # 48 features pass through
        True
        """
        desc = _describe(config)
        if desc.mrope_section is not None:
            raise ValueError(
                "config uses M-RoPE (three position ids per token, mrope_section "
                f"{list(desc.mrope_section)}); rotate with posenc.apply_mrope instead")
        layers = {layer.layer_type: layer for layer in desc.layers}
        if layer_type is None:
            distinct = {_rope_key(layer) for layer in desc.layers}
            if len(distinct) > 1:
                raise ValueError(
                    f"the config's layer types rotate differently ({', '.join(layers)}); "
                    "pass layer_type= one of them (one module per layer type)")
            layer = desc.layers[0]
        elif layer_type in layers:
            layer = layers[layer_type]
        else:
            nope = " (its layers use no RoPE)" if desc.nope_layers else ""
            raise ValueError(
                f"layer_type must be a layer type of the config that rotates "
                f"({', '.join(map(repr, layers))}), got {layer_type!r}{nope}")
        return cls(layer.rotary_dim, layout="interleaved" if desc.interleaved else "half",
                   max_seq_len=max_seq_len, rope_parameters=layer.rope_parameters,
                   max_position_embeddings=desc.max_position_embeddings,
                   rotary_slice=layer.rotary_slice, backend=backend)

    def cos_sin(self, position_ids: torch.Tensor, dtype: torch.dtype | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""cos and sin for transformers' ``apply_rotary_pos_emb``, from float64 angles.

        .. math::

           \mathrm{cos}[b, s] = a\,[\cos(p_{bs}\theta_0), \ldots,
           \cos(p_{bs}\theta_{r/2-1}), \cos(p_{bs}\theta_0), \ldots,
           \cos(p_{bs}\theta_{r/2-1})]

        and the same for sin: transformers' format (the half-width table written twice),
        with :math:`a` the attention factor and :math:`\theta_i` the module's frequencies
        for this call (``"dynamic"`` and ``"longrope"`` pick them from
        ``max(position_ids) + 1`` as transformers does).

        Parameters
        ----------
        position_ids : torch.Tensor
            Integer positions, shape ``(batch, seq)`` (or ``(seq,)``).
        dtype : torch.dtype, optional
            Of the result; default float32 (float64 keeps every digit).  Pass the
            model's dtype to feed a model's own ``apply_rotary_pos_emb``.

        Returns
        -------
        tuple of torch.Tensor
            ``(cos, sin)``, each of shape ``position_ids.shape + (dim,)``, on
            ``position_ids``' device.

        Raises
        ------
        TypeError
            If ``position_ids`` is not an integer tensor.

        Examples
        --------
        >>> import torch
        >>> from posenc.torch import apply_rotary_pos_emb
        >>> rope = RotaryEmbedding(8, layout="half")
        >>> q = k = torch.randn(2, 3, 5, 8)
        >>> cos, sin = rope.cos_sin(torch.arange(5).expand(2, 5))
        >>> cos.shape
        torch.Size([2, 5, 8])
        >>> q2, k2 = apply_rotary_pos_emb(q, k, cos, sin)
        >>> bool(torch.allclose(q2, rope(q, k)[0], atol=1e-6))
        True
        """
        if (not torch.is_tensor(position_ids) or position_ids.is_floating_point()
                or position_ids.is_complex() or position_ids.dtype == torch.bool):
            got = position_ids.dtype if torch.is_tensor(position_ids) else type(position_ids).__name__
            raise TypeError(
                f"position_ids must be an integer tensor, got {got}; "
                "pass e.g. torch.arange(seq)[None]")
        flat = position_ids.reshape(-1)
        inv_freq = self._functional_frequencies(flat, flat.shape[0])
        cos, sin = cos_sin64(position_ids.to(torch.float64), inv_freq, self.attention_factor,
                             torch.float32 if dtype is None else dtype)
        return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)

    def _set_frequencies(self, rope_parameters, max_position_embeddings, layer_type,
                         base_given):
        """The frequencies of the table (float64, a plain CPU attribute: a constant of
        traced graphs, untouched by ``to("meta")``), the attention factor, and what the
        length-dependent types (dynamic, longrope) need to switch frequencies."""
        if max_position_embeddings is not None:
            max_position_embeddings = check_count(
                max_position_embeddings, "max_position_embeddings", minimum=1)
        self.max_position_embeddings = max_position_embeddings
        self.rope_type, self.attention_factor = "default", 1.0
        if rope_parameters is None:
            if layer_type is not None:
                raise ValueError(
                    "layer_type picks an entry of per-layer-type rope_parameters; "
                    "pass rope_parameters too, or leave layer_type out")
            inv_freq = inverse_frequencies(self.dim, self.base)
        else:
            from ..rope_scaling import _layer_entry, rope_frequencies

            if not isinstance(rope_parameters, Mapping):
                raise TypeError(
                    "rope_parameters must be a mapping (a transformers config.rope_parameters "
                    f"dict) or None, got {type(rope_parameters).__name__}"
                )
            params = dict(_layer_entry(rope_parameters, layer_type))
            rope_type = params.get("rope_type") or params.get("type") or "default"
            fraction = params.get("partial_rotary_factor", 1.0)
            if rope_type != "proportional" and fraction != 1.0:
                raise ValueError(
                    f"rope_parameters['partial_rotary_factor'] is {fraction!r}, but dim is the "
                    "rotated width and the whole head is not known here; build the module "
                    "with RotaryEmbedding.from_config(config), or pass "
                    "dim=int(head_dim * partial_rotary_factor), rotary_slice='first' and "
                    "rope_parameters without the key")
            theta = params.get("rope_theta")
            if theta is None:
                params["rope_theta"] = self.base
            else:
                theta = check_base(theta, "rope_parameters['rope_theta']")
                if base_given and self.base != theta:
                    raise ValueError(
                        f"base ({self.base:g}) and rope_parameters['rope_theta'] ({theta:g}) "
                        f"disagree; give the base once"
                    )
                self.base = theta
            # checks every key and value (TypeError/ValueError naming the key)
            inv_freq, self.attention_factor = rope_frequencies(
                self.dim, params, max_position_embeddings=max_position_embeddings)
            self.rope_type = params.get("rope_type") or params.get("type") or "default"
            self._rope_parameters = params
            if self.rope_type == "longrope":
                # transformers: long factors once max(position) + 1 exceeds the original length
                original = params.get("original_max_position_embeddings")
                self._long_after = int(max_position_embeddings if original is None else original)
                with torch.inference_mode(False):
                    self._long_inv_freq = torch.from_numpy(rope_frequencies(
                        self.dim, params, seq_len=self._long_after + 1,
                        max_position_embeddings=max_position_embeddings)[0])
        with torch.inference_mode(False):
            self._inv_freq = torch.from_numpy(np.asarray(inv_freq, dtype=np.float64))
        if self.rope_type == "dynamic":
            # transformers' (max_seq_len_cached, inv_freq) of dynamic_rope_update
            self._dynamic_state = (max_position_embeddings, self._inv_freq)

    def _call_frequencies(self, seq_len):
        """The frequencies for a call whose largest position is ``seq_len - 1`` (eager).

        ``"longrope"``: the long factors when ``seq_len`` exceeds the original length, as
        transformers picks them.  ``"dynamic"``: transformers' ``dynamic_rope_update``,
        which keeps state between calls: recompute for ``seq_len`` when it grows past the
        cached length, and return to the original frequencies when it falls below
        ``max_position_embeddings`` after having grown past it.
        """
        if self.rope_type == "longrope":
            return self._long_inv_freq if seq_len > self._long_after else self._inv_freq
        if self.rope_type != "dynamic":
            return self._inv_freq
        from ..rope_scaling import rope_frequencies

        original = self.max_position_embeddings
        with _GROW_LOCK:
            cached, inv_freq = self._dynamic_state
            if seq_len > cached:  # growth
                with torch.inference_mode(False):
                    inv_freq = torch.from_numpy(rope_frequencies(
                        self.dim, self._rope_parameters, seq_len=seq_len,
                        max_position_embeddings=original)[0])
                cached = seq_len
            if seq_len < original and cached > original:  # reset
                cached, inv_freq = original, self._inv_freq
            self._dynamic_state = (cached, inv_freq)
        return inv_freq

    def _tables(self, positions, device=None, dtype=torch.float32, inv_freq=None):
        """cos and sin of ``positions`` (int64 NumPy) times the attention factor, from
        float64 angles, never inference tensors; empty tables on the meta device."""
        with torch.inference_mode(False):
            if device is not None and torch.device(device).type == "meta":
                shape = (positions.shape[0], self.dim // 2)
                return (torch.empty(shape, dtype=dtype, device="meta"),
                        torch.empty(shape, dtype=dtype, device="meta"))
            inv = (self._inv_freq if inv_freq is None else inv_freq).numpy()
            angles = positions.astype(np.float64)[:, None] * inv[None, :]
            cos, sin = np.cos(angles), np.sin(angles)
            if self.attention_factor != 1.0:
                cos *= self.attention_factor
                sin *= self.attention_factor
            cos = torch.from_numpy(cos).to(device=device, dtype=dtype)
            sin = torch.from_numpy(sin).to(device=device, dtype=dtype)
        return cos, sin

    def extra_repr(self):
        scaled = "" if self.rope_type == "default" else f", rope_type={self.rope_type!r}"
        return (
            f"dim={self.dim}, base={self.base:g}, layout={self.layout!r}, "
            f"max_seq_len={self.cos.shape[0]}{scaled}"
            + (", compiled=True" if self.compiled else "")
            + (f", rotary_slice={self.rotary_slice!r}" if self.rotary_slice != "all" else "")
        )

    def _apply(self, fn, recurse=True):
        # Conversions (to, to_empty, half, cuda, ...) replace the buffers.  The tables are
        # deterministic and not in state_dict, so whatever the conversion made of them
        # (uninitialised memory after to_empty, float16 after half) is rebuilt.
        before = self._buffers.get("cos")
        freqs_before = self._buffers.get("_freqs")
        super()._apply(fn, recurse)
        cos = self._buffers.get("cos")
        if cos is not None and (cos is not before or cos.dtype != torch.float32):
            self._rebuild(cos.device, cos.shape[0])
        freqs = self._buffers.get("_freqs")
        if freqs is not None and (freqs is not freqs_before or freqs.dtype != torch.float64):
            with torch.inference_mode(False):
                if freqs.device.type == "meta":
                    self._freqs = torch.empty(freqs.shape, dtype=torch.float64, device="meta")
                else:
                    self._freqs = _fused.freq_buffer(self._inv_freq, self.attention_factor,
                                                     freqs.device)
        return self

    def _rebuild(self, device, n):
        with _GROW_LOCK:
            self.cos, self.sin = self._tables(np.arange(n), device)

    def _grow(self, n, device):
        """Tables covering positions ``< n`` (at least); swapped in under the lock."""
        with _GROW_LOCK:
            cos, sin = self.cos, self.sin
            if cos.device.type != "meta" and min(cos.shape[0], sin.shape[0]) >= n:
                return cos, sin  # another thread grew it meanwhile
            if cos.device.type != "meta":
                device = cos.device
            n = max(_next_pow2(n), cos.shape[0])  # never shrink
            cos, sin = self._tables(np.arange(n), device)
            self.cos, self.sin = cos, sin
            return cos, sin

    def _positions(self, positions, seq):
        """Checked positions ``(idx, lo, hi)`` (eager): an integer tensor ``(seq,)``, or
        None where they are known to be the run ``lo .. hi``."""
        if (torch.is_tensor(positions) and positions.dtype in _FAST_POSITION_DTYPES
                and positions.device.type != "meta"):
            check_positions_tensor(positions, seq)
            if seq == 0:
                return positions, 0, 0
            if seq <= 8 and positions.device.type == "cpu":  # a decoding step: no kernel
                values = positions.tolist()
                lo, hi = min(values), max(values)
                run = hi - lo == seq - 1 and values == list(range(lo, hi + 1))
                return (None if run else positions), lo, hi
            lo, hi = (int(t) for t in torch.aminmax(positions))
            return positions, lo, hi
        arr = check_positions(positions, seq)  # lists, arrays, uint64: int64 NumPy
        if seq == 0:
            return torch.from_numpy(arr), 0, 0
        lo, hi = int(arr.min()), int(arr.max())
        run = hi - lo == seq - 1 and np.array_equal(arr, np.arange(lo, hi + 1))
        return (None if run else torch.from_numpy(arr)), lo, hi

    def _cos_sin(self, positions, seq, device, dtype):
        """cos and sin of shape (seq, dim/2) in ``dtype`` (float32 or float64)."""
        if positions is None:
            idx, lo, hi = None, 0, seq - 1
        else:
            idx, lo, hi = self._positions(positions, seq)
        inv_freq = self._inv_freq
        if self.rope_type in ("dynamic", "longrope") and seq:
            inv_freq = self._call_frequencies(hi + 1)
        if dtype == torch.float64 or inv_freq is not self._inv_freq:
            # computed for the call: float64 as apply_rope does, or frequencies that are
            # not the table's (dynamic past its length, longrope's long factors)
            pos = np.arange(lo, lo + seq) if idx is None else idx.cpu().numpy()
            return self._tables(pos.astype(np.int64), device, dtype, inv_freq)
        cos, sin = self.cos, self.sin  # one snapshot: never shrunk, rows never change
        if seq == 0:
            return cos[:0], sin[:0]
        n = min(cos.shape[0], sin.shape[0])
        if cos.device.type == "meta" or sin.device.type == "meta":
            n = -1  # never materialised: build on the input's device
        if lo < 0 or (hi >= n and _next_pow2(hi + 1) > max(
                self._max_seq_len, _GROWTH_ROWS, 2 * seq)):
            # negative or far positions: only the rows asked for, from float64
            pos = np.arange(lo, lo + seq) if idx is None else idx.cpu().numpy()
            return self._tables(pos.astype(np.int64), device)
        if hi >= n:
            cos, sin = self._grow(hi + 1, device)
        if idx is None:  # a run: views of the table
            return cos[lo:hi + 1], sin[lo:hi + 1]
        idx = idx.to(device=cos.device, dtype=torch.long)
        return cos[idx], sin[idx]

    def _functional_frequencies(self, positions, seq):
        """The call's frequencies where the values of ``positions`` may not be read.

        ``"longrope"``: the long or the short set, picked with ``torch.where`` on
        ``max(positions) + 1`` (a tensor operation), so that every sample of a
        ``vmap`` over per-sample positions, and every call of a compiled or exported
        graph, gets its own choice.  ``"dynamic"``: its frequencies depend on earlier
        calls (one state per module), which a traced graph and a batch of per-sample
        calls cannot have: a ``ValueError`` naming the rule, never a silent choice.
        """
        if self.rope_type not in ("dynamic", "longrope"):
            return self._inv_freq
        if self.rope_type == "dynamic" and torch.compiler.is_compiling():
            raise ValueError(_DYNAMIC_TRACED)
        if seq == 0:  # no position: the current frequencies, no call to record
            return self._dynamic_state[1] if self.rope_type == "dynamic" else self._inv_freq
        if positions is None:  # 0 .. seq - 1: the length is a shape, known here
            return self._call_frequencies(seq)
        pos = positions if torch.is_tensor(positions) else torch.from_numpy(
            check_positions(positions, seq))
        if self.rope_type == "longrope":
            # transformers: the long factors once max(position) + 1 exceeds the original
            # length, i.e. once a position is >= it; per sample under vmap, per call
            # inside a graph.  (any(..., keepdim=True) rather than max() + 1: PyTorch
            # 2.13's vmap fails on a 0-d batched tensor plus a Python number for an
            # empty batch.)
            longer = (pos >= self._long_after).any(-1, keepdim=True)
            return torch.where(longer, self._long_inv_freq.to(pos.device),
                               self._inv_freq.to(pos.device))
        if pos.is_meta or _is_fake(pos):
            # a shape-only pass: no values, and no call to record in the state
            return self._dynamic_state[1]
        if _is_vmapped(pos):
            raise ValueError(
                "rope_type 'dynamic' cannot be vmapped over per-sample positions: its "
                "frequencies depend on max(positions) + 1 and on the module's earlier calls "
                "(transformers' dynamic_rope_update keeps one state per module, and one "
                "batched call uses the largest position of the whole batch), so a batch of "
                "per-sample calls has no defined result; pass the batch's positions "
                "unbatched (shared by every sample), or loop over the samples"
            )
        return self._call_frequencies(int(pos.max()) + 1)

    # -- where the route takes the tables (see posenc.torch._apply) ----------------------

    @property
    def static(self) -> bool:
        """Whether the frequencies are fixed (the kernel may be traced with them)."""
        return self.rope_type not in ("dynamic", "longrope")

    def eager_tables(self, positions, seq, device, dtype, layout):
        """The call's :class:`~posenc.torch._eager.Tables` from the cached table."""
        if positions is None or _ndim(positions) == 1:
            return Tables(*self._cos_sin(positions, seq, device, dtype))
        pos = self._rows(positions)
        if pos.shape[0] == 1 or bool((pos == pos[:1]).all()):  # rows all equal: one row
            return Tables(*self._cos_sin(pos[0], seq, device, dtype))
        b = pos.shape[0]
        cos, sin = self._cos_sin(pos.reshape(-1), b * seq, device, dtype)
        return Tables(cos.reshape(b, 1, seq, -1), sin.reshape(b, 1, seq, -1))

    def traced_tables(self, positions, seq, device, dtype):
        """cos and sin from the positions by tensor operations (traced, transformed, meta)."""
        rows = positions is not None and _ndim(positions) == 2
        if rows:
            pos = self._rows(positions)
            inv_freq = self._functional_frequencies(pos.reshape(-1), pos.numel())
            if pos.is_meta and device.type != "meta":
                raise ValueError(
                    "positions is a meta tensor (it has no values) but q is not; pass real "
                    "positions, or meta q and k for a shape-only pass")
            p = pos.to(device=device, dtype=torch.float64)
        else:
            inv_freq = self._functional_frequencies(positions, seq)
            p = positions_float64(positions, seq, device)
        cos, sin = cos_sin64(p, inv_freq, self.attention_factor, dtype)
        if rows:
            cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)  # (batch, 1, seq, dim/2)
        return cos, sin

    def kernel_args(self, positions, seq, device):
        """(positions tensor or None, start, frequency buffer) for the Triton kernel."""
        pos, start, hi = _fused.kernel_positions(positions, seq, device)
        inv_freq = self._inv_freq
        if not self.static and seq:
            inv_freq = self._call_frequencies((int(pos.max()) if hi is None else hi) + 1)
        return pos, start, self._freq_buffer(device, inv_freq)

    @staticmethod
    def _rows(positions):
        """``(batch, seq)`` positions as an integer tensor."""
        if torch.is_tensor(positions) and positions.dtype in _FAST_POSITION_DTYPES:
            return positions
        arr = positions.numpy() if torch.is_tensor(positions) else np.asarray(positions)
        return torch.from_numpy(check_positions(arr.reshape(-1), arr.size).reshape(arr.shape))

    def forward(self, q: torch.Tensor, k: torch.Tensor,
                positions: Positions | None = None, *, inplace: bool = False,
                seq_dim: int = -2) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate ``q`` and ``k`` (shape ``(..., seq, dim)``) at the same positions.

        Parameters
        ----------
        q, k : torch.Tensor
            Floating-point, shape ``(..., seq, dim)`` (the leading dimensions may
            differ, e.g. grouped-query attention).
        positions : torch.Tensor or array_like of int, optional
            Shape ``(seq,)``, shared by every sample; or ``(batch, seq)``, one row per
            sample, for 4-D ``q`` and ``k`` of shape ``(batch, heads, seq, dim)``
            (packed or left-padded batches).  Default ``0 .. seq - 1``.  Any integers
            that fit in int64 (negative allowed); an empty list for an empty sequence.
        inplace : bool, keyword-only, default False
            Write the rotation into ``q`` and ``k`` themselves and return them (no
            output is allocated; PyTorch's rules for in-place operations apply, e.g. not
            on a leaf that requires grad).
        seq_dim : int, keyword-only, default -2
            The sequence axis of ``q`` and ``k``: ``-2`` for ``(batch, heads, seq, dim)``
            (transformers), ``1`` for ``(batch, seq, heads, dim)`` (flash-attn,
            torchtune).  The results have the inputs' shapes.

        Returns
        -------
        tuple of torch.Tensor
            The rotated ``(q, k)``, same shapes, dtypes and devices.
        """
        if seq_dim != -2:
            axis = _seq_axis(seq_dim, q, k)
            if axis != q.ndim - 2:
                q2, k2 = self.forward(q.movedim(axis, -2), k.movedim(axis, -2), positions,
                                      inplace=inplace)
                return (q, k) if inplace else (q2.movedim(-2, axis), k2.movedim(-2, axis))
        inplace = check_bool(inplace, "inplace")
        self._check_inputs(q, k, positions)
        offs = (0, 0)
        if self.rotary_slice == "last":
            offs = (q.shape[-1] - self.dim, k.shape[-1] - self.dim)
        q2, k2 = rope((q, k), offs, positions, self, self.dim, self.layout,
                      outs=(q, k) if inplace else None, backend=self.backend,
                      compiled=self.compiled)
        return q2, k2

    def _check_inputs(self, q, k, positions):
        """q, k and the shape and dtype of positions, for :meth:`forward`."""
        sliced = self.rotary_slice != "all"
        for name, t in (("q", q), ("k", k)):
            if not torch.is_tensor(t) or not t.is_floating_point():
                raise TypeError(f"{name} must be a floating-point tensor")
            if t.ndim < 2 or (t.shape[-1] < self.dim if sliced else t.shape[-1] != self.dim):
                width = f">= dim={self.dim}" if sliced else f"dim={self.dim}"
                raise ValueError(
                    f"{name} must have shape (..., seq, {width}), got {tuple(t.shape)}"
                )
        seq = q.shape[-2]
        if k.shape[-2] != seq:
            raise ValueError(
                f"q and k must have the same sequence length, got {seq} and {k.shape[-2]}"
            )
        if positions is None:
            return
        if torch.is_tensor(positions):
            shape = tuple(positions.shape)
            if (positions.is_floating_point() or positions.is_complex()
                    or positions.dtype == torch.bool):
                raise TypeError(f"positions must have an integer dtype, got {positions.dtype}")
        else:
            shape = np.shape(positions)
        if len(shape) == 2 and shape[1] == seq:
            if q.ndim != 4 or k.ndim != 4 or not shape[0] == q.shape[0] == k.shape[0]:
                raise ValueError(
                    f"positions of shape {shape} (one row per sample) need q and k of "
                    f"shape (batch={shape[0]}, heads, seq={seq}, dim), got "
                    f"{tuple(q.shape)} and {tuple(k.shape)}"
                )
        elif len(shape) != 1 or shape[0] != seq:
            hint = ""
            if shape and shape[-1] in q.shape[:-2]:
                hint = (f"; q's axis {list(q.shape).index(shape[-1])} has that length: for "
                        "(batch, seq, heads, dim) tensors pass seq_dim=1")
            raise ValueError(
                f"positions must have shape ({seq},) (the sequence length, q.shape[-2]) "
                f"or (batch, {seq}), got {shape}{hint}"
            )

    def _freq_buffer(self, device, inv_freq=None):
        """The kernel's float64 (frequencies, attention factor) on ``device``: the
        ``_freqs`` buffer for the table's frequencies, else built for the call."""
        if inv_freq is None or inv_freq is self._inv_freq:
            buf = self._freqs
            if buf.device == device:
                return buf
            inv_freq = self._inv_freq
        with torch.inference_mode(False):
            return _fused.freq_buffer(inv_freq, self.attention_factor, device)


def compiled_apply_rope(x: torch.Tensor, positions: Positions | None = None, *,
                        base: float = 10000.0, layout: Layout = "interleaved",
                        rotary_dim: int | None = None) -> torch.Tensor:
    """:func:`posenc.apply_rope` for tensors, as one kernel compiled by ``torch.compile``.

    Opt-in speed.  Eager PyTorch runs one kernel per operation: the interleaved layout
    is already one pass over memory (a complex multiply), but the half layout takes
    three, and float16/bfloat16 need conversions to float32 and back.  Compiled, every
    case is one loop that reads ``x`` once and writes the result once (see the book's
    *Benchmarks* appendix for the measured difference).  The results are those of
    :func:`posenc.apply_rope`: the same float64-accurate tables, float32 arithmetic for
    float16/bfloat16, one rounding at the end (the compiler may contract a multiply and
    an add into one fused operation, so float32 results can differ in the last bit).

    The price is compilation: the first call, and the first with a new dtype, layout,
    rotated width or (once) sequence length, compiles for a few seconds (longer for the
    first compilation in a process), and it needs what ``torch.compile`` needs (a C++
    compiler on the CPU, Triton on a GPU).  On CUDA tensors there is no reason to use it:
    :func:`posenc.apply_rope` already runs posenc's fused Triton kernel there, eagerly
    and inside a compiled model (the operator ``posenc::rope``, whose Triton kernel
    Inductor launches itself).  On the CPU a
    model that is compiled anyway gets this fusion by calling :func:`posenc.apply_rope`
    inside it: while traced, :func:`posenc.apply_rope` bypasses its cache and computes
    the tables from the positions with tensor operations, in the same one-expression
    form (tested with ``fullgraph=True``).  Called inside a compiled graph or a
    ``torch.func`` transform, this function does exactly that.

    Parameters
    ----------
    x : torch.Tensor
        Floating-point, shape ``(..., seq, d)``, ``d`` even.
    positions, base, layout, rotary_dim
        As for :func:`posenc.apply_rope`.

    Returns
    -------
    torch.Tensor
        Same shape, dtype and device as ``x``.

    Raises
    ------
    TypeError
        If ``x`` is not a floating-point tensor, or as :func:`posenc.apply_rope`.
    ValueError
        As :func:`posenc.apply_rope`.

    Examples
    --------
    >>> import torch, posenc
    >>> x = torch.randn(1, 2, 6, 8)
    >>> y = compiled_apply_rope(x, layout="half")              # compiles on first use
    >>> bool(torch.allclose(y, posenc.apply_rope(x, layout="half"), atol=1e-6))
    True
    """
    b = check_base(base)
    layout = check_layout(layout)
    if not torch.is_tensor(x) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor, got "
                        f"{x.dtype if torch.is_tensor(x) else type(x).__name__}")
    return apply_rope_tensor(x, positions, b, layout, rotary_dim, compiled=True)
