"""posenc.torch: SinusoidalPositionalEncoding and RotaryEmbedding."""

import numpy as np
import pytest
import torch

import posenc
from posenc.torch import RotaryEmbedding, SinusoidalPositionalEncoding


# -- SinusoidalPositionalEncoding ------------------------------------------------------


def test_sinusoidal_module_adds_encoding():
    enc = SinusoidalPositionalEncoding(16, max_len=64)
    x = torch.randn(3, 20, 16)
    y = enc(x)
    expected = x.double() + torch.from_numpy(posenc.sinusoidal_encoding(20, 16))
    torch.testing.assert_close(y.double(), expected, atol=1e-6, rtol=0)


def test_sinusoidal_module_buffer_not_persistent():
    enc = SinusoidalPositionalEncoding(8, max_len=10)
    assert "pe" in dict(enc.named_buffers())
    assert "pe" not in enc.state_dict()
    assert list(enc.parameters()) == []
    # a model saved with one max_len loads into one with another
    SinusoidalPositionalEncoding(8, max_len=99).load_state_dict(enc.state_dict())


def test_sinusoidal_module_extends_past_max_len():
    enc = SinusoidalPositionalEncoding(8, max_len=10)
    x = torch.zeros(1, 37, 8)
    y = enc(x)
    assert enc.pe.shape == (64, 8)
    np.testing.assert_allclose(y[0].numpy(), posenc.sinusoidal_encoding(37, 8), atol=1e-6)
    enc(torch.zeros(1, 5, 8))
    assert enc.pe.shape == (64, 8)  # kept, not shrunk


def test_sinusoidal_module_dtype_and_dropout():
    enc = SinusoidalPositionalEncoding(8, max_len=10, dropout=0.5)
    x = torch.zeros(2, 4, 8, dtype=torch.float64)
    enc.eval()
    assert enc(x).dtype == torch.float64
    torch.testing.assert_close(enc(x)[0], torch.from_numpy(posenc.sinusoidal_encoding(4, 8)),
                               atol=1e-6, rtol=0)
    enc.train()
    torch.manual_seed(0)
    assert (enc(x) == 0).any()


def test_sinusoidal_module_half_cast_rebuilds_in_float32():
    enc = SinusoidalPositionalEncoding(8, max_len=4000).half()
    y = enc(torch.zeros(1, 3000, 8, dtype=torch.float16))
    assert enc.pe.dtype == torch.float32
    ref = posenc.sinusoidal_encoding(3000, 8)
    np.testing.assert_allclose(y[0].double().numpy(), ref, atol=1e-3)


