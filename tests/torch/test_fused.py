"""The fused Triton kernel (posenc.torch._triton) and its custom operators.

Every variant is checked against the float64 NumPy reference (:func:`posenc.apply_rope`
on float64 arrays): both layouts, float32/float16/bfloat16, rotary widths below the head
width with the rotated slice first or last, odd head widths (80, 96, 192), q and k with
different head counts (grouped-query attention), tensors held as ``(B, T, H, D)`` and seen
as ``(B, H, T, D)``, positions as a run, a shared tensor and per-sample rows, positions
far past any table (2**40) and negative, in place and out of place, forward and backward.

Without a GPU the kernel runs on CPU tensors under Triton's interpreter
(``TRITON_INTERPRET=1``, set by tests/conftest.py before the kernel is imported); on a GPU
machine, run with ``TRITON_INTERPRET=0``, the same tests run compiled on CUDA tensors.  Shapes are small so that the interpreter stays quick.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import posenc

from posenc.torch import RotaryEmbedding
from posenc.torch import _fused

#: CPU tensors under the interpreter (tests/conftest.py sets TRITON_INTERPRET=1); CUDA
#: tensors compiled, on a GPU machine run with TRITON_INTERPRET=0.
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICES = ["cpu"] if INTERPRET else ["cuda"]


def test_the_kernel_runs_where_the_cases_say():
    """Without this every CPU case below could test the reference formula instead."""
    from posenc.torch import _triton

    assert _fused.available()
    if INTERPRET:
        assert _fused.runs_here(torch.empty(0))
        assert type(_triton._rope_kernel).__name__ == "InterpretedFunction"
    else:
        assert torch.cuda.is_available(), "TRITON_INTERPRET=0 needs a CUDA device"
        assert type(_triton._rope_kernel).__name__ == "JITFunction"

#: float32 within float32 rounding of the float64 result; float16/bfloat16 within one
#: rounding of the output (relative to the largest value)
TOL = {torch.float32: 4e-7, torch.float16: 1e-3, torch.bfloat16: 8e-3}


def _ref(x, positions, layout, rotary_dim, rot_off=0, scale=1.0, inverse=False,
         inv_freq=None):
    """float64 NumPy reference: posenc.apply_rope on float64 arrays, per sample rows."""
    a = x.detach().double().cpu().numpy()
    d = a.shape[-1]
    r = rotary_dim
    pos = None if positions is None else np.asarray(positions.cpu() if torch.is_tensor(
        positions) else positions)
    out = a.copy()
    seg = a[..., rot_off:rot_off + r]
    if inverse:  # the rotation by the opposite angle: negate positions
        pos = -(np.arange(a.shape[-2]) if pos is None else pos)
    if inv_freq is not None:  # scaled frequencies: rotate explicitly
        p = np.arange(a.shape[-2]) if pos is None else pos
        ang = p[..., None].astype(np.float64) * inv_freq
        c, s = np.cos(ang) * scale, np.sin(ang) * scale
        if np.ndim(p) == 2:
            c, s = c[:, None], s[:, None]
        h = r // 2
        if layout == "half":
            x1, x2 = seg[..., :h], seg[..., h:]
            rot = np.concatenate((x1 * c - x2 * s, x2 * c + x1 * s), -1)
        else:
            x1, x2 = seg[..., 0::2], seg[..., 1::2]
            rot = np.stack((x1 * c - x2 * s, x2 * c + x1 * s), -1).reshape(seg.shape)
    elif pos is not None and np.ndim(pos) == 2:
        rot = np.stack([posenc.apply_rope(seg[b], pos[b], layout=layout)
                        for b in range(seg.shape[0])]) * scale
    else:
        rot = posenc.apply_rope(seg, pos, layout=layout) * scale
    out[..., rot_off:rot_off + r] = rot
    assert d == out.shape[-1]
    return out


def _check(got, want, dtype):
    got = got.detach().double().cpu().numpy()
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    assert err <= TOL[dtype], err


def _freqs(r, base=10000.0, scale=1.0, device="cpu"):
    from posenc.sinusoidal import inverse_frequencies

    return _fused.freq_buffer(torch.from_numpy(inverse_frequencies(r, base)), scale, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d,r,where", [(64, 64, "all"), (80, 80, "all"), (96, 64, "first"),
                                       (192, 64, "last"), (96, 32, "last")])
def test_kernel_matches_float64_reference(device, layout, dtype, d, r, where):
    g = torch.Generator().manual_seed(d + r)
    b, hq, hk, t = 2, 4, 2, 5
    # q held as (B, T, H, D) and seen as (B, H, T, D), as models hold it
    q = torch.randn(b, t, hq, d, generator=g).to(dtype).to(device).transpose(1, 2)
    k = torch.randn(b, hk, t, d, generator=g).to(dtype).to(device)
    positions = torch.tensor([0, 7, 2**40, -3, 1_000_000], device=device)
    off = d - r if where == "last" else 0
    oq, ok = _fused.rope_qk(q, k, positions, 0, _freqs(r, device=device),
                            layout == "half", off)
    assert oq.shape == q.shape and oq.dtype == dtype and ok.shape == k.shape
    _check(oq, _ref(q, positions, layout, r, off), dtype)
    _check(ok, _ref(k, positions, layout, r, off), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("i", range(len(__import__("posenc.torch._triton",
                                                   fromlist=["SWEEP"]).SWEEP)))
def test_every_swept_configuration_matches_float64(device, i, monkeypatch):
    """Each configuration the GPU benchmark may choose (tile, heads per tile, float64 or
    reduced float32 trigonometry, warps), at positions up to int64's range: the reduced
    angle must stay exact where the float64 angle itself is far past 2**53."""
    from posenc.torch import _triton

    cfg = _triton.SWEEP[i]
    layout = "half" if i % 2 else "interleaved"
    dtype = torch.bfloat16 if i % 3 == 0 else torch.float32
    monkeypatch.setitem(_triton.CONFIG, 2, dict(cfg))
    monkeypatch.setitem(_triton.CONFIG, 4, dict(cfg))
    g = torch.Generator().manual_seed(i)
    b, hq, hk, t, d = 2, 12, 3, 6, 64
    q = torch.randn(b, t, hq, d, generator=g).to(dtype).to(device).transpose(1, 2)
    k = torch.randn(b, hk, t, d, generator=g).to(dtype).to(device)
    positions = torch.tensor([[0, 1, 2**53 + 1, 2**62, -(2**62) + 7, 9_000_000_000_000_000_000],
                              [5, 4_000_000, 123_456_789_012, 3, 2**31, -1]], device=device)
    oq, ok = _fused.rope_qk(q, k, positions, 0, _freqs(d, device=device),
                            layout == "half", 0)
    _check(oq, _ref(q, positions, layout, d), dtype)
    _check(ok, _ref(k, positions, layout, d), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_positions_as_run_tensor_and_rows(device, layout):
    g = torch.Generator().manual_seed(1)
    q = torch.randn(3, 2, 4, 32, generator=g).to(device)
    k = torch.randn(3, 1, 4, 32, generator=g).to(device)
    rope = RotaryEmbedding(32, layout=layout, backend="triton")
    ref = RotaryEmbedding(32, layout=layout, backend="torch")
    rows = torch.tensor([[0, 1, 2, 3], [10, 11, 12, 13], [5, 3, 9, 2**35]], device=device)
    for pos in (None, [100, 101, 102, 103], torch.tensor([4, 1, 8, 2], device=device), rows):
        got = rope(q, k, positions=pos)
        want = ref(q.cpu(), k.cpu(), positions=pos.cpu() if torch.is_tensor(pos) else pos)
        for a, b_ in zip(got, want):
            assert a.device == q.device
            torch.testing.assert_close(a.cpu(), b_, rtol=0, atol=2e-6)
        _check(got[0], _ref(q, pos, layout, 32), torch.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_scaled_rope_and_attention_factor(device):
    yarn = {"rope_type": "yarn", "rope_theta": 1e6, "factor": 8.0,
            "original_max_position_embeddings": 64}
    rope = RotaryEmbedding(32, layout="half", rope_parameters=yarn,
                           max_position_embeddings=512, backend="triton")
    assert rope.attention_factor != 1.0
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, 2, 3, 32, generator=g).to(device)
    k = torch.randn(1, 2, 3, 32, generator=g).to(device)
    pos = torch.tensor([0, 300, 511], device=device)
    got_q, _ = rope(q, k, positions=pos)
    want = _ref(q, pos, "half", 32, scale=rope.attention_factor,
                inv_freq=rope._inv_freq.numpy())
    _check(got_q, want, torch.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_inplace_leaves_the_unrotated_features(device, layout):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 3, 4, 48, generator=g).to(device)
    k = torch.randn(2, 1, 4, 48, generator=g).to(device)
    q0, k0 = q.clone(), k.clone()
    rope = RotaryEmbedding(32, layout=layout, rotary_slice="last", backend="triton")
    out = rope(q, k, positions=[3, 4, 5, 6], inplace=True)
    assert out[0] is q and out[1] is k
    torch.testing.assert_close(q[..., :16], q0[..., :16], rtol=0, atol=0)
    _check(q, _ref(q0, [3, 4, 5, 6], layout, 32, 16), torch.float32)
    _check(k, _ref(k0, [3, 4, 5, 6], layout, 32, 16), torch.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_backward_is_the_inverse_rotation(device, layout):
    g = torch.Generator().manual_seed(4)
    q = torch.randn(1, 2, 5, 16, generator=g).to(device).requires_grad_()
    k = torch.randn(1, 1, 5, 16, generator=g).to(device).requires_grad_()
    gq = torch.randn(1, 2, 5, 16, generator=g).to(device)
    gk = torch.randn(1, 1, 5, 16, generator=g).to(device)
    pos = torch.tensor([0, 3, 9, 27, 81], device=device)
    rope = RotaryEmbedding(16, layout=layout, backend="triton")
    oq, ok = rope(q, k, positions=pos)
    torch.autograd.backward((oq, ok), (gq, gk))
    _check(q.grad, _ref(gq, pos, layout, 16, inverse=True), torch.float32)
    _check(k.grad, _ref(gk, pos, layout, 16, inverse=True), torch.float32)


@pytest.mark.parametrize("layout", [True, False])
def test_gradcheck_float64_reference_path(layout):
    """The operators' autograd in float64 (the reference formula: no kernel for
    float64), by finite differences."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, 2, 3, 8, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 1, 3, 8, generator=g, dtype=torch.float64, requires_grad=True)
    freqs = _freqs(8, scale=1.3)
    pos = torch.tensor([1, 5, 40])
    assert torch.autograd.gradcheck(
        lambda a, b: _fused._rope_qk_op(a, b, pos, 0, freqs, layout, 0, False), (q, k))
    assert torch.autograd.gradcheck(
        lambda a: _fused._rope_op(a, None, 7, freqs, layout, 0, False), (q,))


