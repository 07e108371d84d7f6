"""``results.json`` -> ``results.md``: the tables, the floors and the arithmetic behind them."""

from __future__ import annotations

import math

LABELS = {
    "clone": "x.clone() (floor)",
    "copy_into": "out.copy_(x), preallocated",
    "posenc_half": "posenc, half",
    "posenc_interleaved": "posenc, interleaved",
    "posenc_half_out": "posenc, half, out=",
    "posenc_interleaved_out": "posenc, interleaved, out=",
    "posenc_half_inplace": "posenc, half, in place",
    "posenc_interleaved_inplace": "posenc, interleaved, in place",
    "rotate_half": "rotate_half formula (HF)",
    "complex": "complex multiply (Meta)",
    "rotary_embedding_torch": "rotary-embedding-torch",
    "fused_half": "prototype: fused half",
    "fused_interleaved": "prototype: fused interleaved",
    "compiled_half": "posenc compiled, half",
    "compiled_interleaved": "posenc compiled, interleaved",
}


def case_title(case: dict) -> str:
    """``float32, (1, 32, 2048, 128)``."""
    return f"{case['dtype']}, ({', '.join(map(str, case['shape']))})"

FLOOR_TITLES = {
    "interleaved_vs_clone": "interleaved within {t:g}x of clone()",
    "half_vs_rotate_half": "half at least {t:g}x faster than rotate_half",
    "posenc_vs_peers": "no posenc layout slower than any peer",
    "interleaved_into_vs_copy": "interleaved in place or out= within {t:g}x of out.copy_(x)",
    "half_into_vs_copy": "half in place or out= within {t:g}x of out.copy_(x)",
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}" if seconds < 1 else f"{seconds * 1e3:,.0f}"


