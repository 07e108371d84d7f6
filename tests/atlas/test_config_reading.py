"""Configs that were once read wrongly, each read as transformers 5.23 reads it, and hostile files.

Every case here gave a wrong description with exit status 0, or a traceback, before
posenc/atlas/_families.py: Gemma 3's local base and layer pattern, Phi-3's top-level
original length, Llama 4's empty ``no_rope_layers`` and chunked layers, Qwen2.5-VL's
``"type": "mrope"`` (as published and as transformers 5.23 re-saves it), DeepSeek-V3's
rotating pairs, ``--plot`` without matplotlib, and files built to break the reader.
"""

import json
import math
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from posenc.__main__ import main
from posenc.atlas import ATLAS_DIR, describe_config, load_config

ZOO = Path(__file__).resolve().parents[1] / "zoo"


def reading(tmp_path, config):
    from zoo.reference import transformers_reading

    (tmp_path / "config.json").write_text(json.dumps(config))
    return transformers_reading(tmp_path)


def test_gemma3_local_layers_use_the_local_base(tmp_path):
    """Gemma 3 1B as published: 22 sliding layers at 10,000, 4 global at 1e6."""
    config = load_config(ZOO / "gemma-3-1b" / "config.json")
    d = describe_config(config)
    layers = {layer.layer_type: layer for layer in d.layers}
    assert layers["sliding_attention"].layers == 22 and layers["full_attention"].layers == 4
    assert layers["sliding_attention"].rope_theta == 10000.0
    assert layers["full_attention"].rope_theta == 1e6
    assert layers["sliding_attention"].window == 512 and layers["full_attention"].window is None
    assert d.pattern() == "22 sliding(512) + 4 global"
    ref = reading(tmp_path, config)
    assert ref["layers"]["sliding_attention"]["rope_theta"] == 10000.0
    assert ref["layers"]["full_attention"]["count"] == 4


def test_gemma3_pattern_puts_global_layers_where_transformers_does():
    config = dict(load_config(ZOO / "gemma-3-1b" / "config.json"), sliding_window_pattern=4,
                  num_hidden_layers=10)
    d = describe_config(config)
    counts = {layer.layer_type: layer.layers for layer in d.layers}
    assert counts == {"sliding_attention": 8, "full_attention": 2}  # layers 3 and 7


def test_phi3_top_level_original_length_wins(tmp_path):
    """Phi-3.5-mini: original 4096 (top level), long factors, attention factor 1.1902."""
    config = load_config(ZOO / "phi-3.5-mini" / "config.json")
    d = describe_config(config)
    g = d.layers[0]
    assert d.original_max_position_embeddings == 4096
    assert g.attention_factor == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))
    assert round(g.attention_factor, 4) == 1.1902
    long = np.array(config["rope_scaling"]["long_factor"])
    plain = 10000.0 ** -(np.arange(0, 96, 2) / 96)
    np.testing.assert_allclose(g.inv_freq, plain / long, rtol=1e-12)
    ref = reading(tmp_path, config)["layers"]["all"]
    np.testing.assert_allclose(g.inv_freq, ref["inv_freq"], rtol=2e-6)
    assert g.attention_factor == pytest.approx(ref["attention_factor"], rel=1e-12)


#: Llama 4 Scout's text_config keys that concern positions (meta-llama/Llama-4-Scout-17B-16E
#: config.json has "no_rope_layers": [] and attention_chunk_size 8192, 48 layers).
SCOUT = {
    "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text", "head_dim": 128, "hidden_size": 5120,
        "num_attention_heads": 40, "num_key_value_heads": 8, "num_hidden_layers": 48,
        "max_position_embeddings": 10485760, "attention_chunk_size": 8192,
        "no_rope_layers": [], "interleave_moe_layer_step": 1, "num_local_experts": 16,
        "intermediate_size": 8192, "intermediate_size_mlp": 16384, "vocab_size": 202048,
        "rope_theta": 500000.0,
        "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    },
}


