"""Figures and tables of the *Experiments* chapter, drawn from ``experiments/results.json``.

The page trains nothing heavy: ``nox -s experiments`` writes the results (with their commit,
machine, versions, seeds and corpus hash) and these functions render them.  Perplexity and
accuracy are shown as the mean over seeds with the min-max range as a band.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator, ScalarFormatter

from ._results import read_results
from ._style import add_labels, label, new_figure
from ._tables import MarkdownTable

__all__ = [
    "load_experiment_results",
    "experiment_perplexity_figure",
    "experiment_copy_figure",
    "experiment_curves_figure",
    "experiment_table",
]

SCHEMA = 1
RESULTS_RELPATH = Path("experiments") / "results.json"

add_labels({
    "exp_nope": {"en": "NoPE", "zh": "NoPE（不加编码）"},
    "exp_learned": {"en": "learned", "zh": "可学习位置嵌入"},
    "exp_sinusoidal": {"en": "sinusoidal", "zh": "正弦"},
    "exp_rope": {"en": "RoPE", "zh": "RoPE"},
    "exp_alibi": {"en": "ALiBi", "zh": "ALiBi"},
    "exp_t5": {"en": "T5 bias", "zh": "T5 偏置"},
    "exp_trained": {"en": "", "zh": ""},
    "exp_pi zero-shot": {"en": "PI, zero-shot", "zh": "PI，不经训练直接套用"},
    "exp_ntk zero-shot": {"en": "NTK-aware, zero-shot", "zh": "NTK-aware，不经训练直接套用"},
    "exp_yarn zero-shot": {"en": "YaRN, zero-shot", "zh": "YaRN，不经训练直接套用"},
    "exp_llama3 zero-shot": {"en": "Llama 3.1 rule, zero-shot", "zh": "Llama 3.1 规则，不经训练直接套用"},
    "exp_pi fine-tuned": {"en": "PI, fine-tuned", "zh": "PI，微调后"},
    "exp_eval_length": {"en": "evaluation length (tokens)", "zh": "评估长度（词元数）"},
    "exp_string_length": {"en": "string length $m$", "zh": "字符串长度 $m$"},
    "exp_perplexity": {"en": "perplexity (held-out text)", "zh": "困惑度（留出文本）"},
    "exp_accuracy": {"en": "copy accuracy", "zh": "复制准确率"},
    "exp_step": {"en": "training step", "zh": "训练步数"},
    "exp_loss": {"en": "training loss", "zh": "训练损失"},
    "exp_train_length": {"en": "training length", "zh": "训练长度"},
    "exp_encoding": {"en": "encoding", "zh": "编码"},
    "exp_chance": {"en": "chance", "zh": "随机猜测"},
    "exp_variant": {"en": "variant", "zh": "变体"},
})


def load_experiment_results(path=None):
    """Read the committed ``experiments/results.json``.

    Parameters
    ----------
    path : str or path-like, optional
        The file.  By default ``$POSENC_EXPERIMENT_RESULTS`` if set, else the first
        ``experiments/results.json`` found walking up from the current directory, else the
        one next to the ``posenc`` package (a source checkout).

    Returns
    -------
    dict

    Raises
    ------
    FileNotFoundError
        If no results file is found.
    ValueError
        If the file is not an experiments results file of this schema.
    """
    data = read_results(path, relpath=RESULTS_RELPATH, env_var="POSENC_EXPERIMENT_RESULTS",
                        session="experiments")
    _check(data)
    return data


def _check(results):
    if not isinstance(results, dict) or results.get("schema") != SCHEMA:
        got = results.get("schema") if isinstance(results, dict) else type(results).__name__
        raise ValueError(f"results must be an experiments/results.json dict with schema "
                         f"{SCHEMA}, got schema {got!r}")
    for key in ("provenance", "config", "runs", "summary", "corpus"):
        if key not in results:
            raise ValueError(f"results must have a {key!r} entry")


def _series(results, task):
    """{(encoding, variant): (lengths, mean, low, high)} from the summary, in run order."""
    _check(results)
    out = {}
    for key, by_length in results["summary"].items():
        t, enc, var = key.split("|")
        if t != task:
            continue
        xs, mean, lo, hi = [], [], [], []
        for length, s in by_length.items():
            if s is None:
                continue
            xs.append(int(length))
            mean.append(s["mean"])
            lo.append(s["min"])
            hi.append(s["max"])
        out[(enc, var)] = tuple(np.array(v, dtype=float) for v in (xs, mean, lo, hi))
    return out


def _name(enc, var):
    extra = label(f"exp_{var}")
    return label(f"exp_{enc}") + (f" · {extra}" if extra else "")


def _plot_series(ax, series, variants, encodings=None):
    for (enc, var), (x, m, lo, hi) in series.items():
        if var not in variants or x.size == 0:
            continue
        if encodings is not None and enc not in encodings:
            continue
        style = "-" if var == "trained" else "--"
        (line,) = ax.plot(x, m, style, marker="o", ms=3, label=_name(enc, var))
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.15, lw=0)


def _plain_log_y(ax):
    """Label a log y axis at 1-2-5 steps in plain numbers (no 10^x, no crowded minors)."""
    lo, hi = ax.get_ylim()
    ticks = [m * 10.0 ** e for e in range(int(np.floor(np.log10(lo))),
                                          int(np.ceil(np.log10(hi))) + 1)
             for m in (1, 2, 5) if lo <= m * 10.0 ** e <= hi]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())


def experiment_perplexity_figure(results, *, variants=("trained",), encodings=None):
    """Perplexity against evaluation length, one line per encoding (mean, min-max band).

    ``variants`` picks which runs to draw: ``("trained",)`` for the encodings as trained,
    or the RoPE scaling variants (``"pi zero-shot"``, ``"yarn zero-shot"``, ...).
    ``encodings`` (default: all) restricts the lines to those encodings.
    """
    fig, ax = new_figure(figsize=(6.4, 3.8))
    _plot_series(ax, _series(results, "lm"), variants, encodings)
    train = results["config"]["lm"]["train_length"]
    ax.axvline(train, color="0.5", lw=0.8, ls=":")
    ax.text(train, 0.01, " " + label("exp_train_length"), transform=ax.get_xaxis_transform(),
            va="bottom", ha="left", fontsize=9, color="0.4")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_log_y(ax)
    ax.set_xlabel(label("exp_eval_length"))
    ax.set_ylabel(label("exp_perplexity"))
    ax.legend(fontsize=9, ncols=2, loc="upper left")
    return fig


def experiment_copy_figure(results):
    """Copy accuracy against string length, one line per encoding (mean, min-max band)."""
    fig, ax = new_figure(figsize=(6.4, 3.6))
    _plot_series(ax, _series(results, "copy"), ("trained",))
    ax.axvline(results["config"]["copy"]["m"], color="0.5", lw=0.8, ls=":")
    from ..analysis.experiments.tasks import SYMBOLS  # imports torch: only when drawn

    chance = 1 / SYMBOLS
    # Named in the legend: a label on the line sat on the curves, which end at chance.
    ax.axhline(chance, color="0.5", lw=0.8, ls="--", label=label("exp_chance"))
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(label("exp_string_length"))
    ax.set_ylabel(label("exp_accuracy"))
    ax.legend(fontsize=9, ncols=2)
    return fig


def experiment_curves_figure(results, task="lm", seed=None):
    """Training loss against step for every encoding (one seed: the first by default)."""
    _check(results)
    seed = results["config"]["seeds"][0] if seed is None else seed
    fig, ax = new_figure(figsize=(6.4, 3.4))
    for r in results["runs"]:
        if r["task"] != task or r["variant"] != "trained" or r["seed"] != seed:
            continue
        steps, loss = np.array(r["losses"], dtype=float).T
        ax.plot(steps, loss, lw=1, label=_name(r["encoding"], "trained"))
    ax.set_xlabel(label("exp_step"))
    ax.set_ylabel(label("exp_loss"))
    ax.legend(fontsize=9, ncols=2)
    return fig


def experiment_table(results, task="lm"):
    """Mean ± standard deviation over seeds at each length, as a Markdown table."""
    series = _series(results, task)
    lengths = sorted({int(v) for x, *_ in series.values() for v in x})
    spec = ".2f" if task == "lm" else ".3f"
    summary = results["summary"]
    rows = []
    for key, by_length in summary.items():
        t, enc, var = key.split("|")
        if t != task:
            continue
        cells = []
        for length in lengths:
            s = by_length.get(str(length))
            cells.append("–" if s is None else
                         f"{format(s['mean'], spec)} ± {format(s['std'], spec)}")
        rows.append([_name(enc, var)] + cells)
    header = [label("exp_encoding")] + [str(n) for n in lengths]
    lines = ["| " + " | ".join(header) + " |",
             "| :--- |" + " ---: |" * len(lengths)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return MarkdownTable("\n".join(lines) + "\n")
