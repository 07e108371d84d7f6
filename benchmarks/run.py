"""posenc against its peers, side by side in one run.  ``nox -s bench`` runs this file.

    python benchmarks/run.py              library benchmarks -> benchmarks/results.{json,md}
    python benchmarks/run.py --build      ... and the book build against the clock
    python benchmarks/run.py --build-only only the build (keeps the library results)
    python benchmarks/run.py --quick      small shapes, one round: checks the harness works

What is measured (details in the module docstrings):

* ``sinusoidal_encoding`` against a Python double loop over positions and dimensions.
* ``apply_rope`` (both layouts) against the ``rotate_half`` formula (Hugging Face), the
  complex multiplication (Meta LLaMA), ``rotary-embedding-torch``, ``x.clone()`` and
  ``out.copy_(x)`` into a preallocated tensor (the two yardsticks: every time is reported
  against both), posenc in place and with ``out=`` (against ``copy_``), plus faster eager formulas and ``torch.compile`` kernels
  prototyped in :mod:`benchmarks.peers`; interleaved timing (:mod:`benchmarks.timing`);
  bytes moved per formula (:mod:`benchmarks.traffic`); peak memory and posenc's first-call
  cost in fresh processes (:mod:`benchmarks.memory`).
* The floors the project set itself, PASS or FAIL.
* With ``--build``: cold, warm and incremental builds of the book (:mod:`benchmarks.build`).

Results keep their machine, versions and thread count; the book's benchmarks page renders
the committed ``results.json`` and times nothing itself.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SCHEMA = 1
THREADS = 2  # the machine has 2 cores; set explicitly and recorded
BASE = 10000.0
RESULTS_JSON = ROOT / "benchmarks" / "results.json"
RESULTS_MD = ROOT / "benchmarks" / "results.md"

#: The RoPE cases: shape (batch, heads, seq_len, head_dim), dtype, timing effort.
ROPE_CASES = (
    {"id": "fp32_2048", "shape": (1, 32, 2048, 128), "dtype": "float32",
     "rounds": 5, "block_s": 0.25, "memory": True, "cold": True},
    {"id": "fp32_16384", "shape": (1, 32, 16384, 128), "dtype": "float32",
     "rounds": 3, "block_s": 0.2, "memory": False, "cold": False},
    {"id": "bf16_2048", "shape": (1, 32, 2048, 128), "dtype": "bfloat16",
     "rounds": 5, "block_s": 0.25, "memory": True, "cold": False},
    # 128 MiB: input and output no longer fit the 32 MiB last-level cache of the
    # benchmark machine, so copy_ streams from memory (at 2048, bf16's 16 + 16 MiB stay
    # in cache and copy_ runs at cache speed)
    {"id": "bf16_16384", "shape": (1, 32, 16384, 128), "dtype": "bfloat16",
     "rounds": 3, "block_s": 0.2, "memory": False, "cold": False},
)
QUICK_ROPE_CASES = (
    {"id": "fp32_2048", "shape": (1, 4, 64, 32), "dtype": "float32",
     "rounds": 1, "block_s": 0.01, "memory": False, "cold": False},
)
#: (seq_len, d_model) of the sinusoidal table, and how many times the loop is timed.
SIN_CASES = ((512, 512, 3), (4096, 1024, 1))
QUICK_SIN_CASES = ((16, 8, 1),)

#: The floors.  Times are per-call medians of the same run.
FLOOR_INTERLEAVED_VS_CLONE = 1.3  # posenc interleaved time / clone time must be <= this
FLOOR_HALF_VS_ROTATE_HALF = 1.7  # rotate_half time / posenc half time must be >= this
#: posenc in place or with ``out=`` (the better of the two) against
#: ``out.copy_(x)`` into a preallocated tensor, per dtype and layout: time ratio <= this.
FLOOR_INTO_VS_COPY = {"float32": {"interleaved": 1.5, "half": 2.5},
                      "bfloat16": {"interleaved": 3.0, "half": 3.0}}
#: posenc counts as slower than a peer when its time is more than this fraction above the
#: peer's: on this shared 2-core machine two identical kernels timed in one run differ by
#: a few per cent (the results record that spread as ``identical_kernel_spread``).
PEER_TIE = 0.05
#: Pairs of candidates that run exactly the same ATen kernels on float32 input.
IDENTICAL_KERNELS = (("posenc_interleaved", "complex"), ("posenc_interleaved", "fused_interleaved"),
                     ("posenc_half", "fused_half"))


def log(msg: str) -> None:
    print(msg, flush=True)


# -- the machine -------------------------------------------------------------------------


def last_level_cache_bytes() -> int | None:
    """Size of the CPU's largest cache as Linux reports it for CPU 0 (None if unknown).

    It decides whether a benchmark's tensors stream from memory or from cache.
    """
    best = None
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        unit = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:], 1)
        try:
            nbytes = int(size.rstrip("KMG")) * unit
        except ValueError:
            continue
        if best is None or level > best[0]:
            best = (level, nbytes)
    return best[1] if best else None


def machine_info() -> dict:
    """CPU model, core counts, memory, load, and every version that matters."""
    import numpy
    import torch

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        mem_gib = round(kb / 2**20, 1)
    except (OSError, IndexError, ValueError):
        pass
    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "numpy": numpy.__version__}
    for dist in ("posenc", "rotary-embedding-torch"):
        try:
            from importlib.metadata import version

            versions[dist] = version(dist)
        except Exception:  # noqa: BLE001 - not installed: say so
            versions[dist] = None
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip() or None
    except OSError:
        commit = None
    return {
        "cpu_model": cpu,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "torch_cpu_capability": getattr(torch.backends.cpu, "get_cpu_capability", lambda: None)(),
        "memory_gib": mem_gib,
        "last_level_cache_bytes": last_level_cache_bytes(),
        "platform": platform.platform(),
        "load_average_start": list(os.getloadavg()),
        "versions": versions,
        "commit": commit,
    }


# -- sinusoidal --------------------------------------------------------------------------


def bench_sinusoidal(cases, quick: bool) -> list[dict]:
    import numpy as np

    import posenc
    from benchmarks.peers import sinusoidal_loop
    from benchmarks.timing import time_interleaved

    rows = []
    for length, d, loop_reps in cases:
        log(f"sinusoidal L={length} d={d}")
        stats = time_interleaved(
            {"posenc": lambda _: posenc.sinusoidal_encoding(length, d, base=BASE)}, None,
            rounds=1 if quick else 5, block_s=0.01 if quick else 0.2,
            warmup_s=0.01 if quick else 0.2, num_threads=THREADS, log=log)["posenc"]
        loop_times = []
        for _ in range(loop_reps):
            t0 = time.perf_counter()
            table = sinusoidal_loop(length, d, BASE)
            loop_times.append(time.perf_counter() - t0)
        loop_times.sort()
        ours = np.asarray(posenc.sinusoidal_encoding(length, d, base=BASE), dtype=np.float64)
        # Where posenc's time goes: NumPy's float64 sin and cos of the (L, d/2) angles.
        angles = np.arange(length, dtype=np.float64)[:, None] * posenc.inverse_frequencies(d, BASE)
        trig = time_interleaved({"sin_cos": lambda a: (np.sin(a), np.cos(a))}, angles,
                                rounds=1 if quick else 3, block_s=0.01 if quick else 0.2,
                                warmup_s=0.01, num_threads=THREADS)["sin_cos"]
        rows.append({
            "seq_len": length, "d_model": d, "iterations": length * d,
            "posenc": stats.as_dict(),
            "loop": {"median": loop_times[len(loop_times) // 2], "runs": loop_reps,
                     "times": loop_times,
                     "method": "every one of the L*d iterations, timed in full"},
            "speedup": loop_times[len(loop_times) // 2] / stats.median,
            "numpy_sin_cos_s": trig.median,
            "max_abs_difference": float(np.max(np.abs(ours - table))),
        })
        log(f"  posenc {stats.median * 1e3:.3f} ms, loop {rows[-1]['loop']['median']:.2f} s, "
            f"x{rows[-1]['speedup']:.0f}")
    return rows


# -- RoPE --------------------------------------------------------------------------------


def bench_rope_case(case: dict, quick: bool, skip_compile: bool) -> dict:
    import torch

    from benchmarks import memory, peers, traffic
    from benchmarks.timing import paired_ratio, time_interleaved

    shape, dtype = tuple(case["shape"]), getattr(torch, case["dtype"])
    log(f"RoPE {case['id']}: shape {shape} {case['dtype']}")
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    refs = {layout: peers.reference_rope(x, layout, BASE) for layout in ("half", "interleaved")}
    fns, rows = {}, {}
    for cand in peers.CANDIDATES:
        if cand.kind == "compiled" and skip_compile:
            continue
        row = {"name": cand.name, "layout": cand.layout, "kind": cand.kind,
               "source": cand.source}
        t0 = time.perf_counter()
        try:
            fn = cand.factory(shape, dtype, BASE)
            y = fn(x)
        except Exception as exc:  # noqa: BLE001 - a compiler may be missing: report it
            if cand.kind != "compiled":
                raise
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            log(f"  {cand.name}: unavailable ({row['error']})")
            rows[cand.name] = row
            continue
        row["setup_s"] = time.perf_counter() - t0  # tables (+ compilation) + first call
        if cand.layout in refs:
            ref = refs[cand.layout]
            row["max_abs_error"] = float((y.to(torch.float64) - ref).abs().max())
        if cand.kind != "compiled":
            t = traffic.measure_traffic(fn, x)
            row["bytes_read"], row["bytes_written"] = t.read, t.written
            row["bytes_allocated"] = t.allocated
            row["kernels"] = [k[0] for k in t.kernels]
        del y
        fns[cand.name] = fn
        rows[cand.name] = row
    del refs
    load_start = list(os.getloadavg())
    stats = time_interleaved(fns, x, rounds=case["rounds"], block_s=case["block_s"],
                             warmup_s=case["block_s"], num_threads=THREADS, log=log)
    for name, st in stats.items():
        rows[name]["time"] = st.as_dict()
    load_end = list(os.getloadavg())
    clone_t = stats["clone"].median
    bandwidth = 2 * x.nbytes / clone_t
    copy_bandwidth = 2 * x.nbytes / stats["copy_into"].median
    fault_cost = max(clone_t - stats["copy_into"].median, 0.0) / x.nbytes
    for name, row in rows.items():
        if "time" not in row:
            continue
        t = row["time"]["median"]
        row["vs_clone"] = paired_ratio(stats[name].rounds, stats["clone"].rounds)
        # the second yardstick: copy_ into a preallocated tensor (no page faults)
        row["vs_copy"] = paired_ratio(stats[name].rounds, stats["copy_into"].rounds)
        row["speedup_vs_rotate_half"] = paired_ratio(stats["rotate_half"].rounds,
                                                     stats[name].rounds)
        if "bytes_read" in row:
            moved = row["bytes_read"] + row["bytes_written"]
            row["bytes_moved_per_input_byte"] = moved / x.nbytes
            row["time_at_clone_bandwidth_s"] = moved / bandwidth
            row["predicted_s"] = traffic.predict_seconds(
                traffic.Traffic(row["bytes_read"], row["bytes_written"],
                                row["bytes_allocated"]), copy_bandwidth, fault_cost)
        log(f"  {name:26s} {t * 1e3:9.2f} ms  x{row['vs_clone']:.2f} clone  "
            f"x{row['vs_copy']:.2f} copy_  "
            f"{row['speedup_vs_rotate_half']:.2f}x vs rotate_half")
    if case.get("memory") and not quick:
        log("  peak memory (a fresh process)")
        names = [n for n, row in rows.items() if row["kind"] != "compiled" and "time" in row]
        for m in memory.run_child("peak", "+".join(names), shape, case["dtype"], THREADS):
            row = rows[m["name"]]
            row["peak_extra_bytes"] = m["peak_extra_bytes"]
            row["peak_extra_per_input_byte"] = m["peak_extra_bytes"] / x.nbytes
    spread = [abs(math.log(paired_ratio(stats[a].rounds, stats[b].rounds)))
              for a, b in IDENTICAL_KERNELS if a in stats and b in stats]
    cold = None
    if case.get("cold") and not quick:
        log("  first-call cost (fresh process per candidate)")
        cold = [memory.run_child("cold", c.name, shape, case["dtype"], THREADS)
                for c in peers.CANDIDATES if c.kind in ("posenc", "peer")]
    return {
        "id": case["id"], "shape": list(shape), "dtype": case["dtype"],
        "input_bytes": int(x.nbytes), "rounds": case["rounds"], "block_s": case["block_s"],
        "clone_bandwidth_bytes_per_s": bandwidth,
        "copy_bandwidth_bytes_per_s": copy_bandwidth,
        "page_fault_seconds_per_byte": fault_cost,
        "load_average_start": load_start, "load_average_end": load_end,
        "identical_kernel_spread": (math.exp(max(spread)) - 1
                                    if spread and case["dtype"] == "float32" else None),
        "candidates": list(rows.values()), "cold": cold,
    }


# -- floors ------------------------------------------------------------------------------


def evaluate_floors(rope_cases: list[dict]) -> list[dict]:
    """The three floors, per RoPE case, with the bytes-moved bound and the best path.

    Every ratio is paired over the rounds of the interleaved timing
    (:func:`benchmarks.timing.paired_ratio`), so it can be recomputed from the json.
    """
    from benchmarks.timing import paired_ratio

    out = []
    for case in rope_cases:
        by = {c["name"]: c for c in case["candidates"] if "time" in c}
        if not {"clone", "rotate_half", "posenc_half", "posenc_interleaved"} <= set(by):
            continue

        def ratio(a, b):
            return paired_ratio(by[a]["time"]["rounds"], by[b]["time"]["rounds"])

        def best(layout, kinds=("prototype", "compiled")):
            alts = [c for c in by.values() if c["layout"] == layout and c["kind"] in kinds]
            return min(alts, key=lambda c: c["time"]["median"])["name"] if alts else None

        def moved(name):
            return by[name].get("bytes_moved_per_input_byte", float("nan"))

        alt = best("interleaved")
        value = ratio("posenc_interleaved", "clone")
        out.append({
            "case": case["id"], "id": "interleaved_vs_clone",
            "rule": f"posenc interleaved time <= {FLOOR_INTERLEAVED_VS_CLONE} x clone time",
            "value": value, "threshold": FLOOR_INTERLEAVED_VS_CLONE, "direction": "<=",
            "passed": value <= FLOOR_INTERLEAVED_VS_CLONE,
            "bytes_bound": moved("posenc_interleaved") / moved("clone"),
            "best_alternative": alt,
            "best_alternative_value": ratio(alt, "clone") if alt else None,
        })
        alt = best("half")
        value = ratio("rotate_half", "posenc_half")
        out.append({
            "case": case["id"], "id": "half_vs_rotate_half",
            "rule": f"posenc half at least {FLOOR_HALF_VS_ROTATE_HALF} x faster than rotate_half",
            "value": value, "threshold": FLOOR_HALF_VS_ROTATE_HALF, "direction": ">=",
            "passed": value >= FLOOR_HALF_VS_ROTATE_HALF,
            "bytes_bound": moved("rotate_half") / moved("posenc_half"),
            "best_alternative": alt,
            "best_alternative_value": ratio("rotate_half", alt) if alt else None,
        })
        peer_names = [n for n, c in by.items() if c["kind"] == "peer"]
        worst = max(((ratio(p, q), p, q) for p in ("posenc_half", "posenc_interleaved")
                     for q in peer_names), default=(float("nan"), None, None))
        same = max(((ratio(p, q), p, q) for p in ("posenc_half", "posenc_interleaved")
                    for q in peer_names if by[q]["layout"] == by[p]["layout"]),
                   default=(float("nan"), None, None))
        out.append({
            "case": case["id"], "id": "posenc_vs_peers",
            "rule": f"no posenc layout more than {PEER_TIE:.0%} slower than any peer",
            "value": worst[0], "threshold": 1.0 + PEER_TIE, "direction": "<=",
            "passed": worst[0] <= 1.0 + PEER_TIE, "worst_pair": [worst[1], worst[2]],
            "same_layout_worst": list(same),
            "bytes_bound": (moved(worst[1]) / moved(worst[2])) if worst[1] else None,
            "best_alternative": None, "best_alternative_value": None,
        })
        out += _into_floors(case, by, ratio, moved)
    return out


def _into_floors(case, by, ratio, moved):
    """Issue 16: the better of posenc in place and ``out=``, per layout, against
    ``out.copy_(x)``; only for cases that timed those candidates (results written before
    they existed have none)."""
    limits = FLOOR_INTO_VS_COPY.get(case.get("dtype"))
    into = [n for n, c in by.items() if c["kind"] == "posenc_into"]
    if not limits or not into or "copy_into" not in by:
        return []
    out = []
    for layout, limit in limits.items():
        names = sorted((n for n in into if by[n]["layout"] == layout),
                       key=lambda n: ratio(n, "copy_into"))
        if not names:
            continue
        best, others = names[0], names[1:]
        value = ratio(best, "copy_into")
        out.append({
            "case": case["id"], "id": f"{layout}_into_vs_copy",
            "rule": f"posenc {layout}, in place or out=, time <= {limit} x out.copy_(x) time",
            "value": value, "threshold": limit, "direction": "<=", "passed": value <= limit,
            "measured_by": best,
            "bytes_bound": moved(best) / moved("copy_into"),
            "best_alternative": others[0] if others else None,
            "best_alternative_value": ratio(others[0], "copy_into") if others else None,
        })
    return out


# -- main --------------------------------------------------------------------------------


def wait_for_quiet(minutes: float, threshold: float = 1.0) -> None:
    """Sleep until the 1-minute load average is below ``threshold`` (or give up)."""
    deadline = time.monotonic() + 60 * minutes
    while os.getloadavg()[0] >= threshold and time.monotonic() < deadline:
        log(f"waiting for a quiet machine: load {os.getloadavg()[0]:.2f}")
        time.sleep(20)


def _load_previous(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def run_library(quick: bool, skip_compile: bool) -> dict:
    import torch

    torch.set_num_threads(THREADS)
    machine = machine_info()
    phases = {}
    t0 = time.perf_counter()
    sin = bench_sinusoidal(QUICK_SIN_CASES if quick else SIN_CASES, quick)
    phases["sinusoidal"] = time.perf_counter() - t0
    rope = []
    for c in (QUICK_ROPE_CASES if quick else ROPE_CASES):
        t0 = time.perf_counter()
        rope.append(bench_rope_case(c, quick, skip_compile))
        phases[c["id"]] = time.perf_counter() - t0
        log(f"  ({phases[c['id']]:.0f} s)")
    t0 = time.perf_counter()
    decode = run_decode(quick)
    phases["decode"] = time.perf_counter() - t0
    machine["load_average_end"] = list(os.getloadavg())
    return {"machine": machine, "sinusoidal": sin, "rope": rope, "decode": decode,
            "floors": evaluate_floors(rope), "phase_seconds": phases}


def run_decode(quick: bool) -> dict:
    """A decoding step's host overhead (:mod:`benchmarks.decode`), one thread."""
    import torch

    from benchmarks.decode import bench_decode, bench_paths

    threads = torch.get_num_threads()
    out = {}
    try:
        torch.set_num_threads(1)
        out = bench_decode(quick)
        out["paths"] = {}
        for n in (1, THREADS):
            torch.set_num_threads(n)
            out["paths"][str(n)] = bench_paths(quick)
    finally:
        torch.set_num_threads(threads)
    out["load_average"] = list(os.getloadavg())
    log(f"decode: posenc {out['median_us']['posenc']:.1f} us, rotate_half "
        f"{out['median_us']['rotate_half']:.1f} us, ratio {out['ratio']:.2f}")
    for n, cases in out["paths"].items():
        for c in cases:
            log(f"  {n} thread(s) {c['id']}: posenc/formula {c['ratio']:.2f} "
                f"(floor {c['floor']}, {'PASS' if c['passed'] else 'FAIL'})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", action="store_true", help="also time the book build")
    parser.add_argument("--build-only", action="store_true",
                        help="only time the build; keep the library results on file")
    parser.add_argument("--decode-only", action="store_true",
                        help="only the decoding-step overhead; keep the other results on file")
    parser.add_argument("--quick", action="store_true", help="tiny shapes: checks the harness")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile kernels")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="MINUTES",
                        help="first wait (up to MINUTES) for the 1-minute load average to "
                             "fall below 1.0: the machine is shared")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for results.json/results.md (default benchmarks/)")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.argv = argv
    out_json = (args.out / "results.json") if args.out else RESULTS_JSON
    out_md = (args.out / "results.md") if args.out else RESULTS_MD
    # A cold compiler cache for the torch.compile candidates, so compile times are honest.
    inductor_cache = None
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        inductor_cache = tempfile.mkdtemp(prefix="posenc-bench-inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache
    try:
        return _run(args, out_json, out_md)
    finally:
        if inductor_cache:
            shutil.rmtree(inductor_cache, ignore_errors=True)


def _run(args, out_json: Path, out_md: Path) -> int:

    from benchmarks.report import write_markdown

    if args.wait_quiet > 0:
        wait_for_quiet(args.wait_quiet)
    start = time.perf_counter()
    previous = _load_previous(out_json) or {}
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    command = "python benchmarks/run.py " + " ".join(args.argv)
    results = {"schema": SCHEMA, "date": now, "command": command}
    if args.build_only or args.decode_only:  # the library results stay as they were
        for key in ("date", "command", "machine", "sinusoidal", "rope", "floors",
                    "library_seconds", "quick", "phase_seconds", "decode"):
            if key in previous:
                results[key] = previous[key]
        if args.decode_only:
            results["decode"] = run_decode(args.quick)
            results["decode"]["date"], results["decode"]["command"] = now, command
            results["decode"]["commit"] = machine_info().get("commit")
    else:
        results.update(run_library(args.quick, args.no_compile or args.quick))
        results["library_seconds"] = time.perf_counter() - start
        results["quick"] = args.quick
    if (args.build or args.build_only) and not args.decode_only:
        from benchmarks.build import run_build_benchmark

        t0 = time.perf_counter()
        build = run_build_benchmark(log=log)
        build["seconds"] = time.perf_counter() - t0
        build["date"], build["command"] = now, command
        results["build"] = build
    else:
        results["build"] = previous.get("build")  # from the last --build run, if any
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    out_md.write_text(write_markdown(results), encoding="utf-8")
    log(f"wrote {out_json} and {out_md} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
