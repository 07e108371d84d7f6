"""Every boolean argument of the public API takes a real bool only.

On commit 8049155 ``apply_mrope(..., interleaved="false")`` selected Qwen3-VL's split (a
different model) and ``resample_position_grid(..., antialias="false")`` turned
antialiasing on, through ``bool(...)``.  Every flag now goes through one helper,
``posenc._validation.check_bool``: a Python ``bool`` or a NumPy ``bool_``, anything else
a ``TypeError`` naming the argument.

The test walks the public API by introspection (the ``__all__`` of ``posenc`` and of
every public module below it; functions, class constructors, ``forward`` and
``__call__``) and finds every parameter annotated ``bool`` or with a ``bool`` default.
Each must have a valid call in :data:`CALLS` (a new flag without one fails the test), and
that call with the flag set to ``"false"``, ``"true"``, ``0``, ``1`` or ``None`` must raise
a ``TypeError`` whose message names the flag, while ``True``, ``False``,
``numpy.True_`` and ``numpy.False_`` are accepted.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt

#: Every public module: ``posenc``, and each module below it without a private part.
MODULES = [posenc] + [
    importlib.import_module(m.name)
    for m in pkgutil.walk_packages(posenc.__path__, "posenc.")
    if not any(part.startswith("_") for part in m.name.split("."))
]


def _bool_parameters():
    """``{(qualified name, parameter): callable}`` for every boolean parameter."""
    found = {}
    for mod in MODULES:
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if inspect.isclass(obj):
                targets = [(f"{name}.__init__", obj.__init__)] + [
                    (f"{name}.{m}", obj.__dict__[m]) for m in ("forward", "__call__")
                    if m in obj.__dict__]
            elif callable(obj):
                targets = [(name, obj)]
            else:
                continue
            for qual, fn in targets:
                try:
                    sig = inspect.signature(fn)
                except (TypeError, ValueError):
                    continue
                for p in sig.parameters.values():
                    if isinstance(p.default, bool) or p.annotation in ("bool", bool):
                        found[(qual, p.name)] = fn
    return found


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def _ids():
    return torch.as_tensor(posenc.mrope_position_ids([1, (1, 2)]))[:, None]  # (3, 1, 3)


def _verdict(passed):
    from posenc.analysis.requirements import Verdict

    return Verdict(passed, 0.0, 1.0, "ok")


def _table(show_scores):
    from posenc.analysis import requirements as R

    scores = R.score_requirements({"index": R.standard_encodings(4)["index"]})
    return R.requirements_table(scores, "en", show_scores=show_scores)


_SHAW = pt.ShawRelativeAttention(8, 2, max_relative_position=2)

#: A valid call for each boolean parameter, as a function of the flag's value.
CALLS = {
    ("scaled_dot_product_attention", "causal"):
        lambda v: posenc.scaled_dot_product_attention(np.ones((2, 4)), np.ones((2, 4)),
                                                      np.ones((2, 4)), causal=v),
    ("SelfAttention.__call__", "causal"):
        lambda v: posenc.SelfAttention(4, seed=0)(np.ones((3, 4)), causal=v),
    ("alibi_bias", "causal"): lambda v: posenc.alibi_bias(3, 2, causal=v),
    ("t5_relative_position_bucket", "bidirectional"):
        lambda v: posenc.t5_relative_position_bucket([1, -1], bidirectional=v),
    ("t5_bucket_layout", "bidirectional"):
        lambda v: posenc.t5_bucket_layout(bidirectional=v),
    ("resample_position_grid", "antialias"):
        lambda v: posenc.resample_position_grid(np.ones((4, 2)), (2, 2), (3, 3), antialias=v),
    ("rope_mixed_frequencies", "rotate"):
        lambda v: posenc.rope_mixed_frequencies(8, rotate=v),
    ("RoPEMixed.__init__", "rotate"):
        lambda v: pt.RoPEMixed(8, 2, rotate=v),
    ("reflow_figure", "stack"):
        lambda v: __import__("posenc.figures", fromlist=["x"]).reflow_figure(
            __import__("posenc.figures", fromlist=["x"]).new_figure(1, 2)[0], 300, stack=v),
    ("figure_variants", "phone"):
        lambda v: __import__("posenc.figures", fromlist=["x"]).figure_variants(
            __import__("posenc.figures", fromlist=["x"]).new_figure()[0], phone=v),
    ("encoding_pipeline", "column"):
        lambda v: __import__("posenc.figures", fromlist=["x"]).encoding_pipeline(column=v),
    ("BookTable.__init__", "wide"):
        lambda v: __import__("posenc.figures._tables", fromlist=["BookTable"]).BookTable(
            ["a"], [["x"]], wide=v),
    ("mrope_pair_components", "interleaved"):
        lambda v: posenc.mrope_pair_components([2, 1, 1], interleaved=v),
    ("apply_mrope", "interleaved"):
        lambda v: posenc.apply_mrope(_x(1, 1, 3, 8), _ids(), mrope_section=[2, 1, 1],
                                     interleaved=v),
    ("RotaryEmbedding.__init__", "compiled"): lambda v: pt.RotaryEmbedding(8, compiled=v),
    ("RotaryEmbedding.forward", "inplace"): lambda v: pt.RotaryEmbedding(8)(
        torch.zeros(1, 2, 8), torch.zeros(1, 2, 8), inplace=v),
    ("ShawRelativeAttention.__init__", "bias"):
        lambda v: pt.ShawRelativeAttention(8, 2, max_relative_position=2, bias=v),
    ("ShawRelativeAttention.forward", "causal"): lambda v: _SHAW(_x(1, 3, 8), causal=v),
    ("T5RelativePositionBias.__init__", "bidirectional"):
        lambda v: pt.T5RelativePositionBias(2, bidirectional=v),
    ("ALiBiBias.__init__", "causal"): lambda v: pt.ALiBiBias(2, causal=v),
    ("t5_relative_position_bucket_torch", "bidirectional"):
        lambda v: pt.t5_relative_position_bucket_torch(torch.tensor([1, -1]), bidirectional=v),
    ("Verdict.__init__", "passed"): _verdict,
    ("requirements_table", "show_scores"): _table,
    ("new_figure", "squeeze"): lambda v: _figure(v),
}


def _figure(squeeze):
    import posenc.figures as pf

    return pf.new_figure(1, 2, squeeze=squeeze)

FOUND = _bool_parameters()


def test_every_boolean_parameter_has_a_call():
    assert set(FOUND) == set(CALLS), (
        f"boolean parameters without a call in CALLS: {sorted(set(FOUND) - set(CALLS))}; "
        f"calls for parameters that are gone: {sorted(set(CALLS) - set(FOUND))}")
    assert len(FOUND) >= 16


@pytest.mark.parametrize("key", sorted(CALLS), ids=lambda k: f"{k[0]}-{k[1]}")
@pytest.mark.parametrize("bad", ["false", "true", 0, 1, None, torch.tensor(True)],
                         ids=["str-false", "str-true", "0", "1", "None", "tensor"])
def test_a_non_bool_flag_is_a_type_error_naming_it(key, bad):
    with pytest.raises(TypeError, match=rf"\b{key[1]} must be True or False"):
        CALLS[key](bad)


@pytest.mark.parametrize("key", sorted(CALLS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_real_bools_are_accepted(key):
    for good in (True, False, np.True_, np.False_):
        CALLS[key](good)


def test_a_string_flag_no_longer_selects_another_model():
    """The two silent wrong answers of 8049155, spelled out."""
    with pytest.raises(TypeError, match="interleaved"):
        posenc.apply_mrope(_x(1, 1, 3, 8), _ids(), mrope_section=[2, 1, 1],
                           interleaved="false")
    with pytest.raises(TypeError, match="antialias"):
        posenc.resample_position_grid(np.ones((4, 2)), (2, 2), (3, 3), antialias="false")
    # NumPy bools select the same as Python bools
    a = posenc.apply_mrope(_x(1, 1, 3, 8), _ids(), mrope_section=[2, 1, 1],
                           interleaved=np.False_)
    b = posenc.apply_mrope(_x(1, 1, 3, 8), _ids(), mrope_section=[2, 1, 1], interleaved=False)
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_rope_parameters_truncate_flag():
    params = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    with pytest.raises(TypeError, match=r"rope_parameters\['truncate'\] must be True or False"):
        posenc.rope_frequencies(8, {**params, "truncate": "false"})
    posenc.rope_frequencies(8, {**params, "truncate": np.False_})
