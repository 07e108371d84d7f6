"""posenc.relative and posenc.torch.relative: T5 buckets and bias against transformers,
ALiBi against BLOOM, Shaw relative attention, the learned table, and every bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import T5Config
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.t5.modeling_t5 import T5Attention

import posenc
from posenc.torch import (
    ALiBiBias,
    LearnedPositionalEmbedding,
    ShawRelativeAttention,
    T5RelativePositionBias,
    t5_relative_position_bucket_torch,
)

SETTINGS = settings(max_examples=40, deadline=None)

# (num_buckets, max_distance) pairs: T5's default, small and large ones, and the smallest
# max_distance each form allows.
T5_SETTINGS = [(32, 128), (8, 16), (16, 9), (64, 256), (128, 1024), (6, 4), (10, 1000)]
# settings valid in one form only: (num_buckets, max_distance, bidirectional)
ONE_FORM_ONLY = [(2, 2, False), (4, 3, False), (6, 2, True), (4, 2, True)]


def hf_buckets(rel, **kw):
    return T5Attention._relative_position_bucket(torch.as_tensor(rel), **kw).numpy()


# -- t5_relative_position_bucket vs transformers ------------------------------------------------


@pytest.mark.parametrize("num_buckets,max_distance", T5_SETTINGS)
@pytest.mark.parametrize("bidirectional", [True, False])
def test_buckets_equal_transformers_on_a_wide_range(num_buckets, max_distance, bidirectional):
    rel = np.arange(-20_000, 20_001, dtype=np.int64)
    kw = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    ours = posenc.t5_relative_position_bucket(rel, **kw)
    np.testing.assert_array_equal(ours, hf_buckets(rel, **kw))
    assert ours.dtype == np.int64 and ours.min() >= 0 and ours.max() < num_buckets
    ours_t = t5_relative_position_bucket_torch(torch.from_numpy(rel), **kw)
    np.testing.assert_array_equal(ours_t.numpy(), ours)


@pytest.mark.parametrize("num_buckets,max_distance,bidirectional", ONE_FORM_ONLY)
def test_smallest_settings_equal_transformers(num_buckets, max_distance, bidirectional):
    rel = np.arange(-5000, 5000)
    kw = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    np.testing.assert_array_equal(posenc.t5_relative_position_bucket(rel, **kw),
                                  hf_buckets(rel, **kw))


@SETTINGS
@given(
    rel=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=50),
    half=st.integers(2, 256),
    extra=st.integers(1, 5000),
    bidirectional=st.booleans(),
)
def test_buckets_equal_transformers_for_random_settings(rel, half, extra, bidirectional):
    num_buckets = 2 * half
    max_exact = num_buckets // (4 if bidirectional else 2)
    kw = dict(bidirectional=bidirectional, num_buckets=num_buckets,
              max_distance=max_exact + extra)
    rel = np.array(rel, dtype=np.int64)
    np.testing.assert_array_equal(posenc.t5_relative_position_bucket(rel, **kw),
                                  hf_buckets(rel, **kw))


def test_bucket_shape_scalar_and_dtypes():
    assert posenc.t5_relative_position_bucket(-3).shape == ()
    assert int(posenc.t5_relative_position_bucket(-3)) == 3
    rel = posenc.relative_positions(4, 6)
    for dtype in (np.int8, np.int16, np.int32, np.uint8, np.int64):
        out = posenc.t5_relative_position_bucket(rel.astype(dtype) if dtype != np.uint8
                                                 else np.abs(rel).astype(dtype))
        assert out.dtype == np.int64 and out.shape == (4, 6)
    assert posenc.t5_relative_position_bucket(np.zeros((0, 3), dtype=int)).shape == (0, 3)


def test_bucket_layout_matches_the_bucket_function():
    for bidirectional in (True, False):
        for nb, md in [(32, 128), (16, 9), (8, 100)]:
            layout = posenc.t5_bucket_layout(bidirectional=bidirectional, num_buckets=nb,
                                             max_distance=md)
            per_side = nb // 2 if bidirectional else nb
            assert layout.shape == (per_side, 2)
            dist = np.arange(4 * md)
            b = posenc.t5_relative_position_bucket(-dist, bidirectional=bidirectional,
                                                   num_buckets=nb, max_distance=md)
            for bucket, (first, last) in enumerate(layout):
                hits = dist[b == bucket]
                if first == -1:
                    assert hits.size == 0
                    continue
                assert hits[0] == first
                if last == -1:
                    assert bucket == per_side - 1 and hits[-1] == dist[-1]
                else:
                    assert hits[-1] == last and hits.size == last - first + 1
    # T5's defaults: 8 exact buckets, the last bucket starts at 91 (before max_distance)
    layout = posenc.t5_bucket_layout()
    np.testing.assert_array_equal(layout[:8], np.stack([np.arange(8)] * 2, axis=1))
    assert tuple(layout[-1]) == (91, -1)
    # empty buckets exist when max_distance barely exceeds the exact range
    assert (posenc.t5_bucket_layout(max_distance=9)[:, 0] == -1).sum() == 6


def test_relative_positions_and_shaw_index():
    np.testing.assert_array_equal(posenc.relative_positions(2, 3, offset=5),
                                  [[-5, -4, -3], [-6, -5, -4]])
    assert posenc.relative_positions(0, 4).shape == (0, 4)
    r = np.arange(-10, 11)
    for k in (1, 2, 7, 30):
        idx = posenc.shaw_relative_index(r, k)
        np.testing.assert_array_equal(idx, np.clip(r, -k, k) + k)
        assert idx.min() >= 0 and idx.max() <= 2 * k


# -- bad inputs (NumPy) -------------------------------------------------------------------------


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(num_buckets=31), ValueError, r"num_buckets must be even, got 31"),
    (dict(num_buckets=2), ValueError, r"num_buckets must be >= 4, got 2"),
    (dict(num_buckets=0, bidirectional=False), ValueError, r"num_buckets must be >= 2, got 0"),
    (dict(num_buckets=32.0), TypeError, r"num_buckets must be an integer, got float 32.0"),
    (dict(max_distance=8), ValueError,
     r"max_distance must be > the number of exact buckets, 8 \(num_buckets // 4, "
     r"bidirectional\), got 8"),
    (dict(max_distance=16, bidirectional=False), ValueError,
     r"max_distance must be > the number of exact buckets, 16 \(num_buckets // 2, causal\), "
     r"got 16"),
    (dict(max_distance=0), ValueError, r"max_distance must be >= 1, got 0"),
    (dict(max_distance=True), TypeError, r"max_distance must be an integer, got bool True"),
    (dict(bidirectional=1), TypeError, r"bidirectional must be True or False, got int 1"),
])
def test_bad_bucket_settings(kw, exc, msg):
    with pytest.raises(exc, match=msg):
        posenc.t5_relative_position_bucket([0, 1], **kw)
    with pytest.raises(exc, match=msg):
        posenc.t5_bucket_layout(**kw)
    with pytest.raises(exc, match=msg):
        T5RelativePositionBias(4, **kw)
    with pytest.raises(exc, match=msg):
        t5_relative_position_bucket_torch(torch.tensor([0, 1]), **kw)


def test_bad_offsets_and_counts():
    with pytest.raises(TypeError, match=r"relative_position must have an integer dtype, "
                                        r"got float64"):
        posenc.t5_relative_position_bucket([0.5, 1.0])
    with pytest.raises(TypeError, match=r"relative_position must have an integer dtype, got bool"):
        posenc.t5_relative_position_bucket(np.array([True]))
    with pytest.raises(TypeError, match=r"got a torch tensor"):
        posenc.t5_relative_position_bucket(torch.tensor([1]))
    with pytest.raises(TypeError, match=r"relative_position must have an integer dtype, got <U1"):
        posenc.shaw_relative_index(["a"], 2)
    with pytest.raises(ValueError, match=r"max_relative_position must be >= 1, got 0"):
        posenc.shaw_relative_index([0], 0)
    with pytest.raises(TypeError, match=r"max_relative_position must be an integer, got float"):
        posenc.shaw_relative_index([0], 2.0)
    with pytest.raises(ValueError, match=r"query_length must be non-negative, got -1"):
        posenc.relative_positions(-1, 3)
    with pytest.raises(TypeError, match=r"offset must be an integer, got float 1.5"):
        posenc.relative_positions(2, 3, offset=1.5)
    with pytest.raises(TypeError, match=r"relative_position must have an integer dtype, "
                                        r"got torch.float32"):
        t5_relative_position_bucket_torch(torch.tensor([1.0]))
    with pytest.raises(TypeError, match=r"relative_position must be a torch.Tensor, got list"):
        t5_relative_position_bucket_torch([1])


# -- T5RelativePositionBias vs transformers' compute_bias ----------------------------------------


def hf_t5_attention(num_heads, num_buckets, max_distance, is_decoder):
    config = T5Config(d_model=32, d_kv=8, num_heads=num_heads, num_layers=1,
                      relative_attention_num_buckets=num_buckets,
                      relative_attention_max_distance=max_distance, is_decoder=is_decoder)
    return T5Attention(config, has_relative_attention_bias=True, layer_idx=0).eval()


@pytest.mark.parametrize("num_heads", [1, 3, 8])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (8, 16), (16, 9), (64, 300)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_bias_equals_transformers_compute_bias(num_heads, num_buckets, max_distance,
                                               bidirectional):
    torch.manual_seed(num_heads + num_buckets)
    hf = hf_t5_attention(num_heads, num_buckets, max_distance, is_decoder=not bidirectional)
    ours = T5RelativePositionBias(num_heads, num_buckets=num_buckets,
                                  max_distance=max_distance, bidirectional=bidirectional)
    ours.load_state_dict({"relative_attention_bias.weight":
                          hf.relative_attention_bias.weight.detach().clone()})
    for q, k, offset in [(1, 1, 0), (7, 7, 0), (5, 40, 0), (1, 300, 299), (3, 520, 517),
                         (40, 5, 0), (16, 16, 2000), (0, 4, 0)]:
        with torch.no_grad():
            ref = hf.compute_bias(q, k, past_seen_tokens=offset)
        got = ours(q, k, offset)
        assert got.shape == (1, num_heads, q, k)
        torch.testing.assert_close(got, ref, rtol=0, atol=0)


def test_bias_depends_only_on_the_offset_and_is_gathered_from_the_table():
    torch.manual_seed(0)
    bias = T5RelativePositionBias(4)
    b = bias(30, 30)[0]
    # constant along every diagonal: a function of j - i only
    for d in range(-29, 30):
        diag = torch.diagonal(b, offset=d, dim1=1, dim2=2)
        assert torch.all(diag == diag[:, :1])
    rel = posenc.relative_positions(30, 30)
    idx = torch.from_numpy(posenc.t5_relative_position_bucket(rel))
    torch.testing.assert_close(b, bias.relative_attention_bias.weight[idx].permute(2, 0, 1))


def test_t5_bias_bad_arguments():
    bias = T5RelativePositionBias(2)
    with pytest.raises(ValueError, match=r"num_heads must be >= 1, got 0"):
        T5RelativePositionBias(0)
    with pytest.raises(ValueError, match=r"query_length must be non-negative, got -2"):
        bias(-2, 3)
    with pytest.raises(TypeError, match=r"key_length must be an integer, got float 3.0"):
        bias(2, 3.0)
    with pytest.raises(TypeError, match=r"offset must be an integer, got str 'a'"):
        bias(2, 3, "a")
    with pytest.raises(TypeError, match=r"bidirectional must be True or False, got str"):
        T5RelativePositionBias(2, bidirectional="yes")


# -- ALiBi vs BLOOM -----------------------------------------------------------------------------


@pytest.mark.parametrize("num_heads", range(1, 65))
def test_alibi_slopes_and_bias_equal_bloom(num_heads):
    n = 11
    mask = torch.ones(1, n, dtype=torch.long)
    bloom = build_alibi_tensor(mask, num_heads, torch.float64)[:, 0, :]   # (heads, keys)
    slopes = posenc.alibi_slopes(num_heads)
    # BLOOM stores slope * key position, its slopes computed as float32 powers (torch.pow
    # of a float32 base: a few float32 roundings, so rtol 1e-6 = about 8 float32 ulps)
    np.testing.assert_allclose(bloom[:, 1].numpy(), slopes, rtol=1e-6, atol=0)
    # posenc's bias is BLOOM's minus slope * query position: a constant per row, which the
    # softmax ignores; on and below the diagonal bias + m_h * i == m_h * j
    bias = posenc.alibi_bias(n, num_heads)
    i = np.arange(n)[None, :, None]
    lower = np.tril(np.ones((n, n), dtype=bool))
    shifted = bias + slopes[:, None, None] * i
    np.testing.assert_allclose(
        np.where(lower, shifted, 0.0),
        np.where(lower, np.broadcast_to(bloom.numpy()[:, None, :], bias.shape), 0.0),
        rtol=1e-6, atol=1e-12,
    )
    # so the causal attention weights agree
    scores = np.random.default_rng(num_heads).normal(size=(num_heads, n, n))
    w_ours = posenc.softmax(scores + bias)
    w_bloom = posenc.softmax(np.where(lower, scores + bloom.numpy()[:, None, :], -np.inf))
    np.testing.assert_allclose(w_ours, w_bloom, rtol=1e-6, atol=1e-12)
    # and the torch module gives the NumPy bias
    got = ALiBiBias(num_heads)(n, n, dtype=torch.float64)[0].numpy()
    np.testing.assert_array_equal(got, bias)
    got = ALiBiBias(num_heads, causal=False)(n, n, dtype=torch.float64)[0].numpy()
    np.testing.assert_array_equal(got, posenc.alibi_bias(n, num_heads, causal=False))


def test_alibi_module_offset_and_bad_arguments():
    full = ALiBiBias(8)(12, 12)
    torch.testing.assert_close(ALiBiBias(8)(3, 12, 9), full[:, :, 9:, :])
    assert not torch.signbit(full[0, 0].diagonal()).any()
    with pytest.raises(ValueError, match=r"num_heads must be >= 1, got 0"):
        ALiBiBias(0)
    with pytest.raises(TypeError, match=r"causal must be True or False, got int 1"):
        ALiBiBias(2, causal=1)
    with pytest.raises(TypeError, match=r"dtype must be a floating torch.dtype"):
        ALiBiBias(2)(3, 3, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"key_length must be non-negative, got -3"):
        ALiBiBias(2)(3, -3)


# -- Shaw relative attention --------------------------------------------------------------------


def shaw_reference(attn, x, causal=False):
    """Shaw et al.'s equations written out with loops over positions (test only)."""
    b, n, d = x.shape
    h, dh, k = attn.num_heads, attn.head_dim, attn.max_relative_position
    with torch.no_grad():
        q = attn.q_proj(x).view(b, n, h, dh).double()
        kk = attn.k_proj(x).view(b, n, h, dh).double()
        v = attn.v_proj(x).view(b, n, h, dh).double()
        ak, av = attn.relative_keys.weight.double(), attn.relative_values.weight.double()
        z = torch.zeros(b, n, h, dh, dtype=torch.float64)
        for i in range(n):
            e = torch.full((b, h, n), -math.inf, dtype=torch.float64)
            for j in range(n):
                if causal and j > i:
                    continue
                r = max(-k, min(k, j - i)) + k
                e[:, :, j] = (q[:, i] * (kk[:, j] + ak[r])).sum(-1) / math.sqrt(dh)
            w = torch.softmax(e, dim=-1)
            for j in range(n):
                r = max(-k, min(k, j - i)) + k
                z[:, i] += w[:, :, j, None] * (v[:, j] + av[r])
        return attn.out_proj(z.reshape(b, n, d).float())


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_shaw_attention_equals_the_paper_equations(causal, k):
    torch.manual_seed(k)
    attn = ShawRelativeAttention(12, 3, max_relative_position=k)
    x = torch.randn(2, 7, 12)
    torch.testing.assert_close(attn(x, causal=causal), shaw_reference(attn, x, causal),
                               rtol=1e-5, atol=1e-5)


