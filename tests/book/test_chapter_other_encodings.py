"""The claims of the chapter ``other-encodings`` (and the NoPE cell of ``why-position``).

Each test quotes or paraphrases the sentence it protects.  Where a claim ranges over
inputs, hypothesis draws them.
"""

from __future__ import annotations

import ast
import io
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
import posenc.figures as pf
from posenc.analysis import other_encodings as oe
from posenc.torch import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    ShawRelativeAttention,
    T5RelativePositionBias,
)

FAST = settings(max_examples=25, deadline=None)
ROOT = Path(__file__).resolve().parents[2]
CJK = re.compile(r"[\u4e00-\u9fff]")
RELATIVE = ("shaw", "transformer_xl", "t5", "alibi", "rope", "nope")


# -- learned absolute positions ---------------------------------------------------------------


@FAST
@given(max_len=st.integers(1, 40), extra=st.integers(1, 10), d=st.integers(1, 8))
def test_a_learned_table_cannot_answer_past_its_last_row(max_len, extra, d):
    """'What it cannot do is answer for a position it has no row for' -- a ValueError
    naming the first missing position; a bare nn.Embedding raises IndexError."""
    table = LearnedPositionalEmbedding(max_len, d)
    assert table(torch.zeros(1, max_len, d)).shape == (1, max_len, d)
    with pytest.raises(ValueError, match=rf"no row for position {max_len}$"):
        table(torch.zeros(1, max_len + extra, d))
    with pytest.raises(IndexError, match="index out of range in self"):
        table.embedding(torch.arange(max_len + extra))


@FAST
@given(max_len=st.integers(2, 30), data=st.data())
def test_rows_past_the_training_length_get_no_gradient(max_len, data):
    """'Rows that no training sequence reaches never receive a gradient'."""
    train_len = data.draw(st.integers(1, max_len - 1))
    torch.manual_seed(data.draw(st.integers(0, 1000)))
    table = LearnedPositionalEmbedding(max_len, 6)
    table(torch.randn(3, train_len, 6)).pow(2).sum().backward()
    norms = table.embedding.weight.grad.norm(dim=1)
    assert torch.all(norms[train_len:] == 0)
    assert torch.all(norms[:train_len] > 0)


def test_the_pages_table_leaves_two_rows_untouched():
    """'The last 2 rows have a gradient of exactly zero' (max_len 8, sequences of 6)."""
    torch.manual_seed(0)
    table = LearnedPositionalEmbedding(max_len=8, d_model=16)
    table(torch.zeros(1, 8, 16))
    table(torch.randn(4, 6, 16)).pow(2).sum().backward()
    assert int((table.embedding.weight.grad.norm(dim=1) == 0).sum()) == 2


def test_gpt2_and_bert_tables_in_transformers():
    """GPT-2's table is an nn.Embedding of n_positions = 1024 rows (its context) and fails
    with an IndexError past it; BERT has 512 rows."""
    from transformers import BertConfig, GPT2Config, GPT2Model

    assert GPT2Config().n_positions == 1024
    assert BertConfig().max_position_embeddings == 512
    model = GPT2Model(GPT2Config(n_positions=8, n_embd=16, n_layer=1, n_head=2,
                                 vocab_size=50, bos_token_id=0, eos_token_id=0)).eval()
    assert type(model.wpe) is torch.nn.Embedding and model.wpe.num_embeddings == 8
    with pytest.raises(IndexError, match="index out of range in self"):
        model(torch.zeros(1, 9, dtype=torch.long))


# -- Shaw et al. --------------------------------------------------------------------------------


