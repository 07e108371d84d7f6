"""RoPE written into a given output: ``apply_rope(x, out=...)`` and ``apply_rope_(x)``.

The results are those of :func:`posenc.apply_rope` out of place, bit for bit where the
same kernels run (every eager path on the CPU); every bad ``out`` is refused with a
ValueError or TypeError naming it; aliasing follows one rule (``out`` is ``x`` itself or
shares no memory with it); autograd follows PyTorch's rules for in-place operations;
float16/bfloat16 keep their single rounding; and the torch guarantees (meta
tensors, inference mode, ``torch.compile`` with ``fullgraph``, ``torch.func``) hold.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import posenc
from posenc import apply_rope, apply_rope_
from posenc.torch import _apply as rope_apply
from posenc.torch import _eager as rope_eager

LAYOUTS = ["interleaved", "half"]
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]

pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.fixture(params=["one block", "many blocks"])
def blocks(request, monkeypatch):
    """Run a test with the default block size and with tiny blocks (many of them, some
    cutting a sequence), so that the block loop is exercised on small tensors."""
    if request.param == "many blocks":
        monkeypatch.setattr(rope_eager, "_BLOCK", 48)
        monkeypatch.setattr(rope_apply, "_SMALL", 0)
    return request.param


# -- the same result as apply_rope -------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("rotary_dim", [None, 6])
@pytest.mark.parametrize("positions", [None, "offset", "scattered"])
def test_out_and_in_place_equal_apply_rope_bit_for_bit(dtype, layout, rotary_dim, positions,
                                                       blocks):
    x = _randn(2, 3, 11, 16, dtype=dtype)
    pos = {None: None, "offset": torch.arange(1000, 1011),
           "scattered": [5, -3, 0, 2**40, 7, 7, 1, 9, 100, 4096, 3]}[positions]
    want = apply_rope(x, pos, layout=layout, rotary_dim=rotary_dim)
    before = x.clone()
    out = torch.full_like(x, float("nan"))
    got = apply_rope(x, pos, layout=layout, rotary_dim=rotary_dim, out=out)
    assert got is out and torch.equal(out, want)
    assert torch.equal(x, before)  # out= leaves x alone
    y = x.clone()
    assert apply_rope_(y, pos, layout=layout, rotary_dim=rotary_dim) is y
    assert torch.equal(y, want)
    assert apply_rope(y, pos, layout=layout, rotary_dim=rotary_dim, out=y) is y  # out=x
    assert torch.equal(y, apply_rope(want, pos, layout=layout, rotary_dim=rotary_dim))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_long_sequence_cut_into_blocks(layout, monkeypatch):
    monkeypatch.setattr(rope_eager, "_BLOCK", 1 << 10)
    monkeypatch.setattr(rope_apply, "_SMALL", 0)
    for dtype in (torch.float32, torch.bfloat16):
        x = _randn(1, 3000, 8, dtype=dtype)  # 24000 elements in rows of 3000 positions
        want = apply_rope(x, torch.arange(7, 3007), layout=layout)
        y = x.clone()
        torch.testing.assert_close(apply_rope_(y, torch.arange(7, 3007), layout=layout), want,
                                   rtol=0, atol=0)


def _views(dtype):
    """``(name, tensor, owner)``: tensors of shape (2, 5, 8) in odd memory layouts."""
    base = _randn(2, 5, 8, dtype=dtype)
    flat = torch.zeros(base.numel() + 1, dtype=dtype)
    flat[1:] = base.reshape(-1)
    wide = torch.zeros(2, 5, 16, dtype=dtype)
    wide[..., ::2] = base
    tr = base.transpose(-1, -2).contiguous()
    heads = base.transpose(0, 1).contiguous()  # (5, 2, 8) -> transpose back: strided rows
    return [("contiguous", base.clone(), None),
            ("odd offset", flat[1:].view(2, 5, 8), flat),
            ("strided features", wide[..., ::2], wide),
            ("transposed", tr.transpose(-1, -2), tr),
            ("strided rows", heads.transpose(0, 1), heads)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_strided_and_offset_views_for_x_and_out(dtype, layout, rotary_dim):
    for name, x, owner in _views(dtype):
        want = apply_rope(x.clone(), [3, 1, 4, 1, 5], layout=layout, rotary_dim=rotary_dim)
        for out_name, out, out_owner in _views(dtype):
            out_owner_before = None if out_owner is None else out_owner.clone()
            out.fill_(float("nan"))
            apply_rope(x, [3, 1, 4, 1, 5], layout=layout, rotary_dim=rotary_dim, out=out)
            # bit for bit when both are contiguous; otherwise PyTorch may take the scalar
            # instead of the vectorised loop of the same kernel (complex multiply)
            if name == out_name == "contiguous":
                assert torch.equal(out, want)
            torch.testing.assert_close(out, want, msg=f"{name}, {out_name}")
            if out_owner is not None:  # nothing outside the view written
                mask = torch.ones_like(out_owner, dtype=torch.bool)
                mask.view(-1)[_covered(out_owner, out)] = False
                assert torch.equal(out_owner[mask], out_owner_before[mask]), out_name
        y, y_owner = x.clone(), None
        for vname, v, v_owner in _views(dtype):
            if vname == name:
                v.copy_(x)
                y, y_owner = v, v_owner
        owner_before = None if y_owner is None else y_owner.clone()
        apply_rope_(y, [3, 1, 4, 1, 5], layout=layout, rotary_dim=rotary_dim)
        torch.testing.assert_close(y, want, msg=name)
        if y_owner is not None:
            mask = torch.ones_like(y_owner, dtype=torch.bool)
            mask.view(-1)[_covered(y_owner, y)] = False
            assert torch.equal(y_owner[mask], owner_before[mask]), name


def _covered(owner, view):
    """Flat indices of ``owner``'s storage that ``view`` reaches."""
    idx = torch.arange(owner.numel()).view(owner.shape)
    return torch.as_strided(idx.view(-1), view.shape, view.stride(),
                            view.storage_offset() - owner.storage_offset()).reshape(-1)


