"""Tables and numbers of the GPU benchmarks (``benchmarks/results-gpu.json``).

``python benchmarks/gpu.py`` (``nox -s bench -- --device cuda``) writes that file on a GPU
machine; it is committed with its device, driver, versions and commit, and the book's
pages render it.  A checkout without it (no GPU run yet) gets ``None`` from
:func:`load_gpu_results`, and the pages say so instead of showing numbers.

>>> results = load_gpu_results()
>>> results is None or results["schema"] == 1
True
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ._results import _CHECKOUT, _walk_up
from ._style import add_labels, get_language, label
from ._tables import BookTable

__all__ = ["gpu_bench_table", "gpu_headlines", "gpu_machine_line", "gpu_sweep_table",
           "load_gpu_results"]

RESULTS_RELPATH = Path("benchmarks") / "results-gpu.json"

add_labels({
    "gpu_col_candidate": {"en": "candidate", "zh": "实现"},
    "gpu_col_ms": {"en": "time (ms)", "zh": "时间（毫秒）"},
    "gpu_col_ratio": {"en": "× copy_", "zh": "× copy_"},
    "gpu_col_err": {"en": "relative error", "zh": "相对误差"},
    "gpu_col_tile": {"en": "tile (bytes)", "zh": "分块（字节）"},
    "gpu_col_heads": {"en": "heads per tile (at most)", "zh": "每块最多几个头"},
    "gpu_col_trig": {"en": "cos/sin", "zh": "cos/sin"},
    "gpu_col_warps": {"en": "warps", "zh": "线程束数"},
    "gpu_trig_32": {"en": "reduced in float64, float32", "zh": "float64 归约，float32 求值"},
    "gpu_trig_64": {"en": "float64", "zh": "float64"},
    "gpu_warps_auto": {"en": "auto", "zh": "自动"},
    "gpu_none": {"en": "No GPU run is recorded in this checkout "
                       "(benchmarks/results-gpu.json is absent): run "
                       "`nox -s bench -- --device cuda` on a CUDA machine.",
                 "zh": "这份代码里还没有 GPU 上的测量结果（缺少 "
                       "benchmarks/results-gpu.json）：请在有 CUDA 的机器上运行 "
                       "`nox -s bench -- --device cuda`。"},
    "gpu_machine": {"en": "Measured on {device} (driver {driver}, CUDA {cuda}) with "
                          "PyTorch {torch}, Triton {triton}, transformers {transformers} "
                          "and Liger {liger}, at posenc commit {commit}, {date}.",
                    "zh": "测量环境：{device}（驱动 {driver}，CUDA {cuda}），PyTorch {torch}、"
                          "Triton {triton}、transformers {transformers}、Liger {liger}，"
                          "posenc 提交 {commit}，{date}。"},
})

#: Candidate names as the tables show them, per language.
_NAMES = {
    "copy_": ("out.copy_(x)", "out.copy_(x)"),
    "copy_ (fwd+bwd bytes)": ("copy_ of q, k and their gradients",
                              "copy_（q、k 及其梯度）"),
    "posenc apply_rope": ("posenc.apply_rope", "posenc.apply_rope"),
    "posenc apply_rope_ (in place)": ("posenc.apply_rope_ (in place)",
                                      "posenc.apply_rope_（原地）"),
    "posenc apply_rope in torch.compile": ("posenc.apply_rope in torch.compile",
                                           "torch.compile 里的 posenc.apply_rope"),
    "posenc apply_rope interleaved": ("posenc.apply_rope, interleaved",
                                      "posenc.apply_rope，交错布局"),
    "posenc RotaryEmbedding": ("posenc RotaryEmbedding", "posenc RotaryEmbedding"),
    "posenc RotaryEmbedding in place": ("posenc RotaryEmbedding, in place",
                                        "posenc RotaryEmbedding，原地"),
    "posenc RotaryEmbedding in torch.compile": ("posenc RotaryEmbedding in torch.compile",
                                                "torch.compile 里的 posenc RotaryEmbedding"),
    "posenc RotaryEmbedding fwd+bwd": ("posenc RotaryEmbedding, forward + backward",
                                       "posenc RotaryEmbedding，前向 + 反向"),
    "rotate_half compiled": ("rotate_half formula, torch.compile",
                             "rotate_half 公式，torch.compile"),
    "rotate_half compiled fwd+bwd": ("rotate_half formula, torch.compile, forward + backward",
                                     "rotate_half 公式，torch.compile，前向 + 反向"),
    "rotate_half eager (transformers)": ("rotate_half formula, eager (transformers)",
                                         "rotate_half 公式，即时执行（transformers）"),
    "rotate_half eager fwd+bwd": ("rotate_half formula, eager, forward + backward",
                                  "rotate_half 公式，即时执行，前向 + 反向"),
    "Meta complex multiply (interleaved)": ("Meta's complex multiply (interleaved)",
                                            "Meta 的复数乘法（交错布局）"),
    "Liger (in place)": ("Liger's Triton kernel (in place)", "Liger 的 Triton 内核（原地）"),
    "Liger fwd+bwd (with clones)": ("Liger, forward + backward (on clones)",
                                    "Liger，前向 + 反向（在副本上）"),
}


def load_gpu_results(path=None):
    """The committed ``benchmarks/results-gpu.json``, or ``None`` if there is none.

    Parameters
    ----------
    path : str or Path, optional
        A results file; default ``$POSENC_GPU_RESULTS``, else the first
        ``benchmarks/results-gpu.json`` above the current directory, else the one in this
        source checkout.

    Raises
    ------
    ValueError
        If the file is not a GPU results file (schema 1, run on CUDA, not ``--quick``).
    """
    if path is None and os.environ.get("POSENC_GPU_RESULTS"):
        path = os.environ["POSENC_GPU_RESULTS"]
    if path is None:
        path = _walk_up(Path.cwd(), RESULTS_RELPATH) or _walk_up(_CHECKOUT, RESULTS_RELPATH)
        if path is None:
            return None
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("schema") != 1 or data.get("device") != "cuda":
        raise ValueError(f"{path} is not a GPU results file (schema 1, device 'cuda') of "
                         f"benchmarks/gpu.py")
    if data.get("quick"):
        raise ValueError(f"{path} is a --quick run (tiny shapes): not a measurement")
    return data


def _name(raw):
    names = _NAMES.get(raw)
    if names is None:
        return raw
    return names[1] if get_language() == "zh" else names[0]


def gpu_bench_table(results, case_id):
    """One case of the GPU run as a table: time, multiple of ``copy_``, accuracy (for
    ``results=None``, the line saying that no GPU run is recorded).

    Raises
    ------
    KeyError
        If the run has no case ``case_id`` (the error lists the ones it has).
    """
    if results is None:  # no GPU run in this checkout (a notebook elsewhere, say)
        return label("gpu_none")
    cases = results["cases"]
    if case_id not in cases:
        raise KeyError(f"no case {case_id!r} in the GPU results; they have {sorted(cases)}")
    case = cases[case_id]
    rows = []
    for raw, r in case["rows"].items():
        if raw.startswith("tiles "):  # the kernel's tile-size sweep: results.md lists it
            continue
        ratio = case["ratios"].get(raw)
        err = r.get("relerr")
        rows.append([_name(raw), f"{r['ms']:.3f}", "" if ratio is None else f"{ratio:.2f}",
                     "" if err is None else f"{err:.1e}"])
    return BookTable([label("gpu_col_candidate"), label("gpu_col_ms"),
                      label("gpu_col_ratio"), label("gpu_col_err")], rows, wide=True)


def gpu_sweep_table(results, dtype):
    """The kernel configurations the run timed before its cases (``dtype``
    ``"bfloat16"`` or ``"float32"``), fastest first: tile bytes, most heads per tile, the
    trigonometry (float64, or reduced in float64 and evaluated in float32), warps,
    multiple of ``copy_``, relative error.  The run's cases used the first row's
    configuration, the one that keeps the accuracy goal and is fastest.

    Raises
    ------
    KeyError
        If the run has no sweep for ``dtype``.
    """
    if results is None:
        return label("gpu_none")
    sweep = results.get("sweep") or {}
    if dtype not in sweep:
        raise KeyError(f"no sweep for {dtype!r} in the GPU results; they have {sorted(sweep)}")
    rows = []
    for r in sorted(sweep[dtype]["rows"], key=lambda r: r["ms"]):
        c = r["config"]
        rows.append([f"{c['tile']:,}", str(c["heads"]), label(f"gpu_trig_{c['trig']}"),
                     label("gpu_warps_auto") if c["warps"] is None else str(c["warps"]),
                     f"{r['x_copy']:.2f}", f"{r['relerr']:.1e}"])
    return BookTable([label("gpu_col_tile"), label("gpu_col_heads"), label("gpu_col_trig"),
                      label("gpu_col_warps"), label("gpu_col_ratio"), label("gpu_col_err")],
                     rows, wide=True)


def gpu_machine_line(results):
    """Where and with what the run was made, in the page's language; or the line that
    says no GPU run is recorded."""
    if results is None:
        return label("gpu_none")
    m = results["machine"]
    commit = (results.get("commit") or "?")[:10]
    return label("gpu_machine").format(
        device=m.get("device_name"), driver=m.get("driver"), cuda=m.get("cuda"),
        torch=m.get("torch"), triton=m.get("triton"), transformers=m.get("transformers"),
        liger=m.get("liger_kernel") or "-", commit=commit, date=results.get("date"))


def gpu_headlines(results):
    """Numbers the pages glue: for each case, posenc's and the peers' ratios to copy_.

    Keys are ``gpu_<case>_<slug>`` where the slug names the row (``posenc``,
    ``posenc_inplace``, ``posenc_compiled``, ``rh_compiled``, ``rh_eager``, ``liger``,
    ``fb_posenc``, ``fb_rh_compiled``, ``fb_liger``; ``tiles_<bytes>_<tokens>`` for the
    kernel's tile-size sweep) and the value is the ratio to
    ``copy_``; ``..._ms`` keys give the time in milliseconds, and
    ``gpu_<case>_err_<slug>`` the relative error against float64 where the run
    checked it.  From the configuration sweep: ``gpu_sweep_<bf16|fp32>_trig<32|64>`` the
    fastest configuration's ratio with each trigonometry and ``..._err_trig<32|64>`` its
    error, ``..._worst`` the slowest ratio, ``..._n`` the configurations timed, and
    ``gpu_cfg_<bf16|fp32>_<tile|heads|warps>`` the chosen configuration (warps 0: the
    launch's own choice).  Rows the run lacks are absent; ``None`` (no run recorded)
    gives ``{}``.
    """
    slugs = {
        "posenc apply_rope": "posenc", "posenc RotaryEmbedding": "posenc",
        "posenc apply_rope_ (in place)": "posenc_inplace",
        "posenc RotaryEmbedding in place": "posenc_inplace",
        "posenc apply_rope in torch.compile": "posenc_compiled",
        "posenc RotaryEmbedding in torch.compile": "posenc_compiled",
        "rotate_half compiled": "rh_compiled",
        "rotate_half eager (transformers)": "rh_eager",
        "Liger (in place)": "liger",
        "posenc RotaryEmbedding fwd+bwd": "fb_posenc",
        "rotate_half compiled fwd+bwd": "fb_rh_compiled",
        "Liger fwd+bwd (with clones)": "fb_liger",
        "Meta complex multiply (interleaved)": "meta_complex",
        "posenc apply_rope interleaved": "posenc_interleaved",
    }
    out: dict = {}
    if results is None:
        return out
    for cid, case in results["cases"].items():
        for raw, r in case["rows"].items():
            slug = slugs.get(raw)
            if raw.startswith("tiles "):  # "tiles 8192 B, 32 tokens" -> tiles_8192_32
                nums = [w for w in raw.replace(",", " ").split() if w.isdigit()]
                slug = "tiles_" + "_".join(nums)
            if slug is None:
                continue
            ratio = case["ratios"].get(raw)
            if ratio is not None:
                out[f"gpu_{cid}_{slug}"] = float(ratio)
            out[f"gpu_{cid}_{slug}_ms"] = float(r["ms"])
            if "relerr" in r:
                out[f"gpu_{cid}_err_{slug}"] = float(r["relerr"])
        copy = case["rows"].get("copy_")
        if copy:
            out[f"gpu_{cid}_copy_ms"] = float(copy["ms"])
    for dname, sw in (results.get("sweep") or {}).items():
        short = {"bfloat16": "bf16", "float32": "fp32"}.get(dname, dname)
        rows = sw["rows"]
        for trig in (32, 64):
            mine = [r for r in rows if r["config"]["trig"] == trig]
            if mine:
                best = min(mine, key=lambda r: r["ms"])
                out[f"gpu_sweep_{short}_trig{trig}"] = float(best["x_copy"])
                out[f"gpu_sweep_{short}_err_trig{trig}"] = float(best["relerr"])
        if rows:
            out[f"gpu_sweep_{short}_worst"] = float(max(r["x_copy"] for r in rows))
            out[f"gpu_sweep_{short}_n"] = float(len(rows))
        chosen = sw["chosen"]
        out[f"gpu_cfg_{short}_tile"] = float(chosen["tile"])
        out[f"gpu_cfg_{short}_heads"] = float(chosen["heads"])
        out[f"gpu_cfg_{short}_warps"] = float(chosen["warps"] or 0)
    return out
