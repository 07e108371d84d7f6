"""posenc in transformers models: RotaryEmbedding.from_config, cos_sin,
apply_rotary_pos_emb and patch, against tiny random-weight transformers models."""

import copy
import json

import numpy as np
import pytest
import torch

import posenc
import posenc.atlas
from posenc.torch import RotaryEmbedding, apply_rotary_pos_emb, patch

transformers = pytest.importorskip("transformers")
T = transformers

COMMON = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
              intermediate_size=64, vocab_size=97, initializer_range=0.3)
LONGROPE = dict(rope_theta=1e4, short_factor=[1.0 + i / 10 for i in range(8)],
                long_factor=[2.0 + i for i in range(8)])

#: name -> (config class, keys): the models a user swaps posenc into, one per rope type
#: and family convention (partial rotary, layer types, MLA, NoPE layers, complex tables).
MODELS = {
    "llama": (T.LlamaConfig, dict(rope_theta=5e5)),
    "llama-llama3": (T.LlamaConfig, dict(max_position_embeddings=131072, rope_parameters=dict(
        rope_type="llama3", rope_theta=5e5, factor=8.0, low_freq_factor=1.0,
        high_freq_factor=4.0, original_max_position_embeddings=8192))),
    "llama-yarn": (T.LlamaConfig, dict(max_position_embeddings=16384, rope_parameters=dict(
        rope_type="yarn", rope_theta=1e4, factor=4.0, original_max_position_embeddings=4096))),
    "llama-dynamic": (T.LlamaConfig, dict(max_position_embeddings=512, rope_parameters=dict(
        rope_type="dynamic", rope_theta=1e4, factor=2.0))),
    "llama-longrope": (T.LlamaConfig, dict(max_position_embeddings=16384, rope_parameters=dict(
        rope_type="longrope", factor=4.0, original_max_position_embeddings=4096, **LONGROPE))),
    "qwen2-yarn": (T.Qwen2Config, dict(max_position_embeddings=16384, rope_parameters=dict(
        rope_type="yarn", rope_theta=1e6, factor=4.0, original_max_position_embeddings=4096))),
    "gemma3": (T.Gemma3TextConfig, dict(
        head_dim=16, sliding_window=8, layer_types=["sliding_attention", "full_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                         "full_attention": {"rope_type": "linear", "factor": 8.0,
                                            "rope_theta": 1e6}})),
    "phi3-longrope": (T.Phi3Config, dict(
        pad_token_id=0, max_position_embeddings=16384, original_max_position_embeddings=4096,
        rope_parameters=dict(rope_type="longrope", **LONGROPE))),
    "stablelm-partial": (T.StableLmConfig, dict(partial_rotary_factor=0.25)),
    "gpt-neox": (T.GPTNeoXConfig, dict(rotary_pct=0.25)),
    "deepseek-v3-mla": (T.DeepseekV3Config, dict(
        num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=8,
        qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
        n_group=1, topk_group=1, first_k_dense_replace=2, moe_intermediate_size=32,
        max_position_embeddings=16384, rope_parameters=dict(
            rope_type="yarn", rope_theta=1e4, factor=4.0, original_max_position_embeddings=4096,
            mscale=1.0, mscale_all_dim=1.0, beta_fast=32, beta_slow=1))),
    "gpt-oss-yarn": (T.GptOssConfig, dict(
        head_dim=16, num_local_experts=2, num_experts_per_tok=1, max_position_embeddings=8192,
        rope_parameters=dict(rope_type="yarn", rope_theta=150000.0, factor=2.0,
                             original_max_position_embeddings=4096, beta_fast=32.0,
                             beta_slow=1.0, truncate=False))),
    "llama4-nope-layers": (T.Llama4TextConfig, dict(
        head_dim=16, num_local_experts=2, intermediate_size_mlp=64, attention_chunk_size=16,
        no_rope_layers=[1, 0])),
}


def _config(name):
    cls, keys = MODELS[name]
    return cls(**{**COMMON, **keys})


def _model(name):
    torch.manual_seed(0)
    return T.AutoModelForCausalLM.from_config(_config(name)).eval()