def test_empty_and_zero_length_sequences():
    for shape in [(2, 0, 8), (0, 5, 8)]:
        x = torch.zeros(shape)
        assert apply_rope_(x).shape == shape
        assert apply_rope(x, out=torch.empty(shape)).shape == shape


# -- bfloat16/float16: one rounding --------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_low_precision_is_rounded_once(dtype, layout, blocks):
    x = _randn(3, 64, 32, dtype=dtype)
    pos = torch.arange(10_000, 10_064)
    ref = apply_rope(x.double(), pos, layout=layout)  # float64, x exactly representable
    y = x.clone()
    apply_rope_(y, pos, layout=layout)
    out = torch.empty_like(x)
    apply_rope(x, pos, layout=layout, out=out)
    assert torch.equal(y, out)
    # one rounding of a float32 result: within half an ulp of the output plus float32 noise
    err = (y.double() - ref).abs()
    eps = torch.finfo(dtype).eps  # an ulp of v is at most eps * |v|
    bound = 0.5 * eps * torch.maximum(ref.abs(), y.double().abs()) + 1e-5 * x.double().abs(
    ).amax()
    assert (err <= bound).all()
    # rounding after every operation in the input's dtype is measurably worse
    cos, sin = (t.to(dtype) for t in (torch.cos(pos[:, None].double() * torch.from_numpy(
        posenc.inverse_frequencies(32))), torch.sin(pos[:, None].double() * torch.from_numpy(
            posenc.inverse_frequencies(32)))))
    if layout == "half":
        x1, x2 = x[..., :16], x[..., 16:]
    else:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    naive = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)
    ref_pairs = torch.cat((ref[..., :16], ref[..., 16:]) if layout == "half" else (
        ref[..., 0::2], ref[..., 1::2]), -1)
    assert (naive.double() - ref_pairs).abs().mean() > 1.5 * err.mean()


