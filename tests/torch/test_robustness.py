"""The torch paths survive the ways real models are built, trained and served.

One section per class of failure: module lifecycle (meta-device init, float64), memory
bounded by the input, runtime contexts (inference mode, threads, torch.compile and
torch.export, torch.func), and tensors and values at the edges.  Every test here failed
on commit 72ef85d (checked by running this file against a copy of that commit).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import posenc
from posenc import apply_rope, rotate_pairs
from posenc.torch import _tables as rope_tables
from posenc.torch import RotaryEmbedding, SinusoidalPositionalEncoding

LAYOUTS = ["interleaved", "half"]

# The first forward-mode AD call of a process makes PyTorch 2.13 load its decompositions
# through torch.jit.script, which warns that it is deprecated; not posenc's.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _poison_allocator(nbytes, count=8):
    """Leave NaN in freed CPU memory of ``nbytes``, as a long-running process would have
    garbage there, so that ``to_empty`` cannot hand back memory that happens to hold a
    valid table."""
    junk = [torch.full((nbytes // 4 + 1,), float("nan")) for _ in range(count)]
    del junk


# -- module lifecycle: meta-device init ---------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("route", ["meta-context", "to-meta"])
def test_rotary_meta_init_then_to_empty_has_valid_tables(layout, route):
    if route == "meta-context":
        with torch.device("meta"):
            model = torch.nn.ModuleDict({"rope": RotaryEmbedding(16, layout=layout,
                                                                 max_seq_len=64)})
    else:
        model = torch.nn.ModuleDict({"rope": RotaryEmbedding(16, layout=layout,
                                                             max_seq_len=64)}).to("meta")
    _poison_allocator(64 * 8 * 4)
    model.to_empty(device="cpu")
    model.load_state_dict(model.state_dict())  # the usual next step; tables not in it
    rope = model["rope"]
    q, k = _randn(2, 2, 10, 16).unbind(0)
    pos = torch.tensor([0, 1, 2, 3, 63, 40, 5, 6, 7, 8])
    q2, k2 = rope(q, k, pos)
    torch.testing.assert_close(q2, apply_rope(q, pos, layout=layout))
    torch.testing.assert_close(k2, apply_rope(k, pos, layout=layout))
    torch.testing.assert_close(rope(q, k)[0], apply_rope(q, layout=layout))
    torch.testing.assert_close(rope.cos, RotaryEmbedding(16, max_seq_len=64).cos, rtol=0, atol=0)


def test_rotary_forward_on_never_materialised_module_builds_tables():
    rope = RotaryEmbedding(8, max_seq_len=32).to("meta")
    q = _randn(5, 8)
    torch.testing.assert_close(rope(q, q)[0], apply_rope(q))
    assert rope.cos.device.type == "cpu"
    # and a meta input is a shape-only pass
    out, _ = RotaryEmbedding(8).to("meta")(q.to("meta"), q.to("meta"))
    assert out.device.type == "meta" and out.shape == q.shape


@pytest.mark.parametrize("route", ["meta-context", "to-meta"])
def test_sinusoidal_meta_init_then_to_empty_has_valid_table(route):
    if route == "meta-context":
        with torch.device("meta"):
            enc = SinusoidalPositionalEncoding(16, max_len=64)
    else:
        enc = SinusoidalPositionalEncoding(16, max_len=64).to("meta")
    _poison_allocator(64 * 16 * 4)
    enc.to_empty(device="cpu")
    enc.load_state_dict(enc.state_dict())
    y = enc(torch.zeros(2, 30, 16))
    np.testing.assert_allclose(y[1].double().numpy(), posenc.sinusoidal_encoding(30, 16),
                               atol=1e-6, rtol=0)


# -- module lifecycle: float64 in, float64 tables -----------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rotary_module_float64_matches_apply_rope_to_float64_rounding(layout):
    rope = RotaryEmbedding(32, layout=layout)
    q, k = _randn(2, 3, 9, 32, dtype=torch.float64).unbind(0)
    for pos in (None, torch.arange(100_000, 100_009), [-3, 0, 5, 7, 11, 2**30, 4, 2, 1]):
        q2, k2 = rope(q, k, pos)
        assert q2.dtype == torch.float64
        # float32 tables would be ~1e-7 off; float64 ones agree to a few float64 ulps
        torch.testing.assert_close(q2, apply_rope(q, pos, layout=layout), atol=1e-14, rtol=0)
        torch.testing.assert_close(k2, apply_rope(k, pos, layout=layout), atol=1e-14, rtol=0)


def test_sinusoidal_module_float64_is_float64_exact():
    enc = SinusoidalPositionalEncoding(16, max_len=32)
    y = enc(torch.zeros(1, 50, 16, dtype=torch.float64))
    np.testing.assert_allclose(y[0].numpy(), posenc.sinusoidal_encoding(50, 16),
                               atol=1e-15, rtol=0)


# -- memory bounded by the input -----------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_far_positions_do_not_grow_the_table(layout):
    rope = RotaryEmbedding(8, layout=layout)  # 4096 rows
    q = _randn(1, 2, 1, 8)
    for far in (1_000_000, 2**24, 2**40, 2**62):
        q2, _ = rope(q, q, torch.tensor([far]))
        assert rope.cos.shape == (4096, 4) and rope.sin.shape == (4096, 4)
        torch.testing.assert_close(q2, apply_rope(q, [far], layout=layout))
    # a long sequence does grow it, to the next power of two of its length
    q = _randn(1, 5000, 8)
    torch.testing.assert_close(rope(q, q)[0], apply_rope(q, layout=layout))
    assert rope.cos.shape[0] == 8192
    # and a run of positions far away: only its own rows
    pos = torch.arange(10**9, 10**9 + 5000)
    torch.testing.assert_close(rope(q, q, pos)[0], apply_rope(q, pos, layout=layout))
    assert rope.cos.shape[0] == 8192


def _cache_bytes():
    """Bytes of the cached tables' storages (cos and sin may view one complex table)."""
    storages = {}
    for tables, _ in rope_tables._cache.values():
        for t in tables:
            if t is not None:
                storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


