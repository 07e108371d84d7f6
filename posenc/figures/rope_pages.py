"""Figures of the chapters ``rope`` and ``rope-in-practice``.

Each function takes the arrays a page has just computed and draws them; nothing is
recomputed here, so what a figure shows is what the cell above it computed.  Words go
through :func:`posenc.figures._style.label`, so the page's ``set_language`` call picks
English or Chinese.
"""

from __future__ import annotations

import numpy as np

from ._style import add_labels, label, new_figure
from ._tables import BookTable  # re-exported: posenc.figures.BookTable

__all__ = [
    "rope_scores_figure",
    "rope_decay_figure",
    "rope_wavelengths_figure",
    "rope_float32_error_figure",
    "BookTable",
    "rope_traffic_table",
    "rope_benchmark_table",
]

add_labels({
    "rope_query_position": {"en": "query position $m$", "zh": "查询位置 $m$"},
    "rope_key_position": {"en": "key position $n$", "zh": "键位置 $n$"},
    "rope_score": {"en": "score", "zh": "分数"},
    "rope_offset": {"en": "offset $m - n$", "zh": "相对位置 $m - n$"},
    "rope_all_entries": {"en": "all $T^2$ entries", "zh": "全部 $T^2$ 个元素"},
    "rope_distance": {"en": "relative distance $r = m - n$", "zh": "相对距离 $r = m - n$"},
    "rope_relative_to_0": {"en": "relative to distance 0", "zh": "相对于距离 0 处的值"},
    "rope_bound": {"en": "RoFormer bound $\\frac{2}{d}\\sum_j |S_j|$",
                   "zh": "RoFormer 上界 $\\frac{2}{d}\\sum_j |S_j|$"},
    "rope_rms_random": {"en": "RMS score, random $\\mathbf{q}, \\mathbf{k}$",
                        "zh": "随机 $\\mathbf{q}, \\mathbf{k}$ 分数的均方根"},
    "rope_mean_self": {"en": "mean score, $\\mathbf{k} = \\mathbf{q}$",
                       "zh": "平均分数，$\\mathbf{k} = \\mathbf{q}$"},
    "rope_pair_index": {"en": "pair $j$", "zh": "维度对 $j$"},
    "rope_wavelength": {"en": "wavelength $\\lambda_j$ (tokens)", "zh": "波长 $\\lambda_j$（词元）"},
    "rope_base": {"en": "base", "zh": "基数"},
    "rope_tokens": {"en": "tokens", "zh": "个词元"},
    "rope_position": {"en": "position $m$", "zh": "位置 $m$"},
    "rope_max_abs_error": {"en": "largest error of the rotated vector",
                           "zh": "旋转后向量的最大误差"},
    "rope_angles_float32": {"en": "angles in float32 (usual code)",
                            "zh": "float32 角度（常见写法）"},
    "rope_angles_float64": {"en": "posenc: angles in float64, result in float32",
                            "zh": "posenc：float64 角度，float32 结果"},
    "rope_true_position": {"en": "true position", "zh": "真实位置"},
    "rope_stored_position": {"en": "stored position", "zh": "存储下来的位置"},
    "rope_position_error": {"en": "largest |stored − true|", "zh": "最大 |存储值 − 真实值|"},
    "rope_exact": {"en": "exact", "zh": "精确"},
    "rope_float16_overflow": {"en": "float16 overflows", "zh": "float16 溢出"},
    "rope_tbl_formula": {"en": "formula", "zh": "写法"},
    "rope_tbl_kernels": {"en": "kernels", "zh": "内核"},
    "rope_tbl_read": {"en": "read (× x)", "zh": "读（× x）"},
    "rope_tbl_written": {"en": "written (× x)", "zh": "写（× x）"},
    "rope_tbl_total": {"en": "total (× x)", "zh": "合计（× x）"},
    "rope_tbl_case": {"en": "case", "zh": "场景"},
    "rope_tbl_impl": {"en": "implementation", "zh": "实现"},
    "rope_tbl_layout": {"en": "layout", "zh": "布局"},
    "rope_tbl_median": {"en": "median (ms)", "zh": "中位数（毫秒）"},
    "rope_tbl_vs_clone": {"en": "× clone", "zh": "× x.clone()"},
    "rope_tbl_speedup": {"en": "speed-up vs rotate_half", "zh": "相对 rotate_half 的加速比"},
    "rope_tbl_measured_on": {"en": "Measured on {cpu}, {threads} threads.",
                             "zh": "测量环境：{cpu}，{threads} 个线程。"},
    "rope_tbl_missing": {"en": "benchmarks/results.json was not present when this page was "
                               "built; run nox -s bench to create it.",
                         "zh": "构建本页时 benchmarks/results.json 还不存在；运行基准测试"
                               "（nox -s bench）即可生成。"},
})


