"""RoPE on a GPU: posenc's fused kernel against the kernels a model builder would pick.

    python benchmarks/gpu.py                      CUDA; writes benchmarks/results-gpu.{json,md}
    python benchmarks/gpu.py --out DIR            ... into DIR instead
    python benchmarks/gpu.py --quick --device cpu tiny shapes on the CPU (Triton's
                                                  interpreter): checks the harness works
    nox -s bench -- --device cuda                 the same, from the bench session

Every time is the median of :func:`triton.testing.do_bench` (CUDA events around many
calls, so Python overhead between launches counts when it starves the GPU) and is reported
as a multiple of ``out.copy_(x)`` of the same tensors in the same run: the time a kernel
that reads its input once and writes its output once cannot beat.  The rows:

Queries and keys are held as attention layers hold them: stored (batch, tokens, heads,
dim) and seen as (batch, heads, tokens, dim), a transposed view (Liger's kernel expects
that storage; on a contiguous (batch, heads, tokens, dim) tensor it copies first).

* **one tensor**, (1, 32, 16384, 128), half layout: ``posenc.apply_rope`` (eager),
  ``posenc.apply_rope`` inside a ``torch.compile``d function, the ``rotate_half`` formula
  compiled, transformers' ``apply_rotary_pos_emb`` formula (eager), Meta's complex
  multiply (eager, interleaved layout);
* **q and k**, 32 query heads and 8 key heads at 16,384 tokens (prefill) and a training
  batch of 8 x 4,096: ``RotaryEmbedding`` (eager, in place, inside a compiled function),
  the compiled ``rotate_half`` formula, transformers' formula, Liger's Triton kernel (in
  place; an optional peer, skipped with a note if not installed); forward and backward for
  the training batch;
* **decode**: q and k of 64 sequences of one token each, every sequence at its own
  position: the same candidates (Liger and transformers given their cos/sin already
  gathered, as their callers hold them).

The rows "in torch.compile" compile with Inductor (``fullgraph=True``): posenc's operators
are registered with ``torch.library.triton_op``, so Inductor receives posenc's Triton kernel itself and
launches it from its generated code (``machine.posenc_compiled_op`` in the results says
"triton_op"; "custom_op" where Triton is missing and the operator stays an opaque call).

Each case runs in bfloat16 and float32.  Accuracy: the largest relative error
``|out - ref| / |ref|`` (norms over the whole tensor) against a float64 reference on the
GPU, for posenc and the peers.  The whole run is bounded by ``--budget`` seconds (default
270): cases are run in order of importance and whatever did not fit is listed as skipped.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SCHEMA = 1
BASE = 10000.0
RESULTS_JSON = ROOT / "benchmarks" / "results-gpu.json"
RESULTS_MD = ROOT / "benchmarks" / "results-gpu.md"

#: (id, what, q shape, k heads or None, dtype name); quick mode shrinks the shapes.
CASES = (
    ("qk_prefill_bf16", "qk", (1, 32, 16384, 128), 8, "bfloat16"),
    ("decode_bf16", "decode", (64, 32, 1, 128), 8, "bfloat16"),
    ("one_prefill_bf16", "one", (1, 32, 16384, 128), None, "bfloat16"),
    ("qk_train_bf16", "train", (8, 32, 4096, 128), 8, "bfloat16"),
    ("qk_prefill_fp32", "qk", (1, 32, 16384, 128), 8, "float32"),
    ("decode_fp32", "decode", (64, 32, 1, 128), 8, "float32"),
    ("one_prefill_fp32", "one", (1, 32, 16384, 128), None, "float32"),
    ("qk_train_fp32", "train", (8, 32, 4096, 128), 8, "float32"),
)
QUICK_SHAPES = {"qk": (1, 4, 64, 32), "one": (1, 4, 64, 32), "train": (2, 4, 32, 32),
                "decode": (4, 4, 1, 32)}


def _rotate_half(x):
    import torch

    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def _rotate_half_formula(x, cos, sin):
    """transformers' ``apply_rotary_pos_emb`` for one tensor (cos/sin (..., seq, d))."""
    return x * cos + _rotate_half(x) * sin