# -- refused input -------------------------------------------------------------------------


def test_out_of_the_wrong_kind_dtype_shape_or_device():
    x = torch.zeros(2, 4, 8)
    with pytest.raises(TypeError, match="out must be a torch.Tensor when x is one"):
        apply_rope(x, out=np.zeros((2, 4, 8), dtype=np.float32))
    with pytest.raises(TypeError, match=r"out must have the dtype of x \(torch.float32\)"):
        apply_rope(x, out=torch.zeros(2, 4, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"out must have the shape of x \(2, 4, 8\)"):
        apply_rope(x, out=torch.zeros(2, 4, 6))
    with pytest.raises(ValueError, match="out must be on the device of x"):
        apply_rope(x, out=torch.zeros(2, 4, 8, device="meta"))
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        apply_rope_(torch.zeros(2, 4, 8, dtype=torch.int32))
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        apply_rope_(torch.zeros(2, 4, 8, dtype=torch.complex64))
    # the checks of apply_rope itself still apply
    with pytest.raises(ValueError, match="last dimension of x"):
        apply_rope_(torch.zeros(2, 4, 7))
    with pytest.raises(ValueError, match="rotary_dim"):
        apply_rope_(torch.zeros(2, 4, 8), rotary_dim=10)
    with pytest.raises(ValueError, match="layout"):
        apply_rope_(torch.zeros(2, 4, 8), layout="diagonal")
    with pytest.raises(ValueError, match="positions"):
        apply_rope_(torch.zeros(2, 4, 8), [0, 1])
    with pytest.raises(TypeError, match="x must be a numpy.ndarray or a torch.Tensor"):
        apply_rope_([[1.0, 0.0]])


def test_expanded_out_or_x_is_refused():
    x = torch.zeros(3, 4, 8)
    with pytest.raises(ValueError, match="out has elements that share memory"):
        apply_rope(x, out=torch.zeros(1, 4, 8).expand(3, 4, 8))
    with pytest.raises(ValueError, match="x has elements that share memory"):
        apply_rope_(torch.zeros(1, 4, 8).expand(3, 4, 8))


def test_aliasing_rule():
    buf = _randn(2 * 5 * 8 + 8)
    x = buf[:80].view(2, 5, 8)
    with pytest.raises(ValueError, match="out shares memory with x without being x"):
        apply_rope(x, out=buf[8:88].view(2, 5, 8))  # shifted by one position: partial
    with pytest.raises(ValueError, match="out shares memory with x without being x"):
        apply_rope(x, out=buf[4:84].view(2, 5, 8))  # half a row off
    with pytest.raises(ValueError, match="out shares memory with x without being x"):
        apply_rope(x, out=torch.as_strided(buf, (2, 5, 8), (40, 1, 5)))  # reordered
    # interleaved but disjoint views also count as overlapping (the rule is conservative)
    wide = torch.zeros(2, 5, 16)
    with pytest.raises(ValueError, match="out shares memory"):
        apply_rope(wide[..., 0::2], out=wide[..., 1::2])
    # a second view of exactly the same elements is x itself: rotated in place
    want = apply_rope(x)
    same = buf[:80].view(2, 5, 8)
    assert same is not x
    apply_rope(x, out=same)
    assert torch.equal(x, want)
    # disjoint parts of one storage are fine
    big = _randn(4, 5, 8)
    want = apply_rope(big[:2])
    apply_rope(big[:2], out=big[2:])
    assert torch.equal(big[2:], want)


def test_numpy_out_and_in_place():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 6, 8))
    want = apply_rope(x, [4, 0, 2, 9, 1, 3], layout="half", rotary_dim=4)
    out = np.full_like(x, np.nan)
    assert apply_rope(x, [4, 0, 2, 9, 1, 3], layout="half", rotary_dim=4, out=out) is out
    np.testing.assert_array_equal(out, want)
    y = x.copy()
    assert apply_rope_(y, [4, 0, 2, 9, 1, 3], layout="half", rotary_dim=4) is y
    np.testing.assert_array_equal(y, want)
    f32 = x.astype(np.float32)
    y = f32.copy()
    apply_rope_(y)
    np.testing.assert_array_equal(y, apply_rope(f32))
    wide = np.zeros((3, 6, 16))  # a strided out
    apply_rope(x, out=wide[..., ::2])
    np.testing.assert_array_equal(wide[..., ::2], apply_rope(x))
    assert not wide[..., 1::2].any()
    # integer input gives float64: an integer array cannot hold its rotation
    ints = np.ones((2, 4), dtype=np.int64)
    np.testing.assert_array_equal(apply_rope(ints, out=np.empty((2, 4))), apply_rope(ints))