@pytest.mark.parametrize("name", list(MODELS))
def test_patched_model_gives_the_models_logits(name):
    model = _model(name)
    ids = torch.randint(0, 97, (2, 24), generator=torch.Generator().manual_seed(1))
    patched = patch(copy.deepcopy(model))
    assert type(_rotary(patched)).__name__ == "TransformersRotaryEmbedding"
    for start, tol in ((0, 2e-5), (1000, 2e-3)):
        # transformers' float32 angles are off by about position * 6e-8 rad; at 1000 that
        # moves its logits by up to 1e-3 on a scale of about 10 (posenc's are float64)
        pos = torch.arange(start, start + 24).expand(2, 24)
        with torch.no_grad():
            want = model(ids, position_ids=pos).logits
            got = patched(ids, position_ids=pos).logits
        assert float((want - got).abs().max()) < tol * float(want.abs().max()), (name, start)


def _rotary(model):
    return next(m for n, m in model.named_modules() if n.endswith("rotary_emb"))


@pytest.fixture(autouse=True)
def _unpatched():
    """patch swaps functions of transformers' modeling files, for the whole process: each
    test leaves them as it found them (reloading re-runs a file in its own namespace)."""
    import importlib
    import sys

    from posenc.torch import hf

    yield
    ours = {hf.apply_rotary_pos_emb, hf._apply_interleaved, hf._apply_freqs_cis,
            hf._apply_half_table, hf._apply_repeat_table, hf._apply_deepseek_interleave}
    for name, module in list(sys.modules.items()):
        if name.startswith("transformers.models.") and any(
                getattr(module, n, None) in ours
                for n in ("apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave",
                          "apply_rotary_emb")):
            importlib.reload(module)
    hf._ORIGINALS.clear()


def _rotate_half64(x, pos, inv, factor, r, first):
    """The float64 formula: rotate_half on r features at the head's start or end."""
    x = x.astype(np.float64)
    rot = x[..., :r] if first else x[..., -r:]
    ang = pos[:, None] * inv[None, :]
    c, s = np.cos(ang) * factor, np.sin(ang) * factor
    h = r // 2
    x1, x2 = rot[..., :h], rot[..., h:]
    out = np.concatenate((x1 * c - x2 * s, x2 * c + x1 * s), axis=-1)
    return np.concatenate((out, x[..., r:]) if first else (x[..., :-r], out), axis=-1)


@pytest.mark.parametrize("name", [n for n in MODELS if not n.startswith(("deepseek", "llama4"))])
def test_from_config_alone_is_within_1e6_of_float64(name):
    cfg = _config(name)
    desc = posenc.atlas.describe_config(cfg.to_dict())
    layer = desc.layers[-1]
    rope = RotaryEmbedding.from_config(cfg, layer.layer_type)
    head = layer.head_dim
    q = torch.randn(2, 4, 24, head, dtype=torch.float32)
    pos = np.arange(1000, 1024)
    got = rope(q, q, torch.from_numpy(pos))[0].double().numpy()
    inv, factor = posenc.rope_frequencies(layer.rotary_dim, layer.rope_parameters,
                                          seq_len=1024, max_position_embeddings=desc.max_position_embeddings)
    want = _rotate_half64(q.numpy(), pos.astype(np.float64), inv, factor, layer.rotary_dim, True)
    assert np.abs(got - want).max() < 1e-6 * max(1.0, np.abs(want).max())


def test_from_config_reads_what_the_model_rotates():
    mla = RotaryEmbedding.from_config(_config("deepseek-v3-mla"))
    assert (mla.dim, mla.rotary_slice, mla.layout) == (8, "last", "interleaved")
    assert mla.rope_type == "yarn"
    partial = RotaryEmbedding.from_config(_config("stablelm-partial"))
    assert (partial.dim, partial.rotary_slice, partial.layout) == (4, "first", "half")
    g = _config("gemma3")
    full = RotaryEmbedding.from_config(g, "full_attention")
    local = RotaryEmbedding.from_config(g, "sliding_attention")
    assert (full.rope_type, full.base, local.rope_type, local.base) == ("linear", 1e6, "default", 1e4)
    assert RotaryEmbedding.from_config(_config("llama4-nope-layers")).layout == "interleaved"


def test_from_config_takes_dicts_paths_and_folders(tmp_path):
    cfg = _config("llama-yarn")
    (tmp_path / "config.json").write_text(cfg.to_json_string())
    ropes = [RotaryEmbedding.from_config(c) for c in
             (cfg, cfg.to_dict(), json.loads(cfg.to_json_string()), tmp_path,
              str(tmp_path / "config.json"))]
    for rope in ropes:
        assert repr(rope) == repr(ropes[0])
        assert torch.equal(rope._inv_freq, ropes[0]._inv_freq)


