"""Every torch entry point under the transforms a real model applies.

Three classes of failure, each found by probing commit 8049155 (every test here but
``test_longrope_exported_switches_per_call``, a guard, fails there; checked by running
this file against a ``git worktree`` of that commit):

1. ``torch.func.vmap`` over per-sample inputs gave a silently wrong answer or an internal
   error: ``RotaryEmbedding`` with ``longrope`` used the short factors for every sample
   (the per-sample ``max(positions)`` could not be read, and an ``except`` returned the
   current set), ``dynamic`` silently used its current frequencies, and ``apply_mrope`` /
   ``apply_rope_2d`` failed with "Cannot access data pointer".  Now longrope picks per
   sample with ``torch.where``, dynamic refuses with a ``ValueError`` naming the rule,
   and the 2-D and M-RoPE paths are tensor operations.
2. ``torch.compile(fullgraph=True)`` and ``torch.export`` could not contain
   ``apply_mrope`` or ``apply_rope_2d`` (``.tolist()``, NumPy angles).
3. (String booleans: ``tests/encodings/test_bool_arguments.py``.)

The references are float64 loops written here, one sample at a time.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc
from posenc import apply_mrope, apply_rope, apply_rope_2d, mrope_position_ids
from posenc.torch import RotaryEmbedding

pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")

DIM = 16
LONGROPE = {
    "rope_type": "longrope", "rope_theta": 10000.0,
    "short_factor": [1.0 + 0.1 * i for i in range(DIM // 2)],
    "long_factor": [2.0 + 3.0 * i for i in range(DIM // 2)],
    "original_max_position_embeddings": 64,
}
DYNAMIC = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}


def _randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _rope_reference(x, positions, inv_freq, layout, factor=1.0):
    """RoPE of one sample in float64 from the definition: pair i of position m is turned
    by m * inv_freq[i] (written out here, not posenc's kernels)."""
    x = x.to(torch.float64)
    ang = torch.as_tensor(positions, dtype=torch.float64)[:, None] * torch.as_tensor(
        inv_freq, dtype=torch.float64)[None, :]
    cos, sin = torch.cos(ang) * factor, torch.sin(ang) * factor
    h = x.shape[-1] // 2
    if layout == "half":
        x1, x2 = x[..., :h], x[..., h:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2], out[..., 1::2] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    return out


# -- 1. vmap over per-sample positions -------------------------------------------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_longrope_under_vmap_picks_the_factor_set_per_sample(layout):
    rope = RotaryEmbedding(DIM, layout=layout, rope_parameters=LONGROPE,
                           max_position_embeddings=256)
    q = _randn(3, 2, 4, DIM)
    # sample 0 inside the original length (short factors), 1 and 2 past it (long factors)
    pos = torch.tensor([[0, 1, 2, 3], [100, 101, 102, 103], [5, 6, 7, 70]])
    got_q, got_k = torch.func.vmap(lambda a, p: rope(a, 2 * a, p))(q, pos)
    short, _ = posenc.rope_frequencies(DIM, LONGROPE, seq_len=4,
                                       max_position_embeddings=256)
    long_, factor = posenc.rope_frequencies(DIM, LONGROPE, seq_len=200,
                                            max_position_embeddings=256)
    assert not np.allclose(short, long_)
    for i, inv in enumerate([short, long_, long_]):
        want = _rope_reference(q[i], pos[i], inv, layout, factor)
        torch.testing.assert_close(got_q[i], want, rtol=0, atol=1e-12)
        torch.testing.assert_close(got_k[i], 2 * want, rtol=0, atol=1e-12)
    # and the same as calling the module once per sample
    loop = torch.stack([rope(a, a, p)[0] for a, p in zip(q, pos)])
    torch.testing.assert_close(got_q, loop, rtol=0, atol=1e-12)


def test_longrope_under_vmap_inside_grad_and_jvp():
    rope = RotaryEmbedding(DIM, layout="half", rope_parameters=LONGROPE,
                           max_position_embeddings=256)
    q = _randn(2, 1, 3, DIM)
    pos = torch.tensor([[0, 1, 2], [80, 81, 82]])

    def loss(a, p):
        return rope(a, a, p)[0].square().sum()

    # a rotation keeps lengths: d/da |R a|^2 = 2 a (times the attention factor squared)
    _, factor = posenc.rope_frequencies(DIM, LONGROPE, seq_len=200,
                                        max_position_embeddings=256)
    grads = torch.func.vmap(torch.func.grad(loss))(q, pos)
    torch.testing.assert_close(grads[1], 2 * factor**2 * q[1], rtol=0, atol=1e-12)
    t = _randn(2, 1, 3, DIM, seed=1)
    _, tangent = torch.func.vmap(
        lambda a, ta, p: torch.func.jvp(lambda v: rope(v, v, p)[0], (a,), (ta,)))(q, t, pos)
    loop = torch.stack([rope(ta, ta, p)[0] for ta, p in zip(t, pos)])
    torch.testing.assert_close(tangent, loop, rtol=0, atol=1e-12)


def test_dynamic_under_vmap_over_per_sample_positions_is_a_clear_error():
    rope = RotaryEmbedding(DIM, layout="half", rope_parameters=DYNAMIC,
                           max_position_embeddings=64)
    q = _randn(2, 1, 3, DIM)
    pos = torch.tensor([[0, 1, 2], [100, 101, 102]])
    with pytest.raises(ValueError, match=r"rope_type 'dynamic' cannot be vmapped over "
                                         r"per-sample positions.*dynamic_rope_update"):
        torch.func.vmap(lambda a, p: rope(a, a, p))(q, pos)
    with pytest.raises(ValueError, match="cannot be vmapped"):  # under grad as well
        torch.func.vmap(torch.func.grad(lambda a, p: rope(a, a, p)[0].sum()))(q, pos)
    # positions shared by the batch are one call, as in transformers: they work
    shared = torch.tensor([100, 101, 102])
    eager = RotaryEmbedding(DIM, layout="half", rope_parameters=DYNAMIC,
                            max_position_embeddings=64)
    got, _ = torch.func.vmap(lambda a: rope(a, a, shared))(q)
    want = eager(q, q, shared)[0]
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    inv, _ = posenc.rope_frequencies(DIM, DYNAMIC, seq_len=103, max_position_embeddings=64)
    torch.testing.assert_close(got[1], _rope_reference(q[1], shared, inv, "half"),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_apply_mrope_under_vmap_over_per_sample_ids(interleaved, dtype):
    section = [2, 3, 3] if not interleaved else [4, 2, 2]
    ids = torch.stack([
        torch.as_tensor(mrope_position_ids([2, (2, 3), 1]))[:, None],
        torch.as_tensor(mrope_position_ids([1, (3, 2), 2], start=1000))[:, None],
        torch.as_tensor(mrope_position_ids([(3, 3)], start=7))[:, None],
    ])  # (samples, 3, 1, 9)
    x = _randn(3, 1, 2, 9, DIM, dtype=dtype)

    def f(a, i):
        return apply_mrope(a, i, mrope_section=section, interleaved=interleaved)

    got = torch.func.vmap(f)(x, ids)
    comp = posenc.mrope_pair_components(section, interleaved=interleaved)
    theta = posenc.inverse_frequencies(DIM, 10000.0)
    for s in range(3):
        # pair j of token t is turned by ids[comp[j], 0, t] * theta[j]
        ang = ids[s][comp, 0].T.to(torch.float64) * torch.from_numpy(theta)  # (9, dim/2)
        a = x[s].to(torch.float64)
        h = DIM // 2
        want = torch.cat((a[..., :h] * ang.cos() - a[..., h:] * ang.sin(),
                          a[..., h:] * ang.cos() + a[..., :h] * ang.sin()), -1)
        tol = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 2e-2}[dtype]
        torch.testing.assert_close(got[s].to(torch.float64), want, rtol=0, atol=tol)
        torch.testing.assert_close(got[s], f(x[s], ids[s]))  # a loop (eager kernels)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_2d_under_vmap_over_per_sample_rows_and_cols(layout):
    rows, cols = (torch.as_tensor(t) for t in posenc.grid_positions(2, 3))
    many_rows = torch.stack([rows, rows + 10, 2 * rows])
    many_cols = torch.stack([cols, cols + 3, cols * 5])
    x = _randn(3, 2, 6, DIM)

    def f(a, r, c):
        return apply_rope_2d(a, r, c, layout=layout)

    got = torch.func.vmap(f)(x, many_rows, many_cols)
    omega = posenc.inverse_frequencies(DIM // 2, 10000.0)
    for s in range(3):
        # axial RoPE = 1-D RoPE whose angles are (col * omega, row * omega)
        ang = np.concatenate([many_cols[s].numpy()[:, None] * omega,
                              many_rows[s].numpy()[:, None] * omega], axis=1)
        want = posenc.rotate_pairs(x[s].numpy(), ang, layout=layout)
        torch.testing.assert_close(got[s], torch.from_numpy(want), rtol=0, atol=1e-12)
    grads = torch.func.vmap(torch.func.grad(lambda a, r, c: f(a, r, c).square().sum()))(
        x, many_rows, many_cols)
    torch.testing.assert_close(grads, 2 * x, rtol=0, atol=1e-12)  # a rotation


# -- 2. torch.compile(fullgraph=True) and torch.export ------------------------------------------


class _MRoPE(torch.nn.Module):
    def __init__(self, interleaved):
        super().__init__()
        self.interleaved = interleaved

    def forward(self, q, k, ids):
        section = [4, 2, 2] if self.interleaved else [2, 3, 3]
        return (apply_mrope(q, ids, mrope_section=section, interleaved=self.interleaved),
                apply_mrope(k, ids, mrope_section=section, interleaved=self.interleaved))


class _Axial(torch.nn.Module):
    def forward(self, x, rows, cols):
        return (apply_rope_2d(x, rows, cols, layout="half", base=100.0)
                + apply_rope_2d(x, rows, cols))


@pytest.mark.parametrize("interleaved", [False, True])
def test_apply_mrope_compiles_with_fullgraph_and_exports(interleaved):
    torch._dynamo.reset()
    model = _MRoPE(interleaved)
    q, k = _randn(2, 2, 3, 9, DIM, dtype=torch.float32).unbind(0)
    ids = torch.as_tensor(mrope_position_ids([2, (2, 3), 1]))[:, None].expand(3, 2, 9)
    ids = ids.contiguous()
    got = torch.compile(model, fullgraph=True)(q, k, ids)
    for a, b in zip(got, model(q, k, ids)):
        torch.testing.assert_close(a, b, rtol=0, atol=2e-6)
    program = torch.export.export(model, (q, k, ids))
    # the program computes the angles from whatever ids it is given
    for other in (ids + 5000, torch.zeros_like(ids), ids.flip(-1)):
        for a, b in zip(program.module()(q, k, other), model(q, k, other)):
            torch.testing.assert_close(a, b, rtol=0, atol=2e-6)


def test_apply_rope_2d_compiles_with_fullgraph_and_exports():
    torch._dynamo.reset()
    model = _Axial()
    x = _randn(2, 2, 6, DIM, dtype=torch.float32)
    rows, cols = (torch.as_tensor(t) for t in posenc.grid_positions(2, 3))
    got = torch.compile(model, fullgraph=True)(x, rows, cols)
    torch.testing.assert_close(got, model(x, rows, cols), rtol=0, atol=2e-6)
    program = torch.export.export(model, (x, rows, cols))
    for r, c in ((rows + 100, cols * 7), (-rows, cols)):
        torch.testing.assert_close(program.module()(x, r, c), model(x, r, c),
                                   rtol=0, atol=2e-6)


def test_longrope_exported_switches_per_call():
    rope = RotaryEmbedding(DIM, layout="half", rope_parameters=LONGROPE,
                           max_position_embeddings=256)
    q = _randn(1, 4, DIM, dtype=torch.float32)
    program = torch.export.export(rope, (q, q, torch.arange(4)))
    for pos in (torch.arange(4), torch.arange(100, 104)):
        torch.testing.assert_close(program.module()(q, q, pos)[0], rope(q, q, pos)[0],
                                   rtol=0, atol=2e-6)


# -- meta: a shape-only pass through every entry point ---------------------------------------


def test_meta_inputs_give_meta_outputs():
    x = torch.empty(1, 2, 9, DIM, device="meta")
    ids = torch.empty(3, 1, 9, dtype=torch.long, device="meta")
    assert apply_mrope(x, ids, mrope_section=[2, 3, 3]).is_meta
    rows = torch.empty(9, dtype=torch.long, device="meta")
    assert apply_rope_2d(x, rows, rows).shape == x.shape
    assert apply_rope_2d(x, rows, rows).is_meta
    with pytest.raises(ValueError, match="position_ids is a meta tensor"):
        apply_mrope(torch.zeros(1, 2, 9, DIM), ids, mrope_section=[2, 3, 3])
    with pytest.raises(ValueError, match="rows is a meta tensor"):
        apply_rope_2d(torch.zeros(1, 2, 9, DIM), rows, torch.arange(9))
    rope = RotaryEmbedding(DIM, rope_parameters=LONGROPE, max_position_embeddings=256)
    q = torch.empty(1, 4, DIM, device="meta")
    assert rope(q, q, torch.empty(4, dtype=torch.long, device="meta"))[0].is_meta
    assert apply_rope(q, torch.arange(4)).is_meta
