"""posenc.apply_rope against the RoPE code real models run.

* ``layout="half"`` against ``apply_rotary_pos_emb`` of Hugging Face ``transformers``
  (Llama, and GPT-NeoX with partial rotary), with cos/sin from its own
  ``LlamaRotaryEmbedding`` / ``GPTNeoXRotaryEmbedding`` built from a local config (no
  network, no weights) and, for float64, built the same way in float64.
* ``layout="interleaved"`` against a complex-number implementation written the way
  Meta's Llama reference code does it (``precompute_freqs_cis``,
  ``reshape_for_broadcast``, ``view_as_complex``), and against GPT-J's
  ``rotate_every_two`` code in ``transformers`` (partial rotary, ``rotary_dim=64``).

float64 comparisons must agree to rounding.  In float32 the reference implementations
form their angles ``position * inv_freq`` in float32, and posenc forms them in float64;
the difference is then bounded by what the float32 angle error can do to a vector (a
pair rotated by an angle off by ``e`` moves by at most ``|pair| * e``), which these
tests compute from the references' own ``inv_freq`` and assert.

``python tests/encodings/test_rope_equivalence.py`` prints the largest differences.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc

transformers = pytest.importorskip("transformers")
from transformers import GPTNeoXConfig, LlamaConfig  # noqa: E402
from transformers.models.gpt_neox import modeling_gpt_neox as neox  # noqa: E402
from transformers.models.gptj import modeling_gptj as gptj  # noqa: E402
from transformers.models.llama.modeling_llama import (  # noqa: E402
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)

F64_TOL = 1e-10


def _randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def _pair_norms(x, layout, r):
    """Largest length of a rotated pair in ``x`` (interleaved or half pairs among ``r``)."""
    x = x.double()
    if layout == "interleaved":
        a, b = x[..., 0:r:2], x[..., 1:r:2]
    else:
        a, b = x[..., : r // 2], x[..., r // 2 : r]
    return float(torch.sqrt(a * a + b * b).max())


def _angle_error(positions, inv_freq32):
    """Max |float32 angle - exact angle| for angles positions * inv_freq formed in float32."""
    r = 2 * inv_freq32.numel()
    pos = torch.as_tensor(positions)
    a32 = (pos.float()[:, None] * inv_freq32.float()[None, :]).double()
    exact = posenc.rope_angles(pos.numpy().astype(np.int64), r, base=_base_of(inv_freq32, r))
    return float((a32 - torch.from_numpy(exact)).abs().max())


def _base_of(inv_freq, r):
    # inv_freq[1] = base ** (-2 / r)  ->  base = inv_freq[1] ** (-r / 2), rounded to what configs use
    return float(round(float(inv_freq.double()[1]) ** (-r / 2), -1))


def _float32_bound(x, layout, r, angle_err):
    """What float32 angles may do to the output, plus float32 rounding of the products."""
    return _pair_norms(x, layout, r) * angle_err * 1.01 + 4e-6 * max(1.0, float(x.abs().max()))


# -- Hugging Face Llama: rotate_half ----------------------------------------------------------


def _llama(base=10000.0, head_dim=64, heads=2):
    cfg = LlamaConfig(hidden_size=head_dim * heads, num_attention_heads=heads,
                      num_key_value_heads=heads, max_position_embeddings=8192,
                      rope_theta=base)
    return LlamaRotaryEmbedding(cfg)


def _hf_tables_float64(position_ids, head_dim, base):
    """cos/sin exactly as LlamaRotaryEmbedding.forward builds them, but in float64."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).double() / head_dim))
    freqs = position_ids[..., None].double() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def llama_half_differences(seq=2048, base=10000.0, offset=0):
    """(float64 difference, float32 difference, float32 bound) against HF's Llama RoPE."""
    B, H, D = 2, 2, 64
    q, k = _randn(B, H, seq, D, seed=1), _randn(B, H, seq, D, seed=2)
    position_ids = (torch.arange(seq) + offset)[None].expand(B, seq)
    positions = position_ids[0]
    # float64: HF's function, tables built HF's way in float64
    cos, sin = _hf_tables_float64(position_ids, D, base)
    q64, k64 = apply_rotary_pos_emb(q.double(), k.double(), cos, sin)
    d64 = max(float((q64 - posenc.apply_rope(q.double(), positions, base=base, layout="half")).abs().max()),
              float((k64 - posenc.apply_rope(k.double(), positions, base=base, layout="half")).abs().max()))
    # float32: HF's own rotary module (float32 angles) and its function
    rot = _llama(base, D, H)
    cos32, sin32 = rot(q, position_ids)
    q32, k32 = apply_rotary_pos_emb(q, k, cos32, sin32)
    d32 = max(float((q32 - posenc.apply_rope(q, positions, base=base, layout="half")).abs().max()),
              float((k32 - posenc.apply_rope(k, positions, base=base, layout="half")).abs().max()))
    bound = max(_float32_bound(t, "half", D, _angle_error(positions, rot.inv_freq)) for t in (q, k))
    return d64, d32, bound


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_half_matches_transformers_llama(base):
    d64, d32, bound = llama_half_differences(base=base)
    assert d64 < F64_TOL
    assert d32 < bound