def test_llama4_empty_no_rope_layers_is_the_default_interval(tmp_path, capsys):
    d = describe_config(SCOUT)
    assert d.nope_layers == 12 and len(d.layers) == 1
    rope = d.layers[0]
    assert rope.layer_type == "chunked_attention" and rope.layers == 36
    assert rope.window == 8192 and rope.window_kind == "chunked"
    assert d.pattern() == "36 chunked(8192) + 12 NoPE global"
    from zoo.reference import assert_same_reading

    assert_same_reading(d, reading(tmp_path, SCOUT))
    path = tmp_path / "scout.json"
    path.write_text(json.dumps(SCOUT))
    assert main(["inspect", str(path)]) == 0
    assert "36 chunked(8192) + 12 NoPE global" in capsys.readouterr().out


def test_llama3_with_equal_band_factors_is_read_with_a_note(tmp_path, capsys):
    """Scout's low_freq_factor = high_freq_factor = 1: transformers warns and computes a
    step (its smoothing divides by their difference, in a band that is empty)."""
    from posenc.atlas import format_description
    from zoo.reference import assert_same_reading

    d = describe_config(SCOUT)
    assert_same_reading(d, reading(tmp_path, SCOUT))
    path = tmp_path / "scout.json"
    path.write_text(json.dumps(SCOUT))
    assert main(["inspect", str(path)]) == 0
    assert ("note              llama3 with low_freq_factor = high_freq_factor: a step, pairs "
            "of wavelength above 8,192 divided by the factor") in capsys.readouterr().out
    assert "阶跃，波长超过 8,192 的维度对除以缩放倍数" in format_description(d, "zh")
    assert "low_freq_factor = high_freq_factor" not in "".join(
        describe_config(load_config(ZOO / "llama-3.1-8b" / "config.json")).notes)


def test_a_config_without_model_type_says_how_it_was_read(tmp_path, capsys):
    from posenc.atlas import format_description

    config = {k: v for k, v in LLAMA.items() if k != "model_type"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    from transformers import AutoConfig

    with pytest.raises(ValueError, match="Should have a `model_type` key"):
        AutoConfig.from_pretrained(str(tmp_path))
    assert main(["inspect", str(tmp_path / "config.json")]) == 0
    out = capsys.readouterr().out
    assert ("note              no model_type: keys read as written (absent rope_theta 10000, "
            "no window); transformers 5.23's AutoConfig refuses such a file") in out
    zh = format_description(describe_config(config), "zh")
    assert "没有 model_type：各键按原样读取" in zh and "no model_type" not in zh
    assert not any("model_type" in n and "no " in n for n in describe_config(LLAMA).notes)


def test_llama4_without_the_key_reads_the_same(tmp_path):
    config = json.loads(json.dumps(SCOUT))
    del config["text_config"]["no_rope_layers"]
    assert describe_config(config).pattern() == "36 chunked(8192) + 12 NoPE global"


QWEN25_VL = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
    "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
    "num_hidden_layers": 28, "max_position_embeddings": 128000, "max_window_layers": 28,
    "rope_theta": 1000000.0, "sliding_window": 32768, "use_sliding_window": False,
    "intermediate_size": 18944, "vocab_size": 152064,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {"depth": 32, "hidden_size": 1280, "out_hidden_size": 3584},
}


@pytest.mark.parametrize("form", ["published", "resaved"])
def test_qwen25_vl_mrope_is_default_rope(tmp_path, form):
    config = json.loads(json.dumps(QWEN25_VL))
    if form == "resaved":  # what transformers 5.23 writes back: both names, and rope_parameters
        scaling = config.pop("rope_scaling")
        config["rope_parameters"] = dict(scaling, rope_type="default", rope_theta=1000000.0)
        del config["rope_theta"]
    d = describe_config(config)
    assert d.scaling == "none" and d.layers[0].rope_theta == 1e6
    assert d.layers[0].rope_type == "default" and d.layers[0].rotated_pairs == 64
    from zoo.reference import assert_same_reading

    assert_same_reading(d, reading(tmp_path, config))


def test_deepseek_v3_row_counts_the_32_rotating_pairs(capsys):
    assert main(["inspect", str(ATLAS_DIR / "deepseek-v3.json")]) == 0
    out = capsys.readouterr().out
    assert "of the 32 rotating pairs complete a turn" in out
    assert "32 of the head's 96 pairs (64 carry no position)" in out
    assert "of 96 complete" not in out


