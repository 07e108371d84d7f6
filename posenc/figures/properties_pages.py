"""Figures and tables of the chapter ``sinusoidal-properties`` (what the sinusoids buy).

Each function draws one figure of the page from data the page computes (or from a
few parameters when the computation is not the point), with words from
:func:`posenc.figures._style.label`, so the English and the Chinese page get the same
figure with their own labels.
"""

from __future__ import annotations

import numpy as np

from ._style import add_labels, label, new_figure

__all__ = [
    "shift_rotation_figure",
    "signed_dot_product_figure",
    "projected_scores_figure",
    "offset_distance_figure",
    "collision_table_markdown",
    "collision_ratio_figure",
    "float32_angle_figure",
    "extrapolation_coverage_figure",
]

add_labels({
    "props_shift_matrix": {"en": "$T_k$ ($d = {d}$, $k = {k}$)",
                           "zh": "$T_k$（$d = {d}$，$k = {k}$）"},
    "props_row": {"en": "row", "zh": "行"},
    "props_column": {"en": "column", "zh": "列"},
    "props_pair_circle": {"en": "pair $i = {i}$: the point $(\\sin p\\omega_i, \\cos p\\omega_i)$",
                          "zh": "第 $i = {i}$ 对：点 $(\\sin p\\omega_i, \\cos p\\omega_i)$"},
    "props_sin_axis": {"en": "$\\sin p\\omega_i$ (column $2i$)", "zh": "$\\sin p\\omega_i$（第 $2i$ 列）"},
    "props_cos_axis": {"en": "$\\cos p\\omega_i$ (column $2i+1$)",
                       "zh": "$\\cos p\\omega_i$（第 $2i+1$ 列）"},
    "props_step": {"en": "$p \\to p + {k}$: the same angle $-{k}\\omega_i$ every time",
                   "zh": "$p \\to p + {k}$：每次转过同一个角 $-{k}\\omega_i$"},
    "props_dot": {"en": "$\\mathrm{PE}(p)\\cdot\\mathrm{PE}(p+k)$",
                  "zh": "$\\mathrm{PE}(p)\\cdot\\mathrm{PE}(p+k)$"},
    "props_at_p": {"en": "$p = {p}$", "zh": "$p = {p}$"},
    "props_dot_title": {"en": "dot product, $d = {d}$: one curve for every $p$, mirror-symmetric",
                        "zh": "点积，$d = {d}$：各个 $p$ 重合为一条曲线，左右对称"},
    "props_score": {"en": "score $(W_q\\mathrm{PE}(p))\\cdot(W_k\\mathrm{PE}(p+k))$",
                    "zh": "分数 $(W_q\\mathrm{PE}(p))\\cdot(W_k\\mathrm{PE}(p+k))$"},
    "props_identity": {"en": "$W_q = W_k = I$", "zh": "$W_q = W_k = I$"},
    "props_learned": {"en": "seeded random $W_q, W_k$", "zh": "固定种子的随机 $W_q, W_k$"},
    "props_stationary": {"en": "part that depends on $k$ only", "zh": "只依赖 $k$ 的部分"},
    "props_odd": {"en": "its odd part (before $\\neq$ after)", "zh": "其中的奇部分（前 $\\neq$ 后）"},
    "props_distance": {"en": "$\\Vert\\mathrm{PE}(p+k) - \\mathrm{PE}(p)\\Vert$",
                       "zh": "$\\Vert\\mathrm{PE}(p+k) - \\mathrm{PE}(p)\\Vert$"},
    "props_measured": {"en": "distance, $d = {d}$", "zh": "距离，$d = {d}$"},
    "props_proportional": {"en": "\"proportional to $k$\": $k\\cdot\\Vert\\mathrm{PE}(1)-\\mathrm{PE}(0)\\Vert$",
                           "zh": "“与 $k$ 成正比”：$k\\cdot\\Vert\\mathrm{PE}(1)-\\mathrm{PE}(0)\\Vert$"},
    "props_sqrt_log": {"en": "$\\sqrt{d\\,\\ln k / \\ln \\mathrm{base}}$ (estimate)",
                       "zh": "$\\sqrt{d\\,\\ln k / \\ln \\mathrm{base}}$（估计）"},
    "props_sqrt_d": {"en": "$\\sqrt{d}$: random angles on average", "zh": "$\\sqrt{d}$：随机角度的平均"},
    "props_sqrt_2d": {"en": "$\\sqrt{2d}$: largest possible", "zh": "$\\sqrt{2d}$：可能的最大值"},
    "props_k512": {"en": "$k = 512$ (\"first vs 513th token\")", "zh": "$k = 512$（“第 1 个与第 513 个词元”）"},
    "props_tbl_d": {"en": "$d$", "zh": "$d$"},
    "props_tbl_base": {"en": "base", "zh": "基数"},
    "props_tbl_neighbour": {"en": "neighbour distance $D(1)$", "zh": "相邻距离 $D(1)$"},
    "props_tbl_closest": {"en": "closest offset $k \\ge 2$", "zh": "最近的偏移 $k \\ge 2$"},
    "props_tbl_closest_d": {"en": "its distance", "zh": "其距离"},
    "props_tbl_first": {"en": "first $k$ closer than a neighbour", "zh": "比相邻位置更近的首个 $k$"},
    "props_tbl_none": {"en": "none", "zh": "无"},
    "props_angle_error": {"en": "largest error", "zh": "最大误差"},
    "props_f32_naive": {"en": "angle error (radians), angles formed in float32",
                        "zh": "角度误差（弧度），在 float32 中计算角度"},
    "props_f32_posenc": {"en": "value error, posenc: float64 angles, float32 output",
                         "zh": "数值误差，posenc：float64 角度，float32 输出"},
    "props_f32_limit": {"en": "$2^{24}$: float32 integers stop being exact",
                        "zh": "$2^{24}$：float32 不再能精确表示每个整数"},
    "props_f32_step": {"en": "angle step of the fastest pair (1 rad)", "zh": "最快一对每步转角（1 弧度）"},
    "props_pair_index": {"en": "pair index $i$", "zh": "维度对编号 $i$"},
    "props_ratio": {"en": "$\\min_{k \\geq 2} D(k)\\,/\\,D(1)$",
                    "zh": "$\\min_{k \\geq 2} D(k)\\,/\\,D(1)$"},
    "props_ratio_width": {"en": "width $d$", "zh": "宽度 $d$"},
    "props_ratio_base": {"en": "base {b:,g}", "zh": "基数 {b:,g}"},
    "props_ratio_one": {"en": "as close as a neighbour", "zh": "与相邻位置一样近"},
    "props_ratio_title": {"en": "first {n:,} positions: the closest non-neighbour, "
                                "over the neighbour distance $D(1)$",
                          "zh": "前 {n:,} 个位置：最近的非相邻位置的距离，与相邻距离 $D(1)$ 之比"},
    "props_coverage": {"en": "fraction of the circle swept", "zh": "扫过的圆周比例"},
    "props_seen": {"en": "positions $0..{L}$ (training)", "zh": "位置 $0..{L}$（训练）"},
    "props_later": {"en": "positions $0..{T}$", "zh": "位置 $0..{T}$"},
    "props_unseen": {"en": "pairs that reach unseen angles", "zh": "进入未见角度的维度对"},
    "props_arc_title": {"en": "pair $i = {i}$ (wavelength {lam:.0f})", "zh": "第 $i = {i}$ 对（波长 {lam:.0f}）"},
    "props_arc_seen": {"en": "seen in training", "zh": "训练中见过"},
    "props_arc_new": {"en": "new at length {T}", "zh": "长度 {T} 时的新角度"},
})


