"""posenc: positional encodings for Transformers, correct, validated and tested.

NumPy reference functions (float64) for every encoding the book teaches, ``apply_rope``
for NumPy arrays and torch tensors alike, analysis helpers for the book's chapters, and
(imported on demand, so ``import posenc`` stays light) PyTorch modules in
:mod:`posenc.torch` and the book's figures in :mod:`posenc.figures`.

Examples
--------
>>> import posenc
>>> posenc.sinusoidal_encoding(3, 4).shape
(3, 4)
"""

from ._validation import LAYOUTS
from .alibi import alibi_bias, alibi_slopes
from .attention import SelfAttention, scaled_dot_product_attention, softmax, token_embeddings
from .decay import rope_decay_bound
from .layouts import invert_permutation, layout_permutation
from .naive import binary_encoding, index_encoding, normalized_index_encoding
from .precision import angle_error, rope_angles_float32
from .rope import apply_rope, clear_rope_cache, rope_angles, rope_rotation_matrix, rotate_pairs
from .similarity import dot_products_by_offset, sinusoidal_dot_product
from .sinusoidal import inverse_frequencies, shift_matrix, sinusoidal_encoding, wavelengths
from .closest import ClosestPair, closest_pair, min_pairwise_distance

__version__ = "0.1.0"

__all__ = [
    "LAYOUTS",
    # naive encodings
    "index_encoding",
    "normalized_index_encoding",
    "binary_encoding",
    # sinusoidal
    "inverse_frequencies",
    "wavelengths",
    "sinusoidal_encoding",
    "shift_matrix",
    # RoPE
    "rope_angles",
    "rope_rotation_matrix",
    "rotate_pairs",
    "apply_rope",
    "clear_rope_cache",
    "layout_permutation",
    "invert_permutation",
    "rope_angles_float32",
    "angle_error",
    # attention
    "softmax",
    "scaled_dot_product_attention",
    "SelfAttention",
    "token_embeddings",
    # ALiBi
    "alibi_slopes",
    "alibi_bias",
    # analysis
    "dot_products_by_offset",
    "sinusoidal_dot_product",
    "ClosestPair",
    "closest_pair",
    "min_pairwise_distance",
    "rope_decay_bound",
]
