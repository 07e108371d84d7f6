"""How transformers 5.23 reads the position keys of each model family's ``config.json``.

A published ``config.json`` leaves out every key whose value is its class's default, and
older files keep names transformers has since renamed (``rope_scaling``,
``rope_local_base_freq``, ``sliding_window_pattern``, ``rotary_pct``, an empty
``no_rope_layers``).  :func:`standardize` turns such a file into the explicit form that
:func:`posenc.atlas.describe_config` reads (``layer_types``, ``no_rope_layers``,
``rope_parameters`` per layer type, ``head_dim``), following, family by family, what the
``__post_init__`` and ``convert_rope_params_to_dict`` of transformers 5.23's configuration
classes do.  The defaults below are those classes' field defaults
(``tests/atlas/test_zoo.py`` checks them against transformers itself).

Each family records the model file its rules were derived from (``_source``, under
``transformers/``) and, where its class or its model file decides more than the defaults,
the rule: how its ``__post_init__`` lays out ``layer_types`` (``_layer_types``), which
layer types have no attention at all (``_no_attention``: a recurrence or a convolution),
which other layer types slide (``_sliding_types``), keys its ``attribute_map`` renames
(``_renamed``), a neighbour-pair layout (``_interleaved``), a head width its class always
sets to ``hidden_size // num_attention_heads`` (``_head_from_hidden``), per-layer-type
rope dicts its converter leaves as written (``_fills_theta`` False), and what its model
file does beyond the rotation (``_notes``).  ``tests/atlas/test_families.py`` reads every
family from its class defaults and from variants, and compares with transformers' own
rotary module.

The model types of transformers 5.23 with RoPE keys that posenc does not read are in
:data:`REFUSED`, with the reason; any other unknown ``model_type`` is refused too (the
reading rules of an unknown family cannot be guessed); a dict without ``model_type`` is
read as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FAMILIES", "REFUSED", "TEXT_MODEL_TYPES", "standardize"]

#: The defaults transformers 5.23 gives the keys posenc reads, per text ``model_type``.
#: ``rope_theta`` is the class's ``default_theta``; ``partial_rotary_factor`` the value
#: its ``convert_rope_params_to_dict`` sets when the file has none.
#: Gemma4TextConfig's defaults, which Gemma4UnifiedTextConfig shares but for its lengths
_GEMMA4_TEXT: dict = {"_source": "models/gemma4/modeling_gemma4.py", "_fills_theta": False,
    "_layer_types": ("every", 6, "full_attention", "sliding_attention", None),
    "_default_rope": {"sliding_attention": {"rope_type": "default",
                                           "rope_theta": 10000.0},
                      "full_attention": {"rope_type": "proportional",
                                         "partial_rotary_factor": 0.25,
                                         "rope_theta": 1000000.0}},
    "head_dim": 256, "hidden_size": 2304, "num_attention_heads": 8,
    "num_hidden_layers": 30, "max_position_embeddings": 131072,
    "sliding_window": 512, "rope_theta": 10000.0}


FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"_source": "models/llama/modeling_llama.py",
              "head_dim": None, "hidden_size": 4096, "num_attention_heads": 32,
              "num_hidden_layers": 32, "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "mistral": {"_source": "models/mistral/modeling_mistral.py",
                "head_dim": None, "hidden_size": 4096, "num_attention_heads": 32,
                "num_hidden_layers": 32, "max_position_embeddings": 131072,
                "sliding_window": 4096, "rope_theta": 10000.0},
    "ministral3": {"_source": "models/ministral3/modeling_ministral3.py",
                   "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
                   "num_hidden_layers": 34, "max_position_embeddings": 262144,
                   "sliding_window": None, "rope_theta": 10000.0,
                   "_default_rope": {"type": "yarn", "rope_theta": 1000000.0, "factor": 16.0,
                                     "original_max_position_embeddings": 16384,
                                     "beta_fast": 32.0, "beta_slow": 1.0,
                                     "mscale_all_dim": 1.0, "mscale": 1.0,
                                     "llama_4_scaling_beta": 0.1}},
    "starcoder2": {"_source": "models/starcoder2/modeling_starcoder2.py",
                   "hidden_size": 3072, "num_attention_heads": 24, "num_hidden_layers": 30,
                   "max_position_embeddings": 4096, "sliding_window": None,
                   "rope_theta": 10000.0},
    "mixtral": {"_source": "models/mixtral/modeling_mixtral.py",
                "head_dim": None, "hidden_size": 4096, "num_attention_heads": 32,
                "num_hidden_layers": 32, "max_position_embeddings": 131072,
                "sliding_window": None, "rope_theta": 1000000.0},
    "qwen2": {"_source": "models/qwen2/modeling_qwen2.py",
              "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
              "max_position_embeddings": 32768, "sliding_window": 4096,
              "use_sliding_window": False, "max_window_layers": 28, "rope_theta": 10000.0},
    "qwen2_moe": {"_source": "models/qwen2_moe/modeling_qwen2_moe.py",
                  "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 24,
                  "max_position_embeddings": 32768, "sliding_window": 4096,
                  "use_sliding_window": False, "max_window_layers": 28, "rope_theta": 10000.0},
    "qwen3": {"_source": "models/qwen3/modeling_qwen3.py",
              "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
              "num_hidden_layers": 32, "max_position_embeddings": 32768, "sliding_window": 4096,
              "use_sliding_window": False, "max_window_layers": 28, "rope_theta": 10000.0},
    "qwen3_moe": {"_source": "models/qwen3_moe/modeling_qwen3_moe.py",
                  "hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 24,
                  "max_position_embeddings": 32768, "sliding_window": 4096,
                  "use_sliding_window": False, "rope_theta": 10000.0},
    "qwen2_vl_text": {"_source": "models/qwen2_vl/modeling_qwen2_vl.py",
                      "hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 80,
                      "max_position_embeddings": 32768, "sliding_window": 4096,
                      "use_sliding_window": False, "max_window_layers": 80,
                      "rope_theta": 1000000.0},
    "qwen2_5_vl_text": {"_source": "models/qwen2_5_vl/modeling_qwen2_5_vl.py",
                        "hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 80,
                        "max_position_embeddings": 32768, "sliding_window": 4096,
                        "use_sliding_window": False, "max_window_layers": 80,
                        "rope_theta": 1000000.0},
    "qwen3_vl_text": {"_source": "models/qwen3_vl/modeling_qwen3_vl.py",
                      "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
                      "num_hidden_layers": 32, "max_position_embeddings": 128000,
                      "rope_theta": 500000.0},
    "gemma": {"_source": "models/gemma/modeling_gemma.py",
              "head_dim": 256, "hidden_size": 3072, "num_attention_heads": 16,
              "num_hidden_layers": 28, "max_position_embeddings": 8192, "rope_theta": 10000.0},
    "gemma2": {"_source": "models/gemma2/modeling_gemma2.py",
               "head_dim": 256, "hidden_size": 2304, "num_attention_heads": 8,
               "num_hidden_layers": 26, "max_position_embeddings": 8192, "sliding_window": 4096,
               "rope_theta": 10000.0},
    "gemma3_text": {"_source": "models/gemma3/modeling_gemma3.py",
                    "head_dim": 256, "hidden_size": 2304, "num_attention_heads": 8,
                    "num_hidden_layers": 26, "max_position_embeddings": 131072,
                    "sliding_window": 4096, "rope_theta": 1000000.0,
                    "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6},
    "phi3": {"_source": "models/phi3/modeling_phi3.py",
             "hidden_size": 3072, "num_attention_heads": 32, "num_hidden_layers": 32,
             "max_position_embeddings": 4096, "sliding_window": None,
             "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
             "partial_rotary_factor": 1.0},
    "deepseek_v2": {"_interleaved": True, "_source": "models/deepseek_v2/modeling_deepseek_v2.py",
                    "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                    "max_position_embeddings": 2048, "qk_rope_head_dim": 64,
                    "qk_nope_head_dim": 128, "rope_theta": 10000.0},
    "deepseek_v3": {"_source": "models/deepseek_v3/modeling_deepseek_v3.py",
                    "hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61,
                    "max_position_embeddings": 4096, "qk_rope_head_dim": 64,
                    "qk_nope_head_dim": 128, "rope_interleave": True, "rope_theta": 10000.0},
    "gpt_oss": {"_source": "models/gpt_oss/modeling_gpt_oss.py",
                "head_dim": 64, "hidden_size": 2880, "num_attention_heads": 64,
                "num_hidden_layers": 36, "max_position_embeddings": 131072,
                "sliding_window": 128, "rope_theta": 150000.0,
                "_default_rope": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                  "beta_slow": 1.0, "truncate": False,
                                  "original_max_position_embeddings": 4096}},
    "smollm3": {"_source": "models/smollm3/modeling_smollm3.py",
                "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 36,
                "max_position_embeddings": 32768, "sliding_window": None,
                "use_sliding_window": False, "no_rope_layer_interval": 4,
                "rope_theta": 2000000.0},
    "olmo2": {"_source": "models/olmo2/modeling_olmo2.py",
              "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
              "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "olmo3": {"_source": "models/olmo3/modeling_olmo3.py",
              "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
              "max_position_embeddings": 2048, "sliding_window": 4096, "rope_theta": 500000.0},
    "cohere": {"_interleaved": True, "_source": "models/cohere/modeling_cohere.py",
               "hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 40,
               "max_position_embeddings": 8192, "rope_theta": 500000.0},
    "cohere2": {"_interleaved": True, "_source": "models/cohere2/modeling_cohere2.py",
                "hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 40,
                "max_position_embeddings": 8192, "sliding_window": 4096,
                "sliding_window_pattern": 4, "rope_theta": 10000.0},
    "glm": {"_interleaved": True, "_source": "models/glm/modeling_glm.py",
            "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
            "num_hidden_layers": 40, "max_position_embeddings": 131072, "rope_theta": 10000.0,
            "partial_rotary_factor": 0.5},
    "glm4": {"_interleaved": True, "_source": "models/glm4/modeling_glm4.py",
             "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
             "num_hidden_layers": 40, "max_position_embeddings": 131072, "rope_theta": 10000.0,
             "partial_rotary_factor": 0.5},
    "stablelm": {"_source": "models/stablelm/modeling_stablelm.py",
                 "hidden_size": 2560, "num_attention_heads": 32, "num_hidden_layers": 32,
                 "max_position_embeddings": 4096, "rope_theta": 10000.0,
                 "partial_rotary_factor": 0.25},
    "gpt_neox": {"_source": "models/gpt_neox/modeling_gpt_neox.py",
                 "hidden_size": 6144, "num_attention_heads": 64, "num_hidden_layers": 44,
                 "max_position_embeddings": 2048, "rope_theta": 10000.0,
                 "partial_rotary_factor": 0.25},
    "phi": {"_source": "models/phi/modeling_phi.py",
            "hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 24,
            "max_position_embeddings": 2048, "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    "falcon": {"_source": "models/falcon/modeling_falcon.py",
               "hidden_size": 4544, "num_attention_heads": 71, "num_hidden_layers": 32,
               "max_position_embeddings": 2048, "rope_theta": 10000.0, "alibi": False},
    "llama4_text": {"_interleaved": True, "_source": "models/llama4/modeling_llama4.py",
                    "head_dim": 128, "hidden_size": 5120, "num_attention_heads": 40,
                    "num_hidden_layers": 48, "max_position_embeddings": 131072,
                    "attention_chunk_size": 8192, "no_rope_layer_interval": 4,
                    "rope_theta": 500000.0},
    # 2024-26 families: class defaults of transformers 5.23 (tests/atlas/test_families.py
    # checks each reading against transformers' rotary module)
    "lfm2_moe": {"_source": "models/lfm2_moe/modeling_lfm2_moe.py", "_layer_types": ("required",),
                 "_no_attention": ("conv",), "hidden_size": 2048, "num_attention_heads": 32,
                 "num_hidden_layers": 32, "max_position_embeddings": 128000,
                 "rope_theta": 1000000.0},
    "youtu": {"_source": "models/youtu/modeling_youtu.py", "hidden_size": 2048,
              "num_attention_heads": 16, "num_hidden_layers": 32, "max_position_embeddings": 131072,
              "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "rope_interleave": True,
              "rope_theta": 10000.0},
    "axk1": {"_source": "models/axk1/modeling_axk1.py", "hidden_size": 7168,
             "num_attention_heads": 64, "num_hidden_layers": 61, "max_position_embeddings": 32768,
             "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "rope_interleave": True,
             "rope_theta": 10000.0},
    "afmoe": {"_source": "models/afmoe/modeling_afmoe.py",
              "_layer_types": ("every", 4, "full_attention", "sliding_attention",
                               "global_attn_every_n_layers"),
              "_rotating_types": ("sliding_attention",),  # AfmoeAttention: is_local_attention
              "head_dim": 128, "hidden_size": 2048, "num_attention_heads": 16,
              "num_hidden_layers": 32, "max_position_embeddings": 16384, "sliding_window": 1024,
              "rope_theta": 10000.0},
    "flint": {"_source": "models/flint/modeling_flint.py", "_layer_types": ("flint",),
              "_rotating_types": ("sliding_attention",),  # FlintAttention: a window, so a slide
              "head_dim": 128, "hidden_size": 2048, "num_attention_heads": 32,
              "num_hidden_layers": 49, "max_position_embeddings": 262144, "sliding_window": 513,
              "rope_theta": 10000.0},
    "lfm3": {"_source": "models/lfm3/modeling_lfm3.py",
             "_layer_types": ("lfm3",), "_no_attention": ("conv",),
             "_default_rope": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "proportional",
                                                  "rope_theta": 1000000.0,
                                                  "partial_rotary_factor": 0.5}},
             "head_dim": 128, "hidden_size": 2048, "num_attention_heads": 16,
             "num_hidden_layers": 24, "max_position_embeddings": 128000, "sliding_window": 256,
             "rope_theta": 1000000.0},
    "mimo_v2_flash": {"_source": "models/mimo_v2_flash/modeling_mimo_v2_flash.py",
                      "_fills_theta": False,
                      "_layer_types": ("every", 6, "full_attention", "sliding_attention", None),
                      "_default_rope": {
                          "full_attention": {"rope_type": "default", "rope_theta": 5000000.0,
                                             "partial_rotary_factor": 0.334},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0,
                                                "partial_rotary_factor": 0.334}},
                      "head_dim": 192, "hidden_size": 4096, "num_attention_heads": 64,
                      "num_hidden_layers": 48, "max_position_embeddings": 131072,
                      "sliding_window": 129, "rope_theta": 10000.0},
    "glm4_moe_lite": {"_source": "models/glm4_moe_lite/modeling_glm4_moe_lite.py",
                      "hidden_size": 2048, "num_attention_heads": 20, "num_hidden_layers": 47,
                      "max_position_embeddings": 202752, "qk_rope_head_dim": 64,
                      "qk_nope_head_dim": 192, "rope_interleave": True, "rope_theta": 10000.0},
    "glm_moe_dsa": {"_source": "models/glm_moe_dsa/modeling_glm_moe_dsa.py", "_interleaved": True,
                    "_layer_types": ("all", "indexed_attention"),
                    "hidden_size": 6144, "num_attention_heads": 64, "num_hidden_layers": 78,
                    "max_position_embeddings": 202752, "qk_rope_head_dim": 64,
                    "qk_nope_head_dim": 192, "rope_theta": 10000.0},
    # LongcatFlashConfig: num_hidden_layers is 2 * num_layers (two attentions per layer)
    "longcat_flash": {"_source": "models/longcat_flash/modeling_longcat_flash.py",
                      "_interleaved": True, "_renamed": {"num_layers": "_num_layers"},
                      "hidden_size": 6144, "num_attention_heads": 64,
                      "max_position_embeddings": 131072, "qk_rope_head_dim": 64,
                      "qk_nope_head_dim": 128, "rope_theta": 10000000.0},
    "apertus": {"_source": "models/apertus/modeling_apertus.py",
                "_default_rope": {"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0,
                                  "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0},
                "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                "max_position_embeddings": 65536, "rope_theta": 12000000.0},
    "arcee": {"_source": "models/arcee/modeling_arcee.py", "head_dim": None, "hidden_size": 2560,
              "num_attention_heads": 32, "num_hidden_layers": 32, "max_position_embeddings": 4096,
              "rope_theta": 10000.0},
    "aria_text": {"_source": "models/aria/modeling_aria.py", "head_dim": None, "hidden_size": 4096,
                  "num_attention_heads": 32, "num_hidden_layers": 32,
                  "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "bitnet": {"_source": "models/bitnet/modeling_bitnet.py", "hidden_size": 2560,
               "num_attention_heads": 20, "num_hidden_layers": 30, "max_position_embeddings": 2048,
               "rope_theta": 500000.0},
    "chameleon": {"_source": "models/chameleon/modeling_chameleon.py", "hidden_size": 4096,
                  "num_attention_heads": 32, "num_hidden_layers": 32,
                  "max_position_embeddings": 4096, "rope_theta": 10000.0},
    "cosmos3_edge_text": {"_source": "models/cosmos3_edge/modeling_cosmos3_edge.py",
                          "_default_rope": {"rope_type": "default", "mrope_section": [24, 20, 20]},
                          "head_dim": 128, "hidden_size": 2048, "num_attention_heads": 16,
                          "num_hidden_layers": 28, "max_position_embeddings": 131072,
                          "rope_theta": 100000000.0},
    "cwm": {"_source": "models/cwm/modeling_cwm.py",
            "_layer_types": ("every", 4, "full_attention", "sliding_attention", None, 0),
            "_default_rope": {"rope_type": "llama3", "rope_theta": 1000000.0, "factor": 16.0,
                              "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                              "original_max_position_embeddings": 8192},
            "head_dim": 128, "hidden_size": 6144, "num_attention_heads": 48,
            "num_hidden_layers": 64, "max_position_embeddings": 131072, "sliding_window": 8192,
            "rope_theta": 1000000.0},
    "deepseek_ocr2_text": {"_source": "models/deepseek_ocr2/modeling_deepseek_ocr2.py",
                           "head_dim": None, "hidden_size": 4096, "num_attention_heads": 32,
                           "num_hidden_layers": 32, "max_position_embeddings": 2048,
                           "rope_theta": 10000.0},
    "deepseek_v32": {"_source": "models/deepseek_v32/modeling_deepseek_v32.py",
                     "_layer_types": ("all", "indexed_attention"), "head_dim": 64,
                     "hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61,
                     "max_position_embeddings": 163840, "qk_rope_head_dim": 64,
                     "qk_nope_head_dim": 128, "rope_theta": 10000.0},
    "diffllama": {"_source": "models/diffllama/modeling_diffllama.py", "head_dim": None,
                  "hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 16,
                  "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "doge": {"_source": "models/doge/modeling_doge.py", "hidden_size": 1024,
             "num_attention_heads": 8, "num_hidden_layers": 32, "max_position_embeddings": 2048,
             "sliding_window": None, "rope_theta": 10000.0},
    "dots1": {"_source": "models/dots1/modeling_dots1.py", "_layer_types": ("window_from",),
              "hidden_size": 4608, "num_attention_heads": 32, "num_hidden_layers": 62,
              "max_position_embeddings": 2048, "sliding_window": 4096, "max_window_layers": 62,
              "rope_theta": 10000.0},
    "emu3_text_model": {"_source": "models/emu3/modeling_emu3.py", "hidden_size": 4096,
                        "num_attention_heads": 32, "num_hidden_layers": 32,
                        "max_position_embeddings": 9216, "rope_theta": 1000000.0},
    "ernie4_5": {"_source": "models/ernie4_5/modeling_ernie4_5.py", "_interleaved": True,
                 "head_dim": 128, "hidden_size": 1024, "num_attention_heads": 16,
                 "num_hidden_layers": 18, "max_position_embeddings": 131072,
                 "rope_theta": 500000.0},
    "ernie4_5_moe": {"_source": "models/ernie4_5_moe/modeling_ernie4_5_moe.py",
                     "_interleaved": True, "hidden_size": 2560, "num_attention_heads": 20,
                     "num_hidden_layers": 28, "max_position_embeddings": 131072,
                     "rope_theta": 500000.0},
    "falcon_h1": {"_source": "models/falcon_h1/modeling_falcon_h1.py",
                  "_layer_types": ("all", "hybrid"), "hidden_size": 4096,
                  "num_attention_heads": 32, "num_hidden_layers": 32,
                  "max_position_embeddings": 8192, "rope_theta": 10000.0},
    "flex_olmo": {"_source": "models/flex_olmo/modeling_flex_olmo.py", "hidden_size": 4096,
                  "num_attention_heads": 32, "num_hidden_layers": 32,
                  "max_position_embeddings": 4096, "rope_theta": 500000.0},
    "glm4_moe": {"_source": "models/glm4_moe/modeling_glm4_moe.py", "hidden_size": 4096,
                 "num_attention_heads": 96, "num_hidden_layers": 46,
                 "max_position_embeddings": 131072, "rope_theta": 10000.0,
                 "partial_rotary_factor": 0.5},
    "glm4v_moe_text": {"_source": "models/glm4v_moe/modeling_glm4v_moe.py",
                       "partial_rotary_factor": 0.5, "hidden_size": 4096,
                       "num_attention_heads": 96, "num_hidden_layers": 46,
                       "max_position_embeddings": 65536, "rope_theta": 10000.0},
    "glm4v_text": {"_source": "models/glm4v/modeling_glm4v.py", "_interleaved": True,
                   "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 40,
                   "max_position_embeddings": 32768, "rope_theta": 10000.0},
    "glm_image_text": {"_source": "models/glm_image/modeling_glm_image.py", "hidden_size": 4096,
                       "num_attention_heads": 32, "num_hidden_layers": 40,
                       "max_position_embeddings": 131072, "rope_theta": 10000.0},
    "glm_ocr_text": {"_source": "models/glm_ocr/modeling_glm_ocr.py", "_interleaved": True,
                     "hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 16,
                     "max_position_embeddings": 131072, "rope_theta": 10000.0},
    "gpt_neox_japanese": {"_source": "models/gpt_neox_japanese/modeling_gpt_neox_japanese.py",
                          "hidden_size": 2560, "num_attention_heads": 32, "num_hidden_layers": 32,
                          "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "granite": {"_source": "models/granite/modeling_granite.py", "hidden_size": 4096,
                "num_attention_heads": 32, "num_hidden_layers": 32,
                "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "granite4_vision_text": {"_source": "models/granite4_vision/modeling_granite4_vision.py",
                             "hidden_size": 4096, "num_attention_heads": 32,
                             "num_hidden_layers": 32, "max_position_embeddings": 2048,
                             "rope_theta": 10000.0},
    "granite_docling_text": {"_source": "models/granite_docling/modeling_granite_docling.py",
                             "hidden_size": 1024, "num_attention_heads": 16,
                             "num_hidden_layers": 28, "max_position_embeddings": 32768,
                             "rope_theta": 10000.0},
    "granitemoe": {"_source": "models/granitemoe/modeling_granitemoe.py", "hidden_size": 4096,
                   "num_attention_heads": 32, "num_hidden_layers": 32,
                   "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "granitemoeshared": {"_source": "models/granitemoeshared/modeling_granitemoeshared.py",
                         "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                         "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "helium": {"_source": "models/helium/modeling_helium.py", "_interleaved": True,
               "head_dim": 128, "hidden_size": 2560, "num_attention_heads": 20,
               "num_hidden_layers": 24, "max_position_embeddings": 4096, "rope_theta": 100000.0},
    "hunyuan_v1_dense": {"_source": "models/hunyuan_v1_dense/modeling_hunyuan_v1_dense.py",
                         "head_dim": None, "hidden_size": 4096, "num_attention_heads": 32,
                         "num_hidden_layers": 32, "max_position_embeddings": 2048,
                         "rope_theta": 10000.0},
    "hunyuan_v1_moe": {"_source": "models/hunyuan_v1_moe/modeling_hunyuan_v1_moe.py",
                       "head_dim": None, "hidden_size": 4096, "num_attention_heads": 32,
                       "num_hidden_layers": 32, "max_position_embeddings": 2048,
                       "rope_theta": 10000.0},
    "hunyuan_vl_text": {"_source": "models/hunyuan_vl/modeling_hunyuan_vl.py", "head_dim": None,
                        "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                        "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "hy_v3": {"_source": "models/hy_v3/modeling_hy_v3.py", "head_dim": 128, "hidden_size": 4096,
              "num_attention_heads": 64, "num_hidden_layers": 80,
              "max_position_embeddings": 131072, "rope_theta": 11158840.0},
    "hyperclovax": {"_source": "models/hyperclovax/modeling_hyperclovax.py", "head_dim": None,
                    "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                    "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "jais2": {"_source": "models/jais2/modeling_jais2.py", "head_dim": None, "hidden_size": 3328,
              "num_attention_heads": 26, "num_hidden_layers": 32, "max_position_embeddings": 8192,
              "rope_theta": 10000.0},
    "jetmoe": {"_source": "models/jetmoe/modeling_jetmoe.py",
               "_renamed": {"kv_channels": "head_dim"}, "head_dim": 128, "hidden_size": 2048,
               "num_hidden_layers": 12, "max_position_embeddings": 4096, "rope_theta": 10000.0},
    "minicpm3": {"_source": "models/minicpm3/modeling_minicpm3.py", "head_dim": None,
                 "hidden_size": 2560, "num_attention_heads": 40, "num_hidden_layers": 62,
                 "max_position_embeddings": 32768, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64,
                 "rope_theta": 10000.0},
    "minimax_m2": {"_source": "models/minimax_m2/modeling_minimax_m2.py", "head_dim": 128,
                   "hidden_size": 3072, "num_attention_heads": 48, "num_hidden_layers": 62,
                   "max_position_embeddings": 196608, "rope_theta": 5000000.0},
    "minimax_m3_vl_text": {"_source": "models/minimax_m3_vl/modeling_minimax_m3_vl.py",
                           "_layer_types": ("all", "full_attention"), "head_dim": 128,
                           "hidden_size": 6144, "num_attention_heads": 64, "num_hidden_layers": 60,
                           "max_position_embeddings": 524288, "rotary_dim": 64,
                           "rope_theta": 5000000.0},
    "ministral": {"_source": "models/ministral/modeling_ministral.py",
                  "_layer_types": ("all_window", "sliding_attention"), "head_dim": None,
                  "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                  "max_position_embeddings": 131072, "sliding_window": 4096,
                  "rope_theta": 10000.0},
    "mllama_text_model": {"_source": "models/mllama/modeling_mllama.py", "hidden_size": 4096,
                          "num_attention_heads": 32, "num_hidden_layers": 40,
                          "max_position_embeddings": 131072, "rope_theta": 500000.0},
    "molmo2_text": {"_source": "models/molmo2/modeling_molmo2.py", "head_dim": 128,
                    "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 36,
                    "max_position_embeddings": 36864, "rope_theta": 10000.0},
    "nanochat": {"_source": "models/nanochat/modeling_nanochat.py", "hidden_size": 768,
                 "num_attention_heads": 6, "num_hidden_layers": 12,
                 "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "nemotron": {"_source": "models/nemotron/modeling_nemotron.py", "partial_rotary_factor": 0.5,
                 "head_dim": None, "hidden_size": 6144, "num_attention_heads": 48,
                 "num_hidden_layers": 32, "max_position_embeddings": 4096, "rope_theta": 10000.0},
    "olmo": {"_source": "models/olmo/modeling_olmo.py", "hidden_size": 4096,
             "num_attention_heads": 32, "num_hidden_layers": 32, "max_position_embeddings": 2048,
             "rope_theta": 10000.0},
    "olmoe": {"_source": "models/olmoe/modeling_olmoe.py", "hidden_size": 2048,
              "num_attention_heads": 16, "num_hidden_layers": 16, "max_position_embeddings": 4096,
              "rope_theta": 10000.0},
    "paddleocr_vl_text": {"_source": "models/paddleocr_vl/modeling_paddleocr_vl.py",
                          "head_dim": 128, "hidden_size": 1024, "num_attention_heads": 16,
                          "num_hidden_layers": 18, "max_position_embeddings": 131072,
                          "rope_theta": 500000.0},
    "persimmon": {"_source": "models/persimmon/modeling_persimmon.py",
                  "partial_rotary_factor": 0.5, "hidden_size": 4096, "num_attention_heads": 64,
                  "num_hidden_layers": 36, "max_position_embeddings": 16384,
                  "rope_theta": 10000.0},
    "phi4_multimodal": {"_source": "models/phi4_multimodal/modeling_phi4_multimodal.py",
                        "hidden_size": 3072, "num_attention_heads": 32, "num_hidden_layers": 32,
                        "max_position_embeddings": 131072, "sliding_window": None,
                        "rope_theta": 10000.0},
    "phimoe": {"_source": "models/phimoe/modeling_phimoe.py", "hidden_size": 4096,
               "num_attention_heads": 32, "num_hidden_layers": 32,
               "max_position_embeddings": 131072, "sliding_window": None, "rope_theta": 1000000.0},
    "qwen2_5_omni_text": {"_source": "models/qwen2_5_omni/modeling_qwen2_5_omni.py",
                          "_layer_types": ("window_from",), "hidden_size": 3584,
                          "num_attention_heads": 28, "num_hidden_layers": 28,
                          "max_position_embeddings": 32768, "sliding_window": 32768,
                          "use_sliding_window": False, "max_window_layers": 28,
                          "rope_theta": 1000000.0},
    "qwen3_omni_moe_text": {"_source": "models/qwen3_omni_moe/modeling_qwen3_omni_moe.py",
                            "hidden_size": 2048, "num_attention_heads": 28,
                            "num_hidden_layers": 28, "max_position_embeddings": 32768,
                            "sliding_window": None, "rope_theta": 1000000.0},
    "qwen3_vl_moe_text": {"_source": "models/qwen3_vl_moe/modeling_qwen3_vl_moe.py",
                          "head_dim": None, "hidden_size": 2048, "num_attention_heads": 16,
                          "num_hidden_layers": 24, "max_position_embeddings": 128000,
                          "rope_theta": 500000.0},
    "seed_oss": {"_source": "models/seed_oss/modeling_seed_oss.py", "head_dim": 128,
                 "hidden_size": 4096, "num_attention_heads": 80, "num_hidden_layers": 64,
                 "max_position_embeddings": 524288, "rope_theta": 10000.0},
    "solar_open": {"_source": "models/solar_open/modeling_solar_open.py", "head_dim": 128,
                   "hidden_size": 4096, "num_attention_heads": 64, "num_hidden_layers": 48,
                   "max_position_embeddings": 131072, "rope_theta": 1000000.0},
    "vaultgemma": {"_source": "models/vaultgemma/modeling_vaultgemma.py",
                   "_layer_types": ("every", 2, "full_attention", "sliding_attention", None),
                   "head_dim": 256, "hidden_size": 2304, "num_attention_heads": 8,
                   "num_hidden_layers": 26, "max_position_embeddings": 8192,
                   "sliding_window": 4096, "rope_theta": 10000.0},
    "voxtral_realtime_text": {"_source": "models/voxtral_realtime/modeling_voxtral_realtime.py",
                              "head_dim": None, "hidden_size": 4096, "num_attention_heads": 32,
                              "num_hidden_layers": 32, "max_position_embeddings": 131072,
                              "sliding_window": 4096, "rope_theta": 10000.0},
    "bamba": {"_source": "models/bamba/modeling_bamba.py", "_partial_forced": 0.5,
              "_layer_types": ("indices", "full_attention", "linear_attention",
                               "attn_layer_indices", False),
              "_no_attention": ("linear_attention",), "hidden_size": 4096,
              "num_attention_heads": 32, "num_hidden_layers": 32,
              "max_position_embeddings": 262144, "rope_theta": 10000.0},
    "exaone4": {"_source": "models/exaone4/modeling_exaone4.py", "_layer_types": ("exaone4",),
                "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                "max_position_embeddings": 2048, "sliding_window": 4096,
                "sliding_window_pattern": 4, "rope_theta": 10000.0},
    "exaone_moe": {"_source": "models/exaone_moe/modeling_exaone_moe.py",
                   "_layer_types": ("exaone4",), "hidden_size": 4096, "num_attention_heads": 32,
                   "num_hidden_layers": 32, "max_position_embeddings": 2048,
                   "sliding_window": 4096, "sliding_window_pattern": 4, "rope_theta": 10000.0},
    "kolibri1": {"_source": "models/kolibri1/modeling_kolibri1.py",
                 "_layer_types": ("every", 5, "full_attention", "sliding_attention", None),
                 "head_dim": 128, "hidden_size": 2560, "num_attention_heads": 48,
                 "num_hidden_layers": 50, "max_position_embeddings": 262144, "sliding_window": 513,
                 "rope_theta": 10000.0},
    "olmo_hybrid": {"_source": "models/olmo_hybrid/modeling_olmo_hybrid.py",
                    "_layer_types": ("every", 4, "full_attention", "linear_attention", None),
                    "_no_attention": ("linear_attention",), "hidden_size": 3840,
                    "num_attention_heads": 30, "num_hidden_layers": 32,
                    "max_position_embeddings": 65536, "rope_theta": 10000.0},
    "granitemoehybrid": {"_source": "models/granitemoehybrid/modeling_granitemoehybrid.py",
                         "_layer_types": ("all", "linear_attention"),
                         "_no_attention": ("linear_attention",), "hidden_size": 4096,
                         "num_attention_heads": 32, "num_hidden_layers": 32,
                         "max_position_embeddings": 2048, "position_embedding_type": None,
                         "rope_theta": 10000.0},
    "qwen3_next": {"_source": "models/qwen3_next/modeling_qwen3_next.py",
                   "_layer_types": ("every", 4, "full_attention", "linear_attention",
                                    "full_attention_interval"),
                   "_no_attention": ("linear_attention",), "head_dim": 256, "hidden_size": 2048,
                   "num_attention_heads": 16, "num_hidden_layers": 48,
                   "max_position_embeddings": 32768, "rope_theta": 10000.0,
                   "partial_rotary_factor": 0.25},
    "qwen3_5_text": {"_source": "models/qwen3_5/modeling_qwen3_5.py",
                     "_layer_types": ("every", 4, "full_attention", "linear_attention",
                                      "full_attention_interval"),
                     "_no_attention": ("linear_attention",), "head_dim": 256, "hidden_size": 4096,
                     "num_attention_heads": 16, "num_hidden_layers": 32,
                     "max_position_embeddings": 32768, "rope_theta": 10000.0,
                     "partial_rotary_factor": 0.25},
    "qwen3_5_moe_text": {"_source": "models/qwen3_5_moe/modeling_qwen3_5_moe.py",
                         "_layer_types": ("every", 4, "full_attention", "linear_attention",
                                          "full_attention_interval"),
                         "_no_attention": ("linear_attention",), "head_dim": 256,
                         "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 40,
                         "max_position_embeddings": 32768, "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.25},
    "minimax": {"_source": "models/minimax/modeling_minimax.py",
                "_layer_types": ("every", 2, "linear_attention", "full_attention", None),
                "_no_attention": ("linear_attention",), "head_dim": None, "hidden_size": 4096,
                "num_attention_heads": 32, "num_hidden_layers": 32,
                "max_position_embeddings": 131072, "sliding_window": None,
                "rope_theta": 1000000.0},
    "lfm2": {"_source": "models/lfm2/modeling_lfm2.py",
             "_layer_types": ("indices", "full_attention", "conv", "full_attn_idxs", True),
             "_no_attention": ("conv",), "hidden_size": 2560, "num_attention_heads": 32,
             "num_hidden_layers": 32, "max_position_embeddings": 128000, "rope_theta": 1000000.0},
    "dbrx": {"_source": "models/dbrx/modeling_dbrx.py",
             "_renamed": {"n_heads": "num_attention_heads", "d_model": "hidden_size",
                          "n_layers": "num_hidden_layers", "max_seq_len": "max_position_embeddings"},
             "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 24,
             "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "cohere2_moe": {"_source": "models/cohere2_moe/modeling_cohere2_moe.py", "_interleaved": True,
                    "head_dim": 128, "hidden_size": 8192, "num_attention_heads": 64,
                    "num_hidden_layers": 40, "max_position_embeddings": 8192,
                    "sliding_window": 4096, "sliding_window_pattern": 4,
                    "prefix_dense_sliding_window_pattern": 1, "rope_theta": 10000.0},
    # MLA with Llama 4's query scaling; its class default is YaRN on a 64 of 128 slice
    "mistral4": {"_source": "models/mistral4/modeling_mistral4.py",
                 "_default_rope": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 128.0,
                                   "original_max_position_embeddings": 8192, "beta_fast": 32.0,
                                   "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0,
                                   "llama_4_scaling_beta": 0.1},
                 "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 36,
                 "max_position_embeddings": 1048576, "qk_rope_head_dim": 64,
                 "qk_nope_head_dim": 64, "rope_interleave": True, "rope_theta": 10000.0},
    # one rotary module per base in layer_rope_theta (0: that layer has no RoPE); every
    # fourth layer global, from the first
    "granite_swa": {"_source": "models/granite_swa/modeling_granite_swa.py",
                    "_layer_types": ("every", 4, "full_attention", "sliding_attention", None, 0),
                    "hidden_size": 2560, "num_attention_heads": 20, "num_hidden_layers": 24,
                    "max_position_embeddings": 8192, "sliding_window": 128,
                    "rope_theta": 10000.0},
    "granitemoe_swa": {"_source": "models/granitemoe_swa/modeling_granitemoe_swa.py",
                       "_layer_types": ("every", 4, "full_attention", "sliding_attention", None,
                                        0),
                       "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                       "max_position_embeddings": 2048, "sliding_window": 128,
                       "rope_theta": 10000.0},
    # Gemma4TextConfig: every sixth layer and the last global, with their own head width
    # (global_head_dim, or per_layer_config's head_dim where the file gives one)
    "gemma4_text": _GEMMA4_TEXT,
    # Gemma4UnifiedTextConfig and its attention are Gemma 4's, with longer defaults
    "gemma4_unified_text": {**_GEMMA4_TEXT,
                            "_source": "models/gemma4_unified/modeling_gemma4_unified.py",
                            "max_position_embeddings": 262144, "sliding_window": 1024},
    # MLA in neighbour pairs (apply_rotary_pos_emb_interleave, whatever the config says),
    # with DeepSeek-V3.2's indexer, which rotates its own features in halves
    "axk2": {"_source": "models/axk2/modeling_axk2.py", "_interleaved": True,
             "_layer_types": ("all", "indexed_attention"),
             "_notes": ("the indexer that picks each query's keys rotates its features in "
                        "halves; the attention in neighbour pairs",),
             "hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 48,
             "max_position_embeddings": 131072, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64,
             "rope_theta": 10000.0},
    # MLA (neighbour pairs) in every layer_group_size-th layer; linear attention elsewhere
    "bailing_hybrid": {"_source": "models/bailing_hybrid/modeling_bailing_hybrid.py",
                       "_interleaved": True, "_renamed": {"model_max_length":
                                                          "max_position_embeddings"},
                       "_layer_types": ("every", 6, "full_attention", "linear_attention",
                                        "layer_group_size"),
                       "_no_attention": ("linear_attention",), "hidden_size": 2560,
                       "num_attention_heads": 32, "num_hidden_layers": 42,
                       "max_position_embeddings": 262144, "qk_rope_head_dim": 64,
                       "qk_nope_head_dim": 128, "rope_theta": 6000000.0},
    # Zamba2: mamba2 layers ("linear_attention"), and "hybrid" layers that run one shared
    # attention block (on hidden state and embeddings concatenated: heads 2 * hidden_size
    # // num_attention_heads wide), rotating only with use_mem_rope
    "zamba2": {"_source": "models/zamba2/modeling_zamba2.py",
               "_renamed": {"layers_block_type": "layer_types", "attention_head_dim": "head_dim"},
               "_layer_types": ("zamba2",), "_no_attention": ("linear_attention",),
               "hidden_size": 2560, "num_attention_heads": 32, "num_hidden_layers": 54,
               "max_position_embeddings": 4096, "use_mem_rope": False, "use_long_context": False,
               "rope_theta": 10000.0},
    # reference_sliding_attention (where a window is set): every prompt token stays
    # visible, and a window of sliding_window generated tokens; head_dim is always
    # hidden_size // num_attention_heads
    "unlimited_ocr_text": {"_source": "models/unlimited_ocr/modeling_unlimited_ocr.py",
                           "_layer_types": ("all_window", "reference_sliding_attention"),
                           "_head_from_hidden": True,
                           "_notes": ("reference_sliding_attention layers keep every prompt "
                                      "token visible and slide over the generated ones",),
                           "hidden_size": 1280, "num_attention_heads": 10,
                           "num_hidden_layers": 12, "max_position_embeddings": 32768,
                           "sliding_window": 128, "rope_theta": 10000.0},
    # MLA in halves ("Non-interleave RoPE") with a DSA indexer that some layers share
    "hy_v4": {"_source": "models/hy_v4/modeling_hy_v4.py",
              "_layer_types": ("all", "indexed_attention"), "hidden_size": 2816,
              "num_attention_heads": 32, "num_hidden_layers": 34,
              "max_position_embeddings": 262144, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192,
              "rope_theta": 10000.0},
    # every fourth layer from the last global; layer_rope_theta 0 gives a layer no RoPE
    # (its other entries are not read: one rotary module at rope_parameters' base)
    "muse_glimmer_text": {"_source": "models/muse_glimmer/modeling_muse_glimmer.py",
                          "_layer_types": ("from_last", 4, "full_attention", "sliding_attention"),
                          "head_dim": 128, "hidden_size": 6656, "num_attention_heads": 32,
                          "num_hidden_layers": 52, "max_position_embeddings": 131072,
                          "sliding_window": 2048, "rope_theta": 10000.0},
    "muse_spark_text": {"_source": "models/muse_spark/modeling_muse_spark.py",
                        "_layer_types": ("from_last", 4, "full_attention", "sliding_attention"),
                        "_default_rope": {"rope_type": "default", "rope_theta": 500000.0},
                        "head_dim": 64, "hidden_size": 8192, "num_attention_heads": 128,
                        "num_hidden_layers": 62, "max_position_embeddings": 1048576,
                        "sliding_window": 2048, "rope_theta": 10000.0},
    # Gemma 3's rope reading (rope_local_base_freq for the sliding layers); every fifth
    # layer global; the last num_kv_shared_layers reuse keys rotated at the same positions
    "gemma3n_text": {"_source": "models/gemma3n/modeling_gemma3n.py",
                     "_layer_types": ("every", 5, "full_attention", "sliding_attention", None),
                     "head_dim": 256, "hidden_size": 2048, "num_attention_heads": 8,
                     "num_hidden_layers": 35, "max_position_embeddings": 32768,
                     "sliding_window": 512, "rope_theta": 1000000.0,
                     "rope_local_base_freq": 10000.0},
    # Griffin: block_types cycled over the layers, "attention" a local (sliding) attention
    # that rotates the first half of each head; "recurrent" an RG-LRU (no attention)
    "recurrent_gemma": {"_source": "models/recurrent_gemma/modeling_recurrent_gemma.py",
                        "_renamed": {"attention_window_size": "sliding_window"},
                        "_layer_types": ("recurrent_gemma",), "_head_from_hidden": True,
                        "_no_attention": ("linear_attention",), "hidden_size": 2560,
                        "num_attention_heads": 10, "num_hidden_layers": 26,
                        "sliding_window": 2048, "rope_theta": 10000.0,
                        "partial_rotary_factor": 0.5},
    # ModernBERT as a causal decoder: every global_attn_every_n_layers-th layer global from
    # the first, the others sliding over local_attention // 2 tokens
    "modernbert-decoder": {"_source": "models/modernbert_decoder/modeling_modernbert_decoder.py",
                           "_layer_types": ("every", 3, "full_attention", "sliding_attention",
                                            "global_attn_every_n_layers", 0),
                           "hidden_size": 768, "num_attention_heads": 12,
                           "num_hidden_layers": 22, "max_position_embeddings": 8192,
                           "local_attention": 128, "rope_theta": 160000.0},
    # Qwen3.5's rotary module; every full_attention_interval-th layer attends (a QSA indexer
    # picks its keys), the others are Gated DeltaNet
    "qwen4_exp_text": {"_source": "models/qwen4_exp/modeling_qwen4_exp.py",
                       "_layer_types": ("every", 4, "indexed_attention", "linear_attention",
                                        "full_attention_interval"),
                       "_no_attention": ("linear_attention",),
                       "_notes": ("the indexer that picks each query's keys scores blocks of "
                                  "keys, mean-pooled and rotated at each block's first position",),
                       "head_dim": 256, "hidden_size": 2048, "num_attention_heads": 16,
                       "num_hidden_layers": 40, "max_position_embeddings": 32768,
                       "rope_theta": 10000.0},
    # IDEFICS (1): a LLaMA decoder whose self-attention rotates; the gated cross-attention
    # blocks it adds before every cross_layer_interval-th layer attend to images unrotated
    "idefics": {"_source": "models/idefics/modeling_idefics.py",
                "_notes": ("the gated cross-attention blocks to the image features rotate "
                           "nothing",),
                "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                "max_position_embeddings": 2048, "rope_theta": 10000.0},
    # Step 3.5 (Step3p7TextConfig): rope_theta and partial_rotary_factors may be per-layer
    # lists, folded into one rope dict per layer type from the type's first layer
    "step3p5": {"_source": "models/step3p7/modeling_step3p7.py",
                "_layer_types": ("all", "full_attention"), "head_dim": 128, "hidden_size": 4096,
                "num_attention_heads": 64, "num_hidden_layers": 45,
                "max_position_embeddings": 128000, "sliding_window": None, "rope_theta": 10000.0},
    # rope_parameters keyed by layer type, filled by no converter: each used dict names its
    # own base (``_fills_theta`` False), as the class's convert_rope_params_to_dict does nothing
    "laguna": {"_source": "models/laguna/modeling_laguna.py", "_fills_theta": False,
               "_layer_types": ("all", "full_attention"),
               "_default_rope": {"full_attention": {"rope_type": "default", "rope_theta": 500000.0,
                                                    "partial_rotary_factor": 0.5},
                                 "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0,
                                                       "partial_rotary_factor": 1.0}},
               "head_dim": 128, "hidden_size": 2048, "num_attention_heads": 48,
               "num_hidden_layers": 40, "max_position_embeddings": 131072, "sliding_window": 512,
               "rope_theta": 10000.0},
    "mellum": {"_source": "models/mellum/modeling_mellum.py", "_fills_theta": False,
               "_layer_types": ("all", "full_attention"),
               "_default_rope": {"full_attention": {"rope_type": "default", "rope_theta": 500000.0},
                                 "sliding_attention": {"rope_type": "default",
                                                       "rope_theta": 10000.0}},
               "head_dim": 128, "hidden_size": 2304, "num_attention_heads": 32,
               "num_hidden_layers": 28, "max_position_embeddings": 131072, "sliding_window": 1024,
               "rope_theta": 10000.0},
    # ZayaAttention: its "hybrid_sliding" layers slide; q and k come from a causal
    # convolution (CCA) before they are rotated
    "zaya": {"_source": "models/zaya/modeling_zaya.py", "_fills_theta": False,
             "_notes": ("queries and keys come from a causal convolution over the tokens (CCA) "
                        "before they are rotated",),
             "_layer_types": ("all", "hybrid"), "_sliding_types": ("hybrid_sliding",),
             "_default_rope": {"hybrid": {"rope_type": "default", "rope_theta": 5000000.0,
                                          "partial_rotary_factor": 0.5},
                               "hybrid_sliding": {"rope_type": "default", "rope_theta": 10000.0,
                                                  "partial_rotary_factor": 0.5}},
             "head_dim": 128, "hidden_size": 2048, "num_attention_heads": 8,
             "num_hidden_layers": 40, "max_position_embeddings": 131072, "sliding_window": None,
             "rope_theta": 10000.0},
    # BeamConfig: every sixth layer and the last global, without RoPE (a None rope dict);
    # BeamModel scales their queries by (1 + (position + 1) / 2048) ** 0.1 instead
    "beam": {"_source": "models/beam/modeling_beam.py", "_fills_theta": False,
             "_notes": ("the layers without RoPE scale their queries by "
                        "(1 + (position + 1) / 2048) ** 0.1",),
             "_layer_types": ("every", 6, "full_attention", "sliding_attention", None),
             "_default_rope": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": None},
             "head_dim": 128, "hidden_size": 5120, "num_attention_heads": 48,
             "num_hidden_layers": 52, "max_position_embeddings": 8192, "sliding_window": 512,
             "rope_theta": 10000.0},
    "gptj": {"_source": "models/gptj/modeling_gptj.py",
             "_renamed": {"n_embd": "hidden_size", "n_head": "num_attention_heads",
                          "n_layer": "num_hidden_layers",
                          "n_positions": "max_position_embeddings"},
             "_interleaved": True, "rotary_dim": 64, "rope_theta": 10000.0, "hidden_size": 4096,
             "num_attention_heads": 16, "num_hidden_layers": 28, "max_position_embeddings": 2048},
    "codegen": {"_source": "models/codegen/modeling_codegen.py",
                "_renamed": {"n_embd": "hidden_size", "n_head": "num_attention_heads",
                             "n_layer": "num_hidden_layers",
                             "n_positions": "max_position_embeddings"},
                "_interleaved": True, "rotary_dim": 64, "rope_theta": 10000.0, "hidden_size": 4096,
                "num_attention_heads": 16, "num_hidden_layers": 28,
                "max_position_embeddings": 2048},
}

#: Families whose rotary class's ``compute_default_rope_parameters`` reads
#: ``partial_rotary_factor`` (GPT-J and CodeGen: ``rotary_dim``); the others rotate the
#: whole head under the default rule whatever the factor says
#: (tests/atlas/test_families.py checks this against their code).
PARTIAL_DEFAULT = frozenset("""
    codegen gptj bamba glm glm4 glm4_moe glm4_moe_lite mimo_v2_flash glm4v_moe_text glm4v_text
    glm_image_text glm_ocr_text laguna mellum zaya recurrent_gemma qwen4_exp_text step3p5
    gpt_neox
    gpt_neox_japanese minimax_m2 minimax_m3_vl_text nemotron persimmon phi phi3
    phi4_multimodal qwen3_5_moe_text qwen3_5_text qwen3_next solar_open stablelm
