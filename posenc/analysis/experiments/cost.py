"""What the GPU tier's protocol costs in arithmetic, counted from its configuration.

A step's cost is the floating-point operations of its matrix products, the count
:class:`torch.utils.flop_counter.FlopCounterMode` makes (a multiply-add is two): for a
:class:`~.models.TinyDecoder` of width ``d``, ``n_layers`` blocks and a vocabulary of
``V`` bytes, one sequence of ``T`` input tokens costs, forward,

    2 · P · T + 4 · d · n_layers · pairs(T),    P = n_layers · 12 d² + V · d,

``P`` being the weights that multiply (the query, key, value and output projections, the
MLP, and the tied output head), and ``pairs(T)`` the (query, key) pairs the attention
scores and reads: ``T (T + 1) / 2`` for causal attention counted as a causal kernel
computes it (:func:`pairs`).  Training costs three times the forward pass (the backward
pass multiplies by each product's two inputs).  Normalisations, activations, softmax and
the optimiser are left out: at width 256 they add about two per cent (a few dozen
operations per element against the 24 d² of a block's products per token).

:func:`gpu_work` lists every group of the GPU plan with its cost per seed; the whole
protocol is each group's cost times its seeds (:func:`gpu_protocol`).  A task group is
counted at its cap of steps, the most it can cost (a seed that learns leaves earlier).
Nothing is run: the counts come from the configuration alone.
"""

from __future__ import annotations

VOCAB = 256  # bytes: :class:`.models.ModelConfig`'s vocabulary
PROBE_MIN_LENGTH = 33  # :data:`.probe.MIN_LENGTH` (a test checks they agree)


def pairs(t: int, causal: bool = True) -> int:
    """The (query, key) pairs attention computes over ``t`` positions: ``t (t + 1) / 2``
    where it is causal, ``t²`` where every query reads every key.

    >>> pairs(4), pairs(4, causal=False)
    (10, 16)
    """
    if not isinstance(t, int) or isinstance(t, bool) or t < 1:
        raise ValueError(f"t must be an integer >= 1, got {t!r}")
    return t * (t + 1) // 2 if causal else t * t


def matmul_parameters(model: dict, vocab: int = VOCAB) -> int:
    """The weights that enter a matrix product in a forward pass (``model``: the
    configuration's ``{"d_model", "n_layers", ...}``)."""
    d, layers = int(model["d_model"]), int(model["n_layers"])
    return layers * 12 * d * d + vocab * d


def forward_flops(model: dict, length: int, sequences: int = 1, *,
                  causal: bool = True) -> int:
    """Operations of a forward pass over ``sequences`` inputs of ``length`` tokens.

    The GPU tier's model (width 256, 7 blocks) reading one window of 512 bytes, and the
    share of it its attention takes:

    >>> m = {"d_model": 256, "n_heads": 8, "n_layers": 7}
    >>> f"{forward_flops(m, 512) / 1e9:.2f} GFLOP"
    '6.65 GFLOP'
    >>> f"{1 - 2 * matmul_parameters(m) * 512 / forward_flops(m, 512):.1%}"
    '14.2%'
    """
    d, layers = int(model["d_model"]), int(model["n_layers"])
    per = 2 * matmul_parameters(model) * length + 4 * d * layers * pairs(length, causal)
    return sequences * per


def decode_flops(model: dict, keys: int, sequences: int = 1) -> int:
    """Operations of one token read after cached keys and values, ``keys`` of them with
    its own (greedy decoding with a cache): the token's products, and its scores and
    reads over ``keys`` keys."""
    if not isinstance(keys, int) or isinstance(keys, bool) or keys < 1:
        raise ValueError(f"keys must be an integer >= 1, got {keys!r}")
    d, layers = int(model["d_model"]), int(model["n_layers"])
    return sequences * (2 * matmul_parameters(model) + 4 * d * layers * keys)


def train_flops(model: dict, length: int, sequences: int = 1, *,
                causal: bool = True) -> int:
    """Operations of one training step (forward and backward) over ``sequences`` inputs
    of ``length`` tokens."""
    return 3 * forward_flops(model, length, sequences, causal=causal)


def _readable(enc: str, train_length: int, lengths) -> list[int]:
    """The lengths a model of ``enc`` can read: a learned table has no row past its
    training length."""
    return [n for n in lengths if enc != "learned" or n <= train_length]


