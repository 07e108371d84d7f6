"""transformers 5.23's "axial" rope type (Qwen3-VL's and GLM-4V's vision towers) against
posenc.rope_scaling.axial_frequencies and posenc.apply_rope_2d."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc
from posenc.rope_scaling import axial_frequencies


def qwen3_vl_vision(hidden=64, heads=2, theta=10000.0):
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionRotaryEmbedding

    config = Qwen3VLVisionConfig(hidden_size=hidden, num_heads=heads, depth=1,
                                 rope_parameters={"rope_type": "axial", "rope_theta": theta})
    return config, Qwen3VLVisionRotaryEmbedding(config)


def test_the_vision_config_defaults_to_axial_and_registry_lacks_it():
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.glm4v.configuration_glm4v import Glm4vVisionConfig
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig

    assert Qwen3VLVisionConfig().rope_parameters["rope_type"] == "axial"
    assert Glm4vVisionConfig().rope_parameters["rope_type"] == "axial"
    assert "axial" not in ROPE_INIT_FUNCTIONS


@pytest.mark.parametrize("hidden, heads, theta", [(64, 2, 1e4), (96, 2, 100.0), (128, 4, 5e5)])
def test_frequencies_equal_transformers(hidden, heads, theta):
    config, module = qwen3_vl_vision(hidden, heads, theta)
    omega, factor = axial_frequencies(hidden // heads, config.rope_parameters)
    np.testing.assert_allclose(omega, module.inv_freq.double().numpy(), rtol=1e-6)
    assert factor == module.attention_scaling == 1.0


def test_apply_rope_2d_half_layout_is_the_axial_rotation():
    from transformers.models.qwen3_vl.modeling_qwen3_vl import apply_rotary_pos_emb_vision

    config, module = qwen3_vl_vision(64, 2, 1e4)
    d = 32
    h, w = np.meshgrid(np.arange(5), np.arange(7), indexing="ij")
    h, w = h.ravel(), w.ravel()
    pos = torch.tensor(np.stack([h, w], axis=1))      # column 0: h, column 1: w
    x = torch.randn(h.size, 1, d, generator=torch.Generator().manual_seed(0))
    cos, sin = module(x, pos)
    hf, _ = apply_rotary_pos_emb_vision(x, x, cos, sin)
    ours = posenc.apply_rope_2d(x[:, 0].double().numpy(), rows=w, cols=h, base=1e4,
                                layout="half")
    np.testing.assert_allclose(ours, hf[:, 0].double().numpy(), atol=2e-5)
    # the obvious argument order (rows=h) is a different rotation
    swapped = posenc.apply_rope_2d(x[:, 0].double().numpy(), rows=h, cols=w, base=1e4,
                                   layout="half")
    assert np.abs(swapped - hf[:, 0].double().numpy()).max() > 0.1


@pytest.mark.parametrize("args, error, fragment", [
    ((30,), ValueError, "multiple of 4"),
    ((2.0,), TypeError, "head_dim"),
    ((16, {"rope_type": "default"}), ValueError, "must be 'axial'"),
    ((16, {"rope_theta": 1.0}), ValueError, "base"),
    ((16, [("rope_theta", 10.0)]), TypeError, "mapping"),
])
def test_bad_input(args, error, fragment):
    with pytest.raises(error, match=fragment):
        axial_frequencies(*args)
