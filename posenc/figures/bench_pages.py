"""Tables, figure and headline numbers of the *Benchmarks* appendix.

The appendix times nothing itself: ``nox -s bench`` (``benchmarks/run.py``) measures on
one machine and writes ``benchmarks/results.json``, which is committed; these functions
read that file and turn it into the page's tables, its bar chart and the numbers glued
into its prose, in the page's language (:func:`posenc.figures.set_language`).  No date
appears in anything they draw, so an unchanged results file renders the same page.

Examples
--------
>>> results = load_bench_results()
>>> results["schema"]
1
>>> "bench_inter_vs_clone" in bench_headlines(results)
True
"""

from __future__ import annotations

import math
from pathlib import Path

from ._results import read_results
from ._style import LABELS, add_labels, get_language, label, new_figure
from ._tables import MarkdownTable  # re-exported: posenc.figures.MarkdownTable

__all__ = [
    "load_bench_results",
    "bench_headlines",
    "bench_ratio_figure",
    "bench_rope_table",
    "bench_floor_table",
    "bench_arithmetic_table",
    "bench_cold_table",
    "bench_sinusoidal_table",
    "bench_build_table",
    "bench_build_comparison_table",
    "bench_yardstick_table",
    "bench_machine_table",
    "MarkdownTable",
]

SCHEMA = 1
RESULTS_RELPATH = Path("benchmarks") / "results.json"

