"""Where a compiled decoding step spends its time (a diagnostic for the GPU call).

    python tools/gpu_profile.py        (on a CUDA machine; tools/device_call.sh runs it)

For q and k of 64 sequences of one token (bfloat16), each of: posenc's ``RotaryEmbedding``
eager, the same inside ``torch.compile``, and the ``rotate_half`` formula compiled, it
prints the host time per call (wall clock over 200 calls, synchronised) and the
profiler's table of the operations by host time, then the kernels one compiled prefill of
``posenc.apply_rope`` launches.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile

    import posenc
    from posenc.torch import RotaryEmbedding

    dev = "cuda"
    dt = torch.bfloat16
    b, hq, hk, d = 64, 32, 8, 128
    q = torch.randn(b, 1, hq, d, device=dev, dtype=dt).transpose(1, 2)
    k = torch.randn(b, 1, hk, d, device=dev, dtype=dt).transpose(1, 2)
    pos = torch.randint(0, 32768, (b, 1), device=dev)
    rope = RotaryEmbedding(d, layout="half", max_seq_len=1).to(dev)
    inv = torch.from_numpy(posenc.sinusoidal.inverse_frequencies(d, 10000.0)).to(dev)
    ang = pos.double()[..., None] * inv
    ang = torch.cat((ang, ang), -1)[:, None]
    cos, sin = ang.cos().to(dt), ang.sin().to(dt)

    def rh(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    def formula(a, c, co, si):
        return a * co + rh(a) * si, c * co + rh(c) * si

    cands = {
        "posenc eager": lambda: rope(q, k, positions=pos),
        "posenc compiled": (lambda f: lambda: f(q, k, pos))(
            torch.compile(lambda a, c, p: rope(a, c, positions=p), fullgraph=True)),
        "rotate_half compiled": (lambda f: lambda: f(q, k, cos, sin))(
            torch.compile(formula, fullgraph=True)),
    }
    for name, fn in cands.items():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        print(f"== {name}: {(time.perf_counter() - t0) / 200 * 1e6:.1f} us per call "
              f"(host, 200 calls)", flush=True)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14,
                                        max_name_column_width=70), flush=True)
    x = torch.randn(1, 16384, 32, d, device=dev, dtype=dt).transpose(1, 2)
    f = torch.compile(lambda a: posenc.apply_rope(a, layout="half"), fullgraph=True)
    f(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            f(x)
        torch.cuda.synchronize()
    print("== compiled posenc.apply_rope prefill (1, 32, 16384, 128): by device time")
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=10,
                                    max_name_column_width=70), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