def gpu_work(config: dict, steps: int) -> dict[str, dict]:
    """Every group of the GPU plan (``config``: a tier of ``experiments/run.py``) at
    ``steps`` language-model steps: ``{group: {"part", "train", "eval"}}``, operations
    per seed.  A group is named as its units' keys are, less the seed (``lm-rope-L512``,
    ``scale-yarn-matched``, ``probe-alibi-L512``, ``finetune-pi``, ``copy-t5-lr0.001``)."""
    from .models import ENCODINGS
    from .rules import matched_kinds

    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    m, lm, plan = config["model"], config["lm"], config["plan"]
    L = int(lm["train_length"])
    lengths = [L * int(f) for f in lm["eval_factors"]]
    probe = config["finetune"]["probe"]

    def batch(n: int) -> int:  # the same bytes per step at every length
        return max(1, int(lm["batch"]) * L // n)

    def test(enc: str, train_length: int, at=lengths) -> int:
        return sum(forward_flops(m, n, lm["n_chunks"])
                   for n in _readable(enc, train_length, at))

    def probe_cost(enc: str, train_length: int) -> int:
        at = [n for n in lengths if n >= PROBE_MIN_LENGTH]
        return sum(forward_flops(m, n, probe["n"] * len(probe["depths"]))
                   for n in _readable(enc, train_length, at))

    out: dict[str, dict] = {}

    def add(group: str, part: str, train: int, evaluate: int) -> None:
        out[group] = {"part": part, "train": int(train), "eval": int(evaluate)}

    valid = forward_flops(m, L, lm["valid_chunks"])
    for enc in ENCODINGS:
        add(f"lm-{enc}-L{L}", "language models", steps * train_flops(m, L, batch(L)),
            test(enc, L) + valid)
    types = config["scaling"]["types"]
    for kind in types:
        add(f"scale-{kind}-fixed", "scaling", 0, test("rope", L))
    for kind in matched_kinds(types):
        add(f"scale-{kind}-matched", "scaling", 0,
            test("rope", L, [n for n in lengths if n > L]))
    for enc in ("rope", "alibi"):
        add(f"probe-{enc}-L{L}", "probes", 0, probe_cost(enc, L))
    for enc, n in plan["references"]:
        n = int(n)
        add(f"lm-{enc}-L{n}", "references", steps * train_flops(m, n, batch(n)),
            test(enc, n) + valid)
        add(f"probe-{enc}-L{n}", "references", 0, probe_cost(enc, n))
    n_ft = L * int(config["finetune"]["factor"])
    for arm in config["finetune"]["arms"]:
        add(f"finetune-{arm}", "fine-tuning",
            int(plan["ft_steps"]) * train_flops(m, n_ft, batch(n_ft)),
            test("rope", L) + probe_cost("rope", L))
    for name in ("copy", "passkey"):
        tc = config[name]
        if name == "copy":
            length = 2 * int(tc["m"][1]) + 1
            readable = [int(k) for k in tc["eval_m"]]
        else:
            length = int(tc["total"][1]) - 1
            readable = [int(t) for t in tc["eval_totals"]]
        cap, checks = int(tc["steps"]), int(tc["steps"]) // int(tc["check_every"]) + 1
        for enc in ENCODINGS:
            # the in-distribution checks while it trains, then the tests
            ev = checks * forward_flops(m, length, tc["n_valid"])
            if name == "copy":
                for k in readable:
                    if not _readable(enc, length, [2 * k + 1]):
                        continue
                    ev += forward_flops(m, 2 * k + 1, tc["n_eval"])  # teacher-forced
                    # free-running, with a cache: the k + 2 tokens given, then each
                    # written token but the last read after those before it
                    ev += forward_flops(m, k + 2, tc["n_eval"]) + sum(
                        decode_flops(m, n, tc["n_eval"]) for n in range(k + 3, 2 * k + 2))
            else:
                ev += sum(forward_flops(m, t - 1, tc["n_eval"] * len(tc["depths"]))
                          for t in readable if _readable(enc, length, [t - 1]))
            for lr in tc["lrs"]:
                add(f"{name}-{enc}-lr{float(lr):g}", "tasks",
                    cap * train_flops(m, length, int(tc["batch"])), ev)
    return out


def plan_seeds(config: dict) -> int:
    """The seeds of every group of the whole plan: ``first_seeds`` and ``more_seeds``."""
    return len(config["plan"]["first_seeds"]) + len(config["plan"]["more_seeds"])


def gpu_protocol(config: dict, steps: int | None = None) -> dict[str, int]:
    """The whole GPU protocol's operations by part (``"language models"``,
    ``"scaling"``, ``"probes"``, ``"references"``, ``"fine-tuning"``, ``"tasks"``) and in
    all (``"total"``), every seed of ``first_seeds`` and ``more_seeds``, at ``steps``
    (default: the plan's ``max_steps``, what the protocol asks for)."""
    steps = int(config["plan"]["max_steps"]) if steps is None else steps
    n_seeds = plan_seeds(config)
    out: dict[str, int] = {}
    for w in gpu_work(config, steps).values():
        out[w["part"]] = out.get(w["part"], 0) + n_seeds * (w["train"] + w["eval"])
    out["total"] = sum(out.values())
    return out


def group_of(key: str) -> str:
    """The group of a unit key: the key less its ``-s<seed>``.

    >>> group_of("scale-yarn-matched-s3")
    'scale-yarn-matched'
    """
    head, sep, seed = key.rpartition("-s")
    if not (sep and seed.isdigit()):
        raise ValueError(f"key must end in -s<seed>, got {key!r}")
    return head


def gpu_done(results: dict) -> int:
    """The operations the units of a GPU results file (``experiments/results-gpu.json``)
    cost, at the steps they were trained for."""
    work = gpu_work(results["config"], int(results["steps"]))
    return sum(work[(g := group_of(u["key"]))]["train"] + work[g]["eval"]
               for u in results["units"])


def gpu_compute(results: dict, budget_s: float = 540.0) -> dict:
    """What a GPU results file says about the device's pace against the whole protocol:
    ``"parts"`` (:func:`gpu_protocol`), ``"done"`` (:func:`gpu_done`), ``"seconds"``
    (the calls' wall time, ``provenance.calls`` where calls were merged), ``"rate"``
    (operations a second over that time), ``"whole_seconds"`` (the whole protocol at
    that rate) and ``"needed"`` (the rate that would finish it in ``budget_s``)."""
    if not (isinstance(budget_s, (int, float)) and budget_s > 0):
        raise ValueError(f"budget_s must be a number > 0, got {budget_s!r}")
    calls = results.get("provenance", {}).get("calls")
    seconds = (sum(float(c["seconds"]) for c in calls) if calls
               else float(results["seconds"]))
    parts = gpu_protocol(results["config"])
    done = gpu_done(results)
    rate = done / seconds
    return {"parts": parts, "done": done, "seconds": seconds, "rate": rate,
            "whole_seconds": parts["total"] / rate, "needed": parts["total"] / budget_s,
            "steps": int(results["config"]["plan"]["max_steps"]),
            "seeds": plan_seeds(results["config"])}