def shift_rotation_figure(k=3, d_model=16, base=10000.0, pair=1, n_points=13):
    """``T_k`` as a heatmap, and one pair of the encoding stepping round its circle.

    Parameters
    ----------
    k : int, default 3
        The shift.
    d_model : int, default 16
        Width of the small example.
    base : float, default 10000.0
    pair : int, default 1
        Which pair to draw on its circle.
    n_points : int, default 13
        Positions ``0 .. n_points - 1`` drawn.

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> fig = shift_rotation_figure()
    >>> len(fig.axes)
    3
    """
    from .. import inverse_frequencies, shift_matrix

    T = shift_matrix(k, d_model, base)
    fig, (ax0, ax1) = new_figure(1, 2, figsize=(9.0, 4.2), gridspec_kw={"width_ratios": [1, 1.1]})
    im = ax0.imshow(T, cmap="RdBu_r", vmin=-1, vmax=1)
    for edge in np.arange(1.5, d_model - 1, 2):
        ax0.axhline(edge, color="0.85", lw=0.5)
        ax0.axvline(edge, color="0.85", lw=0.5)
    ax0.set_title(label("props_shift_matrix").format(d=d_model, k=k))
    ax0.set_xlabel(label("props_column"))
    ax0.set_ylabel(label("props_row"))
    fig.colorbar(im, ax=ax0, shrink=0.8)

    w = inverse_frequencies(d_model, base)[pair]
    theta = np.linspace(0, 2 * np.pi, 400)
    ax1.plot(np.sin(theta), np.cos(theta), color="0.8", lw=1)
    p = np.arange(n_points)
    x, y = np.sin(p * w), np.cos(p * w)
    ax1.plot(x, y, "o", color="C0", ms=5)
    for pi in p:
        ax1.annotate(str(pi), (x[pi], y[pi]), textcoords="offset points",
                     xytext=(8 * x[pi], 8 * y[pi]), ha="center", va="center", fontsize=9)
    for start, color in ((0, "C3"), (6, "C2")):
        ax1.annotate("", xy=(x[start + k], y[start + k]), xytext=(x[start], y[start]),
                     arrowprops={"arrowstyle": "->", "color": color, "lw": 1.5,
                                 "connectionstyle": "arc3,rad=-0.25"})
    ax1.plot([], [], color="C3", label=label("props_step").format(k=k))
    ax1.set_aspect("equal")
    ax1.set_xlim(-1.35, 1.35)
    ax1.set_ylim(-1.35, 1.55)
    ax1.set_xlabel(label("props_sin_axis"))
    ax1.set_ylabel(label("props_cos_axis"))
    ax1.set_title(label("props_pair_circle").format(i=pair), fontsize=9)
    ax1.legend(loc="upper center", fontsize=9, frameon=False)
    return fig