def _x(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"


def _table(header: list[str], rows: list[list[str]], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _has_copy_ratio(case: dict) -> bool:
    """Whether the case reports times against ``copy_`` too (newer results)."""
    return any("vs_copy" in c for c in case["candidates"])


def rope_header(case: dict) -> list[str]:
    if not _has_copy_ratio(case):
        return ROPE_HEADER
    return ROPE_HEADER[:5] + ["time ÷ copy_"] + ROPE_HEADER[5:]


def rope_rows(case: dict) -> list[list[str]]:
    rows = []
    with_copy = _has_copy_ratio(case)
    for c in case["candidates"]:
        if "time" not in c:
            rows.append([LABELS.get(c["name"], c["name"]), c["layout"], "unavailable"]
                        + [""] * (len(rope_header(case)) - 3))
            continue
        t = c["time"]
        rows.append([
            LABELS.get(c["name"], c["name"]), c["layout"], _ms(t["median"]), _ms(t["iqr"]),
            _x(c["vs_clone"]), *([_x(c.get("vs_copy"))] if with_copy else []),
            _x(c["speedup_vs_rotate_half"]),
            str(len(c["kernels"])) if "kernels" in c else "–",
            _x(c.get("bytes_moved_per_input_byte")),
            _x(c["bytes_allocated"] / case["input_bytes"]) if "bytes_allocated" in c else "–",
            _ms(c["predicted_s"]) if "predicted_s" in c else "–",
            _x(c.get("peak_extra_per_input_byte")),
            f"{c['max_abs_error']:.1e}" if "max_abs_error" in c else "–",
        ])
    return rows


ROPE_HEADER = ["implementation", "layout", "median ms", "IQR ms", "time ÷ clone",
               "speed-up vs rotate_half", "kernels", "bytes moved ÷ input",
               "bytes allocated ÷ input", "predicted ms", "peak extra memory ÷ input",
               "max abs error"]


def write_markdown(r: dict) -> str:
    m = r.get("machine")
    out = ["# posenc benchmarks\n",
           "Written by `benchmarks/run.py` (`nox -s bench`); the book's *Benchmarks* appendix "
           "renders the same numbers from `results.json`.\n"]
    if m:
        v = m["versions"]
        out += ["## Machine\n", _table(["", ""], [
            ["CPU", m["cpu_model"]],
            ["cores (usable / logical)", f"{m['usable_cpus']} / {m['logical_cpus']}"],
            ["torch threads", str(m["torch_threads"])],
            ["memory", f"{m['memory_gib']} GiB"],
            ["last-level cache", (f"{m['last_level_cache_bytes'] / 2**20:g} MiB"
                                  if m.get("last_level_cache_bytes") else "unknown")],
            ["load average (1 min) at start / end",
             f"{m['load_average_start'][0]:.2f} / {m['load_average_end'][0]:.2f}"],
            ["Python / torch / NumPy", f"{v['python']} / {v['torch']} / {v['numpy']}"],
            ["posenc / rotary-embedding-torch",
             f"{v.get('posenc')} / {v.get('rotary-embedding-torch')}"],
            ["commit", str(m.get("commit"))], ["date", r["date"]],
            ["command", f"`{r['command']}`"],
            ["library benchmarks took", f"{r.get('library_seconds', float('nan')):.0f} s"],
        ], "ll")]
    dec = r.get("decode")
    if dec:
        out += ["## A decoding step (one thread)\n", _table(["", ""], [
            ["q / k", f"{tuple(dec['shape_q'])} / {tuple(dec['shape_k'])}"],
            ["posenc RotaryEmbedding", f"{dec['median_us']['posenc']:.1f} us"],
            ["rotate_half formula, cos/sin given", f"{dec['median_us']['rotate_half']:.1f} us"],
            ["ratio (floor <= 1.5)",
             f"{dec['ratio']:.2f} ({'PASS' if dec['passed'] else 'FAIL'})"],
        ], "ll")]
    titles = {c["id"]: case_title(c) for c in r.get("rope", [])}
    if r.get("floors"):
        out.append("## Floors\n")
        rows = []
        for f in r["floors"]:
            alt = (f"{LABELS.get(f['best_alternative'], f['best_alternative'])}: "
                   f"{_x(f['best_alternative_value'])}" if f.get("best_alternative") else "–")
            extra = ""
            if f.get("worst_pair") and f["worst_pair"][0]:
                a, b = f["worst_pair"]
                extra = f" ({LABELS.get(a, a)} ÷ {LABELS.get(b, b)})"
                same = f.get("same_layout_worst")
                if same and same[1] and same[1:] != [a, b]:
                    extra += (f"; same layout: {_x(same[0])} ({LABELS.get(same[1], same[1])} ÷ "
                              f"{LABELS.get(same[2], same[2])})")
            if f.get("measured_by"):  # which candidate the value is
                extra = f" ({LABELS.get(f['measured_by'], f['measured_by'])})"
            rows.append([titles.get(f["case"], f["case"]),
                         FLOOR_TITLES[f["id"]].format(t=f["threshold"]),
                         f"{_x(f['value'])}{extra}", f"{f['direction']} {f['threshold']:g}",
                         "**PASS**" if f["passed"] else "**FAIL**",
                         _x(f.get("bytes_bound")), alt])
        out.append(_table(["case", "floor", "measured", "required", "status",
                           "bytes-moved ratio", "fastest other path measured"], rows,
                          "lllllrl"))
        out.append(
            "*bytes-moved ratio*: the same ratio predicted from memory traffic alone -- "
            "bytes the formula's eager kernels read and write (counted per ATen operator "
            "by `benchmarks/traffic.py`) over those of the comparison. On tensors this large "
            "RoPE does a handful of flops per byte, so a formula cannot run faster than its "
            "bytes allow at the machine's streaming bandwidth; the page faults of fresh "
            "allocations come on top (see *predicted* below). Ratios are times, paired per "
            "round; a posenc layout counts as slower than a peer only beyond "
            "a 5% tie band.\n")
    for case in r.get("rope", []):
        bw = case["clone_bandwidth_bytes_per_s"] / 1e9
        out += [f"## apply_rope, {case_title(case)}\n",
                f"Input {case['input_bytes'] / 2**20:.0f} MiB. `out.copy_(x)` streams at "
                f"{case['copy_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s; `x.clone()` (same bytes "
                f"plus a fresh output) at {bw:.1f} GB/s: a fresh allocation costs "
                f"{case['page_fault_seconds_per_byte'] * 2**30 * 1e3:.0f} ms per GiB in page "
                f"faults. *predicted* = bytes moved / copy bandwidth + bytes allocated × that "
                f"cost. {case['rounds']} interleaved rounds of ~{case['block_s']} s blocks per "
                f"candidate (load average {case['load_average_start'][0]:.1f} → "
                f"{case['load_average_end'][0]:.1f}); median and IQR over all blocks; ratios "
                f"are medians of per-round ratios."
                + (f" Two implementations running identical kernels differed by "
                   f"{case['identical_kernel_spread']:.1%} in this run."
                   if case.get("identical_kernel_spread") is not None else "") + "\n",
                _table(rope_header(case), rope_rows(case),
                       "ll" + "r" * (len(rope_header(case)) - 2))]
        if _has_copy_ratio(case):
            out.append("Two yardsticks: *time ÷ clone* compares a path with the cheapest "
                       "operation that allocates its output as `apply_rope(x)` does (use it "
                       "for out-of-place calls); *time ÷ copy_* compares it with moving the "
                       "same bytes into memory already mapped (use it for `out=` and "
                       "`apply_rope_`, and to see how far any path is from the streaming "
                       "limit).\n")
        compiled = [c for c in case["candidates"] if c["kind"] == "compiled" and "setup_s" in c]
        if compiled:
            out.append("Compilation of posenc.torch.compiled_apply_rope (first call, cold "
                       "Inductor cache): " + ", ".join(
                f"{LABELS[c['name']]} {c['setup_s']:.1f} s" for c in compiled) + ".\n")
        if case.get("cold"):
            out.append("First call in a fresh process (tables built then), against the "
                       "steady per-call time:\n")
            out.append(_table(
                ["implementation", "table setup ms", "first call ms", "steady call ms",
                 "first-call extra ms"],
                [[LABELS.get(c["name"], c["name"]), _ms(c["setup_s"]), _ms(c["first_call_s"]),
                  _ms(c["steady_s"]), _ms(c["setup_s"] + c["first_call_s"] - c["steady_s"])]
                 for c in case["cold"]]))
    if r.get("sinusoidal"):
        out.append("## sinusoidal_encoding against a Python double loop\n")
        out.append(_table(
            ["L × d", "posenc median ms", "posenc IQR ms", "loop s", "loop runs", "speed-up",
             "max abs difference"],
            [[f"{s['seq_len']} × {s['d_model']}", _ms(s["posenc"]["median"]),
              _ms(s["posenc"]["iqr"]), f"{s['loop']['median']:.2f}", str(s["loop"]["runs"]),
              f"{s['speedup']:,.0f}", f"{s['max_abs_difference']:.1e}"]
             for s in r["sinusoidal"]]))
        out.append("The loop is timed in full (no extrapolation): every one of the L·d "
                   "Python iterations runs.\n")
    b = r.get("build")
    if b:
        out.append(f"## Building the book (commit {b['commit']}, {b.get('date', '')})\n")
        rows = []
        for step in b["steps"]:
            langs = step["languages"]
            rows.append([step["step"] + (f" ({step['edited']})" if step.get("edited") else ""),
                         f"{step['seconds']:.1f}",
                         *[f"{langs[lang]['seconds']:.1f}" for lang in b["languages"]],
                         "; ".join(f"{lang}: " + (", ".join(langs[lang]["executed"]) or "none")
                                   for lang in b["languages"])])
        out.append(_table(["build", "total s", *[f"{lang} s" for lang in b["languages"]],
                           "pages executed"], rows, "lrrrl"))
        if b.get("previous"):  # side by side with the previous configuration
            from benchmarks.build import comparison_markdown

            out.append(comparison_markdown(b))
    return "\n".join(out)
