"""Headless Chromium (Debian's package) driven by Playwright, against live_server.

The ``browser`` and ``page`` fixtures, shared by the app's browser tests and
the demo's; each conftest imports them. Screenshots go to ``test-artifacts/``
(not committed).

Without Chromium the tests skip locally, with a reason that says how to
install it, and the run ends with a visible line counting them. Under CI
(``CI=true``, which ``.ci/run`` sets) a missing browser is an error instead,
and a run with any browser test skipped fails, so CI cannot pass without them.
Each conftest that uses these fixtures also imports the hooks below.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal

import pytest

# CHROMIUM_BIN points at another build (or at nothing, to see what happens without one).
CHROMIUM = os.environ.get("CHROMIUM_BIN") or shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
INSTALL_HINT = "install Debian's package: sudo apt-get install chromium"


def running_under_ci(environ: Mapping[str, str]) -> bool:
    """``CI`` set to true (GitHub Actions, GitLab and ``.ci/run`` set ``CI=true``)."""
    return environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def missing_chromium(
    chromium: str, environ: Mapping[str, str]
) -> tuple[Literal["run", "skip", "fail"], str]:
    """What the browser tests do: run, skip (locally) or fail (under CI), and why."""
    if Path(chromium).exists():
        return "run", ""
    reason = f"Chromium not found at {chromium}; {INSTALL_HINT}"
    if running_under_ci(environ):
        return "fail", f"{reason}. CI=true: browser tests may not be skipped."
    return "skip", f"{reason} (browser tests skip without it; under CI=true they fail)"


def pytest_collection_modifyitems(session: pytest.Session, items: list[pytest.Item]) -> None:
    """Under CI, refuse to start browser tests that could only skip."""
    if not any(item.get_closest_marker("browser") for item in items):
        return
    action, reason = missing_chromium(CHROMIUM, os.environ)
    if action == "fail":
        raise pytest.UsageError(reason)


def _skipped_browser_tests(config: pytest.Config) -> list[pytest.TestReport]:
    stats = config.pluginmanager.get_plugin("terminalreporter")
    if stats is None:
        return []
    return [r for r in stats.stats.get("skipped", []) if "browser" in r.keywords]


def browser_skip_summary(count: int, ci: bool) -> str | None:
    """The line printed at the end of a run that skipped browser tests."""
    if not count:
        return None
    line = f"{count} browser test(s) SKIPPED: Chromium not found at {CHROMIUM}; {INSTALL_HINT}"
    return f"{line} (CI=true: this run fails)" if ci else line


def pytest_terminal_summary(
    terminalreporter: object, exitstatus: int, config: pytest.Config
) -> None:
    line = browser_skip_summary(len(_skipped_browser_tests(config)), running_under_ci(os.environ))
    if line:
        terminalreporter.write_sep("!", line, yellow=True, bold=True)  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if running_under_ci(os.environ) and _skipped_browser_tests(session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# Playwright's sync API runs an event loop in this thread; the ORM calls the
# tests make between page actions are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


# Module scope: Playwright's event loop must stop before other tests run,
# since async_to_sync refuses to work beside a running loop.
@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    action, reason = missing_chromium(CHROMIUM, os.environ)
    if action == "fail":
        pytest.fail(reason)
    if action == "skip":
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: object, request: pytest.FixtureRequest) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        yield page
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
        context.close()