def rope_traffic_table(traffic, nbytes):
    """Kernels and memory traffic of RoPE formulas, in units of the input's size.

    Parameters
    ----------
    traffic : dict of str to posenc.analysis.rope_extras.Traffic
        Formula name -> the result of :func:`posenc.analysis.rope_extras.memory_traffic`.
    nbytes : int
        Size of the input tensor in bytes (the unit of the table), ``> 0``.

    Returns
    -------
    BookTable

    Raises
    ------
    ValueError
        If ``nbytes`` is not positive.

    Examples
    --------
    >>> from posenc.analysis.rope_extras import KernelTraffic, Traffic
    >>> t = Traffic((KernelTraffic("mul.Tensor", 8, 8),))
    >>> print(rope_traffic_table({"x * 2": t}, 8))
    | formula | kernels | read (× x) | written (× x) | total (× x) |
    | :--- | :--- | ---: | ---: | ---: |
    | `x * 2` | mul | 1.00 | 1.00 | 2.00 |
    """
    if not nbytes > 0:
        raise ValueError(f"nbytes must be > 0, got {nbytes!r}")
    rows = []
    for name, t in traffic.items():
        ops = ", ".join(k.op.split(".")[0] for k in t.kernels)
        rows.append([name, ops, f"{t.read_bytes / nbytes:.2f}", f"{t.written_bytes / nbytes:.2f}",
                     f"{(t.read_bytes + t.written_bytes) / nbytes:.2f}"])
    header = [label(k) for k in ("rope_tbl_formula", "rope_tbl_kernels", "rope_tbl_read",
                                 "rope_tbl_written", "rope_tbl_total")]
    return BookTable(header, rows, align="llrrr", code_columns=(0,))


_BENCH_SHOWN = ("clone", "rotate_half", "complex", "posenc_half", "posenc_interleaved")


def rope_benchmark_table(results, shown=_BENCH_SHOWN):
    """The RoPE rows of ``benchmarks/results.json`` (as loaded by ``json``), or a note.

    Parameters
    ----------
    results : dict or None
        The parsed results file; ``None`` when the file does not exist.
    shown : sequence of str
        Candidate names to show, in this order.

    Returns
    -------
    BookTable
        Median time per call, time relative to ``x.clone()``, and speed-up against the
        ``rotate_half`` formula, per case; with the machine in the note.  Without
        results, an empty table whose note says how to create them.

    Examples
    --------
    >>> print(rope_benchmark_table(None).note)
    benchmarks/results.json was not present when this page was built; run nox -s bench to create it.
    """
    header = [label(k) for k in ("rope_tbl_case", "rope_tbl_impl", "rope_tbl_layout",
                                 "rope_tbl_median", "rope_tbl_vs_clone", "rope_tbl_speedup")]
    if results is None:
        return BookTable(header, [], note=label("rope_tbl_missing"), align="lllrrr")
    rows = []
    for case in results.get("rope", []):
        title = f"{case.get('dtype', '?')}, {tuple(case.get('shape', ()))}"
        by_name = {c.get("name"): c for c in case.get("candidates", [])}
        for name in shown:
            c = by_name.get(name)
            if c is None or "time" not in c:
                continue
            rows.append([title, name, c.get("layout", ""), f"{c['time']['median'] * 1e3:.3g}",
                         f"{c.get('vs_clone', float('nan')):.2f}",
                         f"{c.get('speedup_vs_rotate_half', float('nan')):.2f}"])
    machine = results.get("machine", {})
    note = label("rope_tbl_measured_on").format(cpu=machine.get("cpu_model", "?"),
                                                threads=machine.get("torch_threads", "?"))
    return BookTable(header, rows, align="lllrrr", note=note, code_columns=(1,))


def _check_1d(name, *arrays):
    shapes = {np.shape(a) for a in arrays}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"{name} must be 1-D arrays of one length, got shapes {sorted(shapes)}")


def rope_scores_figure(scores):
    """Score matrix of one query and one key at every position, and scores vs offset.

    Parameters
    ----------
    scores : array_like
        Square ``(T, T)`` matrix, ``scores[m, n] = <R_m q, R_n k>``.

    Returns
    -------
    BookFigure
        Left: the matrix as an image.  Right: every entry plotted against ``m - n``.

    Raises
    ------
    ValueError
        If ``scores`` is not a square 2-D array.

    Examples
    --------
    >>> import numpy as np
    >>> fig = rope_scores_figure(np.add.outer(np.arange(4.0), -np.arange(4.0)))
    >>> len(fig.axes)
    3
    """
    S = np.asarray(scores, dtype=np.float64)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"scores must be a square 2-D array, got shape {S.shape}")
    T = S.shape[0]
    fig, (ax_m, ax_o) = new_figure(1, 2, figsize=(8.4, 3.6), gridspec_kw={"width_ratios": [1, 1.3]})
    lim = float(np.abs(S).max()) or 1.0
    im = ax_m.imshow(S, cmap="RdBu_r", vmin=-lim, vmax=lim, origin="upper")
    ax_m.set_xlabel(label("rope_key_position"))
    ax_m.set_ylabel(label("rope_query_position"))
    # The colour bar has no label of its own: next to the right panel's y label it read
    # "score score".  The matrix's title says what the colours are.
    fig.colorbar(im, ax=ax_m, shrink=0.85)
    ax_m.set_title(label("rope_score"), fontsize=10)
    m, n = np.indices(S.shape)
    ax_o.scatter((m - n).ravel(), S.ravel(), s=6, alpha=0.25, color="C0",
                 label=label("rope_all_entries"), rasterized=True)
    offsets = np.arange(-(T - 1), T)
    ax_o.plot(offsets, [np.diagonal(S, -o).mean() for o in offsets], color="C3", lw=1)
    ax_o.axhline(0, color="0.7", lw=0.6)
    ax_o.set_xlabel(label("rope_offset"))
    ax_o.set_ylabel(label("rope_score"))
    ax_o.legend(loc="upper right", fontsize=9, frameon=False)
    return fig