def test_apply_rope_cache_is_bounded_in_bytes():
    posenc.clear_rope_cache()
    x = torch.zeros(1, 32768, 64)  # 8 MiB of complex64 table per distinct offset
    for offset in range(24):
        apply_rope(x, torch.arange(offset, offset + 32768))
    held = _cache_bytes()
    assert held <= 64 * 2**20, f"the cache holds {held / 2**20:.0f} MiB"
    assert held >= 32 * 2**20  # it still caches: the latest tables are kept
    # a call with the tables just used is served from the cache (no new entry)
    n = len(rope_tables._cache)
    apply_rope(x, torch.arange(23, 23 + 32768))
    assert len(rope_tables._cache) == n
    posenc.clear_rope_cache()
    assert _cache_bytes() == 0


def test_apply_rope_table_larger_than_the_budget_is_not_kept(monkeypatch):
    posenc.clear_rope_cache()
    monkeypatch.setattr(rope_tables, "_CACHE_BYTES", 1 << 20)
    x = _randn(1, 4096, 128)  # a 2 MiB complex64 table
    torch.testing.assert_close(apply_rope(x), apply_rope(x.double()).float())
    assert _cache_bytes() <= 1 << 20
    posenc.clear_rope_cache()


# -- runtime contexts: inference mode --------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_tables_built_in_inference_mode_do_not_break_training(layout):
    posenc.clear_rope_cache()
    rope = RotaryEmbedding(8, layout=layout, max_seq_len=4)
    x = _randn(2, 12, 8)
    pos = torch.arange(20, 32)
    with torch.inference_mode():  # an evaluation pass builds and caches the tables
        apply_rope(x, pos, layout=layout)
        rope(x, x)
        rope(x, x, pos)
        enc = SinusoidalPositionalEncoding(8, max_len=2)
        enc(x)
    # a training step through the same caches
    for f in (lambda t: apply_rope(t, pos, layout=layout), lambda t: rope(t, t)[0],
              lambda t: rope(t, t, pos)[0], enc):
        w = x.clone().requires_grad_(True)
        g = _randn(2, 12, 8, seed=1)
        (f(w) * g).sum().backward()
        assert w.grad is not None and torch.isfinite(w.grad).all()
    # RoPE is a rotation: the gradient is the output gradient rotated back
    w = x.clone().requires_grad_(True)
    (apply_rope(w, pos, layout=layout) * g).sum().backward()
    torch.testing.assert_close(w.grad, apply_rope(g, -pos, layout=layout))
    assert not rope.cos.is_inference() and not enc.pe.is_inference()


# -- runtime contexts: threads -----------------------------------------------------------------