@pytest.mark.parametrize("device", DEVICES)
def test_apply_rope_kernel_entry(device):
    """posenc.apply_rope / apply_rope_ of a CUDA tensor: the route's kernel entry."""
    from posenc.torch._apply import rope
    from posenc.torch._tables import PlainRope

    def apply_rope_fused(x, pos, base, layout, r, inplace):
        return rope((x,), (0,), pos, PlainRope(r, base), r, layout,
                    outs=(x,) if inplace else None, backend="triton")[0]

    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 3, 6, 16, generator=g).to(device)
    for layout in ("half", "interleaved"):
        y = apply_rope_fused(x, [5, 6, 7, 8, 9, 10], 500.0, layout, 12, False)
        want = posenc.apply_rope(x.double().cpu().numpy(), [5, 6, 7, 8, 9, 10], base=500.0,
                                 layout=layout, rotary_dim=12)
        _check(y, want, torch.float32)
        x2 = x.clone()
        assert apply_rope_fused(x2, None, 500.0, layout, 16, True) is x2
        _check(x2, posenc.apply_rope(x.double().cpu().numpy(), base=500.0, layout=layout),
               torch.float32)


def test_custom_ops_are_registered_with_fake_kernels():
    """torch.compile and torch.export see one opaque operator with a fake kernel."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert hasattr(torch.ops.posenc, "rope_qk") and hasattr(torch.ops.posenc, "rope_qk_")
    with FakeTensorMode():
        q = torch.empty(2, 4, 8, 16)
        k = torch.empty(2, 1, 8, 16)
        oq, ok = torch.ops.posenc.rope_qk(q, k, None, 0, torch.empty(9, dtype=torch.float64),
                                          True, 0, False)
        assert oq.shape == q.shape and ok.shape == k.shape
    torch.library.opcheck(torch.ops.posenc.rope_qk.default, (
        torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8), torch.tensor([1, 2, 3]), 0,
        _freqs(8), True, 0, False))
    torch.library.opcheck(torch.ops.posenc.rope.default, (
        torch.randn(1, 2, 3, 8), None, 4, _freqs(8), False, 0, False))


def test_export_keeps_the_operator():
    class M(torch.nn.Module):
        def forward(self, q, k, pos):
            return _fused._rope_qk_op(q, k, pos, 0, _freqs(8), True, 0, False)

    q, k, pos = torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8), torch.tensor([0, 1, 2])
    ep = torch.export.export(M(), (q, k, pos))
    assert "posenc.rope_qk" in str(ep.graph)
    torch.testing.assert_close(ep.module()(q, k, pos)[0], M()(q, k, pos)[0])


def test_backend_errors_name_the_rule():
    with pytest.raises(ValueError, match="backend must be"):
        RotaryEmbedding(8, backend="cuda")
    rope = RotaryEmbedding(8, backend="triton")
    if not INTERPRET:  # compiled Triton: CPU tensors are refused with the rule
        with pytest.raises(ValueError, match="runs on CUDA tensors"):
            rope(torch.randn(1, 1, 2, 8), torch.randn(1, 1, 2, 8))
    q = torch.randn(1, 1, 2, 8, dtype=torch.float64)
    # float64 is not a kernel dtype: the torch path, same result as backend="torch"
    torch.testing.assert_close(rope(q, q)[0], RotaryEmbedding(8, backend="torch")(q, q)[0])
    rows = torch.zeros(3, 2, dtype=torch.long)
    x = torch.randn(2, 1, 2, 8, device=DEVICES[0])
    with pytest.raises(ValueError, match=r"positions of shape \(3, 2\)"):
        rope(x, x, positions=rows)


def test_compiled_model_calls_one_opaque_operator():
    """Inside torch.compile the module is one call of posenc::rope_qk: the compiler gets
    no float64 angle arithmetic to inline into its loops."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    rope = RotaryEmbedding(16, layout="half", backend="triton")

    def f(q, k, pos):
        a, b = rope(q, k, positions=pos)
        return a * 2, b

    g = torch.Generator().manual_seed(7)
    dev = DEVICES[0]
    q = torch.randn(1, 2, 4, 16, generator=g).to(dev)
    k = torch.randn(1, 1, 4, 16, generator=g).to(dev)
    pos = torch.tensor([0, 2, 4, 6], device=dev)
    got = torch.compile(f, backend=backend, fullgraph=True)(q, k, pos)
    torch.testing.assert_close(got[0], f(q, k, pos)[0])
    text = "\n".join(graphs)
    assert "posenc.rope_qk" in text
    assert "cos" not in text.replace("posenc", "") and "sin" not in text