def test_shaw_scores_see_the_offset_and_only_the_clipped_offset():
    """Same content at every position: the scores depend on j - i only, clipped at k."""
    torch.manual_seed(0)
    attn = ShawRelativeAttention(8, 2, max_relative_position=3)
    x = torch.randn(1, 1, 8).expand(1, 10, 8)
    s = attn.scores(x)[0]
    for d in range(-9, 10):
        diag = torch.diagonal(s, offset=d, dim1=1, dim2=2)
        torch.testing.assert_close(diag, diag[:, :1].expand_as(diag))
    # beyond k every offset reads the same table row
    torch.testing.assert_close(s[:, 0, 3], s[:, 0, 9])
    assert not torch.allclose(s[:, 0, 2], s[:, 0, 3])


def test_shaw_attention_mask_and_bad_inputs():
    torch.manual_seed(1)
    attn = ShawRelativeAttention(8, 2, max_relative_position=2)
    x = torch.randn(2, 5, 8)
    causal_mask = torch.ones(5, 5, dtype=torch.bool).tril()
    torch.testing.assert_close(attn(x, attn_mask=causal_mask), attn(x, causal=True))
    with pytest.raises(ValueError, match=r"max_relative_position must be >= 1, got 0"):
        ShawRelativeAttention(8, 2, max_relative_position=0)
    with pytest.raises(ValueError, match=r"d_model must be divisible by num_heads, got "
                                         r"d_model=10 and num_heads=4"):
        ShawRelativeAttention(10, 4, 2)
    with pytest.raises(ValueError, match=r"x must have shape \(batch, seq, d_model=8\), "
                                         r"got \(5, 8\)"):
        attn(x[0])
    with pytest.raises(ValueError, match=r"got \(2, 5, 7\)"):
        attn(x[..., :7])
    with pytest.raises(TypeError, match=r"x must have a floating dtype, got torch.int64"):
        attn(torch.zeros(1, 3, 8, dtype=torch.long))
    with pytest.raises(TypeError, match=r"attn_mask must be a bool tensor"):
        attn(x, attn_mask=causal_mask.float())
    with pytest.raises(ValueError, match=r"attn_mask must broadcast to \(batch, heads, seq, "
                                         r"seq\) = \(2, 2, 5, 5\), got \(4, 4\)"):
        attn(x, attn_mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"causal must be True or False, got str"):
        attn(x, causal="no")
    with pytest.raises(TypeError, match=r"bias must be True or False, got int 0"):
        ShawRelativeAttention(8, 2, 2, bias=0)