def _rotate_half_qk(q, k, cos, sin):
    return _rotate_half_formula(q, cos, sin), _rotate_half_formula(k, cos, sin)


def _meta_complex(x, freqs_cis):
    """Meta LLaMA's ``apply_rotary_emb``: view pairs as complex numbers and multiply."""
    import torch

    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis).flatten(-2).type_as(x)


class Clock:
    """Median milliseconds of a call: ``do_bench`` on CUDA, a host clock on the CPU."""

    def __init__(self, device, quick):
        self.device, self.quick = device, quick

    def __call__(self, fn):
        if self.device == "cuda":
            import triton.testing

            return float(triton.testing.do_bench(fn, warmup=25 if self.quick else 100,
                                                 rep=50 if self.quick else 200,
                                                 return_mode="median"))
        fn()
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        return times[len(times) // 2]


def _relerr(out, ref):
    import torch

    ref = ref.double()
    return float(torch.linalg.vector_norm(out.double() - ref) / torch.linalg.vector_norm(ref))


def _tables(positions, d, device, dtype):
    """cos/sin of width d (the half layout's duplicated tables), float64 angles, then
    ``dtype`` (what a caller of transformers' formula or Liger holds)."""
    import torch

    from posenc.sinusoidal import inverse_frequencies

    inv = torch.from_numpy(inverse_frequencies(d, BASE)).to(device)
    ang = positions.to(device=device, dtype=torch.float64)[..., None] * inv
    ang = torch.cat((ang, ang), dim=-1)
    return ang.cos().to(dtype), ang.sin().to(dtype), ang


def _reference(x, ang, half=True):
    """float64 rotation of x by the angles ``ang`` (..., seq, d) (duplicated halves)."""
    xd = x.double()
    if half:
        return xd * ang.cos() + _rotate_half(xd) * ang.sin()
    h = x.shape[-1] // 2
    a = ang[..., :h]
    x1, x2 = xd[..., 0::2], xd[..., 1::2]
    import torch

    return torch.stack((x1 * a.cos() - x2 * a.sin(), x2 * a.cos() + x1 * a.sin()),
                       dim=-1).flatten(-2)


def run_case(case, clock, device, quick, liger, compile_ok, notes):
    import torch

    import posenc
    from posenc.torch import RotaryEmbedding

    cid, what, qshape, hk, dname = case
    if quick:
        qshape = QUICK_SHAPES[what]
        hk = None if hk is None else max(1, qshape[1] // 4)
    dtype = getattr(torch, dname)
    b, hq, t, d = qshape
    g = torch.Generator(device=device).manual_seed(0)
    # as attention layers hold them: projections stored (batch, tokens, heads, dim) and
    # seen as (batch, heads, tokens, dim) (a transposed view, no copy)
    q = torch.randn((b, t, hq, d), device=device, dtype=dtype, generator=g).transpose(1, 2)
    k = None if hk is None else torch.randn((b, t, hk, d), device=device, dtype=dtype,
                                            generator=g).transpose(1, 2)
    if what == "decode":  # every sequence at its own position
        positions = torch.randint(0, 32768, (b, t), device=device, generator=g)
    else:
        positions = torch.arange(t, device=device)
    cos, sin, ang = _tables(positions, d, device, dtype)
    if positions.ndim == 2:
        cos_b, sin_b, ang_b = cos[:, None], sin[:, None], ang[:, None]
    else:
        cos_b, sin_b, ang_b = cos, sin, ang
    rows = {}

    def timed(name, fn, check=None):
        try:
            ms = clock(fn)
        except Exception as e:  # a peer that fails here is reported, not fatal
            notes.append(f"{cid}: {name} failed: {type(e).__name__}: {str(e)[:200]}")
            return
        rows[name] = {"ms": ms}
        if check is not None:
            try:
                rows[name]["relerr"] = check()
            except Exception as e:
                notes.append(f"{cid}: {name} check failed: {type(e).__name__}: {e}")

    tensors = [q] if k is None else [q, k]
    outs = [torch.empty_like(x) for x in tensors]

    def copy():
        for o, x in zip(outs, tensors):
            o.copy_(x)

    timed("copy_", copy)
    refs = [_reference(x, ang_b) for x in tensors]

    def err(pair):
        return max(_relerr(o, r) for o, r in zip(pair, refs))

    compiled = {}

    def comp(key, fn):
        if not compile_ok:
            return None
        if key not in compiled:
            compiled[key] = torch.compile(fn, dynamic=False, fullgraph=True)
        return compiled[key]

    if what == "one":
        pos1 = None
        timed("posenc apply_rope", lambda: posenc.apply_rope(q, pos1, layout="half"),
              lambda: err([posenc.apply_rope(q, pos1, layout="half")]))
        x_in = q.clone()
        timed("posenc apply_rope_ (in place)",
              lambda: posenc.apply_rope_(x_in, pos1, layout="half"))
        f = comp("posenc", lambda x: posenc.apply_rope(x, layout="half"))
        if f is not None:
            timed("posenc apply_rope in torch.compile", lambda: f(q), lambda: err([f(q)]))
        f = comp("rh", _rotate_half_formula)
        if f is not None:
            timed("rotate_half compiled", lambda: f(q, cos, sin),
                  lambda: err([f(q, cos, sin)]))
        timed("rotate_half eager (transformers)", lambda: _rotate_half_formula(q, cos, sin),
              lambda: err([_rotate_half_formula(q, cos, sin)]))
        freqs_cis = torch.polar(torch.ones_like(ang[..., : d // 2]), ang[..., : d // 2]).to(
            torch.complex64)
        ref_i = _reference(q, ang_b, half=False)
        timed("Meta complex multiply (interleaved)", lambda: _meta_complex(q, freqs_cis),
              lambda: _relerr(_meta_complex(q, freqs_cis), ref_i))
        timed("posenc apply_rope interleaved",
              lambda: posenc.apply_rope(q, layout="interleaved"),
              lambda: _relerr(posenc.apply_rope(q, layout="interleaved"), ref_i))
        return rows

    rope = RotaryEmbedding(d, layout="half", max_seq_len=max(t, 1)).to(device)
    pos_arg = positions
    timed("posenc RotaryEmbedding", lambda: rope(q, k, positions=pos_arg),
          lambda: err(rope(q, k, positions=pos_arg)))
    qi, ki = q.clone(), k.clone()
    timed("posenc RotaryEmbedding in place",
          lambda: rope(qi, ki, positions=pos_arg, inplace=True))
    f = comp("posenc_qk", lambda a, c, p: rope(a, c, positions=p))
    if f is not None:
        timed("posenc RotaryEmbedding in torch.compile", lambda: f(q, k, pos_arg),
              lambda: err(f(q, k, pos_arg)))
    f2 = comp("rh_qk", _rotate_half_qk)
    if f2 is not None:
        timed("rotate_half compiled", lambda: f2(q, k, cos_b, sin_b),
              lambda: err(f2(q, k, cos_b, sin_b)))
    try:  # transformers' own function, cos/sin as its rotary module returns them
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except Exception as e:
        notes.append(f"{cid}: transformers' apply_rotary_pos_emb not importable ({e}); "
                     f"its formula timed instead")
        timed("rotate_half eager (transformers)", lambda: _rotate_half_qk(q, k, cos_b, sin_b),
              lambda: err(_rotate_half_qk(q, k, cos_b, sin_b)))
    else:
        cos_t = cos if cos.ndim == 3 else cos[None]
        sin_t = sin if sin.ndim == 3 else sin[None]
        timed("rotate_half eager (transformers)",
              lambda: apply_rotary_pos_emb(q, k, cos_t, sin_t),
              lambda: err(apply_rotary_pos_emb(q, k, cos_t, sin_t)))
    if liger is not None:
        ql, kl = q.clone(), k.clone()
        cos_l = cos if cos.ndim == 3 else cos[None]
        sin_l = sin if sin.ndim == 3 else sin[None]

        def lig():
            return liger(ql, kl, cos_l, sin_l)

        def lig_check():
            a, c = q.clone(), k.clone()
            return err(liger(a, c, cos_l, sin_l))

        timed("Liger (in place)", lig, lig_check)
    if what == "train":  # forward and backward
        qg = q.clone().requires_grad_()
        kg = k.clone().requires_grad_()
        gq, gk = torch.randn_like(q), torch.randn_like(k)

        def fb(fn):
            def run():
                a, c = fn()
                torch.autograd.backward((a, c), (gq, gk))
            return run

        def copy_fb():
            for o, x in zip(outs, tensors):
                o.copy_(x)
            for o, x in zip(outs, (gq, gk)):
                o.copy_(x)

        timed("copy_ (fwd+bwd bytes)", copy_fb)
        timed("posenc RotaryEmbedding fwd+bwd", fb(lambda: rope(qg, kg, positions=pos_arg)))
        if f2 is not None:
            timed("rotate_half compiled fwd+bwd", fb(lambda: f2(qg, kg, cos_b, sin_b)))
        timed("rotate_half eager fwd+bwd", fb(lambda: _rotate_half_qk(qg, kg, cos_b, sin_b)))
        if liger is not None:
            def lig_fb():
                a, c = qg.clone(), kg.clone()
                return liger(a, c, cos_l, sin_l)
            timed("Liger fwd+bwd (with clones)", fb(lig_fb))
    return rows


#: the accuracy a configuration must keep to be chosen (relative error of the whole tensor
#: against float64): the issue's float32 goal; bfloat16's error is its own rounding
SWEEP_RELERR = {"float32": 2e-7, "bfloat16": 1e-2}


def choose_config(clock, device, quick, notes):
    """Time every configuration of ``posenc.torch._triton.SWEEP`` on the prefill of q and
    k (bfloat16 and float32), choose the fastest that keeps :data:`SWEEP_RELERR`, and set
    it as ``_triton.CONFIG`` for the rest of the run.  Returns the sweep's rows."""
    import torch

    from posenc.torch import RotaryEmbedding, _triton

    out = {}
    for dname in ("bfloat16", "float32"):
        dtype = getattr(torch, dname)
        b, hq, t, d = QUICK_SHAPES["qk"] if quick else (1, 32, 16384, 128)
        hk = max(1, hq // 4)
        g = torch.Generator(device=device).manual_seed(0)
        q = torch.randn((b, t, hq, d), device=device, dtype=dtype, generator=g).transpose(1, 2)
        k = torch.randn((b, t, hk, d), device=device, dtype=dtype, generator=g).transpose(1, 2)
        pos = torch.arange(t, device=device)
        _, _, ang = _tables(pos, d, device, dtype)
        refs = [_reference(x, ang) for x in (q, k)]
        oq, ok = torch.empty_like(q), torch.empty_like(k)

        def copy():
            oq.copy_(q)
            ok.copy_(k)

        base = clock(copy)
        rope = RotaryEmbedding(d, layout="half", max_seq_len=t).to(device)
        size = q.element_size()
        default = dict(_triton.CONFIG[size])
        rows = []
        for cfg in _triton.SWEEP:
            _triton.CONFIG[size] = dict(cfg)
            try:
                ms = clock(lambda: rope(q, k, positions=pos))
                got = rope(q, k, positions=pos)
                err = max(_relerr(a, r) for a, r in zip(got, refs))
            except Exception as e:  # a configuration that fails to build is reported
                notes.append(f"sweep {dname} {cfg}: {type(e).__name__}: {str(e)[:200]}")
                continue
            rows.append({"config": dict(cfg), "ms": ms, "x_copy": ms / base, "relerr": err})
        ok_rows = [r for r in rows if r["relerr"] <= SWEEP_RELERR[dname]]
        best = min(ok_rows, key=lambda r: r["ms"])["config"] if ok_rows else default
        _triton.CONFIG[size] = dict(best)
        out[dname] = {"copy_ms": base, "rows": rows, "chosen": dict(best),
                      "default_before": default}
        print(f"sweep {dname}: copy_ {base:.4f} ms; chosen {best}", flush=True)
        for r in sorted(rows, key=lambda r: r["ms"]):
            print(f"   {str(r['config']):60s} {r['ms']:8.4f} ms {r['x_copy']:5.2f}x "
                  f"{r['relerr']:.1e}", flush=True)
    return out


def _versions(device):
    import numpy
    import torch

    out = {"python": platform.python_version(), "torch": torch.__version__,
           "numpy": numpy.__version__}
    from importlib.metadata import PackageNotFoundError, version

    for mod, dist in (("triton", "triton"), ("transformers", "transformers"),
                      ("liger_kernel", "liger-kernel")):
        try:
            out[mod] = version(dist)
        except PackageNotFoundError:
            out[mod] = None
    try:
        import posenc

        out["posenc"] = posenc.__version__
    except Exception:
        out["posenc"] = None
    # how the compiled-posenc rows reach the kernel: "triton_op" (Inductor launches
    # posenc's Triton kernel from its own generated code) or "custom_op" (an opaque
    # call back into posenc's Python wrapper, where Triton is missing)
    try:
        from torch._library.triton import triton_ops_to_kernels

        import posenc.torch  # noqa: F401  (registers the operators)

        out["posenc_compiled_op"] = ("triton_op" if "posenc::rope_qk" in triton_ops_to_kernels
                                     else "custom_op")
    except Exception:
        out["posenc_compiled_op"] = None
    if device == "cuda":
        out["cuda"] = torch.version.cuda
        out["device_name"] = torch.cuda.get_device_name()
        try:
            out["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception:
            out["driver"] = None
    return out


def _commit():
    if os.environ.get("POSENC_COMMIT"):  # named by the command that sent the tree
        return os.environ["POSENC_COMMIT"], None
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=20).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "posenc", "benchmarks"],
                               cwd=ROOT, capture_output=True, text=True, timeout=20).stdout
        return sha or os.environ.get("POSENC_COMMIT"), bool(dirty.strip())
    except Exception:
        return os.environ.get("POSENC_COMMIT"), None


def ratios(rows):
    """Each row's time as a multiple of the case's ``copy_`` (fwd+bwd rows: of the
    fwd+bwd copy)."""
    out = {}
    base = rows.get("copy_", {}).get("ms")
    base_fb = rows.get("copy_ (fwd+bwd bytes)", {}).get("ms")
    for name, r in rows.items():
        ref = base_fb if "fwd+bwd" in name else base
        out[name] = None if not ref else r["ms"] / ref
    return out


def write_md(results, path):
    lines = ["# RoPE on a GPU", "",
             f"Device: {results['machine'].get('device_name')}, driver "
             f"{results['machine'].get('driver')}, CUDA {results['machine'].get('cuda')}; "
             f"torch {results['machine'].get('torch')}, triton "
             f"{results['machine'].get('triton')}, transformers "
             f"{results['machine'].get('transformers')}, liger-kernel "
             f"{results['machine'].get('liger_kernel')}; posenc commit "
             f"{results['commit']}{' (dirty)' if results.get('dirty') else ''}; "
             f"{results['date']}.", "",
             "Times: median ms of triton.testing.do_bench; x copy_: the time over "
             "out.copy_(x) of the same tensors in the same run.", ""]
    for dname, sw in (results.get("sweep") or {}).items():
        lines += [f"## Kernel configurations, {dname} (q and k prefill; chosen: "
                  f"{sw['chosen']})", "",
                  "| tile bytes | heads | trig | warps | ms | x copy_ | rel. error |",
                  "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in sorted(sw["rows"], key=lambda r: r["ms"]):
            c = r["config"]
            lines.append(f"| {c['tile']} | {c['heads']} | {c['trig']} | "
                         f"{c['warps'] or 'auto'} | {r['ms']:.4f} | {r['x_copy']:.2f} | "
                         f"{r['relerr']:.1e} |")
        lines.append("")
    if results.get("kernel_config"):
        lines += [f"Every posenc row below ran with: {results['kernel_config']}", ""]
    for cid, case in results["cases"].items():
        lines += [f"## {cid} {tuple(case['q_shape'])} k heads {case['k_heads']} "
                  f"{case['dtype']}", "", "| candidate | ms | x copy_ | rel. error |",
                  "|---|---:|---:|---:|"]
        for name, r in case["rows"].items():
            ratio = case["ratios"].get(name)
            e = r.get("relerr")
            lines.append(f"| {name} | {r['ms']:.4f} | "
                         f"{'' if ratio is None else f'{ratio:.2f}'} | "
                         f"{'' if e is None else f'{e:.1e}'} |")
        lines.append("")
    if results["skipped"]:
        lines += ["Skipped (time budget): " + ", ".join(results["skipped"]), ""]
    if results.get("provenance_note"):
        lines += ["Provenance: " + results["provenance_note"], ""]
    if results["notes"]:
        lines += ["Notes:", ""] + [f"- {n}" for n in results["notes"]] + [""]
    Path(path).write_text("\n".join(lines))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--quick", action="store_true", help="tiny shapes: checks the harness")
    p.add_argument("--out", default=None, help="folder for results-gpu.json/.md")
    p.add_argument("--budget", type=float, default=270.0, help="seconds for the whole run")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile rows")
    p.add_argument("--cases", default=None, help="comma-separated case ids")
    p.add_argument("--no-sweep", action="store_true",
                   help="keep the kernel's configuration (no sweep before the cases)")
    a = p.parse_args(argv)
    import torch

    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here (use --device cpu --quick to check the "
                "harness on a CPU, under TRITON_INTERPRET=1)")
    if a.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    start = time.perf_counter()
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb as liger
    except Exception as e:
        liger = None
        notes = [f"Liger not run: {type(e).__name__}: {e}"]
    else:
        notes = []
    if a.device == "cpu":
        liger = None
    clock = Clock(a.device, a.quick)
    sha, dirty = _commit()
    results = {"schema": SCHEMA, "commit": sha, "dirty": dirty,
               "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "machine": _versions(a.device), "quick": a.quick, "device": a.device,
               "cases": {}, "skipped": [], "notes": notes}
    out = Path(a.out) if a.out else RESULTS_JSON.parent
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / ("results-gpu.json" if a.device == "cuda" else "results-gpu-cpu.json")
    md_path = json_path.with_suffix(".md")
    wanted = None if a.cases is None else set(a.cases.split(","))
    if not a.no_sweep:
        t0 = time.perf_counter()
        results["sweep"] = choose_config(clock, a.device, a.quick, results["notes"])
        results["sweep_seconds"] = time.perf_counter() - t0
    from posenc.torch import _triton

    # the configuration every posenc row below ran with (the sweep's choice)
    results["kernel_config"] = {str(k): dict(v) for k, v in _triton.CONFIG.items()}
    for case in CASES:
        if wanted is not None and case[0] not in wanted:
            continue
        if time.perf_counter() - start > a.budget:
            results["skipped"].append(case[0])
            continue
        t0 = time.perf_counter()
        rows = run_case(case, clock, a.device, a.quick, liger,
                        not a.no_compile and a.device == "cuda", results["notes"])
        qshape = QUICK_SHAPES[case[1]] if a.quick else case[2]
        results["cases"][case[0]] = {
            "what": case[1], "q_shape": list(qshape), "k_heads": case[3],
            "dtype": case[4], "rows": rows, "ratios": ratios(rows),
            "seconds": time.perf_counter() - t0}
        results["seconds"] = time.perf_counter() - start
        json_path.write_text(json.dumps(results, indent=1))  # after every case
        write_md(results, md_path)
        print(f"{case[0]}: {time.perf_counter() - t0:.1f} s", flush=True)
        for name, r in rows.items():
            ratio = results["cases"][case[0]]["ratios"][name]
            print(f"   {name:45s} {r['ms']:9.4f} ms  "
                  f"{'' if ratio is None else f'{ratio:6.2f}x'}  "
                  f"{r.get('relerr', '')}", flush=True)
    results["seconds"] = time.perf_counter() - start
    json_path.write_text(json.dumps(results, indent=1))
    write_md(results, md_path)
    print(f"wrote {json_path} ({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