@FAST
@given(k=st.integers(1, 6), n=st.integers(2, 14), seed=st.integers(0, 10_000))
def test_shaw_scores_depend_on_the_clipped_offset_only(k, n, seed):
    """'every diagonal j - i = const holds one value, and offsets beyond k share the value
    of k' -- and offset k - 1 is still distinguished from k."""
    torch.manual_seed(seed)
    shaw = ShawRelativeAttention(8, 2, max_relative_position=k)
    x = torch.randn(1, 1, 8).expand(1, n, 8)
    with torch.no_grad():
        s = shaw.scores(x)[0].numpy()
    assert oe.diagonal_spread(s) < 1e-5
    if n - 1 > k:
        np.testing.assert_allclose(s[:, 0, k], s[:, 0, n - 1], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(s[:, n - 1, n - 1 - k], s[:, n - 1, 0], rtol=1e-6, atol=1e-6)
        assert np.abs(s[:, 0, k] - s[:, 0, k - 1]).max() > 1e-6


def test_shaw_tables_have_2k_plus_1_rows_shared_by_the_heads():
    """'the model learns 2k + 1 vectors per table, shared by all heads'."""
    shaw = ShawRelativeAttention(16, 4, max_relative_position=3)
    assert shaw.relative_keys.weight.shape == (7, 4)
    assert shaw.relative_values.weight.shape == (7, 4)
    names = [n for n, _ in shaw.named_parameters() if "relative" in n]
    assert names == ["relative_keys.weight", "relative_values.weight"]


def test_the_pages_shaw_numbers():
    torch.manual_seed(0)
    shaw = ShawRelativeAttention(16, 4, max_relative_position=3)
    same_token = torch.randn(1, 1, 16).expand(1, 10, 16)
    with torch.no_grad():
        scores = shaw.scores(same_token)[0, 0].numpy()
    assert oe.diagonal_spread(scores) < 1e-6
    assert abs(scores[0, 3] - scores[0, 9]) < 1e-6


# -- Transformer-XL -------------------------------------------------------------------------


@FAST
@given(n=st.integers(1, 12), seed=st.integers(0, 10_000))
def test_transformer_xl_terms(n, seed):
    """'(d) depends on the offset alone, (c) on the key alone; the sum depends on contents
    and offsets' -- and the terms are those of the paper's formula, pair by pair."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8))
    w_q, w_ke, w_kr = rng.normal(size=(3, 8, 4))
    u, v = rng.normal(size=(2, 4))
    a, b, c, d = oe.transformer_xl_terms(x, w_q, w_ke, w_kr, u, v)
    assert oe.diagonal_spread(d) < 1e-9
    np.testing.assert_allclose(c, np.broadcast_to(c[0], c.shape))
    R = lambda r: posenc.sinusoidal_encoding(abs(r) + 1, 8)[abs(r)] * (  # noqa: E731
        np.array([np.sign(r) or 1, 1] * 4))                               # sin is odd
    i, j = rng.integers(0, n, size=2)
    q = x[i] @ w_q
    np.testing.assert_allclose(a[i, j], q @ (x[j] @ w_ke))
    np.testing.assert_allclose(b[i, j], q @ (R(i - j) @ w_kr), atol=1e-9)
    np.testing.assert_allclose(c[i, j], u @ (x[j] @ w_ke))
    np.testing.assert_allclose(d[i, j], v @ (R(i - j) @ w_kr), atol=1e-9)


def test_transformer_xl_terms_reject_bad_shapes():
    x = np.zeros((3, 8))
    w = np.zeros((8, 4))
    with pytest.raises(ValueError, match=r"w_kr must have shape \(d_model, d_head\)"):
        oe.transformer_xl_terms(x, w, w, np.zeros((8, 3)), np.zeros(4), np.zeros(4))
    with pytest.raises(ValueError, match=r"u must have shape \(d_head,\)"):
        oe.transformer_xl_terms(x, w, w, w, np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match=r"positive even number"):
        oe.transformer_xl_terms(np.zeros((3, 7)), w[:7], w[:7], w[:7], np.zeros(4), np.zeros(4))


# -- the shift test ---------------------------------------------------------------------------


@FAST
@given(n=st.integers(2, 8), shift=st.integers(1, 20), seed=st.integers(0, 1000))
def test_moving_the_passage_changes_only_absolute_schemes(n, shift, seed):
    """'With an absolute encoding added to the input the scores change ... Under every
    relative scheme, and without any encoding, they change by at most rounding'."""
    gaps = oe.score_shift_gaps(n=n, shift=shift, seed=seed)
    assert list(gaps) == list(oe.SCHEMES)
    assert gaps["learned"] > 1e-3 and gaps["sinusoidal"] > 1e-3
    assert max(gaps[s] for s in RELATIVE) < 1e-12


def test_the_pages_gaps():
    gaps = oe.score_shift_gaps(n=6, shift=10)
    assert gaps["learned"] > 1 and gaps["sinusoidal"] > 1
    assert max(gaps[s] for s in RELATIVE) < 1e-14


def test_score_functions_bad_input():
    fns = oe.score_functions(8, max_len=4)
    with pytest.raises(ValueError, match=r"x must have shape \(n, 8\)"):
        fns["rope"](np.zeros((3, 6)))
    with pytest.raises(ValueError, match=r"the learned table has 4 rows"):
        fns["learned"](np.zeros((5, 8)))
    with pytest.raises(ValueError, match=r"positive even number"):
        oe.score_functions(7)


def test_diagonal_spread():
    assert oe.diagonal_spread(np.zeros((0, 0))) == 0.0
    toeplitz = np.subtract.outer(np.arange(6), np.arange(6)) ** 2.0
    assert oe.diagonal_spread(toeplitz) == 0.0
    toeplitz[2, 4] += 0.5
    assert oe.diagonal_spread(toeplitz) == 0.5
    masked = np.where(np.tril(np.ones((4, 4), bool)), 1.0, -np.inf)
    assert oe.diagonal_spread(masked) == 0.0
    with pytest.raises(ValueError, match="square"):
        oe.diagonal_spread(np.zeros((2, 3)))


# -- costs ------------------------------------------------------------------------------------


@FAST
@given(n=st.integers(1, 40), heads=st.integers(1, 4), dh=st.sampled_from([2, 4, 8]),
       k=st.integers(1, 5), layers=st.integers(1, 4))
def test_costs_count_what_the_modules_hold(n, heads, dh, k, layers):
    """Shaw: '2 n^2 d_h numbers per layer'; T5: 'heads x buckets' parameters and a bias of
    h n^2; RoPE: a table of n d_h numbers; Transformer-XL: d^2 + 2d per layer."""
    d = heads * dh
    costs = oe.scheme_costs(seq_len=n, d_model=d, n_heads=heads, n_layers=layers,
                            max_len=n, max_relative_position=k, num_buckets=8)
    shaw = ShawRelativeAttention(d, heads, k)
    idx = shaw.relative_index(n)
    gathered = shaw.relative_keys(idx).numel() + shaw.relative_values(idx).numel()
    assert costs["shaw"]["extra_per_layer"] == gathered
    shaw_params = shaw.relative_keys.weight.numel() + shaw.relative_values.weight.numel()
    assert costs["shaw"]["parameters"] == layers * shaw_params
    t5 = T5RelativePositionBias(heads, num_buckets=8, max_distance=20)
    assert costs["t5"]["parameters"] == sum(p.numel() for p in t5.parameters())
    assert costs["t5"]["extra_per_layer"] == t5(n, n).numel()
    assert costs["alibi"]["extra_per_layer"] == posenc.alibi_bias(n, heads).size
    rope = RotaryEmbedding(dh, max_seq_len=n)
    assert costs["rope"]["extra_per_layer"] == rope.cos.numel() + rope.sin.numel()
    assert costs["rope"]["parameters"] == sum(p.numel() for p in rope.parameters()) == 0
    assert costs["transformer_xl"]["parameters"] == layers * (d * d + 2 * d)
    table = LearnedPositionalEmbedding(n, d).embedding.weight
    assert costs["learned"]["parameters"] == table.numel()


def test_scheme_costs_validate():
    kw = dict(seq_len=4, d_model=6, n_heads=4, n_layers=1, max_len=4,
              max_relative_position=1, num_buckets=4)
    with pytest.raises(ValueError, match="d_model must be divisible by n_heads"):
        oe.scheme_costs(**kw)
    with pytest.raises(ValueError, match="max_relative_position must be >= 1"):
        oe.scheme_costs(**{**kw, "n_heads": 2, "max_relative_position": 0})


# -- T5 -----------------------------------------------------------------------------------------


def test_the_pages_t5_numbers():
    """'each side has 16 buckets: the first 8 hold one distance each ... the last bucket
    starts at distance 91 ... In the causal form the last bucket starts at 113'; 12 heads
    x 32 buckets = 384 numbers."""
    layout = posenc.t5_bucket_layout()
    assert len(layout) == 16
    assert int(np.sum(layout[:, 0] == layout[:, 1])) == 8
    assert int(layout[-1, 0]) == 91
    assert int(posenc.t5_bucket_layout(bidirectional=False)[-1, 0]) == 113
    assert sum(p.numel() for p in T5RelativePositionBias(12).parameters()) == 384
    assert T5RelativePositionBias(12)(5, 5).shape == (1, 12, 5, 5)


@FAST
@given(half=st.integers(2, 64), extra=st.integers(1, 2000), bidirectional=st.booleans())
def test_t5_last_bucket_starts_before_max_distance_and_holds_everything_beyond(
        half, extra, bidirectional):
    """'every distance beyond shares the last bucket', and it starts before max_distance."""
    num_buckets = 2 * half
    max_exact = num_buckets // (4 if bidirectional else 2)
    md = max_exact + extra
    kw = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=md)
    layout = posenc.t5_bucket_layout(**kw)
    last = layout[-1, 0]
    assert 0 < last <= md
    far = -np.arange(md, 3 * md + 5)
    assert np.all(posenc.t5_relative_position_bucket(far, **kw) == len(layout) - 1)
    # the exact buckets: one distance each
    np.testing.assert_array_equal(layout[:max_exact, 0], np.arange(max_exact))
    np.testing.assert_array_equal(layout[:max_exact, 1], np.arange(max_exact))


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (16, 64), (64, 1000)])
def test_t5_log_formula_reaches_one_past_the_last_bucket_at_max_distance(
        bidirectional, num_buckets, max_distance):
    """'The logarithmic formula reaches one bucket past the last exactly at max_distance,
    so capping the index makes the last bucket start earlier'."""
    per_side = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_side // 2
    n = np.arange(max_exact, 4 * max_distance, dtype=np.float64)
    raw = max_exact + np.log(n / max_exact) / np.log(max_distance / max_exact) * (
        per_side - max_exact)
    assert raw[n == max_distance][0] == pytest.approx(per_side)
    assert np.all(raw[n < max_distance] < per_side)
    layout = posenc.t5_bucket_layout(bidirectional=bidirectional, num_buckets=num_buckets,
                                     max_distance=max_distance)
    first_capped = int(n[np.floor(raw + 1e-9) >= per_side - 1][0])
    assert layout[-1, 0] == first_capped < max_distance