""".split())

#: A multimodal ``model_type`` -> the ``model_type`` of its text part.
TEXT_MODEL_TYPES = {
    "qwen2_vl": "qwen2_vl_text",
    "qwen2_5_vl": "qwen2_5_vl_text",
    "qwen3_vl": "qwen3_vl_text",
    "gemma3": "gemma3_text",
    "llama4": "llama4_text",
}

#: Multimodal classes whose ``__post_init__`` fills a ``text_config`` dict with their own
#: defaults (``sub_configs_defaults["text_config"].init_kwargs``) before the text class's:
#: the position keys among them.
TEXT_CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {
    "glmasr": {"hidden_size": 2048, "num_hidden_layers": 28, "num_attention_heads": 16,
               "max_position_embeddings": 8192,
               "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}},
    "voxtral": {"hidden_size": 3072, "num_hidden_layers": 30, "max_position_embeddings": 131072,
                "rope_theta": 100000000.0, "head_dim": 128},
    "voxtral_realtime": {"hidden_size": 3072, "num_hidden_layers": 26, "num_attention_heads": 32,
                         "max_position_embeddings": 131072, "rope_theta": 1000000.0,
                         "head_dim": 128, "sliding_window": 8192},
}

#: Families without RoPE: what they use instead.
NOT_ROPE_FAMILIES = {
    "bloom": "ALiBi (linear biases, no rotation)",
    "mpt": "ALiBi (linear biases, no rotation)",
    "gpt2": "learned absolute positions",
    "bert": "learned absolute positions",
}

#: Model types of transformers 5.23 whose configuration class carries RoPE keys but which
#: posenc does not read, and why (tests/atlas/test_families.py checks that every such type
#: of the installed transformers is here or in FAMILIES).
REFUSED: dict[str, str] = {}
REFUSED.update(dict.fromkeys("""
    cohere_compass_vision deepseek_ocr2_encoder dinov3_vit dots3_note_vision_encoder
    edgetam_video efficientloftr eomt_dinov3 ernie4_5_vl_moe_vision exaone4_5_vision
    gemma4_vision glm4v_moe_vision glm4v_vision glm5_next_vision glm_ocr_vision inkling2_vision
    kimi_k25_vision lfm3_vl_vision llama4_vision_model minimax_m3_vl_vision mlcd
    mlcd_vision_model muse_glimmer_vision muse_spark_vision paddleocr_vl_vision pe_video_encoder
    pixtral qwen2_5_omni_vision_encoder qwen2_5_vl_vision qwen2_vl_vision qwen3_5_moe_vision
    qwen3_5_vision qwen3_omni_moe_vision_encoder qwen3_vl_moe_vision qwen3_vl_vision
    qwen4_exp_vision sam2_video sam3_tracker_video sam3_vit_model sapiens2 step3p5_vision
    video_llama_3_vision