def test_threads_share_one_module_while_it_grows():
    lengths = [3, 70, 600, 2500]
    q = _randn(1, max(lengths), 16)
    want = {n: apply_rope(q[:, :n]) for n in lengths}
    want_pos = {n: apply_rope(q[:, :n], np.arange(n) + n) for n in lengths}
    errors = []

    for trial in range(25):
        rope = RotaryEmbedding(16, max_seq_len=1)
        barrier = threading.Barrier(len(lengths))

        def work(n, rope=rope, barrier=barrier):
            try:
                barrier.wait()
                for _ in range(3):
                    got, _ = rope(q[:, :n], q[:, :n])
                    got_pos, _ = rope(q[:, :n], q[:, :n], torch.arange(n) + n)
                    if not (torch.allclose(got, want[n], atol=1e-6)
                            and torch.allclose(got_pos, want_pos[n], atol=1e-6)):
                        errors.append(f"wrong result for length {n}")
            except Exception as e:  # noqa: BLE001 - collected and reported below
                errors.append(f"{type(e).__name__}: {e}")

        threads = [threading.Thread(target=work, args=(n,)) for n in lengths]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert rope.cos.shape == rope.sin.shape and rope.cos.shape[0] >= 2 * max(lengths)
    assert not errors, f"{len(errors)} failures, e.g. {errors[:3]}"


def test_threads_share_one_sinusoidal_module_while_it_grows():
    lengths = [3, 70, 600, 2500]
    want = {n: torch.from_numpy(posenc.sinusoidal_encoding(n, 16)).float() for n in lengths}
    errors = []
    for trial in range(10):
        enc = SinusoidalPositionalEncoding(16, max_len=1)
        barrier = threading.Barrier(len(lengths))

        def work(n, enc=enc, barrier=barrier):
            try:
                barrier.wait()
                for _ in range(3):
                    if not torch.allclose(enc(torch.zeros(1, n, 16))[0], want[n], atol=1e-6):
                        errors.append(f"wrong result for length {n}")
            except Exception as e:  # noqa: BLE001 - collected and reported below
                errors.append(f"{type(e).__name__}: {e}")

        threads = [threading.Thread(target=work, args=(n,)) for n in lengths]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert enc.max_len == 4096
    assert not errors, f"{len(errors)} failures, e.g. {errors[:3]}"


# -- runtime contexts: torch.compile and torch.export ------------------------------------------


def test_apply_rope_compiles_with_fullgraph():
    torch._dynamo.reset()

    def f(x, pos):
        return (apply_rope(x, pos, layout="half")
                + apply_rope(x, pos, layout="interleaved", rotary_dim=8))

    x, pos = _randn(2, 3, 7, 16), torch.arange(1000, 1007)
    got = torch.compile(f, fullgraph=True)(x, pos)
    torch.testing.assert_close(got, f(x, pos), atol=2e-6, rtol=0)


def test_rotary_module_compiles_with_fullgraph_and_exports():
    rope = RotaryEmbedding(16, layout="half", max_seq_len=8)
    q, k = _randn(2, 2, 3, 6, 16).unbind(0)
    pos = torch.arange(50, 56)
    got = torch.compile(rope, fullgraph=True)(q, k, pos)
    for a, b in zip(got, rope(q, k, pos)):
        torch.testing.assert_close(a, b, atol=2e-6, rtol=0)
    program = torch.export.export(rope, (q, k, pos))
    # the exported program computes the tables from whatever positions it is given
    for other in (torch.tensor([-7, 0, 3, 9, 1_000_000, 2**40]), torch.arange(6)):
        for a, b in zip(program.module()(q, k, other), rope(q, k, other)):
            torch.testing.assert_close(a, b, atol=2e-6, rtol=0)


def test_sinusoidal_module_compiles_with_fullgraph():
    enc = SinusoidalPositionalEncoding(16, max_len=4)  # shorter than the input
    x = _randn(2, 9, 16)
    got = torch.compile(enc, fullgraph=True)(x)
    torch.testing.assert_close(got, enc(x), atol=1e-6, rtol=0)


def test_compiled_apply_rope_inside_a_compiled_model():
    from posenc.torch import compiled_apply_rope

    x = _randn(1, 2, 5, 8)
    got = torch.compile(lambda t: compiled_apply_rope(t, layout="half") * 2,
                        fullgraph=True)(x)
    torch.testing.assert_close(got, apply_rope(x, layout="half") * 2, atol=2e-6, rtol=0)