def test_half_matches_transformers_llama_with_offset():
    """Positions 100000.. (a long KV cache): float64 agrees; float32 within the angle bound."""
    d64, d32, bound = llama_half_differences(seq=64, offset=100_000)
    assert d64 < F64_TOL
    assert d32 < bound


@settings(max_examples=25, deadline=None)
@given(seq=st.integers(1, 40), half_dim=st.integers(1, 24), offset=st.integers(-500, 5000),
       base=st.floats(2.0, 1e6), seed=st.integers(0, 2**16))
def test_half_matches_transformers_function_property(seq, half_dim, offset, base, seed):
    """Any shape, offset and base: HF's apply_rotary_pos_emb and posenc agree in float64."""
    D = 2 * half_dim
    q = _randn(3, seq, D, dtype=torch.float64, seed=seed)
    k = _randn(3, seq, D, dtype=torch.float64, seed=seed + 1)
    position_ids = (torch.arange(seq) + offset)[None]
    cos, sin = _hf_tables_float64(position_ids, D, base)
    q_hf, k_hf = apply_rotary_pos_emb(q[None], k[None], cos, sin)
    positions = position_ids[0]
    assert torch.allclose(q_hf[0], posenc.apply_rope(q, positions, base=base, layout="half"),
                          rtol=0, atol=1e-9)
    assert torch.allclose(k_hf[0], posenc.apply_rope(k, positions, base=base, layout="half"),
                          rtol=0, atol=1e-9)


# -- Hugging Face GPT-NeoX: rotate_half on the first rotary_pct of the head -------------------


def neox_partial_differences(seq=1024):
    """GPT-NeoX, head 96, rotary_pct 0.25 (as GPT-NeoX-20B): float64 and float32 differences."""
    heads, D = 2, 96
    cfg = GPTNeoXConfig(hidden_size=heads * D, num_attention_heads=heads, rotary_pct=0.25,
                        max_position_embeddings=4096)
    rot = neox.GPTNeoXRotaryEmbedding(cfg)
    r = 2 * rot.inv_freq.numel()
    q, k = _randn(1, heads, seq, D, seed=3), _randn(1, heads, seq, D, seed=4)
    position_ids = torch.arange(seq)[None]
    positions = position_ids[0]
    cos32, sin32 = rot(q, position_ids)
    q32, _ = neox.apply_rotary_pos_emb(q, k, cos32, sin32)
    d32 = float((q32 - posenc.apply_rope(q, positions, layout="half", rotary_dim=r)).abs().max())
    cos, sin = _hf_tables_float64(position_ids, r, 10000.0)
    q64, _ = neox.apply_rotary_pos_emb(q.double(), k.double(), cos, sin)
    d64 = float((q64 - posenc.apply_rope(q.double(), positions, layout="half", rotary_dim=r))
                .abs().max())
    bound = _float32_bound(q, "half", r, _angle_error(positions, rot.inv_freq))
    return r, d64, d32, bound


def test_partial_half_matches_transformers_gpt_neox():
    r, d64, d32, bound = neox_partial_differences()
    assert r == 24
    assert d64 < F64_TOL
    assert d32 < bound


# -- Meta's Llama reference: complex numbers ---------------------------------------------------


