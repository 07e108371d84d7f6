r"""PyTorch modules: the encodings as ``nn.Module``\ s, for use inside models.

This package imports the real :mod:`torch` (``import posenc`` does not).  Tables are built
from float64 angles (NumPy) and stored as float32 buffers with
``register_buffer(..., persistent=False)``: they are deterministic functions of the
constructor arguments, so they are left out of ``state_dict`` (checkpoints stay small,
and a model saved with one ``max_len`` loads into one built with another).

One submodule per encoding (:mod:`posenc.torch.sinusoidal`, :mod:`posenc.torch.rope`, ...);
every public name is importable from :mod:`posenc.torch` itself.

Without PyTorch installed, importing this package raises an ``ImportError`` that says
how to install posenc's ``torch`` extra; the rest of :mod:`posenc` works with NumPy
alone.
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as _error:  # pragma: no cover - tested in a venv without torch
    raise ImportError(
        "posenc.torch needs PyTorch, which is not installed. Install posenc's torch extra: "
        'pip install "posenc[torch] @ git+https://github.com/posenc/posenc" '
        '(in a clone: pip install ".[torch]")'
    ) from _error

from .relative import (
    ALiBiBias,
    LearnedPositionalEmbedding,
    ShawRelativeAttention,
    T5RelativePositionBias,
    t5_relative_position_bucket_torch,
)
from .multidim import RoPEMixed
from .rope import RotaryEmbedding, compiled_apply_rope
from .sinusoidal import SinusoidalPositionalEncoding
from .hf import apply_rotary_pos_emb, patch

__all__ = [
    "SinusoidalPositionalEncoding",
    "RotaryEmbedding",
    "compiled_apply_rope",
    "apply_rotary_pos_emb",
    "patch",
    "RoPEMixed",
    # posenc.torch.relative
    "LearnedPositionalEmbedding",
    "ShawRelativeAttention",
    "T5RelativePositionBias",
    "ALiBiBias",
    "t5_relative_position_bucket_torch",
]