def test_plot_without_matplotlib_says_how_to_install(tmp_path, capsys, monkeypatch):
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith(("matplotlib.", "posenc.figures")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    status = main(["inspect", str(ATLAS_DIR / "gemma-4-e2b.json"), "--plot",
                   str(tmp_path / "x.png")])
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and err.count("\n") == 1  # checked before printing
    import tomllib

    repo = tomllib.loads((ZOO.parents[1] / "pyproject.toml").read_text())["project"]["urls"]
    assert (f'pip install "posenc[figures] @ git+{repo["Source"]}"' in err
            and 'pip install ".[figures]"' in err and "Traceback" not in err)
    assert not (tmp_path / "x.png").exists()


# -- hostile files ------------------------------------------------------------------------

LLAMA = load_config(ZOO / "llama-3.1-8b" / "config.json")


def with_key(key, raw):
    """The Llama 3.1 8B file with ``key`` set to the JSON text ``raw``."""
    text = json.dumps({k: v for k, v in LLAMA.items() if k != key})
    return text[:-1] + f', "{key}": {raw}}}'


HOSTILE = [
    ("nested", "[" * 200_000 + "]" * 200_000, "deeper than"),
    ("layers_1e12", with_key("num_hidden_layers", str(10**12)), "num_hidden_layers"),
    ("layers_1e30", with_key("num_hidden_layers", str(10**30)), "num_hidden_layers"),
    ("theta_400_digits", with_key("rope_theta", "9" * 400), "rope_theta"),
    ("max_400_digits", with_key("max_position_embeddings", "9" * 400), "max_position_embeddings"),
    ("partial_string", with_key("partial_rotary_factor", '"0.5"'), "partial_rotary_factor"),
    ("theta_string", with_key("rope_theta", '"500000"'), "rope_theta"),
    ("theta_nan", with_key("rope_theta", "NaN"), "rope_theta"),
    ("head_dim_huge", with_key("head_dim", str(10**9)), "head_dim"),
    ("deep_in_scaling", with_key("rope_scaling", "[" * 5000 + "]" * 5000), "deeper than"),
    ("digits_5000", with_key("rope_theta", "9" * 5000), "cannot be read"),
    ("factor_1e308", with_key("rope_scaling", json.dumps(
        dict(LLAMA["rope_scaling"], factor=1e308))), "factor x the original 8,192 tokens"),
]


@pytest.mark.parametrize("name, text, fragment", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_file_exits_2_with_one_line_naming_the_key(tmp_path, capsys, name, text, fragment):
    path = tmp_path / "config.json"
    path.write_text(text)
    tracemalloc.start()
    start = time.process_time()  # CPU time: the bound holds on a loaded machine too
    status = main(["inspect", str(path)])
    elapsed = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("posenc inspect: "), err
    assert fragment in err, err
    assert elapsed < 5.0 and peak < 200 * 2**20, (elapsed, peak)


def test_a_model_folder_reads_its_config_json(tmp_path):
    folder = ZOO / "qwen2.5-7b"
    assert load_config(folder) == load_config(folder / "config.json")
    with pytest.raises(ValueError, match="directory without a config.json.*model folder"):
        load_config(tmp_path)


def test_inspect_names_a_published_file_after_its_folder():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "posenc", "inspect", str(ZOO / "qwen2.5-7b")],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "qwen2.5-7b"


def test_every_family_prints_its_notes_in_both_languages():
    """The class defaults of every family posenc reads: each note has a Chinese line."""
    from posenc.atlas import format_description
    from posenc.atlas._families import FAMILIES

    for model_type in sorted(FAMILIES):
        try:
            d = describe_config({"model_type": model_type})
        except ValueError:  # defaults transformers cannot run, or no RoPE layer
            continue
        for line in format_description(d, "zh").splitlines():
            if line.startswith("  备注"):
                assert any("\u4e00" <= ch <= "\u9fff" for ch in line[4:]), (model_type, line)


def test_a_family_without_rotating_global_layers_says_which_layers_rotate(tmp_path, capsys):
    """Beam's global layers have no RoPE: the "rotated" line counts its sliding layers."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "beam"}))
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "128/128 features of the sliding layers (100%)" in out
    assert "43 sliding(512) + 9 NoPE global" in out
    assert "(1 + (position + 1) / 2048) ** 0.1" in out
    assert main(["inspect", str(path), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["span"], row["span_kind"], row["layers"]) == (
        512, "window", "43 sliding(512) + 9 NoPE global")
