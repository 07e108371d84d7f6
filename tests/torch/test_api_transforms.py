"""The API page's table of transforms is what the code does.

``docs/en/api.md`` and ``docs/zh/api.md`` carry one table: a row per public torch entry
point, a column per transform (``vmap`` over per-sample inputs, ``grad``, ``jvp``,
``torch.compile(fullgraph=True)``, ``torch.export``, meta tensors), ✓ where it works, ✗
where it raises (the row says which error), — where it does not apply (no tensor input).
This test runs every cell and checks each ✓ against eager results (vmap against a loop
over the samples, grad against eager autograd, jvp against a central difference, compile
and export against eager, export also at other positions than the traced ones, meta by
shape), each ✗ by its error, and that both languages' tables carry the same marks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import torch
from torch import nn

import posenc
import posenc.torch as pt

pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")

ROOT = Path(__file__).resolve().parents[2]
TRANSFORMS = ("vmap", "grad", "jvp", "compile", "export", "meta")
LONGROPE = {"rope_type": "longrope", "rope_theta": 10000.0,
            "short_factor": [1.0, 1.5, 2.0, 2.5], "long_factor": [4.0, 8.0, 16.0, 32.0],
            "original_max_position_embeddings": 50}
DYNAMIC = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}


@dataclass
class Case:
    fn: Callable[..., torch.Tensor]   # tensors -> one tensor
    args: tuple                       # its tensor arguments (float input first if any)
    diff: int | None = 0              # which argument grad/jvp differentiate, None: no float
    modules: tuple = ()               # modules whose parameters export must see


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _x(*shape, dtype=torch.float64, device="cpu"):
    return torch.randn(*shape, generator=_g(), dtype=dtype).to(device)


def _rope_module(params=None, **kw):
    return pt.RotaryEmbedding(8, layout="half", rope_parameters=params,
                              max_position_embeddings=256 if params else None, **kw)


def _case(name, device, dtype):
    """The entry point ``name`` as a function of tensors on ``device``."""
    x = lambda *s: _x(*s, dtype=dtype, device=device)  # noqa: E731
    pos = torch.tensor([3, 1, 60, 7], device=device)
    if name == "apply_rope":
        return Case(lambda a, p: posenc.apply_rope(a, p, layout="half"), (x(2, 4, 8), pos))
    if name == "apply_rope_":  # in place (on a copy, so that the input stays)
        return Case(lambda a, p: posenc.apply_rope_(a.clone(), p, layout="half"),
                    (x(2, 4, 8), pos))
    if name == "compiled_apply_rope":
        return Case(lambda a, p: pt.compiled_apply_rope(a, p), (x(2, 4, 8), pos))
    if name.startswith("RotaryEmbedding"):
        params = {"RotaryEmbedding": None, "RotaryEmbedding longrope": LONGROPE,
                  "RotaryEmbedding dynamic": DYNAMIC}[name]
        rope = _rope_module(params).to(device)
        return Case(lambda a, p: rope(a, a, p)[0], (x(2, 4, 8), pos), modules=(rope,))
    if name == "apply_rope_2d":
        rows, cols = (torch.as_tensor(t).to(device) for t in posenc.grid_positions(2, 2))
        return Case(lambda a, r, c: posenc.apply_rope_2d(a, r, c), (x(2, 4, 8), rows, cols))
    if name == "apply_mrope":
        ids = torch.as_tensor(posenc.mrope_position_ids([1, (1, 3)]))[:, None].to(device)
        return Case(lambda a, i: posenc.apply_mrope(a, i, mrope_section=[2, 1, 1]),
                    (x(1, 2, 4, 8), ids))
    if name == "resample_position_grid":
        return Case(lambda t: posenc.resample_position_grid(t, (2, 2), (3, 3)), (x(4, 3),))
    if name == "SinusoidalPositionalEncoding":
        enc = pt.SinusoidalPositionalEncoding(8, max_len=16).to(device)
        return Case(enc, (x(2, 4, 8),), modules=(enc,))
    if name == "LearnedPositionalEmbedding":
        emb = pt.LearnedPositionalEmbedding(16, 8).to(device=device, dtype=dtype)
        return Case(lambda a: emb(a, 2), (x(2, 4, 8),), modules=(emb,))
    if name == "ShawRelativeAttention":
        att = pt.ShawRelativeAttention(8, 2, max_relative_position=3).to(device=device,
                                                                           dtype=dtype)
        return Case(lambda a: att(a, causal=True), (x(2, 4, 8),), modules=(att,))
    if name == "T5RelativePositionBias":
        t5 = pt.T5RelativePositionBias(2, num_buckets=8, max_distance=16).to(device=device,
                                                                            dtype=dtype)
        return Case(lambda w: torch.func.functional_call(
            t5, {"relative_attention_bias.weight": w}, (4, 5)),
            (t5.relative_attention_bias.weight.detach().clone(),), modules=(t5,))
    if name == "ALiBiBias":
        ali = pt.ALiBiBias(2)
        return Case(lambda: ali(4, 5, device=device, dtype=dtype), (), diff=None)
    if name == "t5_relative_position_bucket_torch":
        return Case(lambda r: pt.t5_relative_position_bucket_torch(r, num_buckets=8,
                                                                   max_distance=16),
                    (torch.arange(-6, 6, device=device),), diff=None)
    raise KeyError(name)


ENTRY_POINTS = (
    "apply_rope", "apply_rope_", "compiled_apply_rope", "RotaryEmbedding", "RotaryEmbedding longrope",
    "RotaryEmbedding dynamic", "apply_rope_2d", "apply_mrope", "resample_position_grid",
    "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding", "ShawRelativeAttention",
    "T5RelativePositionBias", "ALiBiBias", "t5_relative_position_bucket_torch",
)


def _other(a):
    """Another sample of the same kind: other positions, other values."""
    return a + 37 if not a.is_floating_point() else 0.5 * a + 1


def _check(name, transform):
    """Run one cell: None if it works (checked against the eager result), the exception
    if it raises, "n/a" if it does not apply."""
    c = _case(name, "cpu", torch.float64)
    try:
        if transform == "vmap":
            if not c.args:
                return "n/a"
            batched = [torch.stack([a, _other(a)]) for a in c.args]
            got = torch.func.vmap(c.fn)(*batched)
            loop = torch.stack([c.fn(*[b[i] for b in batched]) for i in range(2)])
            torch.testing.assert_close(got, loop)
        elif transform in ("grad", "jvp"):
            if c.diff is None:
                return "n/a"
            a = c.args[c.diff]

            def f(v):
                return c.fn(*c.args[:c.diff], v, *c.args[c.diff + 1:])

            if transform == "grad":
                got = torch.func.grad(lambda v: f(v).square().sum())(a)
                leaf = a.detach().clone().requires_grad_(True)
                want, = torch.autograd.grad(f(leaf).square().sum(), leaf)
                torch.testing.assert_close(got, want)
            else:
                t = torch.randn(a.shape, generator=_g(5), dtype=a.dtype)
                _, tangent = torch.func.jvp(f, (a,), (t,))
                eps = 1e-6
                want = (f(a + eps * t) - f(a - eps * t)) / (2 * eps)
                torch.testing.assert_close(tangent, want, rtol=1e-6, atol=1e-6)
        elif transform == "compile":
            torch._dynamo.reset()
            c32 = _case(name, "cpu", torch.float32)
            got = torch.compile(c32.fn, fullgraph=True)(*c32.args)
            torch.testing.assert_close(got, c32.fn(*c32.args), rtol=0, atol=1e-5)
        elif transform == "export":
            c32 = _case(name, "cpu", torch.float32)

            class Wrap(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.held = nn.ModuleList(c32.modules)

                def forward(self, *args):
                    return c32.fn(*args)

            program = torch.export.export(Wrap(), tuple(c32.args))
            for args in (c32.args, tuple(_other(a) for a in c32.args)):
                torch.testing.assert_close(program.module()(*args), c32.fn(*args),
                                           rtol=0, atol=1e-5)
        elif transform == "meta":
            real = c.fn(*c.args)
            m = _case(name, "meta", torch.float64)
            out = m.fn(*m.args)
            assert out.is_meta and out.shape == real.shape, (out.device, out.shape)
    except Exception as e:  # noqa: BLE001 - the table records which error
        return e
    return None


def _doc_table(lang):
    """``{entry point: {transform: mark}}`` from the table of ``docs/<lang>/api.md``."""
    text = (ROOT / "docs" / lang / "api.md").read_text()
    start = text.index("<!-- transforms-table -->")
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.match(r"`([\w.]+)`", cells[0])
        if not m:
            continue
        name, qualifier = m.group(1).split(".")[-1], cells[0][m.end():]
        if "longrope" in qualifier:
            name += " longrope"
        elif "dynamic" in qualifier:
            name += " dynamic"
        rows[name] = dict(zip(TRANSFORMS, [c[0] for c in cells[1:7]]))
    return rows


#: The errors the ✗ cells name (entry point, transform) -> (type, message fragment).
EXPECTED_ERRORS = {
    ("RotaryEmbedding dynamic", "vmap"): (ValueError, "cannot be vmapped over per-sample"),
    ("RotaryEmbedding dynamic", "compile"): (Exception, "dynamic"),
    ("RotaryEmbedding dynamic", "export"): (ValueError, "cannot be traced"),
}


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_each_cell_of_the_table(name, transform):
    table = _doc_table("en")
    assert name in table, f"{name} has no row in the API page's transforms table"
    mark = table[name][transform]
    result = _check(name, transform)
    if mark == "✓":
        assert result is None, f"{name} under {transform}: {result!r}"
    elif mark == "—":
        assert result == "n/a"
    else:
        assert mark == "✗", mark
        kind, fragment = EXPECTED_ERRORS[(name, transform)]
        assert isinstance(result, kind) and fragment in str(result), repr(result)


def test_both_languages_carry_the_same_table():
    en, zh = _doc_table("en"), _doc_table("zh")
    assert set(en) == set(ENTRY_POINTS)
    assert en == zh
