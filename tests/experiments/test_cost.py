"""The GPU protocol's cost in operations (:mod:`posenc.analysis.experiments.cost`)."""

import json
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from posenc.analysis.experiments import cost
from posenc.analysis.experiments.models import ENCODINGS, ModelConfig, TinyDecoder, sequence_loss
from posenc.analysis.experiments.probe import MIN_LENGTH

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"d_model": 32, "n_heads": 4, "n_layers": 3}


def _counted(fn) -> int:
    mode = FlopCounterMode(display=False)
    with mode:
        fn()
    return mode.get_total_flops()


@pytest.mark.parametrize("enc", ENCODINGS)
def test_the_formula_is_what_torch_counts(enc):
    # on the meta device attention is the written-out product over every (query, key)
    # pair, so torch's count is the formula's without the causal half; at 40 positions
    # the additive-bias path is one block, the whole square too
    model = TinyDecoder(ModelConfig(enc, train_length=64, **SMALL)).to("meta")
    batch = torch.randint(0, 256, (3, 41)).to("meta")
    assert _counted(lambda: model(batch[:, :-1])) == cost.forward_flops(SMALL, 40, 3,
                                                                      causal=False)
    assert _counted(lambda: sequence_loss(model, batch).backward()) == cost.train_flops(
        SMALL, 40, 3, causal=False)
    # the causal count is less by exactly the masked pairs
    full, causal = (cost.forward_flops(SMALL, 40, 3, causal=c) for c in (False, True))
    assert full - causal == 3 * 4 * 32 * 3 * (40 * 39 // 2)


def test_a_cached_token_costs_what_torch_counts():
    from posenc.analysis.experiments import stacked as S

    stack = S.build(ModelConfig("rope", train_length=64, **SMALL), [0, 1])
    step = S._cached_step(stack, use_vmap=False)
    with torch.no_grad():
        _, keys, values = step(stack.params, torch.randint(0, 256, (2, 3, 20)), [], [], 0)
        stack.params = {k: v.to("meta") for k, v in stack.params.items()}
        keys, values = [k.to("meta") for k in keys], [v.to("meta") for v in values]
        stack.template.to("meta")
        nxt = torch.randint(0, 256, (2, 3, 1)).to("meta")
        counted = _counted(lambda: step(stack.params, nxt, keys, values, 20))
    assert counted == 2 * cost.decode_flops(SMALL, 21, 3)


def test_bad_arguments_are_refused():
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="t must be an integer >= 1"):
            cost.pairs(bad)
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        cost.gpu_work(_gpu_config(), 0)
    with pytest.raises(ValueError, match="keys must be an integer >= 1"):
        cost.decode_flops(SMALL, 0)
    with pytest.raises(ValueError, match="key must end in -s<seed>"):
        cost.group_of("lm-rope-L512")
    assert cost.PROBE_MIN_LENGTH == MIN_LENGTH


def _gpu_config(tier: str = "gpu") -> dict:
    sys.path.insert(0, str(ROOT))
    from experiments.run import TIERS

    return json.loads(json.dumps(TIERS[tier]))


def test_every_group_of_the_plan_is_counted_once():
    # the plan's groups, as its unit keys name them (the gpuquick run's keys are checked
    # against these in test_protocol), each counted once, training only where it trains
    cfg = _gpu_config()
    L = cfg["lm"]["train_length"]
    work = cost.gpu_work(cfg, 100)
    n_tasks = sum(len(cfg[t]["lrs"]) for t in ("copy", "passkey")) * len(ENCODINGS)
    assert len(work) == (len(ENCODINGS) + 9 + 2 + 2 * len(cfg["plan"]["references"])
                         + len(cfg["finetune"]["arms"]) + n_tasks)
    for g, w in work.items():
        assert (w["train"] > 0) == g.startswith(("lm-", "finetune-", "copy-", "passkey-"))
        assert w["eval"] > 0
    # a language model's training is its steps times one step at the batch of its length
    assert work[f"lm-rope-L{L}"]["train"] == 100 * cost.train_flops(cfg["model"], L,
                                                                      cfg["lm"]["batch"])
    # the learned table is tested only where it can read: less than RoPE
    assert work[f"lm-learned-L{L}"]["eval"] < work[f"lm-rope-L{L}"]["eval"]
    # the same bytes per step at a longer length cost more: the attention grows
    n = max(n for _, n in cfg["plan"]["references"])
    assert work[f"lm-rope-L{n}"]["train"] > 2 * work[f"lm-rope-L{L}"]["train"]
    # twice the steps, twice the training; the evaluation does not change
    again = cost.gpu_work(cfg, 200)
    assert again[f"lm-t5-L{L}"]["train"] == 2 * work[f"lm-t5-L{L}"]["train"]
    assert again[f"lm-t5-L{L}"]["eval"] == work[f"lm-t5-L{L}"]["eval"]
    # the tasks at their cap do not depend on the language models' steps
    assert again["copy-rope-lr0.001"] == work["copy-rope-lr0.001"]


def test_the_protocol_and_what_a_results_file_did():
    cfg = _gpu_config()
    parts = cost.gpu_protocol(cfg)
    assert set(parts) == {"language models", "scaling", "probes", "references",
                          "fine-tuning", "tasks", "total"}
    assert parts["total"] == sum(v for k, v in parts.items() if k != "total")
    seeds = len(cfg["plan"]["first_seeds"]) + len(cfg["plan"]["more_seeds"])
    assert cost.plan_seeds(cfg) == seeds
    work = cost.gpu_work(cfg, cfg["plan"]["max_steps"])
    assert parts["total"] == seeds * sum(w["train"] + w["eval"] for w in work.values())
    # a results file's units, each its group's cost at the steps the file trained for
    few = cost.gpu_work(cfg, 50)
    results = {"config": cfg, "steps": 50,
               "units": [{"key": "lm-rope-L512-s0"}, {"key": "lm-rope-L512-s1"},
                         {"key": "scale-pi-matched-s0"}]}
    lm, pi = few["lm-rope-L512"], few["scale-pi-matched"]
    assert cost.gpu_done(results) == 2 * (lm["train"] + lm["eval"]) + pi["eval"]


def test_run_prints_the_plan_s_cost():
    import subprocess

    run = [sys.executable, str(ROOT / "experiments" / "run.py")]
    proc = subprocess.run([*run, "--tier", "gpu", "--cost", "--steps", "550",
                           "--time-budget", "540"], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    parts = cost.gpu_protocol(_gpu_config(), 550)
    assert "the gpu plan at 550 steps" in proc.stdout
    for part, flops in parts.items():
        assert f"{part:<16} {flops / 1e15:10.2f} PFLOP" in proc.stdout
    assert f"{parts['total'] / 540 / 1e12:.0f} TFLOP/s sustained" in proc.stdout
    bad = subprocess.run([*run, "--cost"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--cost is for the gpu tier" in bad.stderr
