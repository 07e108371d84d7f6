"""RotaryEmbedding(rotary_slice=...): the rotated part of a wider head, where real models
put it.  "last" is DeepSeek's multi-head latent attention (the query head is
[no-position part, rotated part], the rotated key is shared and only that wide), checked
against transformers' DeepSeek-V3 code on a tiny random configuration; "first" is partial
rotary as GPT-NeoX places it, checked against posenc.apply_rope(rotary_dim=...)."""

from __future__ import annotations

import warnings

import pytest
import torch

from posenc import apply_rope
from posenc.torch import RotaryEmbedding

YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "mscale": 1.0,
        "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1,
        "original_max_position_embeddings": 64}


def _deepseek(rope_parameters, nope=16, rope=8):
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = DeepseekV3Config(
            hidden_size=32, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=None,
            kv_lora_rank=16, qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=8,
            num_hidden_layers=1, vocab_size=64, max_position_embeddings=64 * 40,
            rope_parameters=dict(rope_parameters), rope_interleave=True,
        )
    return config, hf


@pytest.mark.parametrize("rope_parameters", [
    {"rope_type": "default", "rope_theta": 10000.0}, YARN,
    # mscale_all_dim 0: the attention factor is not 1 and multiplies cos and sin
    {**YARN, "mscale_all_dim": 0.0}])
def test_last_slice_gives_deepseek_v3_scores(rope_parameters):
    config, hf = _deepseek(rope_parameters)
    nope, rot = config.qk_nope_head_dim, config.qk_rope_head_dim
    torch.manual_seed(0)
    seq = 7
    positions = torch.arange(1000, 1000 + seq)
    q = torch.randn(1, 2, seq, nope + rot)
    k_nope, k_rot = torch.randn(1, 2, seq, nope), torch.randn(1, 1, seq, rot)
    # transformers: cos/sin of its rotary module, then the interleaved rotation
    cos, sin = hf.DeepseekV3RotaryEmbedding(config)(q, positions[None])
    q_hf, k_hf = hf.apply_rotary_pos_emb_interleave(q[..., nope:], k_rot, cos, sin)
    scores_hf = (q[..., :nope] @ k_nope.transpose(-1, -2)
                 + q_hf @ k_hf.expand(1, 2, seq, rot).transpose(-1, -2))
    # posenc: the whole query head and the whole key head, the last `rot` features rotated
    mla = RotaryEmbedding(rot, layout="interleaved", rotary_slice="last",
                          rope_parameters=rope_parameters,
                          max_position_embeddings=config.max_position_embeddings)
    k_full = torch.cat([k_nope, k_rot.expand(1, 2, seq, rot)], dim=-1)
    q2, k2 = mla(q, k_full, positions=positions)
    assert mla.attention_factor == pytest.approx(
        hf.DeepseekV3RotaryEmbedding(config).attention_scaling)
    assert torch.equal(q2[..., :nope], q[..., :nope])
    assert torch.equal(k2[..., :nope], k_nope)
    torch.testing.assert_close(q2 @ k2.transpose(-1, -2), scores_hf, rtol=1e-4, atol=1e-4)
    # the rotated features themselves: transformers returns them in the half layout's order
    order = torch.cat([torch.arange(0, rot, 2), torch.arange(1, rot, 2)])
    torch.testing.assert_close(q2[..., nope:][..., order], q_hf, rtol=1e-5, atol=1e-5)
    # the shared key alone (as wide as dim) is rotated whole
    _, k_alone = mla(q, k_rot, positions=positions)
    torch.testing.assert_close(k_alone[..., order], k_hf, rtol=1e-5, atol=1e-5)


def test_first_slice_is_partial_rotary():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 5, 16)
    rope = RotaryEmbedding(4, layout="half", rotary_slice="first")
    q, k = rope(x, x)
    torch.testing.assert_close(q, apply_rope(x, layout="half", rotary_dim=4), rtol=0, atol=1e-6)
    assert torch.equal(k[..., 4:], x[..., 4:])


def test_slice_under_compile_and_vmap():
    torch.manual_seed(2)
    rope = RotaryEmbedding(8, rotary_slice="last")
    q, k = torch.randn(3, 2, 5, 24), torch.randn(3, 1, 5, 8)
    positions = torch.stack([torch.arange(5) + 100 * i for i in range(3)])
    per_sample = torch.func.vmap(rope)(q, k, positions)
    loop = [rope(q[i], k[i], positions=positions[i]) for i in range(3)]
    for got, want in zip(per_sample, zip(*loop)):
        torch.testing.assert_close(got, torch.stack(want))
    compiled = torch.compile(rope, fullgraph=True)
    for got, want in zip(compiled(q[0], k[0], positions[0]), loop[0]):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("bad, match", [
    (dict(rotary_slice="middle"), "rotary_slice must be 'all', 'first' or 'last'"),
    (dict(rotary_slice=None), "rotary_slice must be"),
])
def test_bad_rotary_slice(bad, match):
    with pytest.raises(ValueError, match=match):
        RotaryEmbedding(8, **bad)


def test_narrower_than_dim_is_an_error_naming_the_rule():
    rope = RotaryEmbedding(8, rotary_slice="last")
    with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., seq, >= dim=8\)"):
        rope(torch.randn(1, 5, 6), torch.randn(1, 5, 8))
    with pytest.raises(ValueError, match=r"k must have shape \(\.\.\., seq, dim=8\)"):
        RotaryEmbedding(8)(torch.randn(1, 5, 8), torch.randn(1, 5, 12))


def test_repr_names_the_slice():
    assert "rotary_slice='last'" in repr(RotaryEmbedding(8, rotary_slice="last"))
    assert "rotary_slice" not in repr(RotaryEmbedding(8))


def test_slice_after_meta_init_in_inference_mode_and_from_threads():
    import threading

    torch.manual_seed(3)
    ref = RotaryEmbedding(8, rotary_slice="last")
    q, k = torch.randn(1, 2, 5, 24), torch.randn(1, 1, 5, 8)
    want = ref(q, k)
    with torch.device("meta"):
        meta = RotaryEmbedding(8, rotary_slice="last")
    real = meta.to_empty(device="cpu")
    assert all(torch.equal(a, b) for a, b in zip(real(q, k), want))
    with torch.inference_mode():
        assert all(torch.equal(a, b) for a, b in zip(ref(q, k), want))
    assert [t.shape for t in ref(q.to("meta"), k.to("meta"))] == [q.shape, k.shape]
    results = []

    def run():
        results.append(all(torch.equal(a, b) for a, b in zip(ref(q, k), want)))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4
