"""Self-Extend's position remapping (posenc.analysis.remap) against the authors' decode code."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.analysis.remap import self_extend_offsets


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
