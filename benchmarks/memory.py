"""Peak memory and first-call cost, each candidate in a fresh Python process.

Peak memory.  ``tracemalloc`` does not see PyTorch's allocations, so we ask the
operating system.  A fresh child process builds the input, and then for each candidate
in turn builds its tables, runs it once to get every lazy initialisation out of the
way, frees that output, resets the kernel's resident-set high-water mark (``echo 5 >
/proc/self/clear_refs``), reads the current resident set ``VmRSS``, calls the candidate
once more and reads the new high-water mark ``VmHWM``; then it frees everything the
candidate made before the next one starts.  ``VmHWM - VmRSS`` is the most
memory the call had resident beyond what existed before it: its output plus every
temporary alive at the worst moment.  glibc would keep freed blocks in its heap and
hand them out again unseen, so the child runs with ``MALLOC_MMAP_THRESHOLD_=65536``
(every block of 64 KiB or more is its own ``mmap``, returned to the system when freed):
the resident set then follows PyTorch's live tensors.  Each figure is reported relative
to the input's size; an out-of-place op cannot do better than 1.0 (its output).

First call.  posenc builds its cos/sin tables on the first call for a given shape and
caches them.  A child process imports torch and posenc, warms PyTorch's own kernels
(``x * 2 + x``, a ``cat``) so that PyTorch's lazy start-up is not billed to posenc,
times the first ``apply_rope`` call and then the median of the next few.  The peers'
equivalent -- building their tables before the timed calls -- is timed the same way.

Run by :mod:`benchmarks.run`; usable alone:
``python -m benchmarks.memory peak rotate_half+clone 1,32,2048,128 float32``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "2"}


def _status(field: str) -> int:
    """A ``VmXXX`` field of /proc/self/status, in bytes."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _child_peak(names: str, shape: tuple, dtype_name: str, threads: int) -> list[dict]:
    import gc

    import torch

    from benchmarks.peers import BY_NAME

    torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).to(dtype)
    out = []
    for name in names.split("+"):
        fn = BY_NAME[name].factory(shape, dtype)
        y = fn(x)
        del y
        gc.collect()
        _reset_peak()
        before = _status("VmRSS")
        y = fn(x)
        peak = _status("VmHWM")
        after = _status("VmRSS")
        out.append({
            "name": name,
            "input_bytes": int(x.nbytes),
            "output_bytes": int(y.nbytes),
            "peak_extra_bytes": int(peak - before),
            "retained_bytes": int(after - before),
        })
        del y, fn
        gc.collect()
    return out


def _child_cold(name: str, shape: tuple, dtype_name: str, threads: int) -> dict:
    import torch

    from benchmarks.peers import BY_NAME

    torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    for _ in range(2):  # PyTorch's own lazy start-up, not billed to anyone
        torch.cat((x * 2 + x, x), dim=-1)
        torch.view_as_real(torch.view_as_complex(x.float().unflatten(-1, (-1, 2))) * 1j)
    candidate = BY_NAME[name]
    if candidate.kind == "posenc":
        import posenc

        layout = candidate.layout
        t0 = time.perf_counter()
        posenc.apply_rope(x, layout=layout)
        first = time.perf_counter() - t0
        setup = 0.0
        fn = lambda x: posenc.apply_rope(x, layout=layout)  # noqa: E731
    else:
        t0 = time.perf_counter()
        fn = candidate.factory(shape, dtype)
        setup = time.perf_counter() - t0
        t0 = time.perf_counter()
        fn(x)
        first = time.perf_counter() - t0
    steady = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn(x)
        steady.append(time.perf_counter() - t0)
    steady.sort()
    return {"name": name, "setup_s": setup, "first_call_s": first, "steady_s": steady[2]}


def run_child(mode: str, name: str, shape: tuple, dtype: str, threads: int = 2):
    """Run one measurement in a fresh interpreter and return its JSON result.

    ``mode="peak"`` takes several candidate names joined by ``+`` and returns a list.
    """
    cmd = [sys.executable, "-m", "benchmarks.memory", mode, name,
           ",".join(map(str, shape)), dtype, str(threads)]
    env = {**os.environ, **CHILD_ENV, "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    mode, name, shape, dtype = argv[:4]
    threads = int(argv[4]) if len(argv) > 4 else 2
    shape_t = tuple(int(s) for s in shape.split(","))
    child = {"peak": _child_peak, "cold": _child_cold}[mode]
    print(json.dumps(child(name, shape_t, dtype, threads)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