def test_operators_are_triton_ops_where_triton_is_installed():
    """posenc::rope* are torch.library.triton_op operators (their bodies launch the kernel
    through wrap_triton), so AOTAutograd can hand Inductor the kernel itself."""
    from torch._library.triton import triton_ops_to_kernels
    from torch._subclasses.functional_tensor import FunctionalTensorMode

    for name, op in (("posenc::rope", _fused._rope_op), ("posenc::rope_qk", _fused._rope_qk_op),
                     ("posenc::rope_", _fused._rope_inplace_op),
                     ("posenc::rope_qk_", _fused._rope_qk_inplace_op)):
        assert name in triton_ops_to_kernels, name
        assert FunctionalTensorMode in op._torch_dispatch_fns, name


def test_opcheck_of_the_inplace_operators():
    """opcheck (schema, fake kernel, autograd registration, AOT dispatch) of the in-place
    triton_ops, with positions as a run and as per-sample rows."""
    torch.library.opcheck(torch.ops.posenc.rope_qk_.default, (
        torch.randn(2, 2, 3, 8), torch.randn(2, 1, 3, 8), torch.tensor([[1, 2, 3], [7, 0, 5]]),
        0, _freqs(8), False, 0, False))
    torch.library.opcheck(torch.ops.posenc.rope_.default, (
        torch.randn(1, 2, 3, 12), None, 4, _freqs(8), True, 4, True))


