"""Figures of the experiments chapter, drawn from the study (``experiments/study.json``).

Every point is the mean over seeds with its 95 % Student-t interval; every figure draws
the baselines beside the models (:mod:`posenc.analysis.experiments.findings`).
"""

from __future__ import annotations

import numpy as np

from ..analysis.experiments import findings as F
from ..analysis.experiments import stats
from ._style import add_labels, label, new_figure

__all__ = ["study_length_figure", "study_finetune_figure"]

add_labels({
    "study_nope": {"en": "NoPE", "zh": "NoPE"},
    "study_learned": {"en": "learned table", "zh": "可学习位置表"},
    "study_sinusoidal": {"en": "sinusoidal", "zh": "正弦编码"},
    "study_rope": {"en": "RoPE", "zh": "RoPE"},
    "study_alibi": {"en": "ALiBi", "zh": "ALiBi"},
    "study_t5": {"en": "T5 bias", "zh": "T5 偏置"},
    "study_ngram": {"en": "5-gram (bytes the model saw)", "zh": "5 元语法（模型见过的字节）"},
    "study_cache": {"en": "5-gram + copy cache over the same history",
                    "zh": "5 元语法 + 复制缓存（同样长的历史）"},
    "study_length": {"en": "bytes of history read $n$", "zh": "读入的历史字节数 $n$"},
    "study_loss": {"en": "loss on the fixed targets (nats/byte)",
                   "zh": "固定目标上的损失（奈特/字节）"},
    "study_length_title": {"en": "past the training length $L = {L}$",
                           "zh": "超出训练长度 $L = {L}$ 之后"},
    "study_steps": {"en": "fine-tuning steps at $4L$", "zh": "在 $4L$ 上微调的步数"},
    "study_ft_title": {"en": "loss at $4L$ while fine-tuning", "zh": "微调过程中 $4L$ 处的损失"},
    "study_arm_plain": {"en": "no scaling", "zh": "不缩放"},
    "study_arm_pi": {"en": "PI", "zh": "PI"},
    "study_arm_ntk": {"en": "NTK-aware", "zh": "NTK-aware"},
    "study_arm_yarn": {"en": "YaRN", "zh": "YaRN"},
})

_COLORS = {"nope": "C5", "learned": "C4", "sinusoidal": "C1", "rope": "C0", "alibi": "C2",
           "t5": "C3", "plain": "C0", "pi": "C1", "ntk": "C2", "yarn": "C3"}
ENCODINGS = ("nope", "learned", "sinusoidal", "rope", "alibi", "t5")


def _mean_interval(values):
    s = stats.summary(values)
    return s["mean"], s["mean"] - s["lo"], s["hi"] - s["mean"]


def study_length_figure(study: dict, *, metric: str = "target"):
    """Loss on the fixed targets against the bytes of history read, one line per encoding,
    with the baselines: each model's own loss at L (dashed: reading only the last L bytes),
    the 5-gram and the 5-gram with a copy cache over the same history (grey).

    Parameters
    ----------
    study : dict
        :func:`~posenc.analysis.experiments.findings.load_study`.
    metric : {"target", "far"}, keyword-only

    Returns
    -------
    BookFigure
    """
    ns = F.lengths(study)
    L = F.train_length(study)
    fig, ax = new_figure(figsize=(6.4, 4.2))
    handles = []
    for enc in ENCODINGS:
        pts = [(n, F.lm(study, enc, n, metric)) for n in ns]
        pts = [(n, v) for n, v in pts if v is not None]
        m = [_mean_interval(v) for _, v in pts]
        handles.append(ax.errorbar(
            [n for n, _ in pts], [a for a, _, _ in m],
            yerr=[[b for _, b, _ in m], [c for _, _, c in m]], marker="o", ms=3.5,
            capsize=2.5, lw=1.4, color=_COLORS[enc], label=label(f"study_{enc}")))
        at_L = float(np.mean(F.truncated(study, enc, metric)))
        ax.plot([L, ns[-1]], [at_L, at_L], ls="--", lw=0.8, color=_COLORS[enc])
    ngram = float(np.mean(F.baseline(study, "ngram", metric=metric)))
    handles.append(ax.axhline(ngram, color="0.45", lw=1.2, ls=":", label=label("study_ngram")))
    cache = [float(np.mean(F.baseline(study, "cache", n, metric))) for n in ns]
    handles += ax.plot(ns, cache, color="0.45", lw=1.2, marker="s", ms=3,
                       label=label("study_cache"))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.minorticks_off()
    ax.set(xlabel=label("study_length"), ylabel=label("study_loss"),
           title=label("study_length_title").format(L=L))
    ax.legend(handles=handles, fontsize=9, ncols=2, loc="upper center",
              bbox_to_anchor=(0.5, -0.18), frameon=False)
    return fig


def study_finetune_figure(study: dict, *, metric: str = "target"):
    """Loss at 4 L after each number of fine-tuning steps, one line per scaling rule (the
    checkpoints evenly spaced, so the first steps are as visible as the last), and the
    unscaled model's loss at L (dashed: reading only the last L bytes).

    Parameters
    ----------
    study : dict
    metric : {"target", "far"}, keyword-only

    Returns
    -------
    BookFigure
    """
    fig, ax = new_figure(figsize=(6.4, 4.0))
    steps = study["protocol"]["finetune"]["checkpoints"]
    for arm in study["protocol"]["finetune"]["arms"]:
        curve = F.finetune_curve(study, arm, metric)
        m = [_mean_interval(curve[s]) for s in steps]
        ax.errorbar(range(len(steps)), [a for a, _, _ in m],
                    yerr=[[b for _, b, _ in m], [c for _, _, c in m]], marker="o", ms=3.5,
                    capsize=2.5, lw=1.4, color=_COLORS[arm], label=label(f"study_arm_{arm}"))
    at_L = float(np.mean(F.truncated(study, "rope", metric)))
    ax.axhline(at_L, color="0.45", lw=1.0, ls="--")
    ax.set_xticks(range(len(steps)), [str(s) for s in steps])
    ax.set(xlabel=label("study_steps"), ylabel=label("study_loss"),
           title=label("study_ft_title"))
    ax.legend(fontsize=9, ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.18),
              frameon=False)
    return fig
