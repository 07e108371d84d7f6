"""The test tree mirrors the package: torch/, atlas/, encodings/ (the NumPy API), analysis/,
figures/, book/, bench/.

This file sits at the top of tests/ so that pytest puts tests/ on sys.path, and the shared
helpers (book_parity, browser_site) import from every subfolder.  It is the only
conftest.py: the test folders are not packages, so a second one (tests/book/conftest.py)
collides with this one under pytest's default import mode ("import file mismatch").
"""

import os
from pathlib import Path

# Triton's kernels run on CPU tensors in its interpreter: the fused RoPE kernel is tested
# that way on machines without a GPU (tests/torch/test_fused.py).  Set before any test
# imports the kernel module, which decides at import time.
os.environ.setdefault("TRITON_INTERPRET", "1")

# No per-example time limit in property tests: on a shared 2-core machine a slow example
# is load, not a bug (test_logn_scale_equals_qwen_reference exceeded the default 200 ms
# under a load average of 11).  Tests that care about time have benchmarks instead.
from hypothesis import settings  # noqa: E402

settings.register_profile("posenc", deadline=None)
settings.load_profile("posenc")


# Fixtures the browser tests share (tests/book/test_browser.py, test_a11y.py,
# test_interactive_browser.py): the built site, a local server over it, one Chromium and
# one browsing context per module.
import pytest  # noqa: E402

from browser_site import chromium, new_context, require_site, serve  # noqa: E402


@pytest.fixture(scope="module")
def site() -> Path:
    return require_site()


@pytest.fixture(scope="module")
def base(site):
    with serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def context(browser):
    ctx = new_context(browser)
    yield ctx
    ctx.close()