@pytest.mark.parametrize("inplace", [False, True])
def test_compiled_call_through_aot_autograd_matches_eager(inplace):
    """torch.compile with AOTAutograd (backend 'aot_eager': the graph Inductor would get,
    run eagerly) of the module on the kernel path, in place and out of place, forward and
    backward: the functionalised triton_ops give the eager results."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(8)
    dev = DEVICES[0]
    rope = RotaryEmbedding(16, layout="interleaved", rotary_slice="first", backend="triton")
    q0 = torch.randn(2, 2, 4, 24, generator=g).to(dev)
    k0 = torch.randn(2, 1, 4, 24, generator=g).to(dev)
    pos = torch.tensor([3, 1, 4, 1], device=dev)

    def f(q, k):
        if inplace:
            q, k = q * 1, k * 1  # non-leaf copies: in place on them is allowed
        a, b = rope(q, k, positions=pos, inplace=inplace)
        return a * 2, b

    want = f(q0, k0)
    got = torch.compile(f, backend="aot_eager", fullgraph=True)(q0, k0)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    if not inplace:
        qg = q0.clone().requires_grad_()
        out = torch.compile(f, backend="aot_eager", fullgraph=True)(qg, k0)
        out[0].sum().backward()
        qe = q0.clone().requires_grad_()
        f(qe, k0)[0].sum().backward()
        torch.testing.assert_close(qg.grad, qe.grad, rtol=0, atol=1e-6)


_FAKE_CUDA_GRAPH = r"""
import os
os.environ["TRITON_INTERPRET"] = "0"  # compiled Triton: kernels are JITFunctions
import torch
from functorch.compile import aot_function, make_boxed_func
from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
from torch._subclasses.fake_tensor import FakeTensorMode
from posenc.torch import _fused, _triton

