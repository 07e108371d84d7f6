"""Read numbers out of ``experiments/results.json`` (schema 2): per-seed values, summaries with
95 % intervals, and paired comparisons.  Pure Python: the chapter and its tests use these
without importing PyTorch.

Every accessor returns one value per seed, in seed order, so two methods can be compared
seed by seed (:func:`stats.paired`).  Losses are nats per byte on the fixed test targets
unless ``metric`` says otherwise (``"window"``: the mean over every position of the window).
"""

from __future__ import annotations

from . import stats

SCHEMA = 2


def check(results) -> None:
    """Raise ``ValueError`` unless ``results`` is a schema-2 results dict."""
    if not isinstance(results, dict) or results.get("schema") != SCHEMA:
        got = results.get("schema") if isinstance(results, dict) else type(results).__name__
        raise ValueError(f"results must be an experiments/results.json dict with schema "
                         f"{SCHEMA}, got schema {got!r}")
    for key in ("provenance", "config", "corpus", "lm", "scaling", "finetune", "budget",
                "copy", "passkey"):
        if key not in results:
            raise ValueError(f"results must have a {key!r} entry")


def lengths(results) -> list[int]:
    lm = results["config"]["lm"]
    return [lm["train_length"] * f for f in lm["eval_factors"]]


def _pick(rows, metric, n):
    out = []
    for r in sorted(rows, key=lambda r: r["seed"]):
        v = r["test"][str(n)]
        out.append(None if v is None else v[metric])
    return out


def lm_values(results, encoding: str, n: int, metric: str = "target") -> list:
    """Per-seed loss of ``encoding`` (trained, tuned setting) at length ``n``; ``None`` where
    the model cannot read ``n`` positions."""
    rows = [r for r in results["lm"]["runs"] if r["encoding"] == encoding]
    if not rows:
        raise ValueError(f"encoding must be one of the trained encodings, got {encoding!r}")
    return _pick(rows, metric, n)


def scaling_values(results, kind: str, n: int, metric: str = "target") -> list:
    """Per-seed loss of the trained RoPE model with scaling ``kind`` applied at length ``n``."""
    rows = [r for r in results["scaling"] if r["kind"] == kind]
    if not rows:
        raise ValueError(f"kind must be one of {sorted({r['kind'] for r in results['scaling']})}"
                         f", got {kind!r}")
    return _pick(rows, metric, n)


def finetune_values(results, arm: str, n: int, metric: str = "target") -> list:
    """Per-seed loss after fine-tuning at the longer length, ``arm`` "pi" or "plain"."""
    rows = [r for r in results["finetune"] if r["arm"] == arm]
    if not rows:
        raise ValueError(f"arm must be 'pi' or 'plain', got {arm!r}")
    return _pick(rows, metric, n)


def buckets(results, encoding: str, n: int) -> list[list[float]]:
    """Per-seed losses per block of positions at length ``n`` (each a list over blocks)."""
    rows = sorted((r for r in results["lm"]["runs"] if r["encoding"] == encoding),
                  key=lambda r: r["seed"])
    return [r["test"][str(n)]["buckets"] for r in rows]


def task_values(results, task: str, encoding: str, key: int, metric: str = "exact",
                depth: float | None = None) -> list:
    """Per-seed accuracy on ``task`` ("copy": ``key`` is the string length m; "passkey":
    ``key`` is the total length, averaged over the depths unless ``depth`` is given)."""
    if task not in ("copy", "passkey"):
        raise ValueError(f"task must be 'copy' or 'passkey', got {task!r}")
    if metric not in ("exact", "symbol"):
        raise ValueError(f"metric must be 'exact' or 'symbol', got {metric!r}")
    rows = sorted((r for r in results[task]["runs"] if r["encoding"] == encoding),
                  key=lambda r: r["seed"])
    out: list = []
    for r in rows:
        v = r["test"][str(key)]
        if v is None:
            out.append(None)
        elif task == "copy":
            out.append(v[metric])
        elif depth is None:
            out.append(sum(d[metric] for d in v.values()) / len(v))
        else:
            out.append(v[str(depth)][metric])
    return out


def summarise(values: list) -> dict | None:
    """:func:`stats.summary` of per-seed values, or ``None`` if any is ``None``."""
    if any(v is None for v in values):
        return None
    return stats.summary(values)


def compare(a: list, b: list) -> dict:
    """The paired comparison ``a - b`` over seeds (:func:`stats.paired`)."""
    return stats.paired(a, b)


# -- the GPU tier's results file (experiments/results-gpu.json, schema 3) -------------------

GPU_SCHEMA = 3