add_labels({
    "bench_clone": {"en": "x.clone() (reference)", "zh": "x.clone()（参照）"},
    "bench_copy_into": {"en": "out.copy_(x), preallocated", "zh": "out.copy_(x)（预分配输出）"},
    "bench_posenc_half": {"en": "posenc, half", "zh": "posenc（对半布局）"},
    "bench_posenc_interleaved": {"en": "posenc, interleaved", "zh": "posenc（交错布局）"},
    "bench_posenc_half_out": {"en": "posenc, half, out=", "zh": "posenc（对半布局，out=）"},
    "bench_posenc_interleaved_out": {"en": "posenc, interleaved, out=",
                                     "zh": "posenc（交错布局，out=）"},
    "bench_posenc_half_inplace": {"en": "posenc, half, in place",
                                  "zh": "posenc（对半布局，原地）"},
    "bench_posenc_interleaved_inplace": {"en": "posenc, interleaved, in place",
                                         "zh": "posenc（交错布局，原地）"},
    "bench_kind_posenc_into": {"en": "posenc, out= / in place", "zh": "posenc（out= / 原地）"},
    "bench_floor_interleaved_into_vs_copy": {
        "en": "interleaved in place or out= within {t:g}× of out.copy_(x)",
        "zh": "交错布局原地或 out= 不超过 out.copy_(x) 的 {t:g} 倍"},
    "bench_floor_half_into_vs_copy": {
        "en": "half in place or out= within {t:g}× of out.copy_(x)",
        "zh": "对半布局原地或 out= 不超过 out.copy_(x) 的 {t:g} 倍"},
    "bench_rotate_half": {"en": "rotate_half formula (Hugging Face)",
                          "zh": "rotate_half 公式（Hugging Face）"},
    "bench_complex": {"en": "complex multiply (Meta Llama)", "zh": "复数乘法（Meta Llama）"},
    "bench_rotary_embedding_torch": {"en": "rotary-embedding-torch",
                                     "zh": "rotary-embedding-torch"},
    "bench_fused_half": {"en": "prototype: fused half", "zh": "原型：融合，对半布局"},
    "bench_fused_interleaved": {"en": "prototype: fused interleaved",
                                "zh": "原型：融合，交错布局"},
    "bench_compiled_half": {"en": "posenc compiled, half", "zh": "posenc 编译版（对半布局）"},
    "bench_compiled_interleaved": {"en": "posenc compiled, interleaved",
                                   "zh": "posenc 编译版（交错布局）"},
    "bench_ratio_axis": {"en": "time ÷ time of x.clone()  (log scale; lower is faster)",
                         "zh": "耗时 ÷ x.clone() 耗时（对数刻度，越低越快）"},
    "bench_floor_line": {"en": "floor: 1.3 × clone", "zh": "底线：1.3 × x.clone()"},
    "bench_kind_floor": {"en": "memory copies (reference)", "zh": "内存复制（参照）"},
    "bench_kind_posenc": {"en": "posenc", "zh": "posenc"},
    "bench_kind_peer": {"en": "peers", "zh": "同类实现"},
    "bench_kind_prototype": {"en": "eager prototype", "zh": "即时执行的原型"},
    "bench_kind_compiled": {"en": "posenc, compiled (opt-in)", "zh": "posenc 编译版（可选）"},
    "bench_col_impl": {"en": "implementation", "zh": "实现"},
    "bench_col_layout": {"en": "layout", "zh": "布局"},
    "bench_col_median": {"en": "median (ms)", "zh": "中位数（毫秒）"},
    "bench_col_vs_clone": {"en": "÷ clone", "zh": "÷ x.clone()"},
    "bench_col_vs_copy": {"en": "÷ copy_", "zh": "÷ copy_"},
    "bench_ratio_axis_copy": {
        "en": "time ÷ time of out.copy_(x)  (log scale; lower is faster)",
        "zh": "耗时 ÷ out.copy_(x) 耗时（对数刻度，越低越快）"},
    "bench_col_step": {"en": "build", "zh": "构建"},
    "bench_col_wall": {"en": "wall s, previous → now", "zh": "耗时（秒），原 → 现"},
    "bench_col_ratio": {"en": "now ÷ previous", "zh": "现 ÷ 原"},
    "bench_col_cpu": {"en": "CPU s", "zh": "CPU 秒"},
    "bench_col_exec_both": {"en": "pages executed", "zh": "执行页数"},
    "bench_col_goal": {"en": "goal", "zh": "目标"},
    "bench_col_dtype_len": {"en": "case", "zh": "场景"},
    "bench_col_oop_clone": {"en": "apply_rope(x) ÷ clone", "zh": "apply_rope(x) ÷ clone()"},
    "bench_col_oop_copy": {"en": "apply_rope(x) ÷ copy_", "zh": "apply_rope(x) ÷ copy_"},
    "bench_col_out_copy": {"en": "out= ÷ copy_", "zh": "out= ÷ copy_"},
    "bench_col_inplace_copy": {"en": "apply_rope_ ÷ copy_", "zh": "apply_rope_ ÷ copy_"},
    "bench_step_analysis": {"en": "one analysis module edited",
                            "zh": "改动一个分析模块"},
    "bench_col_vs_rh": {"en": "speed-up vs rotate_half", "zh": "相对 rotate_half 的加速比"},
    "bench_col_moved": {"en": "bytes moved ÷ input", "zh": "读写字节 ÷ 输入"},
    "bench_col_alloc": {"en": "bytes allocated ÷ input", "zh": "新分配字节 ÷ 输入"},
    "bench_col_kernels": {"en": "kernels", "zh": "内核数"},
    "bench_col_peak": {"en": "peak extra memory ÷ input", "zh": "峰值额外内存 ÷ 输入"},
    "bench_col_error": {"en": "max abs error", "zh": "最大绝对误差"},
    "bench_col_predicted": {"en": "predicted (ms)", "zh": "预测（毫秒）"},
    "bench_col_measured": {"en": "measured (ms)", "zh": "实测（毫秒）"},
    "bench_col_case": {"en": "case", "zh": "场景"},
    "bench_col_floor": {"en": "floor", "zh": "底线"},
    "bench_col_value": {"en": "measured", "zh": "实测"},
    "bench_col_required": {"en": "required", "zh": "要求"},
    "bench_col_status": {"en": "status", "zh": "结果"},
    "bench_col_bound": {"en": "bytes-moved ratio", "zh": "按读写字节预测的比值"},
    "bench_col_best": {"en": "fastest other path measured", "zh": "实测最快的其他路径"},
    "bench_col_setup": {"en": "table setup (ms)", "zh": "建表（毫秒）"},
    "bench_col_first": {"en": "first call (ms)", "zh": "首次调用（毫秒）"},
    "bench_col_steady": {"en": "later calls (ms)", "zh": "之后的调用（毫秒）"},
    "bench_col_extra": {"en": "first-call extra (ms)", "zh": "首次额外开销（毫秒）"},
    "bench_col_size": {"en": "L × d", "zh": "L × d"},
    "bench_col_posenc": {"en": "posenc median (ms)", "zh": "posenc 中位数（毫秒）"},
    "bench_col_loop": {"en": "double loop (s)", "zh": "双重循环（秒）"},
    "bench_col_speedup": {"en": "speed-up", "zh": "加速比"},
    "bench_col_diff": {"en": "max abs difference", "zh": "最大绝对差"},
    "bench_col_build": {"en": "build", "zh": "构建"},
    "bench_col_total": {"en": "both languages (s)", "zh": "两种语言合计（秒）"},
    "bench_col_lang_s": {"en": "{lang} (s)", "zh": "{lang}（秒）"},
    "bench_col_executed": {"en": "notebooks executed", "zh": "重新执行的页面"},
    "bench_col_item": {"en": "", "zh": ""},
    "bench_none": {"en": "none", "zh": "无"},
    "bench_layout_half": {"en": "half", "zh": "对半"},
    "bench_layout_interleaved": {"en": "interleaved", "zh": "交错"},
    "bench_no_build": {"en": "no build benchmark in results.json yet: run `nox -s bench`",
                       "zh": "results.json 里还没有构建基准：请运行 `nox -s bench`"},
    "bench_pass": {"en": "PASS", "zh": "通过"},
    "bench_fail": {"en": "FAIL", "zh": "未通过"},
    "bench_unavailable": {"en": "unavailable", "zh": "不可用"},
    "bench_floor_interleaved_vs_clone": {"en": "interleaved within {t:g}× of clone()",
                                         "zh": "交错布局不超过 x.clone() 的 {t:g} 倍"},
    "bench_floor_half_vs_rotate_half": {"en": "half at least {t:g}× faster than rotate_half",
                                        "zh": "对半布局至少比 rotate_half 快 {t:g} 倍"},
    "bench_floor_posenc_vs_peers": {"en": "no posenc layout slower than any peer",
                                    "zh": "posenc 的任一布局都不慢于任何同类实现"},
    "bench_step_cold": {"en": "cold (empty cache)", "zh": "冷构建（缓存为空）"},
    "bench_step_warm": {"en": "warm, nothing changed", "zh": "热构建，无改动"},
    "bench_step_prose": {"en": "one page's prose edited", "zh": "改动一页的正文"},
    "bench_step_library": {"en": "one posenc function edited", "zh": "改动 posenc 的一个函数"},
    "bench_goal_ratio": {"en": "≤ {t:g}×", "zh": "≤ {t:g} 倍"},
    "bench_goal_seconds": {"en": "≤ {t:g} s", "zh": "≤ {t:g} 秒"},
    "bench_m_cpu": {"en": "CPU", "zh": "CPU"},
    "bench_m_cores": {"en": "cores usable / logical", "zh": "可用 / 逻辑核数"},
    "bench_m_threads": {"en": "torch threads (set explicitly)", "zh": "torch 线程数（显式设置）"},
    "bench_m_memory": {"en": "memory", "zh": "内存"},
    "bench_m_llc": {"en": "last-level cache", "zh": "末级缓存"},
    "bench_m_load": {"en": "load average at start / end (1 min)",
                     "zh": "开始 / 结束时的负载均值（1 分钟）"},
    "bench_m_versions": {"en": "Python / PyTorch / NumPy", "zh": "Python / PyTorch / NumPy"},
    "bench_m_libs": {"en": "posenc / rotary-embedding-torch",
                     "zh": "posenc / rotary-embedding-torch"},
    "bench_m_commit": {"en": "commit measured", "zh": "测量时的提交"},
    "bench_m_seconds": {"en": "benchmark run time", "zh": "基准测试总耗时"},
    "bench_m_seconds_value": {"en": "{t} s", "zh": "{t} 秒"},
})