def test_t5_in_transformers_shares_one_table_and_does_not_scale():
    """'shares the table across all layers' (only block 0 holds it in transformers) and
    'Hugging Face's T5 code ... sets the scaling to one'."""
    from transformers import T5Config, T5EncoderModel

    cfg = T5Config(d_model=16, d_kv=4, d_ff=32, num_heads=4, num_layers=3, vocab_size=20)
    model = T5EncoderModel(cfg)
    holders = [i for i, block in enumerate(model.encoder.block)
               if block.layer[0].SelfAttention.has_relative_attention_bias]
    assert holders == [0]
    assert model.encoder.block[0].layer[0].SelfAttention.scaling == 1.0


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_t5_figure(lang):
    pf.set_language(lang)
    try:
        r = np.arange(-160, 161)
        bi = posenc.t5_relative_position_bucket(r)
        ca = posenc.t5_relative_position_bucket(r, bidirectional=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fig = pf.t5_bucket_figure(r, bi, ca)
            png = pf.figure_to_png(fig)
    finally:
        pf.set_language("en")
    assert png[:4] == b"\x89PNG"
    assert fig.get_facecolor() == (1.0, 1.0, 1.0, 1.0)
    left, right = fig.axes
    np.testing.assert_array_equal(left.get_lines()[0].get_ydata(), bi)
    np.testing.assert_array_equal(right.get_lines()[0].get_ydata(), ca)
    words = " ".join([left.get_xlabel(), left.get_ylabel(), left.get_title(), right.get_title()])
    assert bool(CJK.search(words)) == (lang == "zh")
    with pytest.raises(ValueError, match="1-D arrays of one length"):
        pf.t5_bucket_figure(r, bi[:-1], ca)


# -- ALiBi --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32, 64])
def test_power_of_two_slopes_are_the_geometric_sequence(n):
    """'the slopes form the geometric sequence m_h = 2^(-8h/n)': steep first, nearly flat
    last; with 8 heads 'halving from one head to the next', from 1/2 to 1/256."""
    slopes = posenc.alibi_slopes(n)
    h = np.arange(1, n + 1)
    np.testing.assert_allclose(slopes, 2.0 ** (-8 * h / n), rtol=1e-15)
    assert np.all(np.diff(slopes) < 0)
    if n == 8:
        np.testing.assert_allclose(slopes[1:] / slopes[:-1], 0.5, rtol=1e-15)
        assert (slopes[0], slopes[-1]) == (0.5, 1 / 256)


@FAST
@given(st.integers(1, 64))
def test_other_head_counts_follow_the_authors_rule(n):
    """'takes the p slopes of the largest power of two p below n and appends every other
    slope of 2p heads, which fall halfway (on a log scale) between them'."""
    p = 1 << (n.bit_length() - 1)
    expected = np.concatenate([posenc.alibi_slopes(p), posenc.alibi_slopes(2 * p)[0::2][:n - p]])
    np.testing.assert_allclose(posenc.alibi_slopes(n), expected, rtol=1e-15)
    extra = np.log2(posenc.alibi_slopes(2 * p)[0::2])
    own = np.log2(np.concatenate([[1.0], posenc.alibi_slopes(p)]))
    np.testing.assert_allclose(extra, (own[:-1] + own[1:]) / 2, rtol=1e-12, atol=1e-12)


def test_alibi_bias_is_a_linear_penalty_with_the_mask():
    """'subtracts ... a penalty that grows linearly with the distance' and 'the bias has
    -inf above the diagonal, so adding it also applies the causal mask'."""
    n, heads = 7, 8
    bias = posenc.alibi_bias(n, heads)
    i, j = np.indices((n, n))
    slopes = posenc.alibi_slopes(heads)[:, None, None]
    lower = j <= i
    np.testing.assert_allclose(bias[:, lower], (-slopes * (i - j))[:, lower], rtol=1e-15)
    assert np.all(np.isneginf(bias[:, ~lower]))


def test_twelve_heads_append_the_midpoints():
    """'The first eight slopes are those of 8 heads, and the four appended ones start at
    2^(-1/2), between 1 and the first slope 2^(-1)'."""
    s12 = posenc.alibi_slopes(12)
    np.testing.assert_array_equal(s12[:8], posenc.alibi_slopes(8))
    assert s12[8] == pytest.approx(2 ** -0.5, rel=1e-15)
    assert 0.5 < s12[8] < 1.0
    assert len(s12) == 12


def test_bloom_112_heads():
    """'The largest BLOOM model has 112 heads, so the rule matters': 112 is not a power of
    two, and posenc's slopes equal BLOOM's for it."""
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    assert not math.log2(112).is_integer()
    np.testing.assert_allclose(posenc.alibi_slopes(112),
                               _get_alibi_slopes(112, torch.device("cpu")).double().numpy(),
                               rtol=1e-6)


@FAST
@given(n=st.integers(1, 16), heads=st.integers(1, 16), seed=st.integers(0, 1000))
def test_bloom_form_gives_the_same_weights(n, heads, seed):
    """'the two differ by m_h * i, the same for every key of a query, and the softmax
    ignores a constant added to a whole row'."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    scores = np.random.default_rng(seed).normal(size=(heads, n, n))
    bloom = build_alibi_tensor(torch.ones(1, n, dtype=torch.long), heads,
                               torch.float64)[:, 0, :].numpy()
    lower = np.tril(np.ones((n, n), dtype=bool))
    w_paper = posenc.softmax(scores + posenc.alibi_bias(n, heads))
    w_bloom = posenc.softmax(np.where(lower, scores + bloom[:, None, :], -np.inf))
    np.testing.assert_allclose(w_paper, w_bloom, atol=1e-6)


@FAST
@given(n=st.integers(1, 20), heads=st.integers(1, 16))
def test_symmetric_bias_is_blind_to_reversal(n, heads):
    """'The symmetric bias is unchanged when the sequence is reversed'; the causal is not."""
    sym = posenc.alibi_bias(n, heads, causal=False)
    np.testing.assert_array_equal(sym, sym[:, ::-1, ::-1])
    causal = posenc.alibi_bias(n, heads)
    if n > 1:
        assert not np.array_equal(causal, causal[:, ::-1, ::-1])


# -- NoPE ---------------------------------------------------------------------------------------


@FAST
@given(n=st.integers(1, 64), seed=st.integers(0, 1000))
def test_uniform_causal_head_reads_one_over_i_plus_one(n, seed):
    """'what the head reads at position i is 1/(i + 1)' ('The readout equals 1/(i + 1)
    exactly'); without the mask every query reads the same average, 1/n."""
    q = np.zeros((n, 4))
    k = np.random.default_rng(seed).normal(size=(n, 4))
    marker = np.zeros((n, 1))
    marker[0] = 1.0
    read, _ = posenc.scaled_dot_product_attention(q, k, marker, causal=True)
    np.testing.assert_array_equal(read[:, 0], 1 / np.arange(1, n + 1))     # 'exactly'
    assert np.abs(read[:, 0] - 1 / np.arange(1, n + 1)).max() == 0.0
    free, _ = posenc.scaled_dot_product_attention(q, k, marker)
    np.testing.assert_allclose(free[:, 0], np.full(n, 1 / n), rtol=1e-13)


def _why_position_cells(lang):
    from book_parity import parse_page

    page = parse_page((ROOT / "docs" / lang / "why-position.md").read_text(encoding="utf-8"))
    return page.code_cells


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_why_position_nope_cell(lang):
    """why-position: 'The head reads 1, 1/2, 1/3, ...' -- run the page's own cells."""
    cells = _why_position_cells(lang)
    causal_def = next(c for c in cells if "def causal_attention" in c)
    nope = next(c for c in cells if "read = causal_attention(" in c)
    glued = {}
    ns = {"np": np, "glue": lambda k, v, display=False: glued.__setitem__(k, v)}
    tree = ast.parse(causal_def)
    exec(compile(ast.Module(body=[n for n in tree.body if isinstance(n, ast.FunctionDef)],
                            type_ignores=[]), "<why>", "exec"), ns)
    exec(nope, ns)
    # the number for the text is glued in the hidden cell right after the visible one
    exec(cells[cells.index(nope) + 1], ns)
    np.testing.assert_array_equal(ns["read"], 1 / np.arange(1, ns["n"] + 1))   # exactly
    assert glued["why_nope_gap"] == 0.0


@FAST
@given(layers=st.integers(1, 64), interval=st.integers(1, 8))
def test_nope_layer_rule_matches_transformers(layers, interval):
    """'a layer is a NoPE layer when its 1-based index is a multiple of an interval', the
    rule of Meta's code and of transformers' SmolLM3 and Llama 4 configurations."""
    from transformers import Llama4TextConfig, SmolLM3Config

    idx = oe.nope_layers(layers, interval)
    for config in (SmolLM3Config(num_hidden_layers=layers, no_rope_layer_interval=interval),
                   Llama4TextConfig(num_hidden_layers=layers, no_rope_layer_interval=interval)):
        flags = np.array(config.no_rope_layers[:layers])      # 1 = RoPE, 0 = NoPE
        np.testing.assert_array_equal(np.flatnonzero(flags == 0), idx)


def test_transformers_default_interval_is_four():
    """'the Llama 4 and SmolLM3 configurations of Hugging Face Transformers default that
    interval to 4'; for 12 layers: layers 4, 8, 12."""
    from transformers import Llama4TextConfig, SmolLM3Config

    assert SmolLM3Config().no_rope_layer_interval == 4
    assert Llama4TextConfig().no_rope_layer_interval == 4
    np.testing.assert_array_equal(oe.nope_layers(12, 4) + 1, [4, 8, 12])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_nope_figure(lang):
    pf.set_language(lang)
    try:
        fig = pf.nope_readout_figure(1 / np.arange(1, 13))
        buf = io.BytesIO()
        pf.save_figure(fig, buf)
    finally:
        pf.set_language("en")
    ax = fig.axes[0]
    assert bool(CJK.search(ax.get_title())) == (lang == "zh")
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), 1 / np.arange(1, 13))
    with pytest.raises(ValueError, match="non-empty 1-D"):
        pf.nope_readout_figure(np.zeros((2, 2)))