def test_numpy_refusals():
    x = np.ones((2, 4))
    ro = np.ones((2, 4))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="x is a read-only array"):
        apply_rope_(ro)
    with pytest.raises(ValueError, match="out is a read-only array"):
        apply_rope(x, out=ro)
    with pytest.raises(TypeError, match="x must have dtype float64.*integer x cannot be "
                                        "rotated in place"):
        apply_rope_(np.ones((2, 4), dtype=np.int64))
    with pytest.raises(TypeError, match="out must have dtype float64"):
        apply_rope(x, out=np.ones((2, 4), dtype=np.float32))
    with pytest.raises(ValueError, match=r"out must have the shape of x \(2, 4\)"):
        apply_rope(x, out=np.ones((2, 6)))
    with pytest.raises(TypeError, match="out must be a numpy.ndarray when x is not a tensor"):
        apply_rope(x, out=torch.ones(2, 4, dtype=torch.float64))
    buf = np.ones(12)
    with pytest.raises(ValueError, match="out shares memory with x without being x"):
        apply_rope(buf[:8].reshape(2, 4), out=buf[4:].reshape(2, 4))
    with pytest.raises(TypeError, match="x must hold real numbers"):
        apply_rope_(np.ones((2, 4), dtype=complex))


# -- autograd ------------------------------------------------------------------------------


def test_leaf_that_requires_grad_is_refused_as_pytorch_does():
    leaf = torch.zeros(3, 4, requires_grad=True)
    with pytest.raises(ValueError, match="x is a leaf tensor that requires grad"):
        apply_rope_(leaf)
    with pytest.raises(ValueError, match="out is a leaf tensor that requires grad"):
        apply_rope(torch.zeros(3, 4), out=leaf)
    with pytest.raises(ValueError, match="x is a view of a leaf tensor that requires grad"):
        apply_rope_(leaf[1:])
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.mul_(2)  # PyTorch's own rule, for comparison
    # with autograd off (an optimizer step, say) it is allowed
    leaf2 = _randn(3, 4).requires_grad_(True)
    want = apply_rope(leaf2.detach())
    with torch.no_grad():
        apply_rope_(leaf2)
    assert torch.equal(leaf2.detach(), want) and leaf2.is_leaf


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_in_place_on_a_non_leaf_has_the_out_of_place_gradient(layout, dtype, rotary_dim):
    w = _randn(2, 5, 8, dtype=dtype).requires_grad_(True)
    g = _randn(2, 5, 8, seed=1, dtype=dtype)
    pos = torch.tensor([3, 0, -2, 9, 1000])

    def loss_out_of_place(w):
        return (apply_rope(w * 2, pos, layout=layout, rotary_dim=rotary_dim) * g).sum()

    def loss_in_place(w):
        h = w * 2  # a non-leaf
        y = apply_rope_(h, pos, layout=layout, rotary_dim=rotary_dim)
        assert y is h and h.grad_fn is not None
        return (h * g).sum()

    def loss_out(w):
        out = torch.empty(2, 5, 8, dtype=dtype)
        apply_rope(w * 2, pos, layout=layout, rotary_dim=rotary_dim, out=out)
        assert out.requires_grad and out.grad_fn is not None
        return (out * g).sum()

    grads = []
    for f in (loss_out_of_place, loss_in_place, loss_out):
        w.grad = None
        f(w).backward()
        grads.append(w.grad.clone())
    assert torch.equal(grads[1], grads[0]) and torch.equal(grads[2], grads[0])
    # and the value: in place equals out of place
    with torch.no_grad():
        h = w * 2
        assert torch.equal(apply_rope_(h, pos, layout=layout, rotary_dim=rotary_dim),
                           apply_rope(w * 2, pos, layout=layout, rotary_dim=rotary_dim))