""".split(),
    "an image or video encoder (its RoPE turns patch positions in 2D or 3D, not a token sequence)"))
REFUSED.update(dict.fromkeys("""
    csm csm_depth_decoder_model dia_decoder dia_encoder dots3_note_audio_encoder glmasr_encoder
    gradium_phonon_tts higgs_audio_v2 kyutai_speech_to_text lasr_encoder mimi mimi_decoder
    mimi_encoder moonshine moonshine_streaming moshi nemotron3_5_transcribe_asr_audio
    nemotron3_5_transcribe_word_timestamp nemotron3_diarization_audio neucodec pe_audio_encoder
    pe_audio_video_encoder pocket_tts pocket_tts_audio_tokenizer
    pocket_tts_audio_tokenizer_decoder pocket_tts_audio_tokenizer_encoder qwen2_5_omni_dit
    qwen2_5_omni_talker qwen3_omni_moe_talker_code_predictor qwen3_omni_moe_talker_text
    voxtral_realtime_encoder xcodec2 timesfm2_5
""".split(),
    "a speech, audio or time-series model (not a text model)"))
REFUSED.update(dict.fromkeys("""
    EvollaModel esm esmc eurobert evolla gte jina_embeddings_v3 modernbert nomic_bert ultrabert
    embedding_gemma2_text
