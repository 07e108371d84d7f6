"""RotaryEmbedding(rope_parameters=..., max_position_embeddings=...) against transformers.

The reference is what a Llama model of transformers 5.23.0 runs: ``LlamaRotaryEmbedding``
built from a ``LlamaConfig`` carrying the same ``rope_parameters`` (random q and k, no
weights), then ``apply_rotary_pos_emb`` (the half layout).  transformers forms the
frequencies and the angles ``position * inv_freq`` in float32; posenc in float64.  The
float32 comparison is therefore bounded by what transformers' float32 angle error can do
to a pair (a pair turned by an angle off by ``e`` moves by ``|pair| * e``), computed from
its own ``inv_freq``, plus float32 rounding; the float64 comparison checks posenc against
the definition (angles ``m * theta'_i`` from :func:`posenc.rope_frequencies`, cos and sin
times the attention factor) to rounding.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from posenc import apply_rope, rope_frequencies
from posenc.torch import RotaryEmbedding

HEAD_DIM, HEADS, BATCH = 32, 2, 2

# PyTorch 2.13 loads its forward-AD decompositions through the deprecated torch.jit.script
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")

_rng = np.random.default_rng(0)
CONFIGS = {
    # name: (rope_parameters, max_position_embeddings)
    "default": ({"rope_type": "default", "rope_theta": 10000.0}, 4096),
    "linear": ({"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}, 4096),
    "yarn": ({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
              "original_max_position_embeddings": 2048}, 8192),
    "yarn-deepseek": ({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0,
                       "mscale": 1.0, "mscale_all_dim": 0.707, "beta_fast": 32.0,
                       "beta_slow": 1.0, "original_max_position_embeddings": 4096}, 163840),
    "yarn-attention-factor": ({"rope_type": "yarn", "rope_theta": 1e6, "factor": 8.0,
                               "attention_factor": 0.9, "truncate": False,
                               "original_max_position_embeddings": 4096}, 32768),
    "llama3": ({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}, 131072),
    "longrope": ({"rope_type": "longrope", "rope_theta": 10000.0,
                  "short_factor": list(1.0 + _rng.random(HEAD_DIM // 2)),
                  "long_factor": list(1.0 + 30 * _rng.random(HEAD_DIM // 2)),
                  "original_max_position_embeddings": 4096}, 131072),
}

POSITIONS = {
    "prefix": np.arange(0, 40),
    "kv-cache": np.arange(6000, 6040),  # past 4096: longrope switches to the long set
    "scattered": np.sort(np.random.default_rng(1).integers(0, 20000, 40)),
}


def _randn(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64).to(dtype)


def hf_module(rope_parameters, max_position_embeddings):
    config = LlamaConfig(hidden_size=HEAD_DIM * HEADS, num_attention_heads=HEADS,
                         num_key_value_heads=HEADS, head_dim=HEAD_DIM,
                         max_position_embeddings=max_position_embeddings,
                         rope_parameters=copy.deepcopy(rope_parameters))
    return LlamaRotaryEmbedding(config)


def hf_apply(rot, q, k, positions):
    position_ids = torch.as_tensor(positions)[None].expand(q.shape[0], -1)
    cos, sin = rot(q, position_ids)
    return apply_rotary_pos_emb(q, k, cos, sin)


def float32_bound(rot, positions, inv_freq64, attention_factor, *tensors):
    """transformers' float32 angle error on a pair, plus float32 rounding."""
    pos = torch.as_tensor(positions)
    a32 = (pos[:, None].float() * rot.inv_freq.float()[None, :]).double()
    exact = pos[:, None].double() * torch.as_tensor(inv_freq64)[None, :]
    angle_err = float((a32 - exact).abs().max())
    norm = max(float(torch.hypot(t[..., :HEAD_DIM // 2], t[..., HEAD_DIM // 2:]).max())
               for t in tensors)
    big = max(float(t.abs().max()) for t in tensors)
    return attention_factor * (norm * angle_err * 1.01 + 4e-6 * max(1.0, big))


def reference64(x, positions, inv_freq, attention_factor):
    """The definition in float64: half layout, angles m * theta'_i, times the factor."""
    x = x.double()
    ang = torch.as_tensor(positions)[:, None].double() * torch.as_tensor(inv_freq)[None, :]
    cos, sin = ang.cos() * attention_factor, ang.sin() * attention_factor
    x1, x2 = x[..., :HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def expected_frequencies(params, max_pos, positions):
    """What transformers' forward uses: longrope picks by max(position) + 1."""
    seq_len = int(np.max(positions)) + 1
    return rope_frequencies(HEAD_DIM, params, max_position_embeddings=max_pos,
                            seq_len=seq_len if params["rope_type"] == "longrope" else None)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("where", sorted(POSITIONS))
def test_static_types_match_transformers_llama(name, where):
    params, max_pos = CONFIGS[name]
    positions = POSITIONS[where]
    q = _randn(BATCH, HEADS, len(positions), HEAD_DIM, seed=1)
    k = _randn(BATCH, HEADS, len(positions), HEAD_DIM, seed=2)
    ours = RotaryEmbedding(HEAD_DIM, layout="half", max_seq_len=64, rope_parameters=params,
                           max_position_embeddings=max_pos)
    rot = hf_module(params, max_pos)
    inv, att = expected_frequencies(params, max_pos, positions)
    assert ours.attention_factor == pytest.approx(rot.attention_scaling, rel=1e-12)

    q_hf, k_hf = hf_apply(rot, q, k, positions)
    q2, k2 = ours(q, k, torch.as_tensor(positions))
    bound = float32_bound(rot, positions, inv, att, q, k)
    assert float((q2 - q_hf).abs().max()) < bound
    assert float((k2 - k_hf).abs().max()) < bound

    # float64: the definition to rounding (tables computed for the call in float64)
    q64, _ = ours(q.double(), k.double(), positions)
    torch.testing.assert_close(q64, reference64(q, positions, inv, att), atol=1e-12, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_matches_transformers(dtype):
    params, max_pos = CONFIGS["yarn"]
    positions = POSITIONS["scattered"]
    q, k = (_randn(BATCH, HEADS, 40, HEAD_DIM, seed=s, dtype=dtype) for s in (3, 4))
    ours = RotaryEmbedding(HEAD_DIM, layout="half", rope_parameters=params,
                           max_position_embeddings=max_pos)
    q2, _ = ours(q, k, positions)
    inv, att = expected_frequencies(params, max_pos, positions)
    exact = reference64(q, positions, inv, att)
    # one rounding of the float32 result: within one ulp of the output dtype
    ulp = 2.0 ** (torch.floor(torch.log2(exact.abs().clamp_min(1e-3)))
                  - (7 if dtype == torch.bfloat16 else 10))
    assert bool(((q2.double() - exact).abs() <= ulp).all())
    q_hf, _ = hf_apply(hf_module(params, max_pos), q, k, positions)
    # transformers rounds cos, sin, both products and the sum to the dtype: a few ulps
    # of the pair's norm apart (and its float32 angles add their own error)
    p = 8 if dtype == torch.bfloat16 else 11
    norm = torch.hypot(q[..., :HEAD_DIM // 2], q[..., HEAD_DIM // 2:]).double().repeat(
        1, 1, 1, 2)
    bound = 4 * 2.0 ** (1 - p) * norm * att + float32_bound(
        hf_module(params, max_pos), positions, inv, att, q.float())
    assert bool(((q2.double() - q_hf.double()).abs() <= bound).all())


def test_dynamic_follows_transformers_state_across_calls():
    params = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}
    max_pos = 2048
    ours = RotaryEmbedding(HEAD_DIM, layout="half", rope_parameters=params,
                           max_position_embeddings=max_pos)
    rot = hf_module(params, max_pos)
    default = rope_frequencies(HEAD_DIM, {"rope_theta": 10000.0})[0]
    cached = max_pos
    # grow past the length, stay between, fall below (reset), grow again, decode steps
    calls = [np.arange(0, 16), np.arange(3000, 3016), np.arange(2400, 2416),
             np.arange(0, 16), np.arange(2040, 2056), np.arange(2056, 2057),
             np.arange(5000, 5001), np.arange(100, 116)]
    for i, positions in enumerate(calls):
        seq_len = int(positions.max()) + 1
        if seq_len > cached:
            cached = seq_len
        elif seq_len < max_pos and cached > max_pos:
            cached = max_pos
        inv = rope_frequencies(HEAD_DIM, params, seq_len=cached, max_position_embeddings=max_pos)[0]
        q = _randn(1, HEADS, len(positions), HEAD_DIM, seed=10 + i)
        q_hf, _ = hf_apply(rot, q, q, positions)
        q2, _ = ours(q, q, positions)
        assert float((q2 - q_hf).abs().max()) < float32_bound(rot, positions, inv, 1.0, q)
        torch.testing.assert_close(ours(q.double(), q.double(), positions)[0],
                                   reference64(q, positions, inv, 1.0), atol=1e-12, rtol=0)
        # within the length the frequencies are the default ones, past it they are not
        assert np.array_equal(inv, default) == (cached == max_pos)
    assert ours.cos.shape[0] == 4096  # the default table, untouched by the rescaling


def test_dynamic_cached_once_is_a_different_model():
    """The pitfall: frequencies computed once (at one length) and kept are a static
    variant, not dynamic NTK; at another length the outputs differ."""
    params = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}
    positions = np.arange(8000, 8016)
    q = _randn(1, HEADS, 16, HEAD_DIM, seed=20, dtype=torch.float64)
    dynamic = RotaryEmbedding(HEAD_DIM, layout="half", rope_parameters=params,
                              max_position_embeddings=2048)(q, q, positions)[0]
    once = rope_frequencies(HEAD_DIM, params, seq_len=4096, max_position_embeddings=2048)[0]
    frozen = reference64(q, positions, once, 1.0)
    assert float((dynamic - frozen).abs().max()) > 1e-2


def test_longrope_switches_to_long_factors_past_the_original_length():
    params, max_pos = CONFIGS["longrope"]
    ours = RotaryEmbedding(HEAD_DIM, layout="half", rope_parameters=params,
                           max_position_embeddings=max_pos)
    short = rope_frequencies(HEAD_DIM, params, max_position_embeddings=max_pos)
    long = rope_frequencies(HEAD_DIM, params, seq_len=4097, max_position_embeddings=max_pos)
    q = _randn(1, 1, 1, HEAD_DIM, seed=5, dtype=torch.float64)
    for last, (inv, att) in ((4095, short), (4096, long), (100, short)):
        got, _ = ours(q, q, [last])
        torch.testing.assert_close(got, reference64(q, [last], inv, att), atol=1e-12, rtol=0)


def test_scaled_module_keeps_its_guarantees():
    params, max_pos = CONFIGS["llama3"]
    kwargs = dict(layout="half", max_seq_len=64, rope_parameters=params,
                  max_position_embeddings=max_pos)
    ref = RotaryEmbedding(HEAD_DIM, **kwargs)
    q = _randn(1, HEADS, 8, HEAD_DIM, seed=6)
    pos = torch.arange(100, 108)
    want = ref(q, q, pos)[0]
    # meta-device init
    meta = RotaryEmbedding(HEAD_DIM, **kwargs).to("meta").to_empty(device="cpu")
    torch.testing.assert_close(meta(q, q, pos)[0], want, rtol=0, atol=0)
    # memory: a far position does not grow the table
    rows = ref.cos.shape[0]
    far, _ = ref(q[..., :1, :], q[..., :1, :], [2**40])
    assert ref.cos.shape[0] == rows
    inv, att = rope_frequencies(HEAD_DIM, params, max_position_embeddings=max_pos)
    torch.testing.assert_close(far.double(), reference64(q[..., :1, :], [2**40], inv, att),
                               atol=1e-5, rtol=0)
    # torch.func: jvp is the map itself (linear in q), vmap a loop
    t = _randn(1, HEADS, 8, HEAD_DIM, seed=7)
    _, tangent = torch.func.jvp(lambda v: ref(v, v, pos)[0], (q,), (t,))
    torch.testing.assert_close(tangent, ref(t, t, pos)[0])
    batched = torch.func.vmap(lambda v: ref(v, v, pos)[0])(torch.stack([q, t]))
    torch.testing.assert_close(batched, torch.stack([want, ref(t, t, pos)[0]]))
    # inference mode, then a training step
    with torch.inference_mode():
        ref(q, q, torch.arange(50, 58))
    w = q.clone().requires_grad_(True)
    ref(w, w, torch.arange(50, 58))[0].sum().backward()
    assert w.grad is not None


def test_scaled_module_compiles_and_exports():
    params, max_pos = CONFIGS["longrope"]
    rope = RotaryEmbedding(HEAD_DIM, layout="half", max_seq_len=64, rope_parameters=params,
                           max_position_embeddings=max_pos)
    q = _randn(1, HEADS, 4, HEAD_DIM, seed=8)
    short, long = torch.arange(10, 14), torch.arange(5000, 5004)
    compiled = torch.compile(rope, fullgraph=True)
    program = torch.export.export(rope, (q, q, short))
    for pos in (short, long):  # the graph picks the short or the long set by itself
        want = rope(q, q, pos)[0]
        torch.testing.assert_close(compiled(q, q, pos)[0], want, atol=2e-6, rtol=0)
        torch.testing.assert_close(program.module()(q, q, pos)[0], want, atol=2e-6, rtol=0)


def test_dynamic_is_not_traced_export_refuses_compile_runs_eagerly():
    kwargs = dict(layout="half", max_position_embeddings=2048,
                  rope_parameters={"rope_type": "dynamic", "factor": 2.0})
    rope = RotaryEmbedding(HEAD_DIM, **kwargs)
    q = _randn(1, 1, 4, HEAD_DIM, seed=9)
    with pytest.raises(ValueError, match="rope_type 'dynamic' cannot be traced"):
        torch.export.export(rope, (q, q, torch.arange(4)))
    eager, compiled = RotaryEmbedding(HEAD_DIM, **kwargs), RotaryEmbedding(HEAD_DIM, **kwargs)
    run = torch.compile(compiled)
    for start in (3000, 2500, 0):  # grow, stay, reset: the same state in both
        pos = torch.arange(start, start + 4)
        torch.testing.assert_close(run(q, q, pos)[0], eager(q, q, pos)[0], rtol=0, atol=2e-6)


def test_default_rope_parameters_equal_plain_module():
    q = _randn(2, 7, 16, seed=10)
    plain = RotaryEmbedding(16, base=500000.0)(q, q)[0]
    for kwargs in ({"rope_parameters": {"rope_theta": 500000.0}},
                   {"base": 500000.0, "rope_parameters": {"rope_type": "default"}},
                   {"base": 500000.0, "rope_parameters": {"rope_theta": 500000.0}}):
        torch.testing.assert_close(RotaryEmbedding(16, **kwargs)(q, q)[0], plain, rtol=0, atol=0)
    torch.testing.assert_close(plain, apply_rope(q, base=500000.0))


@pytest.mark.parametrize("kwargs, error, fragment", [
    (dict(rope_parameters=[("rope_type", "linear")]), TypeError, "rope_parameters must be a "),
    (dict(base=500.0, rope_parameters={"rope_theta": 1000.0}), ValueError, "disagree"),
    (dict(rope_parameters={"rope_type": "dynamic", "factor": 2.0}), ValueError,
     "needs max_position_embeddings"),
    (dict(rope_parameters={"rope_type": "linear"}), ValueError, r"'factor'\] is required"),
    (dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "beta_fast": 3}),
     ValueError, "not read by rope_type 'linear'"),
    (dict(rope_parameters={"rope_type": "ntk"}), ValueError, "rope_type'] must be one of"),
    (dict(max_position_embeddings=0), ValueError, "max_position_embeddings must be >= 1"),
    (dict(max_position_embeddings=2.5), TypeError, "max_position_embeddings must be an integer"),
])
def test_bad_scaling_arguments_are_named(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        RotaryEmbedding(HEAD_DIM, **kwargs)