def test_out_that_requires_grad_is_overwritten_with_history():
    a = _randn(2, 4).requires_grad_(True)
    out = a * 1  # a non-leaf that requires grad: overwritten, its old history dropped
    x = _randn(2, 4, seed=3).requires_grad_(True)
    apply_rope(x, out=out)
    out.sum().backward()
    assert a.grad is None or torch.equal(a.grad, torch.zeros_like(a))
    torch.testing.assert_close(x.grad, apply_rope(torch.ones(2, 4), -torch.arange(2)))


# -- the torch guarantees ------------------------------------------------------------------


def test_meta_tensors_are_a_shape_only_pass():
    x = torch.empty(2, 5, 8, device="meta")
    assert apply_rope_(x) is x
    out = torch.empty(2, 5, 8, device="meta")
    assert apply_rope(x, layout="half", out=out) is out and out.is_meta


@pytest.mark.parametrize("layout", LAYOUTS)
def test_inference_mode(layout):
    x = _randn(2, 5, 8)
    want = apply_rope(x, layout=layout)
    y = x.clone()
    with torch.inference_mode():
        apply_rope_(y, layout=layout)  # a normal tensor, written inside inference mode
        inf = x.clone()  # an inference tensor
        apply_rope_(inf, layout=layout)
        assert inf.is_inference()
    assert torch.equal(y, want) and torch.equal(inf, want)
    with pytest.raises(ValueError, match="x is an inference tensor"):
        apply_rope_(inf, layout=layout)
    with pytest.raises(ValueError, match="out is an inference tensor"):
        apply_rope(x, layout=layout, out=inf)
    # the per-thread scratch made inside inference mode still serves a training step
    rope_eager._scratch.__dict__.clear()
    with torch.inference_mode():
        apply_rope_(torch.randn(3, 40, 8, dtype=torch.bfloat16), layout=layout)
    z = _randn(3, 40, 8, dtype=torch.bfloat16)
    want = apply_rope(z, layout=layout)
    assert torch.equal(apply_rope_(z, layout=layout), want)