""".split(),
    ("a bidirectional encoder, whose reading rules posenc has not derived from its "
     "transformers 5.23 code yet")))
REFUSED.update(dict.fromkeys("""
    internlm3 iquestcoder
""".split(),
    ("transformers 5.23 has its configuration class but no model file, so no code says how it "
     "rotates")))
REFUSED.update(dict.fromkeys("""
    blt blt_global_transformer blt_local_decoder blt_local_encoder blt_patcher
""".split(),
    ("the Byte Latent Transformer or one of its parts: local models attend over bytes, its "
     "global model over patches of varying byte length, joined by cross-attention, so a "
     "position is a byte index in some layers and a patch index in others (one token sequence "
     "is what posenc describes)")))
REFUSED.update(dict.fromkeys("""
    t5_gemma_module t5gemma2_decoder t5gemma2_text
""".split(),
    ("a T5Gemma encoder-decoder part: its encoder attends both ways and its decoder also "
     "attends to the encoder's states (T5Gemma2's in one merged softmax), while posenc's spans "
     "describe a causal decoder-only stack")))
REFUSED.update({
    "deepseek_v4": (
        "its compressed layers attend to keys mean-pooled over blocks of compress_rates tokens "
        "and rotated at each block's first position, beside a sliding window; it also rotates "
        "values (K = V) and turns the output back by the query's angle, none of which is a "
        "rotation of per-token queries and keys"),
    "cohere_compass_text": (
        "its rotary module is M-RoPE per layer type (mrope_section, default [24, 20, 20], "
        "recomposed by recomposition_frequencies), and its class defaults give no "
        "rope_parameters, from which transformers cannot build it"),
    "ernie4_5_vl_moe_text": (
        "its rotary module is M-RoPE that reorders the frequencies into height/width pairs and "
        "a time block (mrope_section, default [22, 22, 20]) and accepts rope_type 'default' "
        "only, so its frequencies are not in RoPE's order"),
    "diffusion_gemma_text": (
        "a diffusion model: its decoder attends both ways over the canvas and the encoder's "
        "cached prefix (DiffusionGemmaDecoderTextAttention.is_causal is False), and posenc's "
        "spans are causal"),
    "muse_glimmer_assistant": (
        "a drafting assistant whose attention is not causal (MuseGlimmerAssistantAttention."
        "is_causal is False) and reads the target model's hidden states, and posenc's spans "
        "are causal"),
    "openai_privacy_filter": (
        "a token classifier whose every layer attends a window on both sides "
        "(create_bidirectional_sliding_window_mask), and posenc's spans are causal"),
    "neomme": (
        "its sliding layers alternate two windows (per_layer_config's sliding_window: "
        "sliding_window and default_long_sliding_window), and posenc describes one window per "
        "layer type"),
    "dots3_note_text": (
        "its DSA and sliding layers are multi-head latent attention with different head shapes "
        "(per_layer_config: qk_nope_head_dim 192 against 128, 64 heads against 128), and "
        "posenc's MLA reading has one head shape for every layer type"),
    "hrm_text": (
        "a prefix LM (prefix_lm, default true: the prompt attends both ways) that runs two "
        "recurrent layer stacks for H_cycles * (L_cycles + 1) passes, and posenc's spans are "
        "causal and count each layer once"),
})


REFUSED["mistral_large4_text"] = (
    "its rotary class multiplies each frequency by exp(alpha), a buffer loaded with the "
    "weights (LeRoPE), so the config does not determine the frequencies")

#: Layer type names transformers 5.23 renames when it loads any config
#: (``configuration_utils._LEGACY_LAYER_TYPE_REMAP``).
_LEGACY_LAYER_TYPES = {"mamba": "linear_attention", "attention": "full_attention",
                       "deepseek_sparse_attention": "indexed_attention",
                       "qwen_sparse_attention": "indexed_attention"}

#: The most layers a config may declare (lists are built per layer).
MAX_LAYERS = 100_000


def _pattern(n, period):
    """transformers' ``sliding_window_pattern``: layer i global when (i + 1) % period == 0."""
    return ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(n)]