def precompute_freqs_cis(dim, end, theta=10000.0, dtype=torch.float32):
    """e^{i t theta_j} for t < end, as Meta's reference builds it (dtype float32 there)."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=dtype)[: dim // 2] / dim))
    t = torch.arange(end, dtype=dtype)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def reshape_for_broadcast(freqs_cis, x):
    """(seq, dim/2) -> (1, seq, 1, dim/2) for x of shape (batch, seq, heads, dim/2)."""
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i in (1, x.ndim - 1) else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb_complex(x, freqs_cis):
    """Meta-style: view pairs as complex numbers, multiply, view back.  x: (b, seq, heads, d).

    Meta computes in float32 (``x.float()``); float64 input stays float64 here.
    """
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    x_ = torch.view_as_complex(x.to(compute).reshape(*x.shape[:-1], -1, 2))
    out = torch.view_as_real(x_ * reshape_for_broadcast(freqs_cis, x_)).flatten(3)
    return out.type_as(x)


def meta_interleaved_differences(seq=2048, base=10000.0):
    """(float64, float32 with float64-accurate tables, float32 Meta tables, bound)."""
    B, H, D = 2, 4, 64
    x = _randn(B, seq, H, D, seed=5)  # Meta's layout: (batch, seq, heads, head_dim)
    ours = lambda t: posenc.apply_rope(t.transpose(1, 2), base=base).transpose(1, 2)  # noqa: E731
    fc64 = precompute_freqs_cis(D, seq, base, dtype=torch.float64)
    d64 = float((apply_rotary_emb_complex(x.double(), fc64) - ours(x.double())).abs().max())
    d32_formula = float((apply_rotary_emb_complex(x, fc64.to(torch.complex64)) - ours(x)).abs().max())
    fc32 = precompute_freqs_cis(D, seq, base, dtype=torch.float32)
    d32_meta = float((apply_rotary_emb_complex(x, fc32) - ours(x)).abs().max())
    inv32 = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    bound = _float32_bound(x, "interleaved", D, _angle_error(torch.arange(seq), inv32))
    return d64, d32_formula, d32_meta, bound


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_interleaved_matches_meta_complex(base):
    d64, d32_formula, d32_meta, bound = meta_interleaved_differences(base=base)
    assert d64 < F64_TOL
    assert d32_formula < 1e-5          # the same tables: float32 rounding only
    assert d32_meta < bound            # Meta's float32 angles: within what they can do


# -- GPT-J: rotate_every_two on the first rotary_dim features ---------------------------------


def gptj_partial_differences(seq=1024, rotary_dim=64, head_dim=256):
    B, H = 1, 2
    x = _randn(B, seq, H, head_dim, seed=6)  # GPT-J rotates (batch, seq, heads, head_dim)
    position_ids = torch.arange(seq)[None]
    positions = position_ids[0]

    def gptj_rotate(t, table):
        """GPT-J's attention: sin/cos rows gathered by position, rotate the first rotary_dim."""
        sin, cos = torch.split(table[position_ids], rotary_dim // 2, dim=-1)
        rot = gptj.apply_rotary_pos_emb(t[..., :rotary_dim], sin, cos)
        return torch.cat([rot, t[..., rotary_dim:]], dim=-1)

    ours = lambda t: posenc.apply_rope(t.transpose(1, 2), positions,  # noqa: E731
                                       rotary_dim=rotary_dim).transpose(1, 2)
    table32 = gptj.create_sinusoidal_positions(seq, rotary_dim)
    d32 = float((gptj_rotate(x, table32) - ours(x)).abs().max())
    ang = torch.from_numpy(posenc.rope_angles(seq, rotary_dim))
    table64 = torch.cat((ang.sin(), ang.cos()), dim=1)
    d64 = float((gptj_rotate(x.double(), table64) - ours(x.double())).abs().max())
    inv32 = 1.0 / (10000 ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64) / rotary_dim))
    bound = _float32_bound(x, "interleaved", rotary_dim, _angle_error(positions, inv32.float()))
    return d64, d32, bound


def test_partial_interleaved_matches_transformers_gptj():
    d64, d32, bound = gptj_partial_differences()
    assert d64 < F64_TOL
    assert d32 < bound


def test_wrong_layout_is_detected():
    """The comparisons can fail: the other layout is far from HF's rotate_half."""
    q = _randn(1, 1, 16, 64, dtype=torch.float64)
    position_ids = torch.arange(16)[None]
    cos, sin = _hf_tables_float64(position_ids, 64, 10000.0)
    q_hf, _ = apply_rotary_pos_emb(q, q, cos, sin)
    assert float((q_hf - posenc.apply_rope(q, layout="interleaved")).abs().max()) > 0.1


if __name__ == "__main__":
    torch.set_num_threads(1)
    for base in (10000.0, 500000.0):
        d64, d32, bound = llama_half_differences(base=base)
        print(f"HF Llama rotate_half, base {base:g}, positions 0..2047: "
              f"float64 {d64:.2e}, float32 {d32:.2e} (bound {bound:.2e})")
    d64, d32, bound = llama_half_differences(seq=64, offset=100_000)
    print(f"HF Llama rotate_half, positions 100000..100063: float64 {d64:.2e}, float32 {d32:.2e} "
          f"(bound {bound:.2e})")
    r, d64, d32, bound = neox_partial_differences()
    print(f"HF GPT-NeoX partial (rotary_dim {r}): float64 {d64:.2e}, float32 {d32:.2e} "
          f"(bound {bound:.2e})")
    for base in (10000.0, 500000.0):
        d64, d32f, d32m, bound = meta_interleaved_differences(base=base)
        print(f"Meta complex, base {base:g}, positions 0..2047: float64 {d64:.2e}, float32 same "
              f"tables {d32f:.2e}, float32 Meta tables {d32m:.2e} (bound {bound:.2e})")
    d64, d32, bound = gptj_partial_differences()
    print(f"HF GPT-J partial (rotary_dim 64): float64 {d64:.2e}, float32 {d32:.2e} (bound {bound:.2e})")
