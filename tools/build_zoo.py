"""Write tests/zoo/<slug>/config.json from published config.json texts mirrored on GitHub.

The Hugging Face Hub is not reachable from this project's machines, so the zoo's files
come from public repositories that carry published ``config.json`` contents: MLC LLM's
``MODEL_PRESETS`` (the published dicts, to which MLC adds its own runtime keys
``context_window_size`` / ``prefill_chunk_size`` / ``attention_sink_size`` /
``sliding_window_size``, removed here and listed per file in the manifest), and config
texts quoted whole in a Markdown file.  Run by hand with git mirrors of the sources::

    python tools/build_zoo.py /work/.mirror

(each source at ``<mirrors>/<owner>+<name>/repo``); it rewrites the zoo's files and
``tests/zoo/manifest.json``, which records for each file the repository, path, commit,
how it was carried (``preset`` or ``quoted``), the keys removed and the licences.
Files copied whole from a repository that mirrors a model's files (form ``file``) are
listed by hand in ``tests/zoo/manifest_extra.json``, each with its repository, path,
commit and a note on how the copy relates to the published file; this script merges them.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ZOO = Path(__file__).resolve().parents[1] / "tests" / "zoo"

MLC = ("mlc-ai/mlc-llm", "79d603f085f50500e9509fa01785ffa7ecfaaa93",
       "python/mlc_llm/model/model_preset.py", "Apache-2.0")
# An earlier revision of the same file: presets MLC removed later (Llama 3 8B, Phi-3, the
# Qwen3-4B 2507 release)
MLC_2025 = ("mlc-ai/mlc-llm", "6eba7b23f78420607dbd55fc47c19d5bc8309b26",
            "python/mlc_llm/model/model_preset.py", "Apache-2.0")
PROF = ("citsjtu2020/LLM-Prof", "8434c8d19c396b2f95d92a67845a7c0a0e0dd512",
        "sglang/Model_Config.md", "none stated")
MLC_KEYS = ("context_window_size", "prefill_chunk_size", "attention_sink_size",
            "sliding_window_size")

# slug: (source, key in the source, model, model licence)
ENTRIES = {
    "llama-2-13b": (MLC, "llama2_13b", "meta-llama/Llama-2-13b-hf", "Llama 2 Community License"),
    "codellama-7b": (MLC, "codellama_7b", "codellama/CodeLlama-7b-hf", "Llama 2 Community License"),
    "tinyllama-1.1b-chat-v1.0": (MLC, "tinyllama_1b_chat_v1.0", "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
                                 "Apache-2.0"),
    "mistral-7b-v0.1": (MLC, "mistral_7b", "mistralai/Mistral-7B-Instruct-v0.1 (MLC preset mistral_7b)",
                        "Apache-2.0"),
    "mistral-7b-v0.3": (MLC, "mistral_7b_v03", "mistralai/Mistral-7B-Instruct-v0.3 (MLC preset mistral_7b_v03)",
                        "Apache-2.0"),
    "ministral-3-3b-2512": (MLC, "ministral3_3b_2512", "mistralai/Ministral-3-3B (2512; MLC preset ministral3_3b_2512)",
                            "Apache-2.0"),
    "mixtral-8x7b-v0.1": (MLC, "Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x7B-v0.1", "Apache-2.0"),
    "redpajama-incite-3b": (MLC, "redpajama_3b_v1", "togethercomputer/RedPajama-INCITE-Chat-3B-v1 (GPT-NeoX)",
                            "Apache-2.0"),
    "phi-3.5-mini": (MLC, "phi-3_5", "microsoft/Phi-3.5-mini-instruct", "MIT"),
    "phi-3.5-vision": (MLC, "phi-3_5-vision", "microsoft/Phi-3.5-vision-instruct", "MIT"),
    "phi-4-mini": (MLC, "phi-4", "microsoft/Phi-4-mini-instruct", "MIT"),
    "qwen1.5-1.8b-chat": (MLC, "qwen2", "Qwen/Qwen1.5-1.8B-Chat", "Tongyi Qianwen License"),
    "qwen1.5-moe-a2.7b": (MLC, "qwen2moe", "Qwen/Qwen1.5-MoE-A2.7B-Chat (MLC preset qwen2moe)",
                          "Tongyi Qianwen License"),
    "qwen2-0.5b": (MLC, "qwen2_0_5b", "Qwen/Qwen2-0.5B-Instruct (MLC preset qwen2_0_5b)", "Apache-2.0"),
    "qwen2-7b": (MLC, "qwen2_7b", "Qwen/Qwen2-7B-Instruct (MLC preset qwen2_7b)", "Apache-2.0"),
    "qwen3-0.6b": (MLC, "qwen3_0.6b", "Qwen/Qwen3-0.6B", "Apache-2.0"),
    "deepseek-v2-lite": (MLC, "deepseek_v2_lite", "deepseek-ai/DeepSeek-V2-Lite-Chat (MLC preset deepseek_v2_lite)",
                         "DeepSeek Model License"),
    "stablelm-zephyr-3b": (MLC, "stablelm", "stabilityai/stablelm-zephyr-3b (MLC preset stablelm)",
                           "StabilityAI Non-Commercial Research Community License"),
    "stablelm-2-zephyr-1.6b": (MLC, "stablelm-2-zephyr-1_6b", "stabilityai/stablelm-2-zephyr-1_6b",
                               "StabilityAI Non-Commercial Research Community License"),
    "gemma-2b": (MLC, "gemma_2b", "google/gemma-2b-it (MLC preset gemma_2b)", "Gemma Terms of Use"),
    "gemma-2-2b": (MLC, "gemma2_2b", "google/gemma-2-2b-it (MLC preset gemma2_2b)", "Gemma Terms of Use"),
    "gemma-2-9b": (MLC, "gemma2_9b", "google/gemma-2-9b-it (MLC preset gemma2_9b)", "Gemma Terms of Use"),
    "gemma-2-27b": (MLC, "gemma2_27b", "google/gemma-2-27b-it (MLC preset gemma2_27b)", "Gemma Terms of Use"),
    "gemma-3-1b": (MLC, "gemma3_1b_it", "google/gemma-3-1b-it", "Gemma Terms of Use"),
    "llama-3.1-70b": (MLC, "llama3_1_70b", "meta-llama/Llama-3.1-70B-Instruct (MLC preset llama3_1_70b)",
                      "Llama 3.1 Community License"),
    "llama-3.2-1b": (MLC, "llama3_2_1b", "meta-llama/Llama-3.2-1B-Instruct (MLC preset llama3_2_1b)",
                     "Llama 3.2 Community License"),
    "smollm2-135m": (MLC, "smollm2_135m", "HuggingFaceTB/SmolLM2-135M-Instruct (MLC preset smollm2_135m)",
                     "Apache-2.0"),
    "aya-23-8b": (MLC, "aya-23", "CohereForAI/aya-23-8B (MLC preset aya-23; Cohere Command R family)",
                  "CC-BY-NC-4.0"),
    "olmo-2-7b": (MLC, "olmo2_7b", "allenai/OLMo-2-1124-7B-Instruct (MLC preset olmo2_7b)", "Apache-2.0"),
    "olmo-2-32b": (MLC, "olmo2_32b", "allenai/OLMo-2-0325-32B-Instruct (MLC preset olmo2_32b)", "Apache-2.0"),
    "gpt2": (MLC, "gpt2", "openai-community/gpt2", "MIT"),
    "snowflake-arctic-embed-m": (MLC, "snowflake-arctic-embed-m", "Snowflake/snowflake-arctic-embed-m",
                                 "Apache-2.0"),
    "llama-3-8b": (MLC_2025, "llama3_8b", "meta-llama/Meta-Llama-3-8B-Instruct (MLC preset llama3_8b)",
                   "Meta Llama 3 Community License"),
    "phi-3-mini-4k": (MLC_2025, "phi-3", "microsoft/Phi-3-mini-4k-instruct (MLC preset phi-3)", "MIT"),
    "qwen3-4b-instruct-2507": (MLC_2025, "qwen3_4b_instruct_2507", "Qwen/Qwen3-4B-Instruct-2507",
                               "Apache-2.0"),
    "starcoder2-7b": (MLC, "starcoder2", "bigcode/starcoder2-7b (MLC preset starcoder2)",
                      "BigCode OpenRAIL-M v1"),
    "llama-3.1-8b": (PROF, "Llama-3.1-8B", "meta-llama/Llama-3.1-8B", "Llama 3.1 Community License"),
    "llama-3.2-3b": (PROF, "Llama-3.2-3B", "meta-llama/Llama-3.2-3B", "Llama 3.2 Community License"),
    "qwen2.5-3b": (PROF, "Qwen2.5-3B", "Qwen/Qwen2.5-3B", "Qwen Research License"),
    "qwen2.5-7b": (PROF, "Qwen2.5-7B", "Qwen/Qwen2.5-7B", "Apache-2.0"),
    "qwen2.5-14b": (PROF, "Qwen2.5-14B", "Qwen/Qwen2.5-14B", "Apache-2.0"),
    "qwen2.5-32b": (PROF, "Qwen2.5-32B", "Qwen/Qwen2.5-32B", "Apache-2.0"),
    "qwen3-4b": (PROF, "Qwen3-4B", "Qwen/Qwen3-4B", "Apache-2.0"),
    "qwen3-8b": (PROF, "Qwen3-8B", "Qwen/Qwen3-8B", "Apache-2.0"),
    "qwen3-14b": (PROF, "Qwen3-14B", "Qwen/Qwen3-14B", "Apache-2.0"),
    "qwen3-32b": (PROF, "Qwen3-32B", "Qwen/Qwen3-32B", "Apache-2.0"),
    "qwen3-30b-a3b": (PROF, "Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B", "Apache-2.0"),
}


def _show(mirrors, source):
    repo, commit, path, _ = source
    git = Path(mirrors) / repo.replace("/", "+") / "repo"
    return subprocess.check_output(["git", "-C", str(git), "show", f"{commit}:{path}"], text=True)


def _mlc_presets(text):
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "MODEL_PRESETS":
            return ast.literal_eval(node.value)
    raise ValueError("MODEL_PRESETS not found")


def _quoted_blocks(text):
    """``Name\\n{...}\\n`` blocks of a Markdown file: name -> the JSON text as quoted."""
    out = {}
    for m in re.finditer(r"^(\S[^\n]*)\n(\{\n.*?\n\})\n", text, flags=re.S | re.M):
        out[m.group(1).strip()] = m.group(2) + "\n"
    return out


def main(mirrors):
    texts = {}
    manifest = []
    for slug, (source, key, model, licence) in sorted(ENTRIES.items()):
        if source not in texts:
            texts[source] = _show(mirrors, source)
        repo, commit, path, mirror_licence = source
        removed = []
        if source[0] == MLC[0]:
            preset = dict(_mlc_presets(texts[source])[key])
            removed = [k for k in MLC_KEYS if k in preset]
            for k in removed:
                del preset[k]
            body = json.dumps(preset, indent=2) + "\n"
            form = "preset"
        else:
            body = _quoted_blocks(texts[source])[key]
            json.loads(body)
            form = "quoted"
        (ZOO / slug).mkdir(parents=True, exist_ok=True)
        (ZOO / slug / "config.json").write_text(body, encoding="utf-8")
        manifest.append({
            "slug": slug, "model": model, "repository": repo, "path": path, "commit": commit,
            "url": f"https://github.com/{repo}/blob/{commit}/{path}", "entry": key, "form": form,
            "removed_keys": removed, "model_licence": licence, "mirror_licence": mirror_licence,
        })
    extra = ZOO / "manifest_extra.json"  # files added by hand, each with its own source
    if extra.exists():
        manifest += json.loads(extra.read_text(encoding="utf-8"))
    manifest.sort(key=lambda e: e["slug"])
    (ZOO / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    print(f"{len(manifest)} zoo files")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror")