def _count(c, key, minimum=1, maximum=None):
    """A required integer (the family's rules need it): errors name the key."""
    from . import _int  # one reader of integers for every key (bounds named)

    value = _int(c, key, minimum=minimum, maximum=maximum)
    if value is None:
        raise TypeError(f"config[{key!r}] must be an integer (this family's rules need it), "
                        "got None")
    return value


def _short(value):
    from . import _short as short

    return short(value)


def _check_top_reals(c, *keys):
    """Top-level numbers that end up in a rope dict: checked (and named) where they are."""
    from . import _real

    for key in keys:
        if key in c:
            if c[key] is None:
                raise TypeError(f"config[{key!r}] must be a number, got None")
            _real(c[key], f"config[{key!r}]")


def _flat_rope(c, family, *, partial=True):
    """transformers' ``convert_rope_params_to_dict`` + ``standardize_rope_params``, flat."""
    _check_top_reals(c, "rope_theta")
    scaling = c.pop("rope_scaling", None)
    params = c.get("rope_parameters")
    if scaling is not None and not isinstance(scaling, Mapping):
        raise TypeError(f"config['rope_scaling'] must be a dict or null, got {_short(scaling)}")
    if params is not None and not isinstance(params, Mapping):
        raise TypeError(f"config['rope_parameters'] must be a dict or null, got {_short(params)}")
    params = dict(scaling or params or family.get("_default_rope") or {})
    params.setdefault("rope_theta", c.get("rope_theta", family.get("rope_theta", 10000.0)))
    prf = c.get("partial_rotary_factor", family.get("partial_rotary_factor"))
    if partial and prf is not None:
        params.setdefault("partial_rotary_factor", prf)
    rope_type = params.get("rope_type", params.get("type", "default"))
    params["rope_type"] = rope_type
    params.pop("type", None)
    c["rope_parameters"] = params
    c.pop("partial_rotary_factor", None)
    return params


def _original_length(c, params):
    """Move the pretraining length into the rope dict as ``standardize_rope_params`` does.

    A top-level ``original_max_position_embeddings`` (Phi-3's files) wins over the
    rope dict's own value; otherwise the dict's value, else ``max_position_embeddings``.
    """
    if params.get("rope_type") in ("llama3", "yarn", "longrope"):
        if c.get("original_max_position_embeddings") is not None:
            params["original_max_position_embeddings"] = c["original_max_position_embeddings"]
        elif c.get("max_position_embeddings") is not None:
            params.setdefault("original_max_position_embeddings", c["max_position_embeddings"])