_ORDER = ("clone", "copy_into", "posenc_half", "posenc_interleaved", "posenc_half_out",
          "posenc_interleaved_out", "posenc_half_inplace", "posenc_interleaved_inplace",
          "rotate_half", "complex",
          "rotary_embedding_torch", "fused_half", "fused_interleaved", "compiled_half",
          "compiled_interleaved")
_KIND_COLOR = {"floor": "#7f7f7f", "posenc": "#1f77b4", "peer": "#d62728",
               "prototype": "#2ca02c", "compiled": "#9467bd", "posenc_into": "#17becf"}


def load_bench_results(path=None):
    """Read the committed ``benchmarks/results.json``.

    Parameters
    ----------
    path : str or path-like, optional
        The file.  By default: ``$POSENC_BENCH_RESULTS`` if set, else the first
        ``benchmarks/results.json`` found walking up from the current directory (a page
        executes in its source folder, ``docs/<lang>/``), else the one next to the
        ``posenc`` package (a source checkout).

    Returns
    -------
    dict

    Raises
    ------
    FileNotFoundError
        If no results file is found.
    ValueError
        If the file is not a results file of the schema this module reads.

    Examples
    --------
    >>> load_bench_results()["machine"]["torch_threads"] >= 1
    True
    """
    data = read_results(path, relpath=RESULTS_RELPATH, env_var="POSENC_BENCH_RESULTS",
                        session="bench")
    _check_results(data)
    return data


def _check_results(results):
    if not isinstance(results, dict) or results.get("schema") != SCHEMA:
        got = results.get("schema") if isinstance(results, dict) else type(results).__name__
        raise ValueError(f"results must be a benchmarks/results.json dict with schema "
                         f"{SCHEMA}, got schema {got!r}")
    for key in ("machine", "rope", "floors", "sinusoidal"):
        if key not in results:
            raise ValueError(f"results must have a {key!r} entry (a library benchmark run)")


def _case(results, case_id):
    _check_results(results)
    for case in results["rope"]:
        if case["id"] == case_id:
            return case
    ids = ", ".join(repr(c["id"]) for c in results["rope"])
    raise ValueError(f"case_id must be one of {ids}, got {case_id!r}")


def _cand(case, name):
    for c in case["candidates"]:
        if c["name"] == name:
            return c
    raise KeyError(name)


def _median(case, name):
    return _cand(case, name)["time"]["median"]


def _fmt(v, spec=".2f"):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return format(v, spec)


def _ms(seconds):
    return _fmt(seconds * 1e3, ".3g" if seconds < 1 else ",.0f")


