"""Fixtures the browser tests share (tests/book/test_browser.py, test_a11y.py,
test_interactive_browser.py): the built site, a local server over it, one Chromium and
one browsing context per module."""

from __future__ import annotations

from pathlib import Path

import pytest

from browser_site import chromium, new_context, require_site, serve


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