def test_from_config_refuses_what_it_cannot_build():
    with pytest.raises(ValueError, match="layer types rotate differently.*layer_type="):
        RotaryEmbedding.from_config(_config("gemma3"))
    with pytest.raises(ValueError, match="layer_type must be .*'chunked_attention'.*no RoPE"):
        RotaryEmbedding.from_config(_config("llama4-nope-layers"), "full_attention")
    vl = T.Qwen2VLConfig(text_config=dict(hidden_size=64, num_attention_heads=4,
                                          rope_parameters={"rope_type": "mrope",
                                                           "mrope_section": [2, 3, 3]}))
    with pytest.raises(ValueError, match="M-RoPE.*apply_mrope"):
        RotaryEmbedding.from_config(vl)
    with pytest.raises(TypeError, match="config must be a transformers config"):
        RotaryEmbedding.from_config(42)
    with pytest.raises(ValueError, match="model_type"):  # the reader's own error
        RotaryEmbedding.from_config({"model_type": "no-such-family", "head_dim": 8})


@pytest.mark.parametrize("name", ["llama-llama3", "llama-yarn", "llama-longrope", "gemma3"])
def test_cos_sin_is_transformers_table(name):
    cfg = _config(name)
    model = _model(name)
    theirs = _rotary(model)
    types = ["sliding_attention", "full_attention"] if name == "gemma3" else [None]
    for t in types:
        rope = RotaryEmbedding.from_config(cfg, t)
        for start in (0, 5000):
            pos = torch.arange(start, start + 8)[None].expand(2, 8)
            x = torch.zeros(1)
            want = theirs(x, pos) if t is None else theirs(x, pos, t)
            got = rope.cos_sin(pos)
            for w, g in zip(want, got):
                assert g.shape == w.shape and g.dtype == torch.float32
                assert float((w - g).abs().max()) < 1e-6 + (start + 8) * 2.0**-22
    assert rope.cos_sin(pos, dtype=torch.bfloat16)[0].dtype == torch.bfloat16
    with pytest.raises(TypeError, match="position_ids must be an integer tensor"):
        rope.cos_sin(pos.float())


@pytest.mark.parametrize("unsqueeze_dim", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_apply_rotary_pos_emb_is_transformers_one_rounding(unsqueeze_dim, dtype):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as theirs

    rope = RotaryEmbedding(16, layout="half")
    shape = (2, 3, 5, 16) if unsqueeze_dim == 1 else (2, 5, 3, 16)
    q, k = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)
    cos, sin = rope.cos_sin(torch.arange(40, 45)[None].expand(2, 5))
    got = apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim)
    want = theirs(q.double(), k.double(), cos.double(), sin.double(), unsqueeze_dim)
    for g, w in zip(got, want):
        assert g.dtype == dtype
        ulp = 2.0**-24 if dtype == torch.float32 else 2.0**-8
        assert float((g.double() - w).abs().max()) <= 4 * ulp * float(w.abs().max())


def test_apply_rotary_pos_emb_partial_and_errors():
    rope = RotaryEmbedding(8, layout="half")
    q = torch.randn(1, 2, 5, 32)
    cos, sin = rope.cos_sin(torch.arange(5)[None])
    q2, _ = apply_rotary_pos_emb(q, q, cos, sin)
    assert torch.equal(q2[..., 8:], q[..., 8:])
    assert torch.allclose(q2[..., :8], rope(q[..., :8], q[..., :8])[0], atol=1e-6)
    with pytest.raises(ValueError, match="same shape"):
        apply_rotary_pos_emb(q, q, cos, sin[..., :4])
    with pytest.raises(ValueError, match="q must be at least as wide as cos"):
        apply_rotary_pos_emb(q[..., :4], q, cos, sin)


def test_patch_refuses_what_it_cannot_patch_exactly(monkeypatch):
    gpt2 = T.GPT2LMHeadModel(T.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=32))
    with pytest.raises(ValueError, match="no rotary_emb"):
        patch(gpt2)
    with torch.device("meta"):
        meta = T.AutoModelForCausalLM.from_config(_config("llama"))
    with pytest.raises(ValueError, match="meta device"):
        patch(meta)
    # a reader that got the pairing wrong would rotate differently: the check sees it
    from posenc.atlas._families import FAMILIES

    monkeypatch.setitem(FAMILIES, "llama", {**FAMILIES["llama"], "_interleaved": True})
    model = _model("llama")
    with pytest.raises(ValueError, match="differs from LlamaRotaryEmbedding with its own function.*not patched"):
        patch(model)
    assert type(model.model.rotary_emb).__name__ == "LlamaRotaryEmbedding"


