"""posenc.torch.compiled_apply_rope and RotaryEmbedding(compiled=True): the opt-in
torch.compile path gives apply_rope's results.

Compilation takes seconds, so the cases are few and small; each distinct dtype, layout
and rotated width is one compilation.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc
from posenc.torch import RotaryEmbedding, compiled_apply_rope


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_float32_matches_apply_rope(layout):
    x = _x(2, 3, 17, 16)
    for pos in (None, np.arange(1000, 1017), torch.arange(-5, 12)):
        want = posenc.apply_rope(x, pos, layout=layout)
        got = compiled_apply_rope(x, pos, layout=layout)
        assert got.dtype == x.dtype and got.shape == x.shape
        # one float32 rounding apart at most (the compiler may fuse multiply and add)
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_partial_rotary_and_base():
    x = _x(1, 2, 9, 16, seed=1)
    got = compiled_apply_rope(x, layout="half", rotary_dim=8, base=500000.0)
    want = posenc.apply_rope(x, layout="half", rotary_dim=8, base=500000.0)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    assert torch.equal(got[..., 8:], x[..., 8:])


def test_bfloat16_is_one_rounding_of_the_exact_result():
    x = _x(2, 4, 33, 16, seed=2).bfloat16()
    pos = np.arange(4000, 4033)
    got = compiled_apply_rope(x, pos, layout="half")
    exact = torch.from_numpy(posenc.apply_rope(x.double().numpy(), pos, layout="half"))
    assert got.dtype == torch.bfloat16
    e = torch.floor(torch.log2(exact.abs().clamp_min(2.0**-126)))
    half_ulp = 2.0 ** (e - 7) / 2
    assert bool(((got.double() - exact).abs() <= half_ulp + 1e-6 * x.double().abs().max()).all())


def test_module_compiled_equals_eager():
    q, k = _x(2, 1, 4, 12, 16, seed=3).unbind(0)
    pos = torch.arange(100, 112)
    eager = RotaryEmbedding(16, layout="half")
    fast = RotaryEmbedding(16, layout="half", compiled=True)
    for a, b in zip(eager(q, k, pos), fast(q, k, pos)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert "compiled=True" in repr(fast)


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="compiled must be True or False"):
        RotaryEmbedding(8, compiled="yes")
    with pytest.raises(TypeError, match="x must be a floating-point torch.Tensor"):
        compiled_apply_rope(np.ones((3, 4)))
    with pytest.raises(TypeError, match="x must be a floating-point torch.Tensor"):
        compiled_apply_rope(torch.ones(3, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match="layout"):
        compiled_apply_rope(torch.ones(3, 4), layout="neox")
    with pytest.raises(ValueError, match="positions"):
        compiled_apply_rope(torch.ones(3, 4), [1, 2])
    with pytest.raises(ValueError, match="even"):
        compiled_apply_rope(torch.ones(3, 5))


def test_more_variants_than_the_recompile_limit_fall_back_instead_of_failing():
    """Prefill and decode, in float32 and bfloat16, are more variants than Dynamo's
    recompile limit (lowered here to keep the test short): past it the calls run eagerly,
    with the same results, instead of raising as a fullgraph compilation does."""
    import torch._dynamo

    rope = RotaryEmbedding(8, layout="half", compiled=True)
    with torch._dynamo.config.patch(recompile_limit=1):
        for seq in (6, 1):
            for dtype in (torch.float32, torch.bfloat16):
                q = _x(1, 2, seq, 8).to(dtype)
                got, _ = rope(q, q, torch.arange(100, 100 + seq))
                want = posenc.apply_rope(q.float(), torch.arange(100, 100 + seq), layout="half")
                assert got.dtype == dtype
                torch.testing.assert_close(got.float(), want, rtol=0,
                                           atol=1e-2 if dtype != torch.float32 else 1e-6)
