"""The test tree mirrors the package: encodings/, analysis/, figures/, book/, bench/.

This file sits at the top of tests/ so that pytest puts tests/ on sys.path, and the shared
helpers (book_parity, browser_site) import from every subfolder.
"""

import os

# Triton's kernels run on CPU tensors in its interpreter: the fused RoPE kernel is tested
# that way on machines without a GPU (tests/encodings/test_fused.py).  Set before any test
# imports the kernel module, which decides at import time.
os.environ.setdefault("TRITON_INTERPRET", "1")

# No per-example time limit in property tests: on a shared 2-core machine a slow example
# is load, not a bug (test_logn_scale_equals_qwen_reference exceeded the default 200 ms
# under a load average of 11).  Tests that care about time have benchmarks instead.
from hypothesis import settings  # noqa: E402

settings.register_profile("posenc", deadline=None)
settings.load_profile("posenc")
