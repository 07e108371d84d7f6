"""The test tree mirrors the package: encodings/, analysis/, figures/, book/, bench/.

This file sits at the top of tests/ so that pytest puts tests/ on sys.path, and the shared
helpers (book_parity, browser_site) import from every subfolder.
"""

import os

# Triton's kernels run on CPU tensors in its interpreter: the fused RoPE kernel is tested
# that way on machines without a GPU (tests/encodings/test_fused.py).  Set before any test
# imports the kernel module, which decides at import time.
os.environ.setdefault("TRITON_INTERPRET", "1")