def signed_dot_product_figure(offsets, scores, positions, d_model):
    """Dot products ``PE(p) . PE(p + k)`` against ``k``, one line per reference position.

    Parameters
    ----------
    offsets : array_like, shape (K,)
    scores : array_like, shape (P, K)
        Row ``a`` holds the dot products measured at position ``positions[a]``.
    positions : sequence of int, length P
    d_model : int
        Only for the title.

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> import numpy as np
    >>> fig = signed_dot_product_figure(np.arange(-3, 4), np.ones((2, 7)), [0, 5], 8)
    >>> len(fig.axes)
    1
    """
    offsets = np.asarray(offsets)
    scores = np.asarray(scores)
    fig, ax = new_figure(figsize=(7.0, 3.4))
    styles = ["-", "--", ":", "-."]
    widths = [3.0, 2.0, 1.5, 1.0]
    for a, p in enumerate(positions):
        ax.plot(offsets, scores[a], styles[a % 4], lw=widths[a % 4],
                label=label("props_at_p").format(p=p))
    ax.axvline(0, color="0.6", lw=0.8)
    ax.set_xlabel(label("offset"))
    ax.set_ylabel(label("props_dot"))
    ax.set_title(label("props_dot_title").format(d=d_model), fontsize=10)
    ax.legend(fontsize=9, frameon=False)
    return fig


