"""Fuzz: any JSON value, of any size, under any key posenc reads ends in exit 0 or exit 2.

Published files of five shapes (Llama 3.1 with llama3 scaling, Gemma 3 with per-layer-type
bases, Phi-3.5 with longrope, DeepSeek-V2-Lite with MLA and yarn, Qwen2.5-VL with M-RoPE
sections) get one key, at the top
level or inside ``rope_scaling``, replaced by a value hypothesis draws: null, booleans,
huge and negative integers, NaN and infinities, strings, lists and nested objects.  The
command line must answer with exit status 0, or 2 and one line that names the key, within
a time and memory bound; a traceback fails the test.
"""

import json
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from posenc.__main__ import main

ZOO = Path(__file__).resolve().parents[1] / "zoo"
BASES = ["llama-3.1-8b", "gemma-3-1b", "phi-3.5-mini", "deepseek-v2-lite",
         "qwen2.5-vl-32b-instruct-awq"]

#: Top-level keys describe_config (and the family rules) read.
TOP_KEYS = [
    "model_type", "text_config", "position_embedding_type", "alibi", "num_hidden_layers",
    "max_position_embeddings", "rope_parameters", "rope_scaling", "rope_theta",
    "partial_rotary_factor", "qk_rope_head_dim", "qk_nope_head_dim", "head_dim",
    "hidden_size", "num_attention_heads", "global_head_dim", "layer_types", "no_rope_layers",
    "no_rope_layer_interval", "sliding_window", "use_sliding_window", "attention_chunk_size",
    "rope_interleave", "max_window_layers", "sliding_window_pattern", "rope_local_base_freq",
    "original_max_position_embeddings", "_name_or_path",
]
#: Keys read inside rope_scaling / rope_parameters.
ROPE_KEYS = [
    "rope_type", "type", "rope_theta", "factor", "original_max_position_embeddings",
    "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
    "low_freq_factor", "high_freq_factor", "short_factor", "long_factor", "mrope_section",
    "mrope_interleaved", "truncate", "partial_rotary_factor",
]

SCALARS = (st.none() | st.booleans()
           | st.integers(-10, 10) | st.integers(-(10**30), 10**30)
           | st.sampled_from([0, 1, 2, 3, 64, 10**6, 10**12, 2**63, 10**400])
           | st.floats(allow_nan=True, allow_infinity=True)
           | st.text(max_size=8) | st.sampled_from(["0.5", "default", "yarn", "1e6"]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=6)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)


def big_list(value, n):
    return [value] * n


VALUE = VALUES | st.builds(big_list, SCALARS, st.sampled_from([0, 1, 48, 10_000, 50_000]))


def run(tmp_path, config):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config, allow_nan=True))
    tracemalloc.start()
    start = time.process_time()  # CPU time: the bound holds on a loaded machine too
    try:
        status = main(["inspect", str(path)])
    finally:
        elapsed = time.process_time() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return status, elapsed, peak


FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("base", BASES)
@FUZZ
@given(key=st.sampled_from(TOP_KEYS + [f"rope_scaling.{k}" for k in ROPE_KEYS]), value=VALUE)
# found by this test: an odd global_head_dim was refused naming head_dim
@example(key="global_head_dim", value=1)
@example(key="num_attention_heads", value=4096)
@example(key="head_dim", value=3)
def test_any_value_under_any_key_exits_0_or_2_naming_it(tmp_path, capsys, base, key, value):
    config = json.loads((ZOO / base / "config.json").read_text())
    name = key.split(".")[-1]
    if key.startswith("rope_scaling."):
        scaling = config.get("rope_scaling")
        config["rope_scaling"] = dict(scaling) if isinstance(scaling, dict) else {}
        config["rope_scaling"][name] = value
    else:
        config[key] = value
    capsys.readouterr()
    status, elapsed, peak = run(tmp_path, config)
    out, err = capsys.readouterr()
    assert status in (0, 2), (status, err)
    assert elapsed < 10.0 and peak < 256 * 2**20, (key, elapsed, peak)
    if status == 2:
        assert out == "" and err.count("\n") == 1 and err.startswith("posenc inspect: "), err
        named = [name] + (["rope_scaling", "rope_parameters"] if "." in key else [])
        if name in ("rope_scaling", "rope_parameters"):
            named += ["rope_parameters", "rope_scaling", "rope_type"]
        if name == "text_config":
            named += ["model_type"]
        # a file refused whole (too large, too deep, an unreadable number) names that rule
        named += ["bytes (a config.json is a few kilobytes)", "deeper than", "cannot be read"]
        assert any(n in err for n in named), (key, err)
