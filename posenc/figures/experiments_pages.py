"""Figures and tables of the *Experiments* chapter, drawn from ``experiments/results.json``.

The page trains nothing heavy: ``nox -s experiments`` writes the results (with their commit,
machine, versions, seeds and corpus hashes) and these functions render them.  Every point is
the mean over seeds with its 95 % Student-t interval (:mod:`posenc.analysis.experiments.stats`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..analysis.experiments import report as R
from ._results import read_results
from ._style import add_labels, label, new_figure
from ._tables import BookTable

__all__ = [
    "load_experiment_results",
    "load_experiment_results_gpu",
    "load_experiment_recheck",
    "experiment_gpu_scaling_figure",
    "experiment_gpu_table",
    "experiment_gpu_claims_table",
    "experiment_length_figure",
    "experiment_scaling_figure",
    "experiment_context_table",
    "experiment_reference_rates_table",
    "experiment_ablation_rates_table",
    "experiment_rivals_table",
    "experiment_ablation_figure",
    "experiment_claims_table",
    "experiment_task_table",
    "experiment_task_rerun_table",
    "experiment_passkey_depth_table",
    "experiment_finetune_figure",
    "experiment_budget_figure",
    "experiment_task_figure",
    "experiment_curves_figure",
    "experiment_table",
    "experiment_tuning_table",
    "p_text",
]

SCHEMA = R.SCHEMA
RESULTS_RELPATH = Path("experiments") / "results.json"
GPU_RESULTS_RELPATH = Path("experiments") / "results-gpu.json"
RECHECK_RELPATH = Path("experiments") / "recheck-cpu.json"

add_labels({
    "exp_nope": {"en": "NoPE", "zh": "NoPE（不加编码）"},
    "exp_learned": {"en": "learned", "zh": "可学习位置嵌入"},
    "exp_sinusoidal": {"en": "sinusoidal", "zh": "正弦"},
    "exp_rope": {"en": "RoPE", "zh": "RoPE"},
    "exp_alibi": {"en": "ALiBi", "zh": "ALiBi"},
    "exp_t5": {"en": "T5 bias", "zh": "T5 偏置"},
    "exp_arm_none": {"en": "RoPE as trained", "zh": "RoPE（原样）"},
    "exp_arm_pi": {"en": "PI", "zh": "PI"},
    "exp_arm_ntk": {"en": "static NTK", "zh": "静态 NTK"},
    "exp_arm_yarn": {"en": "YaRN", "zh": "YaRN"},
    "exp_arm_llama3": {"en": "Llama 3.1 rule", "zh": "Llama 3.1 规则"},
    "exp_arm_dynamic": {"en": "dynamic NTK", "zh": "动态 NTK"},
    "exp_arm_ntk_fixed": {"en": "static NTK, one factor", "zh": "静态 NTK，固定因子"},
    "exp_arm_yarn_fixed": {"en": "YaRN, one factor", "zh": "YaRN，固定因子"},
    "exp_arm_yarn_matched": {"en": "YaRN, factor n/L", "zh": "YaRN，因子 n/L"},
    "exp_arm_llama3_matched": {"en": "Llama 3.1 rule, factor n/L",
                               "zh": "Llama 3.1 规则，因子 n/L"},
    "exp_mode_fixed": {"en": "one factor", "zh": "固定因子"},
    "exp_mode_matched": {"en": "factor n/L", "zh": "因子 n/L"},
    "exp_model": {"en": "model", "zh": "模型"},
    "exp_claim": {"en": "claim", "zh": "结论"},
    "exp_diff": {"en": "difference (95 % interval)", "zh": "差值（95 % 区间）"},
    "exp_p": {"en": "p", "zh": "p"},
    "exp_p_holm": {"en": "p, Holm", "zh": "p（Holm 校正）"},
    "exp_holds": {"en": "holds", "zh": "成立"},
    "exp_lower_than": {"en": "{a} below {b} at {n}", "zh": "长度 {n} 时，{a}低于{b}"},
    "exp_rule_mode": {"en": "{rule}, {mode}", "zh": "{rule}，{mode}"},
    "exp_rule_paren": {"en": "{rule} ({mode})", "zh": "{rule}（{mode}）"},
    "exp_trained_at_row": {"en": "{enc} (trained at {n})", "zh": "{enc}（训练长度 {n}）"},
    "exp_far_loss": {"en": "loss on far identifiers (nats/byte)",
                     "zh": "远处标识符上的损失（奈特/字节）"},
    "exp_ft_pi": {"en": "fine-tuned with PI", "zh": "用 PI 微调"},
    "exp_ft_plain": {"en": "fine-tuned without PI", "zh": "不用 PI 微调"},
    "exp_eval_length": {"en": "evaluation length (bytes)", "zh": "评估长度（字节）"},
    "exp_position": {"en": "position in the window (bytes)", "zh": "窗口内位置（字节）"},
    "exp_target_loss": {"en": "loss on fixed targets (nats/byte)",
                        "zh": "固定目标上的损失（奈特/字节）"},
    "exp_block_loss": {"en": "loss (nats/byte)", "zh": "损失（奈特/字节）"},
    "exp_step": {"en": "training step", "zh": "训练步数"},
    "exp_steps": {"en": "training steps", "zh": "训练步数"},
    "exp_loss": {"en": "training loss", "zh": "训练损失"},
    "exp_train_length": {"en": "training length", "zh": "训练长度"},
    "exp_encoding": {"en": "encoding", "zh": "编码"},
    "exp_lr": {"en": "learning rate", "zh": "学习率"},
    "exp_scale": {"en": "embedding scale", "zh": "嵌入缩放"},
    "exp_valid": {"en": "validation loss", "zh": "验证损失"},
    "exp_copy_x": {"en": "string length m", "zh": "字符串长度 m"},
    "exp_passkey_x": {"en": "sequence length (tokens)", "zh": "序列长度（词元）"},
    "exp_exact": {"en": "exact match", "zh": "完全正确的比例"},
    "exp_train_range": {"en": "trained on", "zh": "训练范围"},
    "exp_at": {"en": "at", "zh": "长度"},
    "exp_ft_plain_arm": {"en": "fine-tuned, no scaling", "zh": "微调，不缩放"},
    "exp_ft_pi_arm": {"en": "fine-tuned with PI", "zh": "用 PI 微调"},
    "exp_ft_ntk_arm": {"en": "fine-tuned with static NTK", "zh": "用静态 NTK 微调"},
    "exp_ft_yarn_arm": {"en": "fine-tuned with YaRN", "zh": "用 YaRN 微调"},
    "exp_head_width": {"en": "head width {h}", "zh": "头维度 {h}"},
    "exp_base_row": {"en": "base {b}", "zh": "基数 {b}"},
    "exp_reads": {"en": "reads", "zh": "读入长度"},
    "exp_far_row": {"en": "{model}, reading {n}", "zh": "{model}，读入 {n}"},
    "exp_seeds": {"en": "seeds", "zh": "种子数"},
    "exp_test": {"en": "test", "zh": "检验"},
    "exp_lower_than_at2": {"en": "{a} at {na} below {b} at {nb}",
                           "zh": "{a}（长度 {na}）低于{b}（长度 {nb}）"},
    "exp_budget_row": {"en": "{enc}, {steps} steps", "zh": "{enc}，{steps} 步"},
    "exp_abl_row": {"en": "RoPE, base {b}, head width {h}", "zh": "RoPE，基数 {b}，头维度 {h}"},
    "exp_far_suffix": {"en": " (far identifiers)", "zh": "（远处标识符）"},
    "exp_verdict_holds": {"en": "separated after the correction", "zh": "校正后仍显著"},
    "exp_learned_col": {"en": "seeds that learned", "zh": "学会的种子"},
    "exp_rerun_note": {"en": "a → b: stored, then trained again on the second machine; "
                              "one value: the same on both",
                       "zh": "a → b：先是存档的结果，后是在第二台机器上重新训练的结果；"
                             "只有一个值的，两台机器相同"},
    "exp_m_col": {"en": "m = {m}", "zh": "m = {m}"},
    "exp_n_col": {"en": "n = {n}", "zh": "n = {n}"},
    "exp_depth_col": {"en": "depth {d}", "zh": "深度 {d}"},
    "exp_verdict_not": {"en": "not separated after the correction", "zh": "校正后不显著"},
    "exp_setting": {"en": "rate {lr:g}, scale {sc:g}", "zh": "学习率 {lr:g}，缩放 {sc:g}"},
    "exp_rival_col": {"en": "rival setting", "zh": "对手设置"},
    "exp_chosen_col": {"en": "chosen setting", "zh": "选定设置"},
    "exp_gap0_col": {"en": "seed 0: rival − chosen", "zh": "种子 0：对手 − 选定"},
    "exp_gap_all_col": {"en": "{k} seeds: rival − chosen (95 %)",
                        "zh": "{k} 个种子：对手 − 选定（95 %）"},
    "exp_gap_test_col": {"en": "test at {n}: rival − chosen (95 %)",
                         "zh": "长度 {n} 的测试：对手 − 选定（95 %）"},
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
    R.check(results)


def load_experiment_recheck(path=None):
    """Read the committed ``experiments/recheck-cpu.json`` (``experiments/recheck.py
    --json``: a sample of the committed units re-run with the current code and compared
    with the stored ones), found as :func:`load_experiment_results` finds its file
    (``path``, else ``$POSENC_EXPERIMENT_RECHECK``, else walking up); ``ValueError`` if it
    is not such a file."""
    data = read_results(path, relpath=RECHECK_RELPATH, env_var="POSENC_EXPERIMENT_RECHECK",
                        session="experiments")
    units = data.get("units") if isinstance(data, dict) else None
    if not (isinstance(units, dict) and units and "provenance" in data
            and all(isinstance(u, dict) and "equal" in u for u in units.values())):
        raise ValueError("a recheck file must have 'provenance' and 'units', each unit with "
                         "its 'equal' verdict (experiments/recheck.py --json writes one)")
    return data


def load_experiment_results_gpu(path=None):
    """Read the committed GPU tier's ``experiments/results-gpu.json``: found as
    :func:`load_experiment_results` finds its file (``path``, else
    ``$POSENC_EXPERIMENT_RESULTS_GPU``, else the first one walking up from the current
    directory, else the source checkout's); ``FileNotFoundError`` if there is none,
    ``ValueError`` if it is not a GPU-tier results file."""
    data = read_results(path, relpath=GPU_RESULTS_RELPATH,
                        env_var="POSENC_EXPERIMENT_RESULTS_GPU", session="experiments")
    R.check_gpu(data)
    return data


#: the GPU figure's lines: (label key, accessor arguments, colour, line style)
_GPU_LINES = (
    ("exp_arm_none", ("lm", "rope"), "C0", "-"),
    ("exp_alibi", ("lm", "alibi"), "C1", "-"),
    ("exp_nope", ("lm", "nope"), "C7", "-"),
    ("exp_arm_ntk_fixed", ("scale", "ntk", "fixed"), "C2", "--"),
    ("exp_arm_yarn_fixed", ("scale", "yarn", "fixed"), "C9", "--"),
    ("exp_arm_yarn_matched", ("scale", "yarn", "matched"), "C9", "-"),
    ("exp_arm_llama3_matched", ("scale", "llama3", "matched"), "C3", "-"),
    ("exp_arm_dynamic", ("scale", "ntk", "matched"), "C2", "-"),
)


def _gpu_series(results, spec, n, metric="target"):
    if spec[0] == "lm":
        return R.gpu_lm_values(results, spec[1], n, metric)
    return R.gpu_scaling_values(results, spec[1], spec[2], n, metric)


def experiment_gpu_scaling_figure(results, *, metric="target"):
    """The GPU tier: RoPE as trained, ALiBi and NoPE, and RoPE with scaling rules applied
    without training, with one factor for every length (dashed) and with the factor
    matched to the length read (solid).  Error bars: 95 % t intervals over seeds."""
    R.check_gpu(results)
    fig, ax = new_figure(figsize=(6.4, 4.2))
    ns = R.gpu_lengths(results)
    for key, spec, color, ls in _GPU_LINES:
        _errorbars(ax, ns, [_gpu_series(results, spec, n, metric) for n in ns], color=color,
                   ls=ls, label=label(key))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.minorticks_off()
    ax.axvline(results["config"]["lm"]["train_length"], color="0.5", lw=0.8, ls=":")
    ax.set_xlabel(label("exp_eval_length"))
    ax.set_ylabel(label("exp_target_loss" if metric == "target" else "exp_far_loss"))
    _legend_below(ax, ncols=2)
    return fig


def experiment_gpu_table(results, *, metric="target"):
    """The GPU tier's losses, mean ± half-width of the 95 % interval over seeds, one row per
    model or scaling arm (a card per row on a phone); "–" where there is no value."""
    R.check_gpu(results)
    ns = R.gpu_lengths(results)
    header = [label("exp_model")] + [str(n) for n in ns]
    rows = []
    for enc in ("nope", "learned", "sinusoidal", "rope", "alibi", "t5"):
        rows.append([label(f"exp_{enc}")]
                    + [_cell(R.summarise(R.gpu_lm_values(results, enc, n, metric)))
                       for n in ns])
    refs = sorted({u["train_length"] for u in results["units"] if u["key"].startswith("lm-")
                   and u["encoding"] == "rope"} - {results["config"]["lm"]["train_length"]})
    for tl in refs:
        rows.append([label("exp_trained_at_row").format(enc=label("exp_rope"), n=tl)]
                    + [_cell(R.summarise(R.gpu_lm_values(results, "rope", n, metric,
                                                          train_length=tl)))
                       for n in ns])
    for kind in ("pi", "ntk", "yarn", "llama3"):
        for mode in ("fixed", "matched"):
            rows.append([label("exp_rule_mode").format(rule=label(f"exp_arm_{kind}"),
                                                       mode=label(f"exp_mode_{mode}"))]
                        + [_cell(R.summarise(R.gpu_scaling_values(results, kind, mode, n,
                                                                  metric)))
                           for n in ns])
    return BookTable(header, rows, wide=True)


_COLORS = {"nope": "C7", "learned": "C4", "sinusoidal": "C2", "rope": "C0", "alibi": "C1",
           "t5": "C3"}
_ARM_COLORS = {"none": "C0", "pi": "C4", "ntk": "C2", "yarn": "C1", "llama3": "C3",
               "dynamic": "C5"}


def _errorbars(ax, xs, per_x, **kw):
    """Plot mean and 95 % interval at each x (points where any seed is None are skipped)."""
    x, m, lo, hi = [], [], [], []
    for xv, vals in zip(xs, per_x, strict=True):
        s = R.summarise(vals)
        if s is None:
            continue
        x.append(xv)
        m.append(s["mean"])
        lo.append(s["mean"] - s["lo"])
        hi.append(s["hi"] - s["mean"])
    if x:
        ax.errorbar(x, m, yerr=[lo, hi], marker="o", ms=3.5, capsize=2.5, lw=1.4, **kw)


def _legend_below(ax, ncols=3):
    """The legend in columns under the axes, where it covers no data."""
    ax.legend(fontsize=9, ncols=ncols, loc="upper center", bbox_to_anchor=(0.5, -0.2),
              frameon=False)


def _length_axis(ax, results):
    ns = R.lengths(results)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.minorticks_off()
    train = results["config"]["lm"]["train_length"]
    ax.axvline(train, color="0.5", lw=0.8, ls=":")
    ax.set_xlabel(label("exp_eval_length"))


def experiment_length_figure(results, *, encodings=None, metric="target"):
    """Loss on the fixed target bytes against evaluation length, one line per encoding.

    ``metric="window"`` draws the mean over every position of the window instead (Press et
    al.'s non-overlapping protocol).  Error bars: 95 % t intervals over seeds.
    """
    _check(results)
    fig, ax = new_figure(figsize=(6.4, 4.0))
    ns = R.lengths(results)
    for enc in encodings or results["lm"]["chosen"]:
        _errorbars(ax, ns, [R.lm_values(results, enc, n, metric) for n in ns],
                   color=_COLORS.get(enc), label=label(f"exp_{enc}"))
    _length_axis(ax, results)
    ax.set_ylabel(label("exp_target_loss" if metric == "target" else "exp_block_loss"))
    _legend_below(ax)
    return fig


def experiment_scaling_figure(results, *, kinds=("pi", "ntk", "yarn", "llama3")):
    """The trained RoPE models with each scaling rule applied without training: with one
    factor for every length (left; the configuration's ``scaling.factor``) and with the
    factor matched to the length read, s = n / L (right; NTK so applied is dynamic NTK).
    RoPE as trained and ALiBi in both panels for reference.  95 % t intervals over seeds."""
    _check(results)
    ns = R.lengths(results)
    fig, axes = new_figure(1, 2, figsize=(6.4, 4.4))
    for ax, mode in zip(axes, ("fixed", "matched"), strict=True):
        _errorbars(ax, ns, [R.lm_values(results, "rope", n, seeds=_rope_seeds(results))
                            for n in ns], color=_ARM_COLORS["none"],
                   label=label("exp_arm_none"))
        _errorbars(ax, ns, [R.lm_values(results, "alibi", n) for n in ns],
                   color="0.3", ls=":", label=label("exp_alibi"))
        for kind in kinds:
            _errorbars(ax, ns, [R.scaling_values(results, kind, n, mode=mode) for n in ns],
                       ls="--", color=_ARM_COLORS.get(kind), label=label(f"exp_arm_{kind}"))
        _length_axis(ax, results)
        ax.set_xticks(ns, [str(n) if i % 2 == 0 else "" for i, n in enumerate(ns)])
        ax.set_title(label(f"exp_mode_{mode}"), fontsize=10)
    _same_y(axes)
    axes[0].set_ylabel(label("exp_target_loss"))
    handles, labels_ = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels_, fontsize=9, ncols=3, loc="outside lower center",
               frameon=False)
    return fig


def _base_text(base) -> str:
    """A RoPE base as a reader writes it: 500, 10⁴, 10⁶."""
    import math

    exp = round(math.log10(base))
    if base >= 1e4 and math.isclose(base, 10.0 ** exp):
        return "10" + str(exp).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"{base:g}"


def _same_y(axes):
    """One y range for side-by-side panels, each keeping its own tick labels (a phone
    stacks the panels, where a shared axis would leave the lower one unlabelled)."""
    lo = min(ax.get_ylim()[0] for ax in axes)
    hi = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(lo, hi)


def _rope_seeds(results):
    """The seeds the scaling arms read (RoPE's first seeds)."""
    return sorted({r["seed"] for r in results["scaling"]})


def experiment_ablation_figure(results):
    """RoPE with its base varied, at two head widths (the model's width fixed): loss on the
    fixed targets against evaluation length, one line per base.  95 % t intervals over
    the ablation's seeds."""
    _check(results)
    ab = results["config"]["ablation"]
    ns = R.lengths(results)
    fig, axes = new_figure(1, len(ab["head_dims"]), figsize=(6.4, 3.9))
    colors = ("C1", "C0", "C4")
    for ax, hd in zip(np.atleast_1d(axes), ab["head_dims"], strict=True):
        for base, color in zip(ab["bases"], colors, strict=False):
            _errorbars(ax, ns, [R.ablation_values(results, base, hd, n) for n in ns],
                       color=color, label=label("exp_base_row").format(b=_base_text(base)))
        _length_axis(ax, results)
        ax.set_xticks(ns, [str(n) if i % 2 == 0 else "" for i, n in enumerate(ns)])
        ax.set_title(label("exp_head_width").format(h=hd), fontsize=10)
    _same_y(np.atleast_1d(axes))
    np.atleast_1d(axes)[0].set_ylabel(label("exp_target_loss"))
    np.atleast_1d(axes)[0].legend(fontsize=9, loc="lower right")
    return fig


def experiment_finetune_figure(results):
    """RoPE as trained and after fine-tuning at ``finetune.factor`` times the length, one
    line per finished arm (no scaling, the control; PI; static NTK; YaRN).  95 % t
    intervals over seeds."""
    _check(results)
    fig, ax = new_figure(figsize=(6.4, 4.0))
    ns = R.lengths(results)
    seeds = sorted({r["seed"] for r in results["finetune"]})
    _errorbars(ax, ns, [R.lm_values(results, "rope", n, seeds=seeds) for n in ns],
               color="C0", label=label("exp_arm_none"))
    colors = {"plain": "C2", "pi": "C4", "ntk": "C5", "yarn": "C1"}
    for arm in R.finetune_arms(results):
        _errorbars(ax, ns, [R.finetune_values(results, arm, n) for n in ns], ls="--",
                   color=colors[arm], label=label(f"exp_ft_{arm}_arm"))
    ft = results["config"]["lm"]["train_length"] * results["config"]["finetune"]["factor"]
    ax.axvline(ft, color="0.5", lw=0.8, ls="-.")
    _length_axis(ax, results)
    ax.set_ylabel(label("exp_target_loss"))
    _legend_below(ax, ncols=2)
    return fig


def experiment_budget_figure(results):
    """Test loss at the training length and at the longest length against training steps
    (half, once and twice the protocol's), every encoding at its tuned setting, mean and
    95 % t interval over the budget study's seeds."""
    _check(results)
    lm = results["config"]["lm"]
    ns = (lm["train_length"], max(R.lengths(results)))
    steps = R.budget_steps(results)
    fig, axes = new_figure(1, 2, figsize=(6.4, 4.2), sharex=True)
    for ax, n in zip(axes, ns, strict=True):
        for enc in results["config"]["budget"]["encodings"]:
            _errorbars(ax, steps, [R.budget_values(results, enc, st, n) for st in steps],
                       color=_COLORS.get(enc), label=label(f"exp_{enc}"))
        ax.set_xscale("log", base=2)
        ax.set_xticks(steps, [str(v) for v in steps])
        ax.minorticks_off()
        ax.set_title(f"{label('exp_at')} {n}", fontsize=10)
        ax.set_xlabel(label("exp_steps"))
    axes[0].set_ylabel(label("exp_target_loss"))
    handles, labels_ = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels_, fontsize=9, ncols=3, loc="outside lower center",
               frameon=False)
    return fig


def experiment_task_figure(results, task, *, metric="exact"):
    """Copy (by string length) or passkey (by total length, averaged over depths) accuracy."""
    _check(results)
    tc = results["config"][task]
    keys = tc["eval_m"] if task == "copy" else tc["eval_totals"]
    fig, ax = new_figure(figsize=(6.4, 4.0))
    for enc in results[task]["chosen"]:
        _errorbars(ax, keys, [R.task_values(results, task, enc, k, metric) for k in keys],
                   color=_COLORS.get(enc), label=label(f"exp_{enc}"))
    lo, hi = tc["m"] if task == "copy" else tc["total"]
    ax.axvspan(lo, hi, color="0.5", alpha=0.12, lw=0, label=label("exp_train_range"))
    ax.set_xscale("log", base=2)
    ax.set_xticks(keys, [str(k) for k in keys])
    ax.minorticks_off()
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(label("exp_copy_x" if task == "copy" else "exp_passkey_x"))
    ax.set_ylabel(label("exp_exact"))
    _legend_below(ax)
    return fig


def experiment_curves_figure(results, seed=None):
    """Training loss against step for every encoding at its tuned setting (one seed)."""
    _check(results)
    seed = results["config"]["seeds"][0] if seed is None else seed
    fig, ax = new_figure(figsize=(6.4, 3.6))
    for r in results["lm"]["runs"]:
        if r["seed"] != seed:
            continue
        steps, loss = np.array(r["losses"], dtype=float).T
        ax.plot(steps, loss, lw=1, color=_COLORS.get(r["encoding"]),
                label=label(f"exp_{r['encoding']}"))
    ax.set_xlabel(label("exp_step"))
    ax.set_ylabel(label("exp_loss"))
    ax.legend(fontsize=9, ncols=3)
    return fig


def _cell(s, spec=".3f"):
    """``mean ± half-width`` of the 95 % interval (the t interval is symmetric)."""
    return "–" if s is None else f"{format(s['mean'], spec)} ± " \
                                 f"{format(s['hi'] - s['mean'], spec)}"


def experiment_table(results, *, metric="target"):
    """Mean ± half-width of the 95 % interval over seeds of the loss at each length, one row
    per encoding (a card per row on a phone)."""
    _check(results)
    ns = R.lengths(results)
    header = [label("exp_encoding")] + [str(n) for n in ns]
    rows = [[label(f"exp_{enc}")] + [_cell(R.summarise(R.lm_values(results, enc, n, metric)))
                                     for n in ns]
            for enc in results["lm"]["chosen"]]
    return BookTable(header, rows, wide=True)


def experiment_tuning_table(results):
    """The joint tuning grid on seed 0: validation loss for every learning rate (rows) and
    embedding scale (columns) of each encoding, the chosen pair marked ✓; "–" where the
    pair was not trained (the grid grows past an edge only where an optimum lands)."""
    _check(results)
    grid = results["lm"]["grid"]
    scales = sorted({g["embed_scale"] for g in grid})
    header = [label("exp_encoding"), label("exp_lr")] + [
        f"{label('exp_scale')} {sc:g}" for sc in scales]
    rows = []
    for enc, ch in results["lm"]["chosen"].items():
        cells = {(g["lr"], g["embed_scale"]): g["valid"] for g in grid if g["encoding"] == enc}
        for lr in sorted({k[0] for k in cells}):
            row = [label(f"exp_{enc}"), f"{lr:g}"]
            for sc in scales:
                v = cells.get((lr, sc))
                mark = " ✓" if (lr, sc) == (ch["lr"], ch["embed_scale"]) else ""
                row.append("–" if v is None else f"{v:.3f}{mark}")
            rows.append(row)
    return BookTable(header, rows, wide=True)


def experiment_reference_rates_table(results):
    """The references' rate check: for each reference encoding and length, the validation
    loss at its own length (seed 0) at every rate tried, the best marked ✓; "–" where a
    rate was not tried."""
    _check(results)
    return _rate_table(R.reference_rate_check(results), lambda c: label(
        "exp_trained_at_row").format(enc=label(f"exp_{c['encoding']}"), n=c["train_length"]))


def _rate_table(checks, name) -> BookTable:
    """A rate check as a table: one row per checked model (``name(check)``), its
    validation loss at every rate tried, the best marked ✓, "–" where not tried."""
    rates = sorted({lr for c in checks for lr in c["valid"]})
    header = [label("exp_model")] + [f"{label('exp_lr')} {lr:g}" for lr in rates]
    rows = []
    for c in checks:
        row = [name(c)]
        for lr in rates:
            v = c["valid"].get(lr)
            row.append("–" if v is None else f"{v:.3f}" + (" ✓" if lr == c["lr"] else ""))
        rows.append(row)
    return BookTable(header, rows, wide=True)


def experiment_ablation_rates_table(results):
    """The ablation's rate check: for each arm other than the protocol's own RoPE, the
    validation loss at the training length (seed 0) at every rate tried, the best marked
    ✓; "–" where a rate was not tried."""
    _check(results)
    return _rate_table(R.ablation_rate_check(results), lambda c: label("exp_abl_row").format(
        b=_base_text(c["rope_base"]), h=c["head_dim"]))


def experiment_rivals_table(results):
    """The check of seed 0's choice: for each rival (a grid point within one seed standard
    deviation of the chosen setting on seed 0), its setting beside the chosen one, its
    seed-0 gap in validation loss, and the rival minus the chosen setting over every seed:
    on the validation text and on the test chunks at the training length (mean, 95 % t
    interval)."""
    _check(results)
    checks = R.lm_rival_check(results)
    L = results["config"]["lm"]["train_length"]
    k = max((len(c["seeds"]) for c in checks), default=0)
    header = [label("exp_model"), label("exp_chosen_col"), label("exp_rival_col"),
              label("exp_gap0_col"), label("exp_gap_all_col").format(k=k),
              label("exp_gap_test_col").format(n=L)]
    rows = []
    for c in checks:
        rows.append([label(f"exp_{c['encoding']}"),
                     label("exp_setting").format(lr=c["chosen"]["lr"],
                                                 sc=c["chosen"]["embed_scale"]),
                     label("exp_setting").format(lr=c["lr"], sc=c["embed_scale"]),
                     f"{c['gap']:+.3f}",
                     *(f"{d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"
                       for d in (c["valid"], c["test"][L]))])
    return BookTable(header, rows, wide=True)


def experiment_context_table(results):
    """Loss on the far-identifier targets (bytes whose identifier last occurred more than
    ``far_targets.gap`` bytes back): every encoding at each length it can read, and the
    reference models trained at a longer length, reading their own length; mean ± half
    the 95 % interval over seeds."""
    _check(results)
    ns = R.lengths(results)
    header = [label("exp_model")] + [str(n) for n in ns]
    rows = [[label(f"exp_{enc}")] + [_cell(R.summarise(R.lm_values(results, enc, n, "far")))
                                     for n in ns]
            for enc in results["lm"]["chosen"]]
    refs = sorted({(r["encoding"], r["train_length"]) for r in results["references"]})
    for enc, tl in refs:
        rows.append([label("exp_trained_at_row").format(enc=label(f"exp_{enc}"), n=tl)]
                    + [_cell(R.summarise(R.reference_values(results, enc, tl, n, "far")))
                       if n >= tl else "–" for n in ns])
    return BookTable(header, rows, wide=True)


def _series_label(spec):
    if spec[0] == "lm":
        return label("exp_arm_none" if spec[1] == "rope" else f"exp_{spec[1]}")
    if spec[0] == "ref":
        return label("exp_trained_at_row").format(enc=label(f"exp_{spec[1]}"), n=spec[2])
    return label("exp_rule_paren").format(rule=label(f"exp_arm_{spec[1]}"),
                                          mode=label(f"exp_mode_{spec[2]}"))


def _spaced(text: str) -> str:
    """A space between a Chinese character and a Latin letter or digit next to it, as the
    book's Chinese is typeset (a no-op on English text)."""
    import re

    text = re.sub(r"([\u4e00-\u9fff])([A-Za-z0-9])", r"\1 \2", text)
    return re.sub(r"([A-Za-z0-9])([\u4e00-\u9fff])", r"\1 \2", text)


def _task_header(results, task):
    tc = results["config"][task]
    keys = tc["eval_m"] if task == "copy" else tc["eval_totals"]
    return keys, [label("exp_encoding"), label("exp_learned_col")] + [
        label("exp_m_col").format(m=k) if task == "copy" else label("exp_n_col").format(n=k)
        for k in keys]


def _task_cells(results, task, threshold, interval=True):
    """Per encoding: the seeds that learned (k/n, with the Wilson interval if
    ``interval``), then per test length the seeds of those that get at least
    ``threshold`` of the sequences whole ("–" where there is nothing to count)."""
    keys, _ = _task_header(results, task)
    rows = []
    for enc in results[task]["chosen"]:
        got = R.task_learned(results, task, enc)
        row = [f"{got['k']}/{got['n']}"
               + (f" [{got['lo']:.2f}, {got['hi']:.2f}]" if interval else "")]
        for k in keys:
            tf = R.task_extrapolation(results, task, enc, k, threshold=threshold)
            row.append("–" if tf is None else f"{tf['k']}/{tf['n']}")
        rows.append(row)
    return rows


def experiment_task_table(results, task="copy", *, threshold=0.5):
    """A synthetic task by encoding: how many seeds learned it (k of n, with the Wilson
    interval), then at each test length how many of the seeds that learned get at least
    ``threshold`` of the sequences exactly right ("k/n"; "–" where no seed learned or the
    model cannot read that length).
    Exact match is the same teacher-forced and free-running: a sequence whose every
    symbol is right under teacher forcing is the one the model writes itself."""
    _check(results)
    _, header = _task_header(results, task)
    rows = [[label(f"exp_{enc}"), *cells] for enc, cells in
            zip(results[task]["chosen"], _task_cells(results, task, threshold))]
    return BookTable(header, rows, wide=True)


def experiment_task_rerun_table(results, rerun, task="copy", *, threshold=0.5):
    """:func:`experiment_task_table` (without the intervals) once from the stored seeds and
    once from ``rerun``, the same seeds trained again (``experiments/recheck.py
    --task-seeds``, read with :func:`posenc.analysis.experiments.report.task_rerun`): a
    cell that differs shows "stored → re-run", one that does not shows its value once."""
    _check(results)
    again = R.task_rerun(results, rerun)
    _, header = _task_header(results, task)
    rows = []
    for enc, a, b in zip(results[task]["chosen"], _task_cells(results, task, threshold, False),
                         _task_cells(again, task, threshold, False)):
        rows.append([label(f"exp_{enc}")] + [x if x == y else f"{x} → {y}"
                                             for x, y in zip(a, b)])
    return BookTable(header, rows, wide=True, note=label("exp_rerun_note"))


def experiment_passkey_depth_table(results, total):
    """The passkey task at total length ``total``, by where the key sits: for each encoding,
    the share of keys retrieved exactly at each depth (0 at the start of the filler, 1 at
    its end), averaged over the seeds that learned the task ("–" where none did, or where
    the model cannot read ``total`` tokens)."""
    _check(results)
    depths = results["config"]["passkey"]["depths"]
    if total not in results["config"]["passkey"]["eval_totals"]:
        raise ValueError(f"total must be one of the passkey's test lengths "
                         f"{results['config']['passkey']['eval_totals']}, got {total!r}")
    header = [label("exp_encoding")] + [label("exp_depth_col").format(d=d) for d in depths]
    rows = []
    for enc in results["passkey"]["chosen"]:
        row = [label(f"exp_{enc}")]
        for d in depths:
            vals = R.task_values(results, "passkey", enc, total, depth=d, learned_only=True)
            vals = [v for v in vals if v is not None]
            row.append(f"{sum(vals) / len(vals):.2f}" if vals else "–")
        rows.append(row)
    return BookTable(header, rows)


def _cpu_label(spec):
    kind = spec[0]
    if kind == "lm":
        return label(f"exp_{spec[1]}")
    if kind == "scale":
        return label("exp_rule_paren").format(rule=label(f"exp_arm_{spec[1]}"),
                                              mode=label(f"exp_mode_{spec[2]}"))
    if kind in ("ref", "refctx"):  # refctx: the same reference, read again
        return label("exp_trained_at_row").format(enc=label(f"exp_{spec[1]}"), n=spec[2])
    if kind == "abl":
        return label("exp_abl_row").format(b=_base_text(spec[1]), h=spec[2])
    if kind == "budget":
        return label("exp_budget_row").format(enc=label(f"exp_{spec[1]}"), steps=spec[2])
    return label(f"exp_ft_{spec[1]}_arm")


def p_text(p: float) -> str:
    """A p-value as prose gives it: three places, and below 0.001 as such (not as a zero).

    >>> p_text(0.0493), p_text(0.00004), p_text(1.0)
    ('0.049', '< 0.001', '1.000')
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a probability in [0, 1], got {p!r}")
    return "< 0.001" if p < 5e-4 else f"{p:.3f}"


def _p(p: float) -> str:
    """A p-value to four places; below 0.0001 as such (not as a zero)."""
    return "< 0.0001" if p < 1e-4 else f"{p:.4f}"


def experiment_claims_table(results, *, n_boot=R.N_BOOT):
    """Every claim the chapter makes on the CPU tier (:func:`report.claims`): the mean
    difference with its two-level bootstrap interval (seeds and test files), the seeds it
    rests on, the paired t test's p and its Holm-adjusted p over the whole family, and
    whether it holds (✓) or not (✗)."""
    claims = R.claims(results, n_boot=n_boot)
    header = [label("exp_claim"), label("exp_diff"), label("exp_seeds"), label("exp_p"),
              label("exp_p_holm"), label("exp_holds")]
    rows = []
    for c in claims:
        if isinstance(c["length"], tuple):
            text = label("exp_lower_than_at2").format(a=_cpu_label(c["a"]), na=c["length"][0],
                                                      b=_cpu_label(c["b"]), nb=c["length"][1])
        else:
            text = label("exp_lower_than").format(a=_cpu_label(c["a"]), b=_cpu_label(c["b"]),
                                                  n=c["length"])
        if c["metric"] == "far":
            text += label("exp_far_suffix")
        rows.append([_spaced(text), f"{c['mean']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}]",
                     str(len(c["seeds"])), _p(c["p"]), _p(c["p_holm"]),
                     "✓" if c["holds"] else "✗"])
    return BookTable(header, rows, align="lrrrrr", wide=True)


def experiment_gpu_claims_table(results):
    """The GPU-tier section's family of claims (:func:`report.gpu_claims`): each with its
    paired difference and interval, its p-value and its Holm-adjusted p-value."""
    claims = R.gpu_claims(results)
    header = [label("exp_claim"), label("exp_diff"), label("exp_p"), label("exp_p_holm"),
              label("exp_holds")]
    rows = []
    for c in claims:
        a, b = _series_label(c["a"]), _series_label(c["b"])
        if isinstance(c["length"], tuple):
            text = label("exp_lower_than_at2").format(a=a, na=c["length"][0], b=b,
                                                      nb=c["length"][1])
        else:
            text = label("exp_lower_than").format(a=a, b=b, n=c["length"])
        if c["metric"] == "far":
            text += label("exp_far_suffix")
        rows.append([_spaced(text), f"{c['mean']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}]",
                     _p(c["p"]), _p(c["p_holm"]), "✓" if c["holds"] else "✗"])
    return BookTable(header, rows, align="lrrrr", wide=True)