def projected_scores_figure(offsets, identity_scores, learned_scores, stationary, odd, positions):
    """Scores of pure position vectors through projections: identity versus learned.

    Parameters
    ----------
    offsets : array_like, shape (K,)
    identity_scores, learned_scores : array_like, shape (P, K)
        :func:`posenc.analysis.uniqueness.projected_scores` at ``positions``.
    stationary, odd : array_like, shape (K,)
        The part of the learned score that depends on ``k`` only, and its odd part.
    positions : sequence of int, length P

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> import numpy as np
    >>> z = np.zeros((2, 5))
    >>> fig = projected_scores_figure(np.arange(5), z, z, z[0], z[0], [0, 1])
    >>> len(fig.axes)
    2
    """
    offsets = np.asarray(offsets)
    fig, axes = new_figure(1, 2, figsize=(10.0, 4.0))
    for ax, scores, title in ((axes[0], identity_scores, "props_identity"),
                              (axes[1], learned_scores, "props_learned")):
        for a, p in enumerate(positions):
            ax.plot(offsets, np.asarray(scores)[a], lw=0.9, alpha=0.75, color=f"C{a}",
                    label=label("props_at_p").format(p=p))
        ax.axvline(0, color="0.6", lw=0.8)
        ax.set_title(label(title))
        ax.set_xlabel(label("offset"))
    lines = [axes[1].plot(offsets, stationary, color="k", lw=2.8)[0],
             axes[1].plot(offsets, odd, color="k", lw=1.6, ls="--")[0]]
    lo, hi = axes[1].get_ylim()
    axes[1].set_ylim(lo, hi + 0.45 * (hi - lo))
    axes[1].legend(lines, [label("props_stationary"), label("props_odd")], fontsize=9,
                   frameon=False, loc="upper left")
    axes[0].set_ylabel(label("props_score"), fontsize=9)
    axes[0].legend(fontsize=9, frameon=False, loc="upper right")
    return fig


def offset_distance_figure(offsets, distances, d_model, base=10000.0, mark=512):
    """``||PE(p + k) - PE(p)||`` against ``k`` on log-log axes, with the "proportional" line.

    Parameters
    ----------
    offsets : array_like, shape (K,)
        Positive offsets, starting at 1.
    distances : array_like, shape (K,)
        :func:`posenc.analysis.uniqueness.offset_distance` at ``offsets``.
    d_model : int
    base : float, default 10000.0
        For the approximation :math:`\\sqrt{d \\ln k / \\ln \\mathrm{base}}`, drawn dotted.
    mark : int or None, default 512
        An offset to mark on the curve.

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> import numpy as np
    >>> from posenc.analysis.uniqueness import offset_distance
    >>> k = np.arange(1, 1000)
    >>> fig = offset_distance_figure(k, offset_distance(k, 64), 64)
    >>> len(fig.axes)
    1
    """
    k = np.asarray(offsets, dtype=float)
    dist = np.asarray(distances, dtype=float)
    fig, ax = new_figure(figsize=(7.0, 3.8))
    ax.loglog(k, dist, lw=1.0, label=label("props_measured").format(d=d_model))
    ax.loglog(k, k * dist[0], color="C3", ls="--", label=label("props_proportional"))
    grow = (k > 1) & (k < base)
    ax.loglog(k[grow], np.sqrt(d_model * np.log(k[grow]) / np.log(base)), color="C2", ls=":",
              lw=2, label=label("props_sqrt_log"))
    ax.axhline(np.sqrt(d_model), color="0.3", ls=":", label=label("props_sqrt_d"))
    ax.axhline(np.sqrt(2 * d_model), color="0.6", ls="-.", label=label("props_sqrt_2d"))
    if mark is not None and k[0] <= mark <= k[-1]:
        j = int(np.argmin(np.abs(k - mark)))
        ax.plot(k[j], dist[j], "o", color="C1", ms=7, label=label("props_k512"))
    ax.set_ylim(dist[0] * 0.5, np.sqrt(2 * d_model) * 1.6)
    ax.set_xlabel(label("offset"))
    ax.set_ylabel(label("props_distance"))
    ax.legend(fontsize=9, frameon=True, framealpha=0.9, loc="lower right")
    return fig


