"""Training-free position remapping (posenc.analysis.remap): Self-Extend and STRING against
the authors' decode code, and the properties the models chapter states."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.analysis.remap import offset_counts, self_extend_offsets, string_offsets


def authors_decode(p, group_size_1, group_size_2):
    """The decode branch of datamllab/LongLM self_extend_patch/Llama.py, line for line:
    the offsets of every cached key (positions 0..p) for the query at p."""
    position_ids = torch.tensor([[p]])
    key_position = torch.arange(p + 1).view(1, p + 1)
    neighbor_key_position = position_ids[:, -1] - key_position
    _re_group_size_2 = 0 if position_ids.max() < group_size_2 else group_size_2
    group_key_position = (position_ids[:, -1] // group_size_1 - key_position // group_size_1
                          + (_re_group_size_2 - _re_group_size_2 // group_size_1))
    return torch.cat([group_key_position[:, :-group_size_2],
                      neighbor_key_position[:, -group_size_2:]], dim=1)[0].numpy()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 5000), st.sampled_from([2, 4, 8, 16]), st.sampled_from([16, 64, 512]))
def test_equals_the_authors_decode_branch(p, g, w):
    ours = self_extend_offsets(p, np.arange(p + 1), group_size=g, window=w)
    np.testing.assert_array_equal(ours, authors_decode(p, g, w))


def test_offsets_stay_small():
    p = np.arange(16_384)
    r = self_extend_offsets(p[-1], p, group_size=8, window=1024)
    assert r.max() == 16_383 // 8 + 1024 - 128 == 2943
    assert np.all(r <= 16_383 - p) and np.all(np.diff(r[::-1]) >= 0)  # never larger, monotone


@pytest.mark.parametrize("kwargs, error, fragment", [
    (dict(query_positions=3, key_positions=4), ValueError, "at or before"),
    (dict(query_positions=-1, key_positions=0), ValueError, "query_positions must be >= 0"),
    (dict(query_positions=1.5, key_positions=0), TypeError, "query_positions must be integers"),
    (dict(query_positions=3, key_positions=0, group_size=0), ValueError, "group_size"),
    (dict(query_positions=3, key_positions=0, window=2.0), TypeError, "window"),
])
def test_bad_input(kwargs, error, fragment):
    kwargs = {"group_size": 4, "window": 8, **kwargs}
    with pytest.raises(error, match=fragment):
        self_extend_offsets(**kwargs)


# -- STRING (An et al. 2024; HKUNLP/STRING string_for_llama.py) -------------------------

def authors_string_decode(kv_seq_len, diag_size, local_window):
    """The decode branch of HKUNLP/STRING string_for_llama.py ``forward``, line for line:
    the offset of every cached key (positions 0..kv_seq_len-1) for the newest query.
    The last ``diag_size`` keys are read with the query at its position, the others
    with ``position_ids - diag_size + local_window``; keys are rotated at their own."""
    position_ids = torch.tensor([[kv_seq_len - 1]])
    key_position = torch.arange(kv_seq_len)
    query_1 = position_ids
    query_2 = position_ids - diag_size + local_window
    shifted_size = kv_seq_len - diag_size
    diag = query_1[0, -1] - key_position[shifted_size:kv_seq_len]
    shifted = query_2[0, -1] - key_position[:shifted_size]
    return torch.cat([shifted, diag]).numpy()


def authors_string_prefill_keys(n, diag_size, local_window):
    """Which (key, offset) pairs each query row of the authors' prefill path attends:
    flash_attn_func(causal=True, window_size=[diag_size, 0]) on all rows (keys i - S .. i
    inclusive, as the flash-attn docstring the file quotes says), and for rows i >= S the
    shifted half over keys 0 .. i - S with the query at i - S + W (causal, both of length
    n - S, so aligned at the top left)."""
    rows = []
    for i in range(n):
        pairs = [(j, i - j) for j in range(max(0, i - diag_size), i + 1)]
        if i >= diag_size:
            pairs += [(j, i - diag_size + local_window - j) for j in range(i - diag_size + 1)]
        rows.append(pairs)
    return rows


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 1000), st.integers(0, 200))
def test_string_equals_the_authors_decode_branch(p, shift, window):
    window = min(window, shift)
    p = max(p, shift - 1)  # the branch slices the cache from kv_seq_len - S: needs p + 1 >= S
    ours = string_offsets(p, np.arange(p + 1), shift=shift, window=window)
    np.testing.assert_array_equal(ours, authors_string_decode(p + 1, shift, window))


def test_string_prefill_attends_the_key_at_offset_shift_twice():
    """What the models chapter says of the authors' prefill: the windowed half's flash
    window is inclusive, so the key S back is read at offset S and again at W; the
    decoding path (and string_offsets) reads it once, at W."""
    n, S, W = 12, 4, 1
    for i, pairs in enumerate(authors_string_prefill_keys(n, S, W)):
        keys = [j for j, _ in pairs]
        if i >= S:
            assert keys.count(i - S) == 2 and {r for j, r in pairs if j == i - S} == {S, W}
            assert len(keys) == i + 2
            decode = string_offsets(i, np.arange(i + 1), shift=S, window=W)
            assert decode[i - S] == W and decode.size == i + 1
        else:
            assert sorted(keys) == list(range(i + 1))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 1500), st.integers(1, 1500), st.integers(0, 1500))
def test_string_band_kept_and_largest_offset_bounded(n, shift, window):
    window = min(window, shift)
    q = np.arange(n)[:, None]
    k = np.arange(n)[None, :]
    q, k = np.broadcast_arrays(q, k)
    below = k <= q
    r = string_offsets(q[below], k[below], shift=shift, window=window)
    assert r.shape == (n * (n + 1) // 2,) and r.dtype == np.int64
    plain = q[below] - k[below]
    band = plain < shift
    np.testing.assert_array_equal(r[band], plain[band])        # the diagonal band kept
    assert np.all(r <= plain) and r.min() >= 0                  # never larger, never negative
    assert r.max() == max(min(n, shift) - 1, n - 1 - shift + window)
    assert r.max() <= n - 1                                    # within what n tokens trained
    if window == shift:
        np.testing.assert_array_equal(r, plain)                 # W = S changes nothing


def test_string_shape_broadcasts():
    r = string_offsets(np.arange(5, 10)[:, None], np.arange(5)[None, :], shift=3, window=2)
    assert r.shape == (5, 5)
    assert string_offsets(7, 0, shift=3, window=2).shape == ()


def test_string_llama31_defaults():
    """The README's setting for Llama 3.1: shifted_offset = int(0.33 * 131072),
    small_local_value = 128; the largest offset at 128K is 86K + 127 as its figure shows."""
    L = 131_072
    S = int(0.33 * L)
    r = string_offsets(L - 1, np.arange(L), shift=S, window=128)
    assert S == 43_253 and r.max() == L - 1 - S + 128 == 87_946
    assert r[L - 1 - S] == 128 and r[L - S] == S - 1


def test_offset_counts():
    for n in (1, 2, 7, 300):
        c = offset_counts(n)
        q, k = np.tril_indices(n)
        np.testing.assert_array_equal(c, np.bincount(q - k, minlength=n))
        assert c.sum() == n * (n + 1) // 2 and np.all(np.diff(c) == -1)


@pytest.mark.parametrize("kwargs, error, fragment", [
    (dict(query_positions=3, key_positions=4), ValueError, "at or before"),
    (dict(query_positions=-1, key_positions=0), ValueError, "query_positions must be >= 0"),
    (dict(query_positions=2, key_positions=[0.5]), TypeError, "key_positions must be integers"),
    (dict(shift=0), ValueError, "shift must be >= 1"),
    (dict(shift=4.0), TypeError, "shift must be an integer"),
    (dict(window=-1), ValueError, "window must be >= 0"),
    (dict(window=True), TypeError, "window must be an integer"),
    (dict(shift=4, window=5), ValueError, "window must be <= shift"),
])
def test_string_bad_input(kwargs, error, fragment):
    kwargs = {"query_positions": 3, "key_positions": 0, "shift": 4, "window": 2, **kwargs}
    with pytest.raises(error, match=fragment):
        string_offsets(**kwargs)


@pytest.mark.parametrize("length, error, fragment", [
    (0, ValueError, "length must be >= 1"), (2.0, TypeError, "length must be an integer"),
])
def test_offset_counts_bad_input(length, error, fragment):
    with pytest.raises(error, match=fragment):
        offset_counts(length)