def check_gpu(results) -> None:
    """Raise ``ValueError`` unless ``results`` is a GPU-tier results dict (schema 3)."""
    if not isinstance(results, dict) or results.get("schema") != GPU_SCHEMA \
            or results.get("tier") != "gpu":
        got = (results.get("schema"), results.get("tier")) if isinstance(results, dict) \
            else type(results).__name__
        raise ValueError("results must be an experiments/results-gpu.json dict (schema "
                         f"{GPU_SCHEMA}, tier 'gpu'), got {got!r}")
    for key in ("provenance", "config", "units"):
        if key not in results:
            raise ValueError(f"results must have a {key!r} entry")


def gpu_lengths(results) -> list[int]:
    """The evaluation lengths of the GPU tier."""
    return lengths(results)


def _gpu_pick(rows, metric, n) -> list:
    if metric not in ("target", "far", "window"):
        raise ValueError(f"metric must be 'target', 'far' or 'window', got {metric!r}")
    out = []
    for r in sorted(rows, key=lambda r: r["seed"]):
        v = r["test"].get(str(n))
        out.append(None if v is None else v[metric])
    return out


def gpu_lm_values(results, encoding: str, n: int, metric: str = "target", *,
                  train_length: int | None = None) -> list:
    """Per-seed loss of the GPU tier's ``encoding`` model trained at ``train_length`` (the
    tier's training length by default), at length ``n``; ``None`` where it has no value."""
    tl = train_length or results["config"]["lm"]["train_length"]
    rows = [u for u in results["units"] if u["key"].startswith("lm-")
            and u["encoding"] == encoding and u["train_length"] == tl]
    if not rows:
        have = sorted({(u["encoding"], u["train_length"]) for u in results["units"]
                       if u["key"].startswith("lm-")})
        raise ValueError(f"encoding and train_length must name a trained model, got "
                         f"{(encoding, tl)!r}; the file has {have}")
    return _gpu_pick(rows, metric, n)


def gpu_scaling_values(results, kind: str, mode: str, n: int,
                       metric: str = "target") -> list:
    """Per-seed loss of the GPU tier's RoPE models with scaling ``kind`` applied without
    training, ``mode`` "fixed" (one factor for every length) or "matched" (s = n / L)."""
    if mode not in ("fixed", "matched"):
        raise ValueError(f"mode must be 'fixed' or 'matched', got {mode!r}")
    rows = [u for u in results["units"] if u["key"].startswith("scale-")
            and u["kind"] == kind and u["mode"] == mode]
    if not rows:
        kinds = sorted({u["kind"] for u in results["units"] if u["key"].startswith("scale-")})
        raise ValueError(f"kind must be one of {kinds} (mode {mode!r}), got {kind!r}")
    return _gpu_pick(rows, metric, n)


def gpu_claims(results) -> list[dict]:
    """The GPU-tier section's family of claims, each a paired comparison over seeds.

    Each claim reads "``a`` is lower than ``b``" for two per-seed series of losses on the
    fixed targets (``a`` and ``b`` name them: ``("lm", encoding)`` or ``("scale", kind,
    mode)``, at ``length``).  Returned with the mean difference ``a - b`` and its 95 %
    interval, the two-sided paired t p-value and the Holm-adjusted p over the whole
    family (:func:`stats.holm`); ``holds`` is whether the difference is negative and the
    adjusted p below 0.05.
    """
    check_gpu(results)
    L = results["config"]["lm"]["train_length"]

    def series(spec, n):
        if spec[0] == "lm":
            return gpu_lm_values(results, spec[1], n)
        return gpu_scaling_values(results, spec[1], spec[2], n)

    family = [("llama3_matched_alibi", ("scale", "llama3", "matched"), ("lm", "alibi"), 2 * L),
              ("yarn_matched_alibi", ("scale", "yarn", "matched"), ("lm", "alibi"), 2 * L),
              ("alibi_llama3_matched", ("lm", "alibi"), ("scale", "llama3", "matched"), 4 * L),
              ("alibi_yarn_matched", ("lm", "alibi"), ("scale", "yarn", "matched"), 4 * L)]
    family += [(f"{k}_matched_fixed", ("scale", k, "matched"), ("scale", k, "fixed"), 2 * L)
               for k in ("pi", "ntk", "yarn", "llama3")]
    family += [(f"rope_{k}_fixed", ("lm", "rope"), ("scale", k, "fixed"), L)
               for k in ("yarn", "llama3")]
    out = []
    for name, a, b, n in family:
        va, vb = series(a, n), series(b, n)
        d = stats.paired(va, vb)
        out.append({"name": name, "a": a, "b": b, "length": n, "mean": d["mean"],
                    "lo": d["lo"], "hi": d["hi"], "p": stats.paired_t_pvalue(va, vb),
                    "n": len(va)})
    for c, q in zip(out, stats.holm([c["p"] for c in out]), strict=True):
        c["p_holm"] = q
        c["holds"] = c["mean"] < 0 and q < 0.05
    return out
