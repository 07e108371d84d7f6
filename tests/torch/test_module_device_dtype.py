"""Every posenc.torch module returns its output on the module's device and in its dtype.

Each module is built, then converted with ``.to(torch.float64)``, ``.half()``,
``.to("meta")``, or built under ``torch.set_default_dtype(torch.float64)``; its output
must then have that dtype and device (a module whose input is a tensor gets an input of
the same dtype and device, as a model would pass it).  ALiBiBias had no buffer and kept
returning float32 on the CPU, so a float16 model adding its bias to the scores failed.
"""

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt


def _grid(device):
    rows, cols = posenc.grid_positions(2, 3)
    return torch.from_numpy(rows).to(device), torch.from_numpy(cols).to(device)


#: name -> (build, call(module, dtype, device))
MODULES = {
    "SinusoidalPositionalEncoding": (
        lambda: pt.SinusoidalPositionalEncoding(8, max_len=16),
        lambda m, dt, dev: m(torch.zeros(2, 5, 8, dtype=dt, device=dev))),
    "RotaryEmbedding": (
        lambda: pt.RotaryEmbedding(8, max_seq_len=16),
        lambda m, dt, dev: m(*(torch.ones(1, 2, 5, 8, dtype=dt, device=dev),) * 2)[0]),
    "RoPEMixed": (
        lambda: pt.RoPEMixed(8, 2, seed=0),
        lambda m, dt, dev: m(torch.ones(1, 2, 6, 8, dtype=dt, device=dev), *_grid(dev))),
    "LearnedPositionalEmbedding": (
        lambda: pt.LearnedPositionalEmbedding(16, 8),
        lambda m, dt, dev: m(torch.zeros(2, 5, 8, dtype=dt, device=dev))),
    "ShawRelativeAttention": (
        lambda: pt.ShawRelativeAttention(8, 2, 3),
        lambda m, dt, dev: m(torch.ones(2, 5, 8, dtype=dt, device=dev), causal=True)),
    "T5RelativePositionBias": (
        lambda: pt.T5RelativePositionBias(4),
        lambda m, dt, dev: m(5, 7, 2)),
    "ALiBiBias": (
        lambda: pt.ALiBiBias(4),
        lambda m, dt, dev: m(5, 7, 2)),
}

CONVERSIONS = {
    "float64": (lambda m: m.to(torch.float64), torch.float64, "cpu"),
    "half": (lambda m: m.half(), torch.float16, "cpu"),
    "bfloat16": (lambda m: m.to(torch.bfloat16), torch.bfloat16, "cpu"),
    "meta": (lambda m: m.to("meta"), torch.float32, "meta"),
}


def test_every_module_is_listed():
    modules = {name for name in pt.__all__
               if isinstance(getattr(pt, name), type) and issubclass(getattr(pt, name), torch.nn.Module)}
    assert modules == set(MODULES)


@pytest.mark.parametrize("conversion", CONVERSIONS)
@pytest.mark.parametrize("name", MODULES)
def test_output_follows_the_module(name, conversion):
    build, call = MODULES[name]
    convert, dtype, device = CONVERSIONS[conversion]
    module = convert(build())
    out = call(module, dtype, device)
    assert out.dtype == dtype and out.device.type == device, (out.dtype, out.device)


@pytest.mark.parametrize("name", MODULES)
def test_output_follows_the_default_dtype_at_construction(name):
    build, call = MODULES[name]
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        module = build()
    finally:
        torch.set_default_dtype(old)
    out = call(module, torch.float64, "cpu")
    assert out.dtype == torch.float64


def test_alibi_half_bias_adds_to_half_scores_and_keeps_its_values():
    heads = 4
    alibi = pt.ALiBiBias(heads).half()
    scores = torch.zeros(1, heads, 5, 7, dtype=torch.float16)
    total = scores + alibi(5, 7, 2)
    assert total.dtype == torch.float16
    want = pt.ALiBiBias(heads)(5, 7, 2, dtype=torch.float64)
    np.testing.assert_array_equal(total.float().numpy(), want.half().float().numpy())
    # explicit arguments still win over the module's own dtype and device
    assert alibi(2, 2, dtype=torch.float32).dtype == torch.float32
    assert alibi(2, 2, device="meta").device.type == "meta"


def test_alibi_meta_then_to_empty_computes_the_slopes_again():
    with torch.device("meta"):
        alibi = pt.ALiBiBias(6)
    assert alibi.slopes.is_meta and alibi(4, 4).is_meta  # built meta, computes meta
    alibi = alibi.to_empty(device="cpu")  # the buffer holds garbage now
    torch.testing.assert_close(alibi(4, 4), pt.ALiBiBias(6)(4, 4), rtol=0, atol=0)
    assert alibi.state_dict() == {}