def rope_decay_figure(distances, bound, rms_random, mean_self):
    """The RoFormer bound next to actual scores, each normalised at distance 0.

    Parameters
    ----------
    distances : array_like
        1-D relative distances, starting at 0.
    bound, rms_random, mean_self : array_like
        1-D, one value per distance: the bound, the RMS score of random pairs, the mean
        score of vectors with themselves.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If the arrays are not 1-D of one length, or a curve is 0 at distance 0.

    Examples
    --------
    >>> import numpy as np
    >>> r = np.arange(5.0)
    >>> fig = rope_decay_figure(r, 5 - r, np.ones(5), np.cos(r))
    >>> len(fig.axes[0].lines)
    4
    """
    _check_1d("distances, bound, rms_random and mean_self", distances, bound, rms_random,
              mean_self)
    r = np.asarray(distances, dtype=np.float64)
    fig, ax = new_figure(figsize=(7.0, 3.6))
    for values, key, color in ((bound, "rope_bound", "C3"), (rms_random, "rope_rms_random", "C0"),
                               (mean_self, "rope_mean_self", "C2")):
        v = np.asarray(values, dtype=np.float64)
        if v[0] == 0:
            raise ValueError(f"{key} is 0 at distance 0 and cannot be normalised")
        ax.plot(r, v / v[0], color=color, lw=1.2, label=label(key))
    ax.axhline(0, color="0.7", lw=0.6)
    ax.set_xlabel(label("rope_distance"))
    ax.set_ylabel(label("rope_relative_to_0"))
    ax.legend(loc="center right", fontsize=9, frameon=True, framealpha=0.9)
    return fig


def rope_wavelengths_figure(d_model, bases, contexts):
    """Wavelength of every pair for several bases, with context lengths as lines.

    Parameters
    ----------
    d_model : int
        Head width (even).
    bases : sequence of float
        Bases to compare.
    contexts : sequence of int
        Context lengths drawn as horizontal lines.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        As :func:`posenc.wavelengths` for bad ``d_model`` or bases.

    Examples
    --------
    >>> fig = rope_wavelengths_figure(16, [10000.0], [100])
    >>> fig.axes[0].get_yscale()
    'log'
    """
    from ..sinusoidal import wavelengths

    fig, ax = new_figure(figsize=(6.6, 3.6))
    for i, b in enumerate(bases):
        lam = wavelengths(d_model, b)
        ax.plot(np.arange(lam.size), lam, marker="o", ms=2.5, lw=1, color=f"C{i}",
                label=f"{label('rope_base')} {b:,.0f}")
    for c in contexts:
        ax.axhline(c, color="0.45", lw=0.8, ls="--")
        ax.annotate(f"{c:,} {label('rope_tokens')}", (0, c), xytext=(2, 3),
                    textcoords="offset points", fontsize=9, color="0.3")
    ax.set_yscale("log")
    ax.set_xlabel(label("rope_pair_index"))
    ax.set_ylabel(label("rope_wavelength"))
    ax.legend(loc="lower right", fontsize=9, frameon=False)
    return fig


def rope_float32_error_figure(positions, err_float32_angles, err_posenc):
    """Error of a rotated vector against position: float32 angles vs posenc, log-log.

    Parameters
    ----------
    positions : array_like
        1-D positions, all ``>= 1``.
    err_float32_angles, err_posenc : array_like
        1-D errors, one per position.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If the arrays are not 1-D of one length.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([1, 10, 100])
    >>> rope_float32_error_figure(p, p * 1e-8, np.full(3, 1e-7)).axes[0].get_xscale()
    'log'
    """
    _check_1d("positions and errors", positions, err_float32_angles, err_posenc)
    fig, ax = new_figure(figsize=(6.6, 3.6))
    floor = 1e-10  # exact zeros (small positions) drawn at the bottom of the log axis
    ax.loglog(positions, np.maximum(err_float32_angles, floor), color="C3", lw=1.2,
              label=label("rope_angles_float32"))
    ax.loglog(positions, np.maximum(err_posenc, floor), color="C0", lw=1.2,
              label=label("rope_angles_float64"))
    ax.set_ylim(bottom=1e-9)
    ax.set_xlabel(label("rope_position"))
    ax.set_ylabel(label("rope_max_abs_error"))
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    return fig