# -- the learned table -----------------------------------------------------------------------


def test_learned_table_adds_its_rows_and_refuses_positions_past_its_end():
    torch.manual_seed(0)
    pos = LearnedPositionalEmbedding(8, 4)
    x = torch.randn(3, 5, 4)
    torch.testing.assert_close(pos(x), x + pos.embedding.weight[:5])
    torch.testing.assert_close(pos(x, offset=3), x + pos.embedding.weight[3:8])
    torch.testing.assert_close(pos.lookup(torch.tensor([[7, 0]])),
                               pos.embedding.weight[[7, 0]][None])
    assert pos(torch.zeros(1, 0, 4)).shape == (1, 0, 4)
    # a bare nn.Embedding fails with an IndexError; the module says what is wrong
    with pytest.raises(IndexError):
        pos.embedding(torch.arange(9))
    with pytest.raises(ValueError, match=r"positions 0..8 do not fit a learned table of "
                                         r"max_len=8 rows \(positions 0..7\): there is no row "
                                         r"for position 8"):
        pos(torch.zeros(1, 9, 4))
    with pytest.raises(ValueError, match=r"no row for position 8"):
        pos(x, offset=4)
    with pytest.raises(ValueError, match=r"no row for position -1"):
        pos(x, offset=-1)
    with pytest.raises(ValueError, match=r"no row for position 100"):
        pos.lookup(torch.tensor([1, 100]))
    with pytest.raises(ValueError, match=r"no row for position -2"):
        pos.lookup(torch.tensor([-2, 3]))
    with pytest.raises(TypeError, match=r"positions must have an integer dtype, got torch.float32"):
        pos.lookup(torch.tensor([1.0]))
    with pytest.raises(ValueError, match=r"x must have shape \(..., seq, d_model=4\)"):
        pos(torch.zeros(2, 3, 5))
    with pytest.raises(TypeError, match=r"x must have a floating dtype"):
        pos(torch.zeros(2, 3, 4, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"max_len must be >= 1, got 0"):
        LearnedPositionalEmbedding(0, 4)
    with pytest.raises(ValueError, match=r"init_std must be a finite number > 0"):
        LearnedPositionalEmbedding(4, 4, init_std=0.0)


# -- meta-device init and inference mode -------------------------------------------------------


def _modules():
    return [
        (lambda: LearnedPositionalEmbedding(16, 8), lambda m: m(torch.randn(2, 6, 8))),
        (lambda: ShawRelativeAttention(8, 2, 3), lambda m: m(torch.randn(2, 6, 8), causal=True)),
        (lambda: T5RelativePositionBias(4), lambda m: m(6, 9, 3)),
        (lambda: T5RelativePositionBias(4, bidirectional=False, num_buckets=8, max_distance=20),
         lambda m: m(6, 9, 3)),
        (lambda: ALiBiBias(6), lambda m: m(6, 9, 3)),
    ]


@pytest.mark.parametrize("index", range(5))
def test_meta_device_init_then_load_gives_the_same_results(index):
    make, call = _modules()[index]
    torch.manual_seed(0)
    ref_module = make()
    with torch.device("meta"):
        meta = make()
    meta = meta.to_empty(device="cpu")
    meta.load_state_dict(ref_module.state_dict())
    torch.manual_seed(1)
    want = call(ref_module)
    torch.manual_seed(1)
    got = call(meta)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    # and the module also runs on the meta device itself (shapes only)
    with torch.device("meta"):
        m = make()
    torch.manual_seed(1)
    if index == 0:
        out = m(torch.randn(2, 6, 8, device="meta"))
    elif index == 1:
        out = m(torch.randn(2, 6, 8, device="meta"), causal=True)
    elif index == 4:
        out = m(6, 9, 3, device="meta")
    else:
        out = m(6, 9, 3)
    assert out.device.type == "meta" and out.shape == want.shape


@pytest.mark.parametrize("index", range(5))
def test_inference_mode(index):
    make, call = _modules()[index]
    torch.manual_seed(0)
    module = make()
    torch.manual_seed(1)
    want = call(module)
    torch.manual_seed(1)
    with torch.inference_mode():
        got = call(module)
    torch.testing.assert_close(got, want.detach(), rtol=0, atol=0)


def test_modules_do_not_grow_with_the_largest_position():
    bias = T5RelativePositionBias(2)
    n_params = sum(p.numel() for p in bias.parameters())
    bias(1, 1, 10**9)
    assert sum(p.numel() for p in bias.parameters()) == n_params == 32 * 2
    assert list(bias.buffers()) == []
    alibi = ALiBiBias(4)  # one fixed buffer, the slopes (its dtype and device only)
    alibi(1, 1, 10**9)
    assert [tuple(b.shape) for b in alibi.buffers()] == [(4,)] and alibi.state_dict() == {}
    shaw = ShawRelativeAttention(8, 2, 4)
    assert shaw.relative_keys.weight.shape == (9, 4)
    shaw(torch.randn(1, 40, 8))
    assert shaw.relative_keys.weight.shape == (9, 4)