# -- xPos ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [8, 64, 128])
def test_xpos_scales_equal_the_reference_code(d):
    """zeta_j = (2j + 0.4d)/(1.4d), the scale buffer of the authors' code (reproduced by
    rotary-embedding-torch's xpos option); fastest pair decays most, all in (0, 1)."""
    from rotary_embedding_torch import RotaryEmbedding as LucidRotary

    zeta = oe.xpos_scales(d)
    ref = LucidRotary(dim=d, use_xpos=True).scale.double().numpy()
    np.testing.assert_allclose(zeta, ref, rtol=1e-6)
    assert np.all(np.diff(zeta) > 0) and zeta[0] > 0 and zeta[-1] < 1


def test_the_pages_xpos_numbers():
    zeta = oe.xpos_scales(128)
    assert round(float(zeta[0]), 3) == 0.286 and round(float(zeta[-1]), 3) == 0.989


# -- the taxonomy table -----------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_taxonomy_table_cells_are_the_computed_costs(lang):
    config = dict(seq_len=512, d_model=768, n_heads=12, n_layers=12,
                  max_len=512, max_relative_position=16, num_buckets=32)
    costs = oe.scheme_costs(**config)
    pf.set_language(lang)
    try:
        table = pf.other_taxonomy_table(costs, last_bucket_start=91, **config)
    finally:
        pf.set_language("en")
    assert len(table.rows) == len(oe.SCHEMES)
    for row, scheme in zip(table.rows, oe.SCHEMES):
        assert row[3] == f"{costs[scheme]['parameters']:,}"
        assert row[4] == f"{costs[scheme]['extra_per_layer']:,}"
    assert "91" in table.rows[oe.SCHEMES.index("t5")][5]
    assert "16" in table.rows[oe.SCHEMES.index("shaw")][5]
    assert bool(CJK.search(" ".join(table.header))) == (lang == "zh")
    with pytest.raises(ValueError, match="lacks the schemes"):
        pf.other_taxonomy_table({}, last_bucket_start=91, **config)


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 200))
def test_rope_lets_content_meet_the_offset_and_alibi_does_not(seed, offset):
    """'Like Shaw's vectors and Transformer-XL's term (b), it lets the content of a query
    interact with the offset ... like ALiBi, it adds no parameters; and what it holds for
    positions is one table of angles, not a tensor per pair of tokens'."""
    rng = np.random.default_rng(seed)
    d = 16
    inv = posenc.inverse_frequencies(d)
    q, k = rng.normal(size=(2, 2, d))  # two queries, two keys

    def rope_score(qi, ki, r):
        rotated = posenc.rotate_pairs(qi[None], np.array([[r]]) * inv, layout="half")
        return float(rotated[0] @ ki)

    # RoPE: how the score changes with the offset depends on the content
    changes = [rope_score(q[i], k[i], offset) - rope_score(q[i], k[i], 0) for i in (0, 1)]
    assert abs(changes[0] - changes[1]) > 1e-6
    # ALiBi: the change is -m_h * offset whatever the content
    bias = posenc.alibi_bias(offset + 1, 4)
    np.testing.assert_allclose(bias[:, offset, 0] - bias[:, offset, offset],
                               -posenc.alibi_slopes(4) * offset, rtol=1e-12)
    costs = oe.scheme_costs(seq_len=512, d_model=768, n_heads=12, n_layers=12,
                            max_len=512, max_relative_position=16, num_buckets=32)
    assert costs["rope"]["parameters"] == costs["alibi"]["parameters"] == 0
    assert costs["rope"]["extra_per_layer"] == 512 * 64 < costs["alibi"]["extra_per_layer"]
