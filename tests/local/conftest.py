"""Fixtures for the local tooling: headless Chromium, a fake agent and the page's web server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.local.local_fakes import RemoteStacks, WebStacks

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--autoplay-policy=no-user-gesture-required",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium driven by Playwright (never `playwright install`: it downloads a browser)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make system-deps` (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def web_stacks() -> Iterator[WebStacks]:
    stacks = WebStacks()
    try:
        yield stacks
    finally:
        stacks.close()


@pytest.fixture
def remote_stacks(monkeypatch: pytest.MonkeyPatch) -> Iterator[RemoteStacks]:
    stacks = RemoteStacks(monkeypatch)
    try:
        yield stacks
    finally:
        stacks.close()


@pytest.fixture
def page_problems() -> list[str]:
    """Console errors and uncaught exceptions of `page`; a test that expects one removes it."""
    return []


def watched_page(browser: Browser, page_problems: list[str], **context_options: Any) -> Iterator[Page]:
    """A fresh page; console errors and uncaught exceptions left in `page_problems` fail the test."""
    context = browser.new_context(**context_options)
    page = context.new_page()
    page.on("pageerror", lambda exc: page_problems.append(f"uncaught: {exc}"))
    page.on(
        "console", lambda msg: page_problems.append(f"console.{msg.type}: {msg.text}") if msg.type == "error" else None
    )
    try:
        yield page
    finally:
        context.close()
    assert page_problems == [], page_problems


@pytest.fixture
def page(browser: Browser, page_problems: list[str]) -> Iterator[Page]:
    yield from watched_page(browser, page_problems)


@pytest.fixture
def tls_page(browser: Browser, page_problems: list[str]) -> Iterator[Page]:
    """`page` that accepts the AgentCore stand-in's throwaway certificate (its wss:// and https://)."""
    yield from watched_page(browser, page_problems, ignore_https_errors=True)