graphs = []

def capture(gm, example_inputs):
    graphs.append(gm)
    return make_boxed_func(gm.forward)

def f(q, k, pos, freqs):
    return _fused._rope_qk_op(q, k, pos, 0, freqs, True, 0, False)

with FakeTensorMode(allow_non_fake_inputs=True):
    q = torch.empty(2, 8, 4, 64, device="cuda").transpose(1, 2)  # (B, T, H, D) storage
    k = torch.empty(2, 1, 8, 64, device="cuda")
    pos = torch.empty(2, 8, dtype=torch.long, device="cuda")
    freqs = torch.empty(33, dtype=torch.float64, device="cuda")
    try:
        aot_function(f, fw_compiler=capture)(q, k, pos, freqs)
    except RuntimeError as e:  # running the graph needs a CUDA build of PyTorch
        assert "cuda" in str(e).lower(), e
(gm,) = graphs
nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
names = [str(n.target) for n in nodes]
hop = [n for n in nodes if "triton_kernel_wrapper_functional" in str(n.target)]
assert len(hop) == 1, names
kernel = kernel_side_table.get_kernel(hop[0].kwargs["kernel_idx"])
assert getattr(kernel, "fn", kernel) is _triton._rope_kernel, kernel  # (Autotuner).fn
assert not [n for n in names if "posenc" in n or "cos" in n or "sin" in n], names