# -- runtime contexts: torch.func ---------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_jvp_is_the_linear_map_itself(layout, dtype, rotary_dim):
    x, t = _randn(2, 3, 5, 8, dtype=dtype), _randn(2, 3, 5, 8, seed=1, dtype=dtype)
    pos = torch.tensor([0, 3, -2, 100, 7])

    def f(v):
        return apply_rope(v, pos, layout=layout, rotary_dim=rotary_dim)

    out, tangent = torch.func.jvp(f, (x,), (t,))
    # RoPE is linear in x: its derivative in direction t is the rotation of t
    torch.testing.assert_close(out, f(x))
    torch.testing.assert_close(tangent, f(t))
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        dual = f(fwAD.make_dual(x, t))
        torch.testing.assert_close(fwAD.unpack_dual(dual).tangent, f(t))


def test_jvp_through_the_module():
    for layout in LAYOUTS:
        rope = RotaryEmbedding(8, layout=layout, max_seq_len=4)
        q, t = _randn(3, 6, 8), _randn(3, 6, 8, seed=1)
        pos = torch.arange(10, 16)
        (q2, _), (tq, _) = torch.func.jvp(lambda v: rope(v, v, pos), (q,), (t,))
        torch.testing.assert_close(q2, apply_rope(q, pos, layout=layout))
        torch.testing.assert_close(tq, apply_rope(t, pos, layout=layout))
        import torch.autograd.forward_ad as fwAD

        with fwAD.dual_level():
            dual, _ = rope(fwAD.make_dual(q, t), q, pos)
            torch.testing.assert_close(fwAD.unpack_dual(dual).tangent,
                                       apply_rope(t, pos, layout=layout))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_vmap_equals_a_loop(layout, dtype, rotary_dim):
    xs = _randn(4, 3, 5, 8, dtype=dtype)
    pos = torch.arange(20, 25)

    def f(v):
        return apply_rope(v, pos, layout=layout, rotary_dim=rotary_dim)

    got = torch.func.vmap(f)(xs)
    loop = torch.stack([f(v) for v in xs])
    torch.testing.assert_close(got, loop, atol=1e-6 if dtype == torch.float32 else None,
                               rtol=0 if dtype == torch.float32 else None)
    # batched positions too: one sequence of positions per example
    many = torch.stack([pos + 100 * i for i in range(4)])
    got = torch.func.vmap(lambda v, p: apply_rope(v, p, layout=layout,
                                                  rotary_dim=rotary_dim))(xs, many)
    loop = torch.stack([apply_rope(v, p, layout=layout, rotary_dim=rotary_dim)
                        for v, p in zip(xs, many)])
    torch.testing.assert_close(got, loop, atol=1e-6 if dtype == torch.float32 else None,
                               rtol=0 if dtype == torch.float32 else None)


def test_vmap_through_the_module():
    rope = RotaryEmbedding(8, layout="half")
    qs = _randn(4, 2, 5, 8, dtype=torch.bfloat16)
    got, _ = torch.func.vmap(lambda v: rope(v, v))(qs)
    torch.testing.assert_close(got, torch.stack([rope(v, v)[0] for v in qs]))


# -- tensors and values at the edges -------------------------------------------------------------


@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_odd_storage_offset_on_the_interleaved_path(rotary_dim):
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        flat = _randn(1 + 2 * 3 * 8, dtype=dtype)
        x = flat[1:].view(2, 3, 8)  # contiguous, storage offset 1
        assert x.is_contiguous() and x.storage_offset() % 2 == 1
        before = flat.clone()
        got = apply_rope(x, layout="interleaved", rotary_dim=rotary_dim)
        torch.testing.assert_close(got, apply_rope(x.clone(), rotary_dim=rotary_dim))
        assert torch.equal(flat, before)  # the input is not touched
        if rotary_dim is None:
            q2, _ = RotaryEmbedding(8)(x, x)
            torch.testing.assert_close(q2, apply_rope(x.clone()))


@pytest.mark.parametrize("bad", [
    torch.zeros(2, 5, 8, dtype=torch.int64),
    torch.zeros(2, 5, 8, dtype=torch.bool),
    torch.zeros(2, 5, 8, dtype=torch.uint8),
])
def test_sinusoidal_module_refuses_integer_and_bool_tensors(bad):
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        SinusoidalPositionalEncoding(8)(bad)