def _table(header, rows, align=None):
    align = align or "l" + "r" * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join("---:" if a == "r" else ":---" for a in align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return MarkdownTable("\n".join(lines) + "\n")


def _case_title(case):
    return f"{case['dtype']}, ({', '.join(map(str, case['shape']))})"


# -- headline numbers ----------------------------------------------------------------------


def bench_headlines(results):
    """The numbers the page's prose quotes, as plain Python floats and ints.

    Keys start with ``bench_``; ratios are of per-call medians measured in the same run.
    Build numbers are included when the results hold a build benchmark.

    Parameters
    ----------
    results : dict
        From :func:`load_bench_results`.

    Returns
    -------
    dict of str to float or int

    Raises
    ------
    ValueError
        If ``results`` is not a results dict of the expected schema.

    Examples
    --------
    >>> h = bench_headlines(load_bench_results())
    >>> h["bench_inter_vs_clone"] > 0 and isinstance(h["bench_threads"], int)
    True
    """
    _check_results(results)
    out = {}
    m = results["machine"]
    out["bench_threads"] = int(m["torch_threads"])
    out["bench_cores"] = int(m["usable_cpus"] or m["logical_cpus"])
    out["bench_load_start"] = float(m["load_average_start"][0])
    out["bench_load_end"] = float(m["load_average_end"][0])
    out["bench_run_s"] = float(results.get("library_seconds", float("nan")))
    llc = m.get("last_level_cache_bytes")  # absent from results older than the field
    out["bench_llc_mib"] = float(llc / 2**20) if llc else math.nan
    for prefix, case_id in _HEADLINE_CASES:
        if case_id == "bf16_16384" and case_id not in {c["id"] for c in results["rope"]}:
            continue  # results written before this case existed
        case = _case(results, case_id)
        p = f"bench_{prefix}"
        # Against the second yardstick, out.copy_(x) into a preallocated tensor.
        for c in case["candidates"]:
            if c["kind"] in ("posenc", "posenc_into", "peer", "compiled") and "vs_copy" in c:
                out[p + c["name"] + "_vs_copy"] = float(c["vs_copy"])
        if case_id == "bf16_16384":
            out[p + "copy_gbps"] = float(case["copy_bandwidth_bytes_per_s"] / 1e9)
            out[p + "input_mib"] = float(case["input_bytes"] / 2**20)
            continue
        # Ratios are the harness's paired ratios (median over rounds), as stored.
        out[p + "clone_ms"] = float(_median(case, "clone") * 1e3)
        out[p + "inter_vs_clone"] = float(_cand(case, "posenc_interleaved")["vs_clone"])
        out[p + "half_vs_clone"] = float(_cand(case, "posenc_half")["vs_clone"])
        out[p + "half_speedup"] = float(_cand(case, "posenc_half")["speedup_vs_rotate_half"])
        out[p + "half_vs_rotate_half"] = 1.0 / out[p + "half_speedup"]
        out[p + "rotate_half_vs_clone"] = float(_cand(case, "rotate_half")["vs_clone"])
        out[p + "complex_vs_clone"] = float(_cand(case, "complex")["vs_clone"])
        out[p + "ret_vs_clone"] = float(_cand(case, "rotary_embedding_torch")["vs_clone"])
        for name in ("compiled_half", "compiled_interleaved", "fused_half", "fused_interleaved"):
            c = _cand(case, name)
            ok = "time" in c  # a compiler may be missing: NaN, and the table says why
            out[p + name + "_vs_clone"] = float(c["vs_clone"]) if ok else math.nan
            if name.startswith("compiled"):
                out[p + name + "_setup_s"] = float(c["setup_s"]) if ok else math.nan
        out[p + "copy_gbps"] = float(case["copy_bandwidth_bytes_per_s"] / 1e9)
        out[p + "clone_gbps"] = float(case["clone_bandwidth_bytes_per_s"] / 1e9)
        out[p + "fault_share"] = float(max(1.0 - _cand(case, "copy_into")["vs_clone"], 0.0))
        out[p + "copy_ms"] = float(_median(case, "copy_into") * 1e3)
        out[p + "input_mib"] = float(case["input_bytes"] / 2**20)
        for name in ("rotate_half", "posenc_half", "posenc_interleaved", "rotary_embedding_torch"):
            c = _cand(case, name)
            if "peak_extra_per_input_byte" in c:
                out[p + "peak_" + name] = float(c["peak_extra_per_input_byte"])
            out[p + "moved_" + name] = float(c["bytes_moved_per_input_byte"])
            out[p + "err_" + name] = float(c["max_abs_error"])
            out[p + "alloc_" + name] = float(c["bytes_allocated"] / case["input_bytes"])
        if case.get("cold"):
            for c in case["cold"]:
                if c["name"].startswith("posenc"):
                    extra = c["setup_s"] + c["first_call_s"] - c["steady_s"]
                    out[p + "cold_extra_ms_" + c["name"]] = float(extra * 1e3)
    out["bench_bf16_err_ratio"] = out["bench_bf16_err_rotate_half"] / out["bench_bf16_err_posenc_half"]
    floors = results["floors"]
    for f in floors:
        if f["id"].endswith("_into_vs_copy"):
            out[f"bench_into_floor_{f['case']}_{f['id'].split('_')[0]}_passed"] = int(f["passed"])
    out["bench_floors_passed"] = int(sum(bool(f["passed"]) for f in floors))
    out["bench_floors_total"] = int(len(floors))
    for s in results["sinusoidal"]:
        tag = f"{s['seq_len']}x{s['d_model']}"
        out[f"bench_sin_speedup_{tag}"] = float(s["speedup"])
        out[f"bench_sin_loop_s_{tag}"] = float(s["loop"]["median"])
        out[f"bench_sin_posenc_ms_{tag}"] = float(s["posenc"]["median"] * 1e3)
        out[f"bench_sin_trig_share_{tag}"] = float(s["numpy_sin_cos_s"] / s["posenc"]["median"])
    build = results.get("build")
    for name in ("cold", "warm", "prose", "library"):  # NaN until a --build run exists
        out[f"bench_build_{name}_s"] = math.nan
        out[f"bench_build_{name}_executed"] = -1
    out["bench_build_pages"] = -1
    if build:
        steps = {s["step"]: s for s in build["steps"]}
        for name, s in steps.items():
            out[f"bench_build_{name}_s"] = float(s["seconds"])
            out[f"bench_build_{name}_executed"] = int(
                sum(len(v["executed"]) for v in s["languages"].values()))
        out["bench_build_pages"] = int(sum(
            len(v["executed"]) + len(v["cached"]) for v in steps["cold"]["languages"].values()))
        out.update(_build_comparison_headlines(build))
    return out


#: (prefix of the headline keys, RoPE case) for :func:`bench_headlines`.
_HEADLINE_CASES = (("", "fp32_2048"), ("long_", "fp32_16384"), ("bf16_", "bf16_2048"),
                   ("bf16long_", "bf16_16384"))


def _executed(step):
    return int(sum(len(v["executed"]) for v in step["languages"].values()))


def _build_comparison_headlines(build):
    """The side-by-side build numbers (current against the previous configuration)."""
    out = {}
    previous = build.get("previous")
    if not previous:  # a build benchmark from before the comparison existed
        return out
    prev = {s["step"]: s for s in previous["steps"]}
    cur = {s["step"]: s for s in build["steps"]}
    cur["analysis"] = build["analysis_step"]
    for name in ("cold", "warm", "analysis"):
        out[f"bench_build_{name}_now_s"] = float(cur[name]["seconds"])
        out[f"bench_build_{name}_prev_s"] = float(prev[name]["seconds"])
        out[f"bench_build_{name}_ratio"] = float(cur[name]["seconds"] / prev[name]["seconds"])
        out[f"bench_build_{name}_cpu_ratio"] = float(cur[name]["cpu_seconds"]
                                                     / prev[name]["cpu_seconds"])
        out[f"bench_build_{name}_now_executed"] = _executed(cur[name])
        out[f"bench_build_{name}_prev_executed"] = _executed(prev[name])
    out["bench_build_goals_passed"] = int(sum(bool(g["passed"]) for g in build["goals"]))
    out["bench_build_goals_total"] = int(len(build["goals"]))
    memo = build.get("memo_cold") or {}
    out["bench_build_memo_hits"] = int(memo.get("hits", 0))
    out["bench_build_memo_saved_s"] = float(memo.get("seconds_saved", 0.0))
    out["bench_build_languages_pages"] = int(len(build.get("pages", [])))
    return out


# -- the figure ----------------------------------------------------------------------------


def bench_ratio_figure(results, case_ids=None, yardstick="clone"):
    """Bar chart: every implementation's per-call time divided by that of ``x.clone()``.

    (Or by that of ``out.copy_(x)`` into a preallocated tensor, with
    ``yardstick="copy_into"``; the dashed floor line is drawn for ``"clone"`` only.)

    One panel per case; bars coloured by kind (posenc, peers, eager prototypes,
    ``torch.compile``, the memory copies); whiskers span the inter-quartile range.  The
    dashed line marks the 1.3 × clone floor set for the interleaved layout.

    Parameters
    ----------
    results : dict
        From :func:`load_bench_results`.
    case_ids : sequence of str, optional
        The RoPE cases to draw, in order; by default every case of ``results``.
    yardstick : {"clone", "copy_into"}
        What every time is divided by.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If ``results`` is not a results dict, ``case_ids`` is empty or names an unknown
        case.

    Examples
    --------
    >>> fig = bench_ratio_figure(load_bench_results(), ["fp32_2048"])
    >>> len(fig.axes)
    1
    """
    _check_results(results)
    case_ids = [c["id"] for c in results["rope"]] if case_ids is None else list(case_ids)
    if not case_ids:
        raise ValueError("case_ids must name at least one case")
    if yardstick not in ("clone", "copy_into"):
        raise ValueError(f"yardstick must be 'clone' or 'copy_into', got {yardstick!r}")
    key = "vs_clone" if yardstick == "clone" else "vs_copy"
    cases = [_case(results, cid) for cid in case_ids]
    fig, axes = new_figure(len(cases), 1, figsize=(7.4, 2.9 * len(cases)), squeeze=False)
    for ax, case in zip(axes[:, 0], cases):
        cands = [c for c in sorted(case["candidates"], key=lambda c: _ORDER.index(c["name"])
                                   if c["name"] in _ORDER else 99) if "time" in c]
        names = [label("bench_" + c["name"]) for c in cands]
        ratios = [c[key] for c in cands]
        # Whiskers: the candidate's own inter-quartile spread, relative to its median.
        lo = [r * (1 - c["time"]["q1"] / c["time"]["median"]) for r, c in zip(ratios, cands)]
        hi = [r * (c["time"]["q3"] / c["time"]["median"] - 1) for r, c in zip(ratios, cands)]
        y = list(range(len(cands)))[::-1]
        ax.barh(y, ratios, color=[_KIND_COLOR[c["kind"]] for c in cands], height=0.7,
                xerr=[[max(v, 0) for v in lo], [max(v, 0) for v in hi]],
                error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#333333"})
        ax.set_xscale("log")
        ax.axvline(1.0, color="#333333", lw=0.8)
        if yardstick == "clone":
            ax.axvline(1.3, color="#333333", lw=0.8, ls="--", label=label("bench_floor_line"))
        for yi, r in zip(y, ratios):
            ax.text(r * 1.04, yi, f"{r:.2f}×", va="center", fontsize=9)
        ax.set_yticks(y, names, fontsize=9)
        ax.set_xlim(min(0.5, min(ratios) * 0.8), max(ratios) * 1.6)
        ax.set_title(_case_title(case), fontsize=10)
        ax.tick_params(axis="x", labelsize=9)
    axes[-1, 0].set_xlabel(label("bench_ratio_axis" if yardstick == "clone"
                                 else "bench_ratio_axis_copy"))
    from matplotlib.patches import Patch

    present = {c["kind"] for case in cases for c in case["candidates"]}
    handles = [Patch(color=col, label=label("bench_kind_" + kind))
               for kind, col in _KIND_COLOR.items() if kind in present]
    if yardstick == "clone":
        handles.append(axes[0, 0].get_legend_handles_labels()[0][0])
    # above the panels, so that no bar or value label is hidden behind it
    fig.legend(handles=handles, fontsize=9, loc="outside upper center", ncol=3, frameon=False)
    return fig


# -- tables --------------------------------------------------------------------------------


def bench_rope_table(results, case_id="fp32_2048"):
    """All implementations of one RoPE case: times, ratios, bytes, memory, error.

    The inter-quartile ranges are in the figure's whiskers and in ``results.md``; the
    page's column is too narrow for them beside both yardsticks.

    Parameters
    ----------
    results : dict
    case_id : str
        The id of one of ``results["rope"]``: ``"fp32_2048"``, ``"fp32_16384"``,
        ``"bf16_2048"`` or ``"bf16_16384"``.

    Returns
    -------
    MarkdownTable

    Raises
    ------
    ValueError
        If ``case_id`` is not a case of ``results``.

    Examples
    --------
    >>> print(bench_rope_table(load_bench_results()).splitlines()[0][:22])
    | implementation | lay
    """
    case = _case(results, case_id)
    rows = []
    for c in sorted(case["candidates"], key=lambda c: _ORDER.index(c["name"])
                    if c["name"] in _ORDER else 99):
        name = label("bench_" + c["name"])
        if "time" not in c:
            rows.append([name, _layout(c["layout"]), label("bench_unavailable")] + ["–"] * 6)
            continue
        t = c["time"]
        rows.append([
            name, _layout(c["layout"]), _ms(t["median"]),
            _fmt(c["vs_clone"]),
            _fmt(c.get("vs_copy")),
            _fmt(c["speedup_vs_rotate_half"]), _fmt(c.get("bytes_moved_per_input_byte")),
            _fmt(c.get("peak_extra_per_input_byte")),
            _fmt(c.get("max_abs_error"), ".1e"),
        ])
    header = [label(k) for k in ("bench_col_impl", "bench_col_layout",
                                 "bench_col_median", "bench_col_vs_clone",
                                 "bench_col_vs_copy", "bench_col_vs_rh", "bench_col_moved",
                                 "bench_col_peak", "bench_col_error")]
    return _table(header, rows, "llrrrrrrr")


def _layout(name):
    """A layout name as the table shows it, in the page's language ("-" stays "-")."""
    key = "bench_layout_" + str(name)
    return label(key) if key in LABELS else name


def bench_arithmetic_table(results, case_id="fp32_2048"):
    """Bytes moved and allocated per formula, the time they predict, the time measured.

    The prediction is ``moved / B + allocated * f`` with ``B`` the bandwidth of
    ``out.copy_(x)`` and ``f`` the cost per byte of a fresh allocation
    (``clone()`` minus ``copy_``), both from the same run.

    Examples
    --------
    >>> print(bench_arithmetic_table(load_bench_results()).splitlines()[0][:22])
    | implementation | ker
    """
    case = _case(results, case_id)
    rows = []
    for c in sorted(case["candidates"], key=lambda c: _ORDER.index(c["name"])
                    if c["name"] in _ORDER else 99):
        if "predicted_s" not in c:
            continue
        rows.append([label("bench_" + c["name"]), str(len(c["kernels"])),
                     _fmt(c["bytes_moved_per_input_byte"]),
                     _fmt(c["bytes_allocated"] / case["input_bytes"]),
                     _ms(c["predicted_s"]), _ms(c["time"]["median"])])
    header = [label(k) for k in ("bench_col_impl", "bench_col_kernels", "bench_col_moved",
                                 "bench_col_alloc", "bench_col_predicted", "bench_col_measured")]
    return _table(header, rows)


def bench_floor_table(results):
    """The floors, per case: the measured ratio, the rule, PASS or FAIL, the best path.

    Examples
    --------
    >>> "PASS" in bench_floor_table(load_bench_results()) or "FAIL" in \\
    ...     bench_floor_table(load_bench_results())
    True
    """
    _check_results(results)
    titles = {c["id"]: _case_title(c) for c in results["rope"]}
    rows = []
    for f in results["floors"]:
        value = _fmt(f["value"])
        if f.get("worst_pair") and f["worst_pair"][0]:
            first, second = (label("bench_" + name) for name in f["worst_pair"][:2])
            pair = f"{first} ÷ {second}"
            value += f"（{pair}）" if get_language() == "zh" else f" ({pair})"
        colon = "：" if get_language() == "zh" else ": "
        best = (f"{label('bench_' + f['best_alternative'])}{colon}"
                f"{_fmt(f['best_alternative_value'])}"
                if f.get("best_alternative") else "–")
        status = label("bench_pass") if f["passed"] else label("bench_fail")
        rows.append([titles.get(f["case"], f["case"]),
                     label("bench_floor_" + f["id"]).format(t=f["threshold"]), value,
                     f"{'≤' if f['direction'] == '<=' else '≥'} {f['threshold']:g}",
                     f"**{status}**", _fmt(f.get("bytes_bound")), best])
    header = [label(k) for k in ("bench_col_case", "bench_col_floor", "bench_col_value",
                                 "bench_col_required", "bench_col_status", "bench_col_bound",
                                 "bench_col_best")]
    return _table(header, rows, "lllllrl")


def bench_cold_table(results, case_id="fp32_2048"):
    """posenc's first call (tables built then) against the peers' table setup.

    Examples
    --------
    >>> print(bench_cold_table(load_bench_results()).splitlines()[0][:22])
    | implementation | tab
    """
    case = _case(results, case_id)
    if not case.get("cold"):
        raise ValueError(f"case_id {case_id!r} has no first-call measurements")
    rows = [[label("bench_" + c["name"]), _ms(c["setup_s"]), _ms(c["first_call_s"]),
             _ms(c["steady_s"]), _ms(c["setup_s"] + c["first_call_s"] - c["steady_s"])]
            for c in case["cold"]]
    header = [label(k) for k in ("bench_col_impl", "bench_col_setup", "bench_col_first",
                                 "bench_col_steady", "bench_col_extra")]
    return _table(header, rows)


def bench_sinusoidal_table(results):
    """``sinusoidal_encoding`` against the double loop over positions and dimensions.

    Examples
    --------
    >>> print(bench_sinusoidal_table(load_bench_results()).splitlines()[0][:9])
    | L × d |
    """
    _check_results(results)
    rows = [[f"{s['seq_len']} × {s['d_model']}", _ms(s["posenc"]["median"]),
             _fmt(s["loop"]["median"]), _fmt(s["speedup"], ",.0f"),
             _fmt(s["max_abs_difference"], ".1e")] for s in results["sinusoidal"]]
    header = [label(k) for k in ("bench_col_size", "bench_col_posenc", "bench_col_loop",
                                 "bench_col_speedup", "bench_col_diff")]
    return _table(header, rows)


def bench_build_table(results):
    """Cold, warm and incremental builds of the book: seconds and executed notebooks.

    A results file without a build run (the build benchmark builds a copy of the
    committed book, whose results cannot hold that very run yet) gives a one-row table
    that says so.

    Examples
    --------
    >>> "|" in bench_build_table(load_bench_results())
    True
    >>> print(bench_build_table({**load_bench_results(), "build": None}).splitlines()[-1])
    | no build benchmark in results.json yet: run `nox -s bench` |
    """
    _check_results(results)
    build = results.get("build")
    if not build:
        return _table([label("bench_col_build")], [[label("bench_no_build")]], "l")
    langs = build["languages"]
    rows = []
    for s in build["steps"]:
        executed = "; ".join(
            f"{lang}: " + (", ".join(s["languages"][lang]["executed"]) or label("bench_none"))
            for lang in langs)
        rows.append([label("bench_step_" + s["step"]), _fmt(s["seconds"], ".1f"),
                     *[_fmt(s["languages"][lang]["seconds"], ".1f") for lang in langs],
                     executed])
    header = [label("bench_col_build"), label("bench_col_total"),
              *[label("bench_col_lang_s").format(lang=lang) for lang in langs],
              label("bench_col_executed")]
    return _table(header, rows, "lrrrl")


def bench_yardstick_table(results, case_ids=None):
    """posenc's three ways to call RoPE against both yardsticks, one row per case and layout.

    Out of place (``apply_rope(x)``) against ``x.clone()`` and against ``out.copy_(x)``;
    into a preallocated tensor (``out=``) and in place (``apply_rope_``) against
    ``out.copy_(x)`` (ratios paired per round, as stored by the harness); then the goal,
    which applies to the better of in place and ``out=``, and whether this run met it.

    Parameters
    ----------
    results : dict
        From :func:`load_bench_results`.
    case_ids : sequence of str, optional
        The cases, in order; by default every case that timed the in-place candidates.

    Returns
    -------
    MarkdownTable

    Raises
    ------
    ValueError
        If ``results`` is not a results dict or a case is unknown.

    Examples
    --------
    >>> print(bench_yardstick_table(load_bench_results()).splitlines()[0][:15])
    | case | layout
    """
    _check_results(results)
    if case_ids is None:
        case_ids = [c["id"] for c in results["rope"]
                    if any(k["kind"] == "posenc_into" for k in c["candidates"])]
    floors = {(f["case"], f["id"]): f for f in results["floors"]}
    rows = []
    for cid in case_ids:
        case = _case(results, cid)
        names = {c["name"] for c in case["candidates"] if "time" in c}
        for layout in ("interleaved", "half"):
            if f"posenc_{layout}" not in names:
                continue

            def ratio(suffix, key="vs_copy", layout=layout):
                name = f"posenc_{layout}{suffix}"
                return _fmt(_cand(case, name).get(key)) if name in names else "–"

            f = floors.get((cid, f"{layout}_into_vs_copy"))
            goal = "–" if f is None else f"≤ {f['threshold']:g}"
            status = "–" if f is None else (
                f"**{label('bench_pass') if f['passed'] else label('bench_fail')}**")
            rows.append([f"{case['dtype']}, {case['shape'][-2]}", _layout(layout),
                         ratio("", "vs_clone"), ratio(""), ratio("_out"), ratio("_inplace"),
                         goal, status])
    header = [label(k) for k in ("bench_col_dtype_len", "bench_col_layout",
                                 "bench_col_oop_clone", "bench_col_oop_copy",
                                 "bench_col_out_copy", "bench_col_inplace_copy",
                                 "bench_col_goal", "bench_col_status")]
    return _table(header, rows, "llrrrrll")


def bench_build_comparison_table(results):
    """The book's build now against the configuration before its rework, side by side.

    One row per build (cold, warm, one analysis module edited): wall seconds in the
    previous configuration and now, their ratio, the CPU seconds and the pages executed
    (both languages), each as previous → now, and the goal with its status.  Results without that comparison give
    a one-row table that says so.

    Examples
    --------
    >>> print(bench_build_comparison_table(load_bench_results()).splitlines()[0][:9])
    | build |
    """
    _check_results(results)
    build = results.get("build")
    if not build or not build.get("previous"):
        return _table([label("bench_col_build")], [[label("bench_no_build")]], "l")
    prev = {s["step"]: s for s in build["previous"]["steps"]}
    cur = {s["step"]: s for s in build["steps"]}
    cur["analysis"] = build["analysis_step"]
    goals = {g["step"]: g for g in build["goals"]}
    rows = []
    for name in ("cold", "warm", "analysis"):
        p, c = prev[name], cur[name]
        g = goals.get(name)
        title = label("bench_step_" + name)
        if name == "analysis":
            edited = f"`{str(c['edited']).split(':')[0]}`"
            title += f"（{edited}）" if get_language() == "zh" else f" ({edited})"
        if g is None:
            verdict = "–"
        else:
            kind = "bench_goal_ratio" if "previous" in g["rule"] else "bench_goal_seconds"
            goal = label(kind).format(t=g["limit"])
            status = f"**{label('bench_pass') if g['passed'] else label('bench_fail')}**"
            verdict = f"{status}（{goal}）" if get_language() == "zh" else f"{status} ({goal})"
        rows.append([title, f"{_fmt(p['seconds'], '.1f')} → {_fmt(c['seconds'], '.1f')}",
                     _fmt(c["seconds"] / p["seconds"]),
                     f"{_fmt(p['cpu_seconds'], '.0f')} → {_fmt(c['cpu_seconds'], '.0f')}",
                     f"{_executed(p)} → {_executed(c)}", verdict])
    header = [label(k) for k in ("bench_col_step", "bench_col_wall", "bench_col_ratio",
                                 "bench_col_cpu", "bench_col_exec_both", "bench_col_goal")]
    return _table(header, rows, "lrrrrl")


def bench_machine_table(results):
    """Where and with what the numbers were measured (no date).

    Examples
    --------
    >>> "torch" in bench_machine_table(load_bench_results()).lower()
    True
    """
    _check_results(results)
    m = results["machine"]
    v = m["versions"]
    rows = [
        [label("bench_m_cpu"), m["cpu_model"]],
        [label("bench_m_cores"), f"{m['usable_cpus']} / {m['logical_cpus']}"],
        [label("bench_m_threads"), str(m["torch_threads"])],
        [label("bench_m_memory"), f"{m['memory_gib']} GiB"],
        [label("bench_m_llc"), (f"{m['last_level_cache_bytes'] / 2**20:g} MiB"
                                if m.get("last_level_cache_bytes") else "–")],
        [label("bench_m_load"),
         f"{m['load_average_start'][0]:.2f} / {m['load_average_end'][0]:.2f}"],
        [label("bench_m_versions"), f"{v['python']} / {v['torch']} / {v['numpy']}"],
        [label("bench_m_libs"), f"{v.get('posenc')} / {v.get('rotary-embedding-torch')}"],
        [label("bench_m_commit"), f"`{m.get('commit')}`"],
        [label("bench_m_seconds"),
         label("bench_m_seconds_value").format(t=_fmt(results.get("library_seconds"), ".0f"))],
    ]
    return _table([label("bench_col_item") or " ", label("bench_col_value")], rows, "ll")