@pytest.mark.parametrize("kwargs, exc, msg", [
    (dict(d_model=7), ValueError, "d_model must be a positive even number"),
    (dict(d_model=8, max_len=-1), ValueError, "max_len must be non-negative"),
    (dict(d_model=8, base=1.0), ValueError, "base must be > 1"),
    (dict(d_model=8, dropout=1.0), ValueError, r"dropout must be a probability in \[0, 1\)"),
])
def test_sinusoidal_module_bad_arguments(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        SinusoidalPositionalEncoding(**kwargs)


def test_sinusoidal_module_bad_input_shape():
    enc = SinusoidalPositionalEncoding(8)
    with pytest.raises(ValueError, match=r"x must have shape \(batch, seq, d_model=8\)"):
        enc(torch.zeros(4, 6))


# -- RotaryEmbedding -------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rotary_module_matches_apply_rope(layout):
    rope = RotaryEmbedding(32, layout=layout, max_seq_len=64)
    q = torch.randn(2, 4, 10, 32)
    k = torch.randn(2, 1, 10, 32)  # grouped-query attention: fewer key heads
    q2, k2 = rope(q, k)
    torch.testing.assert_close(q2, posenc.apply_rope(q, layout=layout))
    torch.testing.assert_close(k2, posenc.apply_rope(k, layout=layout))
    pos = torch.tensor([7, 3, 60, 0, 1, 2, 5, 9, 11, 63])
    q3, _ = rope(q, k, positions=pos)
    torch.testing.assert_close(q3, posenc.apply_rope(q, pos, layout=layout))


def test_rotary_module_caches_from_float64_and_not_persistent():
    rope = RotaryEmbedding(16, max_seq_len=1_000_001)
    assert rope.cos.dtype == torch.float32 and rope.cos.shape == (1_000_001, 8)
    ang = posenc.rope_angles(np.array([1_000_000]), 16)
    np.testing.assert_allclose(rope.cos[-1].double().numpy(), np.cos(ang[0]), atol=1e-7)
    assert rope.state_dict() == {}


def test_rotary_module_extends_cache():
    rope = RotaryEmbedding(8, max_seq_len=16)
    q = k = torch.randn(1, 20, 8)
    q2, _ = rope(q, k)  # seq 20 > 16
    assert rope.cos.shape[0] == 32
    torch.testing.assert_close(q2, posenc.apply_rope(q))
    pos = torch.arange(1000, 1020)
    q3, _ = rope(q, k, positions=pos)  # positions past the table
    assert rope.cos.shape[0] == 1024
    torch.testing.assert_close(q3, posenc.apply_rope(q, pos))


def test_rotary_module_negative_positions():
    rope = RotaryEmbedding(8, max_seq_len=16)
    q = k = torch.randn(3, 8)
    pos = torch.tensor([-5, 0, 5])
    q2, _ = rope(q, k, positions=pos)
    torch.testing.assert_close(q2, posenc.apply_rope(q, pos))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_rotary_module_dtypes(dtype):
    rope = RotaryEmbedding(16, layout="half")
    q = torch.randn(2, 5, 16).to(dtype)
    q2, k2 = rope(q, q)
    assert q2.dtype == dtype and k2.dtype == dtype
    torch.testing.assert_close(q2, posenc.apply_rope(q, layout="half"))


def test_rotary_module_survives_half_cast():
    rope = RotaryEmbedding(8, max_seq_len=4096).half()
    q = torch.randn(1, 3, 8)
    pos = torch.tensor([3000, 3001, 3002])
    q2, _ = rope(q, q, positions=pos)
    assert rope.cos.dtype == torch.float32
    torch.testing.assert_close(q2, posenc.apply_rope(q, pos))


def test_rotary_module_gradients():
    rope = RotaryEmbedding(8)
    q = torch.randn(2, 4, 8, requires_grad=True)
    k = torch.randn(2, 4, 8, requires_grad=True)
    q2, k2 = rope(q, k)
    (q2 @ k2.transpose(-1, -2)).sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_rotary_module_relative_scores():
    rope = RotaryEmbedding(16)
    q = torch.randn(1, 16, dtype=torch.float64)
    k = torch.randn(1, 16, dtype=torch.float64)

    def score(m, n):
        qm, _ = rope(q, q, positions=torch.tensor([m]))
        kn, _ = rope(k, k, positions=torch.tensor([n]))
        return (qm @ kn.T).item()

    assert np.isclose(score(10, 3), score(510, 503))


@pytest.mark.parametrize("call, exc, msg", [
    (lambda r: r(torch.randn(3, 6), torch.randn(3, 6)), ValueError, r"q must have shape \(\.\.\., seq, dim=8\)"),
    (lambda r: r(torch.randn(3, 8), torch.randn(4, 8)), ValueError, "same sequence length"),
    (lambda r: r(torch.randn(3, 8), torch.randn(3, 8), torch.arange(2)), ValueError,
     r"positions must have shape \(3,\)"),
    (lambda r: r(torch.randn(3, 8), torch.randn(3, 8), torch.arange(3.0)), TypeError,
     "positions must have an integer dtype"),
    (lambda r: r(torch.ones(3, 8, dtype=torch.int64), torch.randn(3, 8)), TypeError,
     "q must be a floating-point tensor"),
])
def test_rotary_module_bad_input(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call(RotaryEmbedding(8))


def test_rotary_module_bad_arguments():
    with pytest.raises(ValueError, match="dim must be a positive even number"):
        RotaryEmbedding(9)
    with pytest.raises(ValueError, match="layout must be one of 'interleaved', 'half'"):
        RotaryEmbedding(8, layout="neox")