# a symbolic sequence length (torch.compile with dynamic shapes): still the kernel, with
# the length and the grid as graph values rather than constants
from torch._dynamo.source import ConstantSource
from torch.fx.experimental.symbolic_shapes import ShapeEnv

mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
env = mode.shape_env
t = env.create_symintnode(env.create_symbol(8, ConstantSource("t")), hint=8)
with mode:
    q = torch.empty(2, 4, t, 64, device="cuda")
    k = torch.empty(2, 1, t, 64, device="cuda")
    pos = torch.empty(t, dtype=torch.long, device="cuda")
    freqs = torch.empty(33, dtype=torch.float64, device="cuda")
    try:
        aot_function(f, fw_compiler=capture, dynamic=True)(q, k, pos, freqs)
    except RuntimeError as e:
        assert "cuda" in str(e).lower(), e
hop = [n for n in graphs[-1].graph.nodes if "triton_kernel_wrapper_functional" in str(n.target)]
assert len(hop) == 1 and len(graphs) == 2
assert isinstance(hop[0].kwargs["kwargs"]["T"], torch.fx.Node), hop[0].kwargs
assert isinstance(hop[0].kwargs["grid"][0][0], torch.fx.Node), hop[0].kwargs["grid"]
print("KERNEL-IN-GRAPH", len(nodes))
"""


def test_compiled_graph_holds_the_triton_kernel_itself(tmp_path):
    """What Inductor receives on CUDA: AOTAutograd's graph of a posenc::rope_qk call on
    (fake) CUDA tensors holds one triton_kernel_wrapper_functional node running posenc's
    kernel, and no posenc operator, cos or sin: Inductor launches the kernel from its
    generated code.  Traced without a GPU (FakeTensorMode) in a fresh process, since the
    kernel must be a compiled-Triton JITFunction, not the interpreter's function.  With a
    symbolic sequence length too (torch.compile's dynamic shapes)."""
    import subprocess
    import sys

    script = tmp_path / "graph.py"
    script.write_text(_FAKE_CUDA_GRAPH)
    env = dict(os.environ, TRITON_INTERPRET="0")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "KERNEL-IN-GRAPH" in proc.stdout


_WITHOUT_TRITON = r"""
import sys
sys.modules["triton"] = None  # as if Triton were not installed
import torch
from torch._library.triton import triton_ops_to_kernels
from posenc.torch import RotaryEmbedding, _fused
from posenc.sinusoidal import inverse_frequencies

assert not _fused.available()
assert "posenc::rope_qk" not in triton_ops_to_kernels  # plain custom_op operators
freqs = _fused.freq_buffer(torch.from_numpy(inverse_frequencies(8)), 1.0)
torch.library.opcheck(torch.ops.posenc.rope_qk.default, (
    torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8), torch.tensor([1, 2, 3]), 0, freqs,
    True, 0, False))
torch.library.opcheck(torch.ops.posenc.rope_.default, (
    torch.randn(1, 2, 3, 8), None, 2, freqs, False, 0, False))
ep = torch.export.export(RotaryEmbedding(8, backend="auto"),
                         (torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8)))
print("CUSTOM-OP-OK")
"""


def test_operators_without_triton_are_custom_ops(tmp_path):
    """Without Triton the operators are torch.library.custom_op ones with fake kernels,
    and pass opcheck (a fresh process, Triton hidden from the import system)."""
    import subprocess
    import sys

    script = tmp_path / "no_triton.py"
    script.write_text(_WITHOUT_TRITON)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CUSTOM-OP-OK" in proc.stdout



#: compiles the kernel for an H100 (sm_90) in a process without Triton's interpreter (the
#: test session runs kernels interpreted, and an interpreted kernel cannot be compiled);
#: argv[1] is a JSON list of [dtype, configuration index, extra constexprs]
_AOT_SCRIPT = r"""
import importlib.util, inspect, json, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from posenc.torch import _triton

# the kernel as torch.compile's Inductor writes it into its generated code: the source
# of the kernel and of the helpers it calls, with the imports Inductor derives from the
# kernel's globals, under the header Inductor's files start with
from torch._inductor.codegen.wrapper import (
    user_defined_triton_kernel_transitive_closure_source_code as closure)
src = "import triton\nimport triton.language as tl\n@triton.jit\n" + closure(
    _triton._rope_kernel)
path = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
path.write(src)
path.close()
spec = importlib.util.spec_from_file_location("inductor_copy", path.name)
inductor_copy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(inductor_copy)

out = []
for dtype, i, flags, where in json.loads(sys.argv[1]):
    kernel = inductor_copy._rope_kernel if where == "inductor" else _triton._rope_kernel
    cfg = _triton.SWEEP[i]
    h2, size = 64, {"bf16": 2, "fp16": 2, "fp32": 4}[dtype]
    block_t, block_h, *_, warps = _triton.plan(32, 8, 16384, h2, size, cfg)
    const = dict(H2=h2, BLOCK_P=h2, BLOCK_T=block_t, BLOCK_H=block_h, BLOCK_REST=1,
                 HAS_POS=False, HALF=True, INVERSE=False, COPY_REST=False,
                 TRIG=cfg["trig"], LIBDEVICE=True)
    const.update(flags)
    ptrs = {n: "*" + dtype for n in ("q_ptr", "k_ptr", "oq_ptr", "ok_ptr")}
    ptrs.update(pos_ptr="*i64", inv_ptr="*fp64")
    sig = {n: ptrs.get(n, "constexpr" if n in const else "i64")
           for n in inspect.signature(kernel.fn).parameters}
    try:
        k = triton.compile(ASTSource(fn=kernel, signature=sig, constexprs=const),
                           target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    except Exception as e:
        msgs = []
        while e is not None:
            msgs.append(f"{type(e).__name__}: {e}"[-400:])
            e = e.__cause__
        out.append({"error": " <- ".join(msgs)})
        continue
    out.append({"cubin": len(k.asm["cubin"]), "ptx": k.asm["ptx"]})
print(json.dumps(out))
"""

AOT_CASES = [
    ["bf16", 0, {}, "posenc"], ["fp32", 4, {}, "posenc"], ["bf16", 9, {}, "posenc"],
    ["fp16", 13, {}, "posenc"], ["bf16", 1, {"HALF": False}, "posenc"],
    ["fp32", 2, {"HAS_POS": True, "INVERSE": True}, "posenc"],
    ["bf16", 4, {"COPY_REST": True, "BLOCK_REST": 32}, "posenc"],
    # as Inductor compiles it inside torch.compile (both trigonometry modes)
    ["bf16", 4, {}, "inductor"], ["fp32", 9, {"HAS_POS": True}, "inductor"],
]


def test_kernel_builds_for_an_h100_without_a_gpu():
    """Every trigonometry mode and the launch's variants compile to sm_90 machine code,
    as posenc launches the kernel and as Inductor copies it into a compiled graph's code:
    Triton's compiler runs without a GPU, so errors the interpreter cannot see (a module
    global read inside the kernel, a name Inductor's copy lacks, a type the GPU backend
    rejects) fail here, not on the first GPU that meets them."""
    import json
    import subprocess
    import sys

    from posenc.torch import _triton

    env = dict(os.environ, TRITON_INTERPRET="0", TRITON_DEFAULT_FP_FUSION="1")
    run = subprocess.run([sys.executable, "-c", _AOT_SCRIPT, json.dumps(AOT_CASES)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    for (dtype, i, flags, where), res in zip(AOT_CASES, results, strict=True):
        assert "error" not in res, (dtype, i, flags, where, res.get("error"))
        assert res["cubin"] > 0
        if _triton.SWEEP[i]["trig"] == 32:  # 2 pi as a float64 immediate (either sign)
            assert "01921FB54442D18" in res["ptx"] and "fma.rn.f64" in res["ptx"]  # +-2 pi