def collision_ratio_figure(rows, n_positions):
    """Closest non-neighbour distance over the neighbour distance, against the width.

    For each ``(d_model, base, summary)`` the point is ``summary.closest_distance /
    summary.neighbour_distance``: below the line at 1, some position ``k >= 2`` steps
    away is closer than a neighbour.  Each point is labelled with its ``k``
    (``summary.closest_offset``), so the widths where that closest position is far away
    and those where it is the one two steps away can be told apart.

    Parameters
    ----------
    rows : sequence of (d_model, base, CollisionSummary)
        As for :func:`collision_table_markdown`; one line per distinct base.
    n_positions : int
        The number of positions scanned (for the title).

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If ``rows`` is empty or a summary has no closest offset (fewer than 3 positions).

    Examples
    --------
    >>> from posenc.analysis.uniqueness import collision_summary
    >>> rows = [(d, 100.0, collision_summary(1000, d, 100.0)) for d in (4, 16, 64)]
    >>> fig = collision_ratio_figure(rows, 1000)
    >>> len(fig.axes[0].lines)       # one base, and the line at 1
    2
    """
    rows = list(rows)
    if not rows:
        raise ValueError("rows must hold at least one (d_model, base, summary)")
    if any(s.closest_offset < 2 for _, _, s in rows):
        raise ValueError("rows: every summary needs a closest offset k >= 2 "
                         "(scan at least 3 positions)")
    fig, ax = new_figure(figsize=(7.0, 3.8))
    bases = sorted({float(b) for _, b, _ in rows})
    for n, b in enumerate(bases):
        pts = sorted((d, s) for d, bb, s in rows if float(bb) == b)
        widths = np.array([d for d, _ in pts], dtype=float)
        ratio = np.array([s.closest_distance / s.neighbour_distance for _, s in pts])
        ax.plot(widths, ratio, "o-", color=f"C{n}", label=label("props_ratio_base").format(b=b))
        for w, r, (_, s) in zip(widths, ratio, pts):
            ax.annotate(f"k={s.closest_offset:,}", (w, r), textcoords="offset points",
                        xytext=(4, 6 if n % 2 == 0 else -12), fontsize=9, color=f"C{n}")
    ax.axhline(1.0, color="0.3", ls="--", label=label("props_ratio_one"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    widths = sorted({int(d) for d, _, _ in rows})
    ax.set_xticks(widths, [str(w) for w in widths])
    ax.minorticks_off()
    top = max(s.closest_distance / s.neighbour_distance for _, _, s in rows)
    ax.set_ylim(top=max(top, 1.0) * 3)
    ax.set_xlabel(label("props_ratio_width"))
    ax.set_ylabel(label("props_ratio"))
    ax.set_title(label("props_ratio_title").format(n=n_positions), fontsize=10)
    ax.legend(fontsize=9, frameon=True, framealpha=0.9, loc="lower right")
    return fig


def collision_table_markdown(rows, n_positions):
    """A Markdown table of :func:`posenc.analysis.uniqueness.collision_summary` results.

    Parameters
    ----------
    rows : sequence of (d_model, base, CollisionSummary)
    n_positions : int
        The number of positions scanned (for the "none below" entries).

    Returns
    -------
    str
        A MyST/GitHub Markdown table with headers in the current language; "none" (无)
        where no offset below ``n_positions`` is closer than a neighbour.

    Examples
    --------
    >>> from posenc.analysis.uniqueness import collision_summary
    >>> print(collision_table_markdown([(4, 10000.0, collision_summary(100, 4))], 100).splitlines()[2])
    | 4 | 10,000 | 0.959 | 19 | 0.242 | 6 |
    """
    head = [label(key) for key in ("props_tbl_d", "props_tbl_base", "props_tbl_neighbour",
                                   "props_tbl_closest", "props_tbl_closest_d",
                                   "props_tbl_first")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    none = label("props_tbl_none")
    for d, base, s in rows:
        first = none if s.first_closer_offset is None else f"{s.first_closer_offset:,}"
        lines.append(f"| {d} | {base:,.0f} | {s.neighbour_distance:.3g} | {s.closest_offset:,} "
                     f"| {s.closest_distance:.3g} | {first} |")
    return "\n".join(lines)


def float32_angle_figure(positions, naive_error, posenc_error, fastest_step=1.0):
    """Angle error of float32 angle arithmetic against position, log-log.

    Parameters
    ----------
    positions : array_like, shape (N,)
    naive_error : array_like, shape (N,)
        Largest angle error over the pairs when the angles are formed in float32.
    posenc_error : array_like, shape (N,)
        Largest error of the encoding when angles are float64 and only the output is
        cast to float32.
    fastest_step : float, default 1.0
        The angle the fastest pair turns per position (a horizontal reference line).

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([1e2, 1e4, 1e6])
    >>> fig = float32_angle_figure(p, p * 1e-7, np.full(3, 3e-8))
    >>> len(fig.axes)
    1
    """
    p = np.asarray(positions, dtype=float)
    fig, ax = new_figure(figsize=(7.0, 3.6))
    naive = np.maximum(np.asarray(naive_error, dtype=float), 1e-12)
    ax.loglog(p, naive, "o-", ms=3, label=label("props_f32_naive"))
    ax.loglog(p, np.maximum(posenc_error, 1e-12), "s-", ms=3, label=label("props_f32_posenc"))
    ax.axhline(fastest_step, color="0.5", ls=":", label=label("props_f32_step"))
    ax.axvline(2.0 ** 24, color="C3", ls="--", lw=1, label=label("props_f32_limit"))
    ax.set_xlabel(label("position"))
    ax.set_ylabel(label("props_angle_error"))
    ax.set_ylim(top=1e3)
    ax.legend(fontsize=9, frameon=True, framealpha=0.9, loc="upper left")
    return fig


def extrapolation_coverage_figure(seen, later, train_length, test_length, d_model, base=10000.0):
    """Which pairs meet angles at ``test_length`` that training never showed.

    Parameters
    ----------
    seen, later : array_like, shape (d_model // 2,)
        :func:`posenc.analysis.uniqueness.phase_coverage` at the two lengths.
    train_length, test_length : int
    d_model : int
    base : float, default 10000.0

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> from posenc.analysis.uniqueness import phase_coverage
    >>> fig = extrapolation_coverage_figure(phase_coverage(64, 32), phase_coverage(256, 32), 64, 256, 32)
    >>> len(fig.axes)
    2
    """
    from .. import inverse_frequencies

    seen = np.asarray(seen, dtype=float)
    later = np.asarray(later, dtype=float)
    i = np.arange(seen.shape[0])
    fig, (ax0, ax1) = new_figure(1, 2, figsize=(9.5, 3.8), gridspec_kw={"width_ratios": [1.6, 1]})
    ax0.fill_between(i, seen, later, where=later > seen, color="C1", alpha=0.35,
                     step="mid", label=label("props_unseen"))
    ax0.step(i, later, where="mid", color="C1", label=label("props_later").format(T=test_length - 1))
    ax0.step(i, seen, where="mid", color="C0", label=label("props_seen").format(L=train_length - 1))
    ax0.set_xlabel(label("props_pair_index"))
    ax0.set_ylabel(label("props_coverage"))
    ax0.set_ylim(0, 1.08)
    ax0.legend(fontsize=9, frameon=False, loc="upper right")

    # one slow pair: the arc training swept and the arc a longer sequence adds
    j = int(np.argmin(np.abs(seen - 0.2)))
    w = inverse_frequencies(d_model, base)[j]
    t = np.linspace(0, 2 * np.pi, 400)
    ax1.plot(np.sin(t), np.cos(t), color="0.85", lw=1)
    a_seen = np.linspace(0, (train_length - 1) * w, 200)
    a_new = np.linspace((train_length - 1) * w, min((test_length - 1) * w, 2 * np.pi), 200)
    ax1.plot(np.sin(a_new), np.cos(a_new), color="C1", lw=5, label=label("props_arc_new").format(T=test_length))
    ax1.plot(np.sin(a_seen), np.cos(a_seen), color="C0", lw=5, label=label("props_arc_seen"))
    ax1.set_aspect("equal")
    ax1.set_xlim(-1.3, 1.3)
    ax1.set_ylim(-1.3, 1.7)
    ax1.set_xticks([])
    ax1.set_yticks([])
    ax1.set_title(label("props_arc_title").format(i=j, lam=2 * np.pi / w), fontsize=9)
    ax1.legend(fontsize=9, frameon=False, loc="upper center")
    return fig