def _qwen_layers(c):
    if not c.get("use_sliding_window"):
        c["sliding_window"] = None
    if c.get("layer_types") is None and "max_window_layers" in c:
        n = _count(c, "num_hidden_layers", maximum=MAX_LAYERS)
        mwl = _count(c, "max_window_layers", minimum=0)
        c["layer_types"] = [
            "sliding_attention" if c["sliding_window"] is not None and i >= mwl
            else "full_attention" for i in range(n)
        ]


def standardize(config: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The text config in explicit form, and its ``model_type`` (None when absent).

    Raises ValueError naming ``model_type`` for a family posenc has no rules for, and
    for families without RoPE.
    """
    outer_type = config.get("model_type")
    text = config.get("text_config")
    if outer_type is not None and not isinstance(outer_type, str):
        raise TypeError(f"config['model_type'] must be a str, got {_short(outer_type)}")
    if isinstance(text, Mapping):
        c = {**TEXT_CONFIG_DEFAULTS.get(outer_type or "", {}), **text}
        model_type = c.get("model_type") or TEXT_MODEL_TYPES.get(outer_type or "", outer_type)
        if model_type is not None and not isinstance(model_type, str):
            raise TypeError(f"config['text_config']['model_type'] must be a str, got {_short(model_type)}")
    elif text is not None:
        raise TypeError(f"config['text_config'] must be a dict, got {type(text).__name__}")
    else:
        c = dict(config)
        model_type = TEXT_MODEL_TYPES.get(outer_type or "", outer_type)
    if (isinstance(text, Mapping) and outer_type in FAMILIES
            and outer_type not in TEXT_MODEL_TYPES):
        # AutoConfig builds the text-only class of outer_type from the top-level keys
        # (class defaults where absent) and leaves text_config unused
        raise ValueError(
            f"config['model_type'] {_short(outer_type)} is a text-only class in transformers 5.23, "
            "which ignores config['text_config'] and reads the top-level keys (class "
            "defaults where absent): fix model_type (the multimodal class) or read "
            "text_config alone"
        )
    if model_type is None:
        return c, None
    if model_type in NOT_ROPE_FAMILIES:
        raise ValueError(
            f"config['model_type'] is {model_type!r} ({NOT_ROPE_FAMILIES[model_type]}): "
            "this reads RoPE models only"
        )
    if model_type in REFUSED:
        remedy = ("; remove model_type to read the file's keys as written"
                  if "not derived" in REFUSED[model_type] else "")
        raise ValueError(f"config['model_type'] is {model_type!r}, which this does not read: "
                         f"{REFUSED[model_type]}{remedy}")
    family = FAMILIES.get(model_type)
    if family is None:
        raise ValueError(
            f"config['model_type'] {_short(model_type)} is not a family posenc reads as "
            f"transformers 5.23 does (known: {', '.join(sorted(FAMILIES))}); remove "
            "model_type to read the file's keys as written"
        )
    for old_key, key in family.get("_renamed", {}).items():  # transformers' attribute_map
        if old_key in c:
            c.setdefault(key, c.pop(old_key))
    if model_type == "qwen4_exp_text" and isinstance(c.get("layer_types"), list):
        # Qwen4ExpTextConfig: its checkpoint names the indexed layers full_attention
        c["layer_types"] = ["indexed_attention" if t == "full_attention" else t
                            for t in c["layer_types"]]
    if isinstance(c.get("layer_types"), list):  # PreTrainedConfig.__post_init__'s remap
        c["layer_types"] = [_LEGACY_LAYER_TYPES.get(t, t) if isinstance(t, str) else t
                            for t in c["layer_types"]]
    for key, value in family.items():
        if not key.startswith("_") and key not in (
                "rope_theta", "partial_rotary_factor", "rope_local_base_freq",
                "sliding_window_pattern"):
            c.setdefault(key, value)
    _family_rules(c, family, model_type)
    if model_type == "falcon":
        if c.get("alibi"):
            raise ValueError("config['alibi'] is true (ALiBi, no rotation): this reads RoPE models only")
        if c.get("rotary") is False or (c.get("rotary") is None and c.get("alibi")):
            raise ValueError("config['rotary'] is false: this reads RoPE models only")
    if model_type == "gpt_neox":
        params = c.get("rope_scaling") or c.get("rope_parameters")
        if not params or "rope_theta" not in params:
            c.setdefault("rope_theta", c.pop("rotary_emb_base", family["rope_theta"]))
        c.setdefault("partial_rotary_factor", c.pop("rotary_pct", 0.25))
    if model_type in ("gemma3_text", "gemma3n_text", "olmo3", "modernbert-decoder"):
        _nested_rope(c, family, model_type)
    elif model_type == "cohere2_moe":
        _cohere2_moe_rope(c, family)
    elif model_type == "step3p5":
        _step3p5_rope(c, family)
    elif _is_nested(family.get("_default_rope")):
        _per_type_rope(c, family, model_type)
    else:
        params = _flat_rope(c, family)
        if model_type in ("qwen2_vl_text", "qwen2_5_vl_text", "qwen3_vl_text"):
            if params["rope_type"] == "mrope":
                params["rope_type"] = "default"
        if model_type in ("ministral3", "mistral4"):
            beta = params.pop("llama_4_scaling_beta", None)
            params.pop("max_position_embeddings", None)
            if beta is not None:
                c["_query_scaling"] = beta
        _original_length(c, params)
        if model_type == "mistral4":
            _mistral4_width(c, params)
        if model_type == "dbrx":
            _dbrx_base(c, params)
        if model_type == "recurrent_gemma" and params["rope_type"] != "default":
            raise ValueError(f"config['rope_parameters']['rope_type'] is {params['rope_type']!r}, "
                             "but RecurrentGemmaRotaryEmbedding accepts 'default' only; read it "
                             "with rope_type 'default'")
        if model_type == "phi3" and params["rope_type"] in ("su", "yarn"):
            # Phi3Config renames the old names after standardize_rope_params, which
            # moved no original length into the dict for them: its validation then fails
            if params.get("original_max_position_embeddings") is None:
                raise ValueError(
                    f"config['rope_scaling']['type'] is {params['rope_type']!r}: transformers "
                    "5.23 renames it 'longrope' but finds no "
                    "rope_scaling['original_max_position_embeddings'] and refuses the file"
                )
            params["rope_type"] = "longrope"
    if model_type not in PARTIAL_DEFAULT:
        c.pop("partial_rotary_factor", None)
        params = c["rope_parameters"]
        for p in (params.values() if _is_nested(params) else [params]):
            if isinstance(p, dict) and p.get("rope_type") == "default":
                p.pop("partial_rotary_factor", None)
    if model_type in ("gemma4_text", "gemma4_unified_text"):
        _gemma4_heads(c)
    elif model_type in ("muse_glimmer_text", "muse_spark_text"):
        _nope_where_base_zero(c)
    elif model_type in ("granite_swa", "granitemoe_swa"):
        _bases_per_layer(c)
    elif model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen2_vl_text", "qwen2_5_vl_text"):
        _qwen_layers(c)
    elif model_type == "qwen3_moe":
        if not c.get("use_sliding_window"):
            c["sliding_window"] = None
    elif model_type in ("gemma2", "gpt_oss"):
        if c.get("layer_types") is None:
            c["layer_types"] = _pattern(_count(c, "num_hidden_layers", maximum=MAX_LAYERS), 2)
    elif model_type == "gemma3_text":
        if c.get("layer_types") is None:
            period = _count(dict(c, sliding_window_pattern=c.get("sliding_window_pattern", 6)),
                            "sliding_window_pattern")
            c["layer_types"] = _pattern(_count(c, "num_hidden_layers", maximum=MAX_LAYERS), period)
    elif model_type == "olmo3":
        if c.get("layer_types") is None:
            c["layer_types"] = _pattern(_count(c, "num_hidden_layers", maximum=MAX_LAYERS), 4)
    elif model_type == "cohere2_moe":
        n = _count(c, "num_hidden_layers", maximum=MAX_LAYERS)
        dense = _count(dict(c, k=c.pop("first_k_dense_replace", 0)), "k", minimum=0)
        if c.get("layer_types") is None:
            prefix = _count(c, "prefix_dense_sliding_window_pattern")
            rest = _count(dict(c, sliding_window_pattern=c.get("sliding_window_pattern", 4)),
                          "sliding_window_pattern")
            c["layer_types"] = (_pattern(min(dense, n), prefix)
                                + _pattern(max(n - dense, 0), rest))
        mlp = c.get("mlp_layer_types")
        if mlp is None:
            mlp = ["dense" if i < dense else "sparse" for i in range(n)]
        if not isinstance(mlp, (list, tuple)) or len(mlp) != n:
            raise ValueError(f"config['mlp_layer_types'] must list one entry per layer "
                             f"({n}), got {_short(mlp)}")
        # Cohere2MoeAttention rotates its sliding layers, and its dense layers when
        # prefix_dense_sliding_window_pattern is 1
        force = c.get("prefix_dense_sliding_window_pattern") == 1
        c["no_rope_layers"] = [int(t == "sliding_attention" or (force and m == "dense"))
                               for t, m in zip(c["layer_types"], mlp)]
    elif model_type == "cohere2":
        heads = _count(c, "num_attention_heads")
        c["head_dim"] = _count(c, "hidden_size") // heads  # Cohere2Config sets it so
        if c.get("layer_types") is None:
            period = _count(dict(c, sliding_window_pattern=c.get("sliding_window_pattern", 4)),
                            "sliding_window_pattern")
            c["layer_types"] = _pattern(_count(c, "num_hidden_layers", maximum=MAX_LAYERS), period)
        # its global layers apply no rotation (Cohere2Attention rotates sliding layers only)
        c["no_rope_layers"] = [int(t == "sliding_attention") for t in c["layer_types"]]
    elif model_type in ("llama4_text", "smollm3"):
        n = _count(c, "num_hidden_layers", maximum=MAX_LAYERS)
        flags = c.get("no_rope_layers")
        interval = _count(c, "no_rope_layer_interval")
        default = [int((i + 1) % interval != 0) for i in range(n)]
        if model_type == "llama4_text":
            # Llama4TextConfig: an empty (or absent) list means the default interval
            c["no_rope_layers"] = flags if flags else default
        else:
            c["no_rope_layers"] = default if flags is None else flags
        if c.get("layer_types") is None and isinstance(c["no_rope_layers"], list):
            if model_type == "llama4_text":
                c["layer_types"] = ["chunked_attention" if f else "full_attention"
                                    for f in c["no_rope_layers"]]
            else:
                sliding = c.get("use_sliding_window") and c.get("sliding_window") is not None
                c["layer_types"] = ["sliding_attention" if sliding and not f else "full_attention"
                                    for f in c["no_rope_layers"]]
        c.pop("no_rope_layer_interval", None)
    elif model_type in ("deepseek_v2", "deepseek_v3"):
        c.pop("head_dim", None)
    c["_model_type"] = model_type
    return c, model_type


def _gemma4_heads(c):
    """Gemma4TextConfig (and Gemma4UnifiedTextConfig): the last layer is global whatever
    layer_types says; a global layer's head is global_head_dim wide (512) unless the file
    gives per_layer_config, whose head_dim per layer index then decides (global_head_dim
    unread)."""
    if c.get("use_bidirectional_attention") == "all":
        raise ValueError(
            "config['use_bidirectional_attention'] is 'all': every layer attends both ways "
            "(a window of sliding_window // 2 + 1 on each side), and posenc's spans are "
            "causal; read it as a causal model only by removing that key")
    types = list(c["layer_types"])
    if types:
        types[-1] = "full_attention"  # its __post_init__ forces it, with a warning
    c["layer_types"] = types
    head = _count(c, "head_dim")
    overrides = c.get("per_layer_config")
    if overrides is None:
        width = _count(dict(c, global_head_dim=c.get("global_head_dim", 512)), "global_head_dim")
        dims = [width if t == "full_attention" else head for t in types]
    else:
        if not isinstance(overrides, Mapping):
            raise TypeError(f"config['per_layer_config'] must be a dict of layer index to "
                            f"overrides, got {_short(overrides)}")
        dims = [head] * len(types)
        for key, layer in overrides.items():
            if not (isinstance(key, (str, int)) and str(key).isdigit()
                    and int(key) < len(types) and isinstance(layer, Mapping)):
                raise ValueError(f"config['per_layer_config'] must map layer indices below "
                                 f"{len(types)} to dicts, got key {_short(key)}")
            unknown = set(layer) - {"head_dim", "num_key_value_heads"}
            if unknown:
                raise ValueError(
                    f"config['per_layer_config'][{key!r}] sets {', '.join(sorted(unknown))}: "
                    "posenc reads head_dim and num_key_value_heads per layer only; read a "
                    "config without the other overrides")
            if "head_dim" in layer:
                dims[int(key)] = _count(layer, "head_dim")
        c.pop("global_head_dim", None)
    per_type = {t: {d for tt, d in zip(types, dims) if tt == t} for t in set(types)}
    for t, found in per_type.items():
        if len(found) > 1:
            raise ValueError(
                f"config['per_layer_config'] gives the {t} layers {len(found)} head widths "
                f"({', '.join(map(str, sorted(found)))}): transformers 5.23 builds one rotary "
                "table per layer type, which cannot serve them all; give them one width")
    c["head_dim"] = next(iter(per_type.get("sliding_attention", {head})))
    c["global_head_dim"] = next(iter(per_type.get("full_attention", {head})))


def _nope_where_base_zero(c):
    """Muse: layer_rope_theta marks NoPE layers with 0 (by default every fourth from the
    last); the model rotates every other layer with the one module at rope_parameters'
    base, so a different non-zero entry would be silently ignored: refused."""
    from . import _real

    types, base = c["layer_types"], float(c["rope_parameters"]["rope_theta"])
    n = len(types)
    bases = c.get("layer_rope_theta")
    if bases is None:  # its __post_init__
        bases = [0 if (n - 1 - i) % 4 == 0 else base for i in range(n)]
    if not isinstance(bases, (list, tuple)) or len(bases) != n:
        raise ValueError(f"config['layer_rope_theta'] must list one base per layer ({n}), "
                         f"got {_short(bases)}")
    bases = [_real(b, "config['layer_rope_theta'] entries") for b in bases]
    other = sorted({b for b in bases if b and b != base})
    if other:
        raise ValueError(
            f"config['layer_rope_theta'] gives bases {', '.join(f'{b:g}' for b in other)} but "
            f"transformers 5.23 rotates every RoPE layer of this family with rope_parameters' "
            f"base {base:g} (it reads layer_rope_theta only for 0, no RoPE); give those "
            "layers that base, or 0")
    c["no_rope_layers"] = [int(bool(b)) for b in bases]


def _bases_per_layer(c):
    """Granite SWA: layer i rotates with base layer_rope_theta[i] (0: no RoPE), the rest
    of rope_parameters shared; read as one rope dict per layer type, which holds while
    the layers of a type share their base."""
    from . import _real

    types, flat = c["layer_types"], c["rope_parameters"]
    bases = c.get("layer_rope_theta")
    if bases is None:  # its __post_init__: every layer at rope_parameters' base
        bases = [flat["rope_theta"]] * len(types)
    if not isinstance(bases, (list, tuple)) or len(bases) != len(types):
        raise ValueError(f"config['layer_rope_theta'] must list one base per layer "
                         f"({len(types)}), got {_short(bases)}")
    bases = [_real(b, "config['layer_rope_theta'] entries") for b in bases]
    per_type = {}  # layer type -> its non-zero bases
    for t, base in zip(types, bases):
        if base:
            per_type.setdefault(t, set()).add(base)
    for t, found in per_type.items():
        if len(found) > 1:
            raise ValueError(
                f"config['layer_rope_theta'] gives the {t} layers {len(found)} bases "
                f"({', '.join(f'{b:g}' for b in sorted(found))}): posenc describes one base "
                "per layer type; give those layers one base, or read each layer's config alone")
    if per_type:
        c["rope_parameters"] = {t: dict(flat, rope_theta=found.pop())
                                for t, found in per_type.items()}
    c["no_rope_layers"] = [int(bool(base)) for base in bases]


def _mistral4_width(c, params):
    """Mistral4Config: head_dim is qk_nope_head_dim + qk_rope_head_dim and the rotary
    module rotates int(head_dim * partial_rotary_factor) features (the whole head under
    the default rule), which Mistral4Attention applies to its qk_rope_head_dim slice; it
    scales queries with llama_4_scaling_beta beyond original_max_position_embeddings."""
    rope, nope = _count(c, "qk_rope_head_dim"), _count(c, "qk_nope_head_dim", minimum=0)
    head = rope + nope
    prf = params.pop("partial_rotary_factor", rope / head)  # its __post_init__'s default
    from . import _real

    prf = _real(prf, "config['rope_parameters']['partial_rotary_factor']")
    width = head if params["rope_type"] in ("default", "proportional") else int(head * prf)
    if width != rope:
        raise ValueError(
            f"config['qk_rope_head_dim'] is {rope} but transformers 5.23's rotary module for "
            f"model_type 'mistral4' turns {width} features (rope_type {params['rope_type']!r}, "
            f"head_dim {head}, partial_rotary_factor {prf:g}), so its attention cannot apply "
            "it; give a scaled rope_type with partial_rotary_factor = qk_rope_head_dim / "
            "(qk_nope_head_dim + qk_rope_head_dim)")
    if c.get("_query_scaling") is None or params.get("original_max_position_embeddings") is None:
        raise ValueError(
            "config['rope_parameters'] must give llama_4_scaling_beta and "
            "original_max_position_embeddings for model_type 'mistral4': Mistral4Attention "
            "scales every query with both; give them as its class default does")
    c.pop("head_dim", None)


def _dbrx_base(c, params):
    """DbrxConfig reads the top-level rope_theta; attn_config['rope_theta'], where DBRX's
    published files keep the base, reaches only an unused attribute of DbrxAttention."""
    attn = c.get("attn_config")
    if isinstance(attn, Mapping) and attn.get("rope_theta") is not None:
        from . import _real

        theirs = _real(attn["rope_theta"], "config['attn_config']['rope_theta']")
        if theirs != float(params["rope_theta"]):
            raise ValueError(
                f"config['attn_config']['rope_theta'] is {theirs:g} but transformers 5.23 "
                f"rotates model_type 'dbrx' with the top-level base {params['rope_theta']:g} "
                "and never reads attn_config's; give rope_theta at the top level too (the "
                "same value) to read the checkpoint's rotation")


def _step3p5_layers(c):
    """Step3p7TextConfig: per-layer lists padded with num_nextn_predict_layers trailing
    multi-token-prediction entries are cut to num_hidden_layers."""
    if c.get("use_bidirectional_attention"):
        raise ValueError("config['use_bidirectional_attention'] is true: every layer attends "
                         "both ways, and posenc's spans are causal; read it without that key")
    n = _count(c, "num_hidden_layers", maximum=MAX_LAYERS)
    extra = _count(dict(c, k=c.pop("num_nextn_predict_layers", 0)), "k", minimum=0)
    for key in ("layer_types", "rope_theta", "partial_rotary_factors"):
        value = c.get(key)
        if extra and isinstance(value, list) and len(value) == n + extra:
            c[key] = value[:n]


def _step3p5_rope(c, family):
    """Step3p7TextConfig: a file's rope_parameters when they hold a dict for every layer
    type; else, per layer type, rope_theta and partial_rotary_factors of its first layer
    (lists per layer, or one rope_theta for all), rope_scaling added to full_attention."""
    from . import _real

    types = c["layer_types"]
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise TypeError("config['layer_types'] must be a list of str")
    params = c.pop("rope_parameters", None)
    scaling = c.pop("rope_scaling", None)
    thetas = c.pop("rope_theta", family["rope_theta"])
    factors = c.pop("partial_rotary_factors", None)
    if isinstance(params, Mapping) and all(isinstance(params.get(t), Mapping) for t in set(types)):
        params = {t: dict(params[t]) for t in set(types)}
        for p in params.values():
            p.setdefault("rope_theta", family["rope_theta"])  # its converter's default
            p.setdefault("rope_type", p.pop("type", "default"))
    else:
        per_layer = {"rope_theta": thetas if isinstance(thetas, list) else [thetas] * len(types)}
        if factors:
            per_layer["partial_rotary_factors"] = factors
        for key, values in per_layer.items():
            if not isinstance(values, list) or len(values) != len(types):
                raise ValueError(f"config[{key!r}] must list one value per layer "
                                 f"({len(types)}), got {_short(values)}")
            for t in set(types):
                found = {_real(v, f"config[{key!r}] entries")
                         for v, tt in zip(values, types) if tt == t}
                if len(found) > 1:
                    raise ValueError(
                        f"config[{key!r}] gives the {t} layers {len(found)} values "
                        f"({', '.join(f'{v:g}' for v in sorted(found))}), but transformers "
                        "5.23 builds one rotary table per layer type from its first layer; "
                        "give those layers one value")
        params = {}
        for t in set(types):
            i = types.index(t)
            params[t] = {"rope_type": "default", "rope_theta": per_layer["rope_theta"][i]}
            if factors:
                params[t]["partial_rotary_factor"] = factors[i]
        if scaling is not None and "full_attention" in params:
            if not isinstance(scaling, Mapping):
                raise TypeError(f"config['rope_scaling'] must be a dict or null, "
                                f"got {_short(scaling)}")
            params["full_attention"].update(scaling)
            params["full_attention"]["rope_type"] = params["full_attention"].pop(
                "type", params["full_attention"]["rope_type"])
    for t, p in params.items():
        if p["rope_type"] in ("llama3", "yarn", "longrope") and \
                p.get("original_max_position_embeddings") is None:
            raise ValueError(f"config's rope dict for {t} (rope_type {p['rope_type']!r}) must "
                             "give original_max_position_embeddings: model_type 'step3p5' fills "
                             "in none and transformers refuses the file; give it")
    c["rope_parameters"] = params


def _cohere2_moe_rope(c, family):
    """Cohere2MoeConfig: a file's rope_parameters are kept as written (rope_type filled;
    rope_theta only by a scaled rule's init function), else the top-level rope_theta; its
    rope_scaling field is never read."""
    _check_top_reals(c, "rope_theta")
    if c.get("rope_scaling") is not None:
        raise ValueError(
            "config['rope_scaling'] is set, but transformers 5.23's Cohere2MoeConfig keeps it "
            "as a field its rotary module never reads (it rotates with rope_parameters, else "
            "rope_theta); give the rule as rope_parameters")
    params = c.get("rope_parameters")
    if params is None:
        params = {"rope_type": "default", "rope_theta": c.get("rope_theta", family["rope_theta"])}
    elif not isinstance(params, Mapping):
        raise TypeError(f"config['rope_parameters'] must be a dict or null, got {_short(params)}")
    params = dict(params)
    params["rope_type"] = params.get("rope_type", params.pop("type", "default"))
    params.pop("type", None)
    if "rope_theta" not in params:
        if params["rope_type"] not in ("linear", "dynamic", "yarn", "longrope"):
            raise ValueError(f"config['rope_parameters'] must give rope_theta for model_type "
                             f"'cohere2_moe' under rope_type {params['rope_type']!r}: its class "
                             "fills in none when the file gives the dict; give the base")
        # these rules' init functions standardize first, from the rope_theta field (the
        # validator of the others requires the key, or the default rule reads it unfilled)
        params["rope_theta"] = c.get("rope_theta", family["rope_theta"])
    if params["rope_type"] in ("llama3", "yarn", "longrope") and \
            params.get("original_max_position_embeddings") is None:
        raise ValueError(f"config['rope_parameters'] must give original_max_position_embeddings "
                         f"for rope_type {params['rope_type']!r} (model_type 'cohere2_moe' "
                         "fills in none and transformers refuses the file); give it")
    c["rope_parameters"] = params
    c.pop("rope_theta", None)
    c.pop("partial_rotary_factor", None)


def _nested_rope(c, family, model_type):
    """Gemma 3 / OLMo 3 / ModernBERT decoder: a rope dict per layer type, rope_scaling for
    the global layers (ModernBERT's: for both)."""
    _check_top_reals(c, "rope_theta", "rope_local_base_freq")
    scaling = c.pop("rope_scaling", None)
    if scaling is not None and not isinstance(scaling, Mapping):
        raise TypeError(f"config['rope_scaling'] must be a dict or null, got {_short(scaling)}")
    params = c.get("rope_parameters")
    if params is not None and not isinstance(params, Mapping):
        raise TypeError(f"config['rope_parameters'] must be a dict or null, got {_short(params)}")
    params = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in (params or {
        "sliding_attention": {"rope_type": "default"},
        "full_attention": {"rope_type": "default"}}).items()}
    if scaling is not None:
        params.setdefault("full_attention", {"rope_type": "default"})
        if params["full_attention"] is None:
            params["full_attention"] = {}
        params["full_attention"].update(scaling)
        if model_type == "modernbert-decoder":  # its converter scales both layer types
            if params.get("sliding_attention") is None:
                params["sliding_attention"] = {"rope_type": "default"}
            params["sliding_attention"].update(scaling)
    if params.get("full_attention") is None:
        params["full_attention"] = {"rope_type": "default"}
    if params.get("sliding_attention") is None:
        params["sliding_attention"] = {"rope_type": "default"}
    default = family["rope_theta"]
    if model_type == "modernbert-decoder":  # global_rope_theta / local_rope_theta
        _check_top_reals(c, "global_rope_theta", "local_rope_theta")
        params["full_attention"].setdefault("rope_theta", c.get("global_rope_theta", default))
        params["sliding_attention"].setdefault("rope_theta", c.get("local_rope_theta", 10000.0))
    elif model_type in ("gemma3_text", "gemma3n_text"):
        params["full_attention"].setdefault("rope_theta", c.get("rope_theta", default))
        params["sliding_attention"].setdefault(
            "rope_theta", c.get("rope_local_base_freq", family["rope_local_base_freq"]))
    else:  # OLMo 3: the sliding layers take the class default (rope_theta is popped once)
        params["full_attention"].setdefault("rope_theta", c.get("rope_theta", default))
        params["sliding_attention"].setdefault("rope_theta", default)
    for p in params.values():
        if isinstance(p, dict):
            p.setdefault("rope_type", p.get("type", "default"))
            p.pop("type", None)
            if p["rope_type"] in ("llama3", "yarn", "longrope"):
                if c.get("max_position_embeddings") is not None:
                    p.setdefault("original_max_position_embeddings", c["max_position_embeddings"])
    c["rope_parameters"] = params
    c.pop("rope_theta", None)


def _family_rules(c, family, model_type):
    """The layer pattern, the layers without attention and the attention layers without
    RoPE of a family that declares them (``_layer_types``, ``_no_attention``), as its
    configuration class's ``__post_init__`` and its model file decide."""
    if family.get("_interleaved"):
        c["rope_interleave"] = True  # the model file's rotate_half pairs neighbours
    if model_type in ("gptj", "codegen"):
        rotary = _count(c, "rotary_dim")  # GPTJAttention rotates the first rotary_dim features
        head = _count(c, "hidden_size") // _count(c, "num_attention_heads")
        if rotary > head or rotary % 2:
            raise ValueError(f"config['rotary_dim'] must be even and at most the head width "
                             f"{head}, got {rotary}")
        c["head_dim"], c["partial_rotary_factor"] = head, rotary / head
        # create_sinusoidal_positions: base 10000 written in the code, no rope keys read
        c.pop("rope_scaling", None)
        c.pop("rope_theta", None)
        c["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}
    if model_type == "longcat_flash":
        c.setdefault("num_hidden_layers", 2 * _count(dict(c, n=c.pop("_num_layers", 28)), "n"))
    if "_partial_forced" in family:  # BambaConfig sets it whatever the file says
        c["partial_rotary_factor"] = family["_partial_forced"]
    if model_type == "minimax_m2" and c.get("rotary_dim") is not None:
        # MiniMaxM2Config: a legacy rotary_dim sets partial_rotary_factor = rotary_dim / head_dim
        c.setdefault("partial_rotary_factor", _count(c, "rotary_dim") / _count(c, "head_dim"))
    if model_type == "mimo_v2_flash" and c.get("sliding_window_size") is not None:
        # MiMoV2FlashConfig: the window attends sliding_window_size tokens plus the query
        c["sliding_window"] = _count(c, "sliding_window_size") + 1
    if family.get("_head_from_hidden"):  # its __post_init__ sets head_dim so
        c["head_dim"] = _count(c, "hidden_size") // _count(c, "num_attention_heads")
    if model_type == "step3p5":
        _step3p5_layers(c)
    if model_type == "modernbert-decoder":  # its __post_init__: half the local window
        local = _count(c, "local_attention", minimum=0)
        if not local and "sliding_attention" in (c.get("layer_types") or ["sliding_attention"]):
            raise ValueError("config['local_attention'] must be positive for sliding layers: "
                             "ModernBertDecoderConfig then sets sliding_window -1, which no mask "
                             "reads as a window; give the local window")
        c["sliding_window"] = local // 2 if local else None
    if model_type == "zamba2":
        if c.get("use_long_context"):
            if c.get("use_mem_rope"):
                raise ValueError(
                    "config['use_long_context'] is true: transformers 5.23 warns that it uses "
                    "a rescaled rope_theta but rotates with the file's base, so which base the "
                    "checkpoint expects is not in the config; read it without use_long_context")
            c["max_position_embeddings"] = 16384  # Zamba2Config sets it so
        c["head_dim"] = 2 * _count(c, "hidden_size") // _count(c, "num_attention_heads")
    if c.get("layer_types") is None and "_layer_types" in family:
        rule = family["_layer_types"]
        n = _count(c, "num_hidden_layers", maximum=MAX_LAYERS)
        if rule[0] == "required":
            raise ValueError(f"config['layer_types'] is required for model_type {model_type!r}: "
                             "its class has no default and its model reads it per layer; give "
                             "the file's layer_types")
        if rule[0] == "all":
            c["layer_types"] = [rule[1]] * n
        elif rule[0] == "every":  # (every, period, type when (i + offset) % period == 0, else,
            _, period, hit, other, key, *offset = rule  # key of the period, offset: 1 if absent)
            offset = offset[0] if offset else 1
            if key is not None:
                period = _count(dict(c, **{key: c.get(key, period)}), key)
            c["layer_types"] = [hit if (i + offset) % period == 0 else other for i in range(n)]
            if model_type == "olmo_hybrid" and hit not in c["layer_types"]:
                c["layer_types"][-1] = hit  # OlmoHybridConfig keeps one full attention layer
            if model_type == "mimo_v2_flash":
                c["layer_types"][0] = hit  # MiMoV2FlashConfig: the first layer is global too
            if model_type in ("beam", "gemma4_text", "gemma4_unified_text"):
                c["layer_types"][-1] = hit  # BeamConfig: the last layer is global too
        elif rule[0] == "indices":  # (indices, type listed, type not listed, key, all if absent)
            _, hit, other, key, everywhere = rule
            idxs = c.get(key)
            if idxs is not None and not isinstance(idxs, (list, tuple)):
                raise TypeError(f"config[{key!r}] must be a list of layer indices, "
                                f"got {_short(idxs)}")
            idxs = set(range(n) if everywhere else ()) if idxs is None else set(idxs)
            c["layer_types"] = [hit if i in idxs else other for i in range(n)]
        elif rule[0] == "window_from":  # sliding from max_window_layers on, where a window is set
            first = _count(c, "max_window_layers", minimum=0)
            c["layer_types"] = ["sliding_attention" if c.get("sliding_window") is not None
                                and i >= first else "full_attention" for i in range(n)]
        elif rule[0] == "all_window":  # every layer sliding where a window is set
            c["layer_types"] = [rule[1] if c.get("sliding_window") is not None
                                else "full_attention"] * n
        elif rule[0] == "flint":  # FlintConfig: the first two, every i % 4 == 1 and the last global
            c["layer_types"] = ["full_attention" if i < 2 or i % 4 == 1 or i == n - 1
                                else "sliding_attention" for i in range(n)]
        elif rule[0] == "from_last":  # (from_last, period, type when (n-1-i) % period == 0, else)
            _, period, hit, other = rule
            c["layer_types"] = [hit if (n - 1 - i) % period == 0 else other for i in range(n)]
        elif rule[0] == "recurrent_gemma":  # RecurrentGemmaConfig.layers_block_type
            blocks = c.get("block_types", ("recurrent", "recurrent", "attention"))
            if not isinstance(blocks, (list, tuple)) or not blocks:
                raise TypeError(f"config['block_types'] must be a non-empty list, got "
                                f"{_short(blocks)}")
            c["layer_types"] = ["linear_attention" if b == "recurrent" else "sliding_attention"
                                for b in (list(blocks) * n)[:n]]
        elif rule[0] == "zamba2":  # Zamba2Config's layout, 54 layers whatever the count
            c["layer_types"] = (["linear_attention"] + (["linear_attention"] * 5 + ["hybrid"]) * 7
                                + ["linear_attention"] * 4 + ["hybrid"] + ["linear_attention"] * 3
                                + ["hybrid"] + ["linear_attention"] * 2)
        elif rule[0] == "lfm3":  # Lfm3Config: i % 4 == 2 full, i % 4 == 0 < i sliding, else conv
            c["layer_types"] = ["full_attention" if i % 4 == 2 else "sliding_attention"
                                if i % 4 == 0 and i > 0 else "conv" for i in range(n)]
        elif rule[0] == "exaone4":  # Exaone4Config: a pattern only where there is a window
            period = _count(dict(c, sliding_window_pattern=c.get("sliding_window_pattern", 4)),
                            "sliding_window_pattern")
            c["layer_types"] = _pattern(n, period) if c.get("sliding_window") else None
    types = c.get("layer_types")
    if model_type == "exaone4" and c.get("sliding_window") is not None and types:
        # Exaone4Attention rotates "if self.sliding_window is None or self.is_sliding"
        c["no_rope_layers"] = [int(t == "sliding_attention") for t in types]
    if model_type == "granitemoehybrid" and c.get("position_embedding_type") != "rope":
        # GraniteMoeHybridModel builds its rotary module only for position_embedding_type "rope"
        c["no_rope_layers"] = [0] * len(types or [])
    if "_rotating_types" in family and types:  # the model file rotates these types only
        c["no_rope_layers"] = [int(t in family["_rotating_types"]) for t in types]
    if model_type == "zamba2" and not c.get("use_mem_rope"):
        # Zamba2Model builds no rotary module and passes None without use_mem_rope
        c["no_rope_layers"] = [0] * len(types or [])
    if model_type == "olmo_hybrid" and types:
        # OlmoHybridModel gives position embeddings to its full_attention layers only
        c["no_rope_layers"] = [int(t == "full_attention") for t in types]
    c["_no_attention"] = family.get("_no_attention", ())
    c["_sliding_types"] = family.get("_sliding_types", ())
    c["_notes"] = family.get("_notes", ())


def _is_nested(params):
    return isinstance(params, Mapping) and bool(params) and all(
        isinstance(v, Mapping) or v is None for v in params.values())


def _per_type_rope(c, family, model_type):
    """A family whose class default is a rope dict per layer type (LFM3, MiMo-V2-Flash,
    Laguna, ...): the file's rope_parameters, else the default; rope_theta filled in each
    dict as ``convert_rope_params_to_dict`` does (``_fills_theta`` False: it fills nothing)."""
    _check_top_reals(c, "rope_theta")
    params = c.pop("rope_scaling", None) or c.get("rope_parameters")
    if params is not None and not isinstance(params, Mapping):
        raise TypeError(f"config['rope_parameters'] must be a dict or null, got {_short(params)}")
    if model_type == "zaya" and params is not None:
        # ZayaConfig.convert_rope_params_to_dict drops a stray flat rope_type beside the dicts
        params = {k: v for k, v in params.items() if k != "rope_type"}
    params = params or family["_default_rope"]
    if not _is_nested(params):
        raise ValueError(f"config['rope_parameters'] must hold one dict per layer type for "
                         f"model_type {model_type!r} (as its class does); give it keyed by "
                         "layer type")
    params = {k: (None if v is None else dict(v)) for k, v in params.items()}
    used = set(c.get("layer_types") or params)
    for t, p in params.items():
        if p is None:
            continue
        if family.get("_fills_theta", True):
            p.setdefault("rope_theta", c.get("rope_theta", family["rope_theta"]))
        elif "rope_theta" not in p and t in used:
            raise ValueError(f"config['rope_parameters'][{t!r}] must give rope_theta for model_type "
                             f"{model_type!r}: its class fills in none and its rotary module needs "
                             "it; give the base of that layer type")
        p.setdefault("rope_type", p.pop("type", "default"))
        if p["rope_type"] in ("llama3", "yarn", "longrope"):
            if c.get("max_position_embeddings") is not None:
                p.setdefault("original_max_position_embeddings", c["max_position_embeddings"])
    c["rope_parameters"] = params
    c.pop("rope_theta", None)