def test_rotary_embedding_takes_per_layer_type_parameters():
    params = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    full = RotaryEmbedding(32, layout="half", rope_parameters=params, layer_type="full_attention")
    assert (full.rope_type, full.base) == ("linear", 1e6)
    with pytest.raises(ValueError, match="keyed by layer type.*layer_type="):
        RotaryEmbedding(32, layout="half", rope_parameters=params)


def test_rotary_embedding_refuses_partial_rotary_factor_it_would_ignore():
    params = {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.25}
    with pytest.raises(ValueError, match="partial_rotary_factor.*from_config"):
        RotaryEmbedding(64, layout="half", rope_parameters=params)


def test_explicit_base_that_disagrees_with_rope_theta_is_an_error():
    with pytest.raises(ValueError, match="disagree"):
        RotaryEmbedding(8, base=10000.0, rope_parameters={"rope_theta": 5e5})
    assert RotaryEmbedding(8, rope_parameters={"rope_theta": 5e5}).base == 5e5


def test_seq_dim_rotates_batch_seq_heads_dim_tensors():
    rope = RotaryEmbedding(32, layout="half")
    q = torch.randn(2, 16, 4, 32)  # (batch, seq, heads, dim)
    got = rope(q, q, torch.arange(16), seq_dim=1)[0]
    want = rope(q.transpose(1, 2), q.transpose(1, 2), torch.arange(16))[0].transpose(1, 2)
    assert torch.equal(got, want)
    with pytest.raises(ValueError, match="axis 1 has that length.*seq_dim=1"):
        rope(q, q, torch.arange(16))
    with pytest.raises(ValueError, match="seq_dim must be an axis"):
        rope(q, q, seq_dim=3)


def test_readme_quick_start_runs_as_written():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)[1]
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    model, q = scope["model"], scope["q"]
    assert type(_rotary(model)).__name__ == "TransformersRotaryEmbedding"
    assert q.shape == (1, 4, 10, 64)


def _tiny(cls, **keys):
    torch.manual_seed(0)
    return T.AutoModelForCausalLM.from_config(cls(**{**COMMON, **keys})).eval()


MLA = dict(num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=8,
           qk_nope_head_dim=16, v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
           first_k_dense_replace=2, moe_intermediate_size=32)


@pytest.mark.parametrize("family", ["cohere", "gpt-oss", "deepseek-v3"])
def test_patch_leaves_other_models_of_the_family_right(family):
    """patch swaps the modeling file's function for the process: a model left unpatched
    (here with another table format or pairing) still computes its own logits, and a
    second model can be patched too."""
    if family == "cohere":
        a, b = _tiny(T.CohereConfig), _tiny(T.CohereConfig)
    elif family == "gpt-oss":
        keys = dict(head_dim=16, num_local_experts=2, num_experts_per_tok=1)
        a, b = _tiny(T.GptOssConfig, **keys), _tiny(T.GptOssConfig, **keys)
    else:
        keys = dict(MLA, n_group=1, topk_group=1)
        a = _tiny(T.DeepseekV3Config, rope_interleave=True, **keys)
        b = _tiny(T.DeepseekV3Config, rope_interleave=False, **keys)
    ids = torch.randint(0, 97, (1, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        before = b(ids).logits
        patch(a)
        assert float((b(ids).logits - before).abs().max()) < 1e-5 * float(before.abs().max())
        patch(b)
        assert float((b(ids).logits - before).abs().max()) < 1e-5 * float(before.abs().max())


def test_patch_refuses_cast_models_and_probes_it_cannot_run():
    cast = _model("llama").to(torch.bfloat16)
    with pytest.raises(ValueError, match="inv_freq is torch.bfloat16.*before casting"):
        patch(cast)
    v2 = _tiny(T.DeepseekV2Config, **MLA)  # a complex table over (batch, heads, seq, dim)
    with pytest.raises(ValueError, match="cannot be checked with posenc's probe.*not patched"):
        patch(v2)


def test_transformers_rotary_embedding_names_a_bad_table():
    from posenc.torch.hf import TransformersRotaryEmbedding

    with pytest.raises(ValueError, match="table must be one of 'full'.*got 'cat'"):
        TransformersRotaryEmbedding(_config("llama"), table="cat")