def test_sinusoidal_module_refuses_numpy_arrays():
    with pytest.raises(TypeError, match=r"x must be a floating-point torch\.Tensor.*ndarray"):
        SinusoidalPositionalEncoding(8)(np.zeros((2, 5, 8), dtype=np.float32))


@pytest.mark.parametrize("positions", [
    [2**63],
    [2**64 + 5],
    np.array([2**63 + 1], dtype=np.uint64),
    torch.tensor([2**63], dtype=torch.uint64),
])
def test_positions_beyond_int64_are_refused(positions):
    x = np.ones((1, 4))
    with pytest.raises(ValueError, match=r"positions must fit in int64"):
        apply_rope(x, positions)
    with pytest.raises(ValueError, match=r"positions must fit in int64"):
        apply_rope(torch.ones(1, 4), positions)
    with pytest.raises(ValueError, match=r"positions must fit in int64"):
        RotaryEmbedding(4)(torch.ones(1, 4), torch.ones(1, 4), positions)
    with pytest.raises(ValueError, match=r"positions must fit in int64"):
        posenc.rope_angles(positions, 4)


def test_largest_int64_positions_still_work():
    x = _randn(2, 4, dtype=torch.float64)
    pos = [2**63 - 1, -2**63]
    want = apply_rope(x.numpy(), pos)
    torch.testing.assert_close(apply_rope(x, pos), torch.from_numpy(want))
    torch.testing.assert_close(RotaryEmbedding(4)(x, x, pos)[0], torch.from_numpy(want))


def test_longdouble_refused_by_apply_rope_and_float64_from_rotate_pairs():
    x = np.ones((2, 4), dtype=np.longdouble)
    if np.dtype(np.longdouble).itemsize > 8:  # x86-64 Linux: 80-bit extended precision
        with pytest.raises(TypeError, match=r"x has dtype float128 \(numpy\.longdouble\)"):
            apply_rope(x)
    else:  # where long double is float64, it is float64
        assert apply_rope(x).dtype == np.longdouble
    # rotate_pairs documents a float64 result, whatever the input
    assert rotate_pairs(x, np.zeros((2, 2))).dtype == np.float64


def test_complex_input_refused():
    with pytest.raises(TypeError, match="x must hold real numbers"):
        rotate_pairs(np.ones((2, 4)) + 1j, np.zeros((2, 2)))
    with pytest.raises(TypeError, match="angles must hold real numbers"):
        rotate_pairs(np.ones((2, 4)), np.zeros((2, 2)) + 1j)
    with pytest.raises(TypeError, match="x must hold real numbers"):
        apply_rope(np.ones((2, 4), dtype=complex))
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        apply_rope(torch.ones(2, 4, dtype=torch.complex64))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_empty_positions_list_for_an_empty_sequence(layout):
    rope = RotaryEmbedding(8, layout=layout)
    q = torch.zeros(2, 0, 8)
    for pos in ([], np.array([], dtype=np.int64), torch.zeros(0, dtype=torch.long)):
        q2, k2 = rope(q, q, pos)
        assert q2.shape == (2, 0, 8) and k2.shape == (2, 0, 8)
        assert apply_rope(q, pos, layout=layout).shape == (2, 0, 8)


def test_uint64_torch_positions_work_like_int64():
    rope = RotaryEmbedding(8)
    q = _randn(3, 8)
    small = torch.tensor([5, 0, 4000], dtype=torch.uint64)
    want = apply_rope(q, torch.tensor([5, 0, 4000]))
    torch.testing.assert_close(rope(q, q, small)[0], want)
    torch.testing.assert_close(apply_rope(q, small), want)


def test_meta_positions_with_real_input_are_a_clear_error():
    pos = torch.arange(3, device="meta")
    with pytest.raises(ValueError, match="positions is a meta tensor"):
        RotaryEmbedding(8)(torch.ones(3, 8), torch.ones(3, 8), pos)
    with pytest.raises(ValueError, match="positions is a meta tensor"):
        apply_rope(torch.ones(3, 8), pos)
    # with meta input too it is a shape-only pass
    meta = torch.ones(3, 8, device="meta")
    assert RotaryEmbedding(8)(meta, meta, pos)[0].device.type == "meta"
    assert apply_rope(meta, pos).shape == (3, 8)


@pytest.mark.parametrize("dropout", ["0.1", None, [0.1], True])
def test_dropout_must_be_a_real_number(dropout):
    with pytest.raises(TypeError, match="dropout must be a real number"):
        SinusoidalPositionalEncoding(8, dropout=dropout)
