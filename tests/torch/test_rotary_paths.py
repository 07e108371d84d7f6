"""RotaryEmbedding on the paths transformers users take: (batch, seq) positions, rows
equal or not, long and short, and float16/bfloat16 decoding steps, against float64."""

import numpy as np
import pytest
import torch

import posenc
from posenc.torch import RotaryEmbedding


def _want(q, pos, layout):
    """float64 apply_rope of each sample at its own row of positions."""
    return np.stack([posenc.apply_rope(q[i].double().numpy(), pos[i].numpy(), layout=layout)
                     for i in range(q.shape[0])])


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("seq", [1, 3, 80])
@pytest.mark.parametrize("rows", ["equal", "differ", "far"])
def test_batch_positions(layout, dtype, seq, rows):
    g = torch.Generator().manual_seed(seq)
    q = torch.randn(3, 4, seq, 16, generator=g).to(dtype)
    k = torch.randn(3, 2, seq, 16, generator=g).to(dtype)
    pos = torch.arange(1000, 1000 + seq).expand(3, seq).clone()
    if rows == "differ":
        pos += torch.tensor([[0], [7], [-900]])
    elif rows == "far":  # past the table: computed for the call
        pos += torch.tensor([[0], [2**40], [-5000]])
    rope = RotaryEmbedding(16, layout=layout)
    got_q, got_k = rope(q, k, pos)
    assert got_q.dtype == dtype and got_q.shape == q.shape and got_k.shape == k.shape
    for got, x in ((got_q, q), (got_k, k)):
        want = _want(x, pos, layout)
        err = np.abs(got.double().numpy() - want).max()
        # one rounding of values below 4 in the input's dtype
        tol = {torch.float64: 1e-12, torch.float32: 1e-6, torch.bfloat16: 2**-6,
               torch.float16: 2**-9}[dtype]
        assert err <= tol, (err, tol)