def test_compile_fullgraph_in_place_and_out():
    torch._dynamo.reset()

    def f(x, pos):
        y = x.clone()
        apply_rope_(y, pos, layout="half")
        out = torch.empty_like(x)
        apply_rope(x, pos, layout="interleaved", rotary_dim=8, out=out)
        return y + out

    x, pos = _randn(2, 3, 7, 16), torch.arange(1000, 1007)
    got = torch.compile(f, fullgraph=True)(x, pos)
    torch.testing.assert_close(got, f(x, pos), atol=2e-6, rtol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_func_vmap_and_jvp(layout):
    xs = _randn(4, 3, 5, 8)
    pos = torch.arange(20, 25)

    def f(v):
        return apply_rope_(v.clone(), pos, layout=layout)

    torch.testing.assert_close(torch.func.vmap(f)(xs), apply_rope(xs, pos, layout=layout),
                               atol=1e-6, rtol=0)
    t = _randn(4, 3, 5, 8, seed=1)
    out, tangent = torch.func.jvp(f, (xs,), (t,))
    torch.testing.assert_close(out, apply_rope(xs, pos, layout=layout), atol=1e-6, rtol=0)
    torch.testing.assert_close(tangent, apply_rope(t, pos, layout=layout), atol=1e-6, rtol=0)
    # the batched tensor itself rotated in place under vmap
    ys = xs.clone()
    torch.func.vmap(lambda v: apply_rope_(v, pos, layout=layout))(ys)
    torch.testing.assert_close(ys, apply_rope(xs, pos, layout=layout), atol=1e-6, rtol=0)


def test_threads_have_their_own_scratch():
    import threading

    x = {i: _randn(4, 300, 64, seed=i, dtype=torch.bfloat16) for i in range(4)}
    want = {i: apply_rope(x[i], layout="half") for i in range(4)}
    errors = []

    def work(i):
        for _ in range(5):
            y = x[i].clone()
            apply_rope_(y, layout="half")
            if not torch.equal(y, want[i]):
                errors.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# -- a property over shapes, layouts and memory layouts ------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dtype=st.sampled_from(DTYPES), layout=st.sampled_from(LAYOUTS),
       d=st.integers(1, 6).map(lambda k: 2 * k), seq=st.integers(0, 7),
       lead=st.lists(st.integers(0, 3), max_size=2), rot=st.integers(0, 6),
       memory=st.sampled_from(["contiguous", "odd offset", "strided", "transposed"]),
       block=st.sampled_from([1 << 17, 8, 33]), seed=st.integers(0, 2**31))
def test_in_place_equals_out_of_place_everywhere(dtype, layout, d, seq, lead, rot, memory,
                                                 block, seed):
    rotary_dim = None if rot == 0 or 2 * rot > d else 2 * rot
    shape = (*lead, seq, d)
    values = _randn(*shape, seed=seed, dtype=dtype)
    n = values.numel()
    if memory == "odd offset":
        owner = torch.zeros(n + 1, dtype=dtype)
        x = owner[1:].view(shape)
    elif memory == "strided":
        owner = torch.zeros(*shape[:-1], 2 * d, dtype=dtype)
        x = owner[..., ::2]
    elif memory == "transposed":
        owner = torch.zeros(*shape[:-2], d, seq, dtype=dtype)
        x = owner.transpose(-1, -2)
    else:
        owner = x = torch.zeros(shape, dtype=dtype)
    x.copy_(values)
    old = rope_eager._BLOCK, rope_apply._SMALL
    rope_eager._BLOCK, rope_apply._SMALL = block, 0
    try:
        want = apply_rope(values, layout=layout, rotary_dim=rotary_dim)
        assert apply_rope_(x, layout=layout, rotary_dim=rotary_dim) is x
    finally:
        rope_eager._BLOCK, rope_apply._SMALL = old
    if memory == "contiguous" or dtype not in (torch.float32, torch.float64):
        assert torch.equal(x, want)
    else:  # the scalar loop of a strided complex multiply may differ in the last bit
        torch.testing.assert_close(x, want, atol=0, rtol=2 * torch.finfo(dtype).eps)
    if memory == "strided":
        assert not owner[..., 1::2].any()  # the gaps are not written


@pytest.mark.parametrize("d", [4, 6, 32])
@pytest.mark.parametrize("seq", [1, 2, 7])
def test_one_rotated_pair_in_place_is_bit_identical(d, seq):
    # rotary_dim=2 leaves one complex number per row; PyTorch's in-place strided complex
    # multiply differed from the out-of-place one in the last bit (found by hypothesis)
    x = torch.randn(3, seq, d, generator=torch.Generator().manual_seed(d + seq))
    want = apply_rope(x, rotary_dim=2)
    y = x.clone()
    apply_rope_(y, rotary_dim=2)
    assert torch.equal(y, want)
