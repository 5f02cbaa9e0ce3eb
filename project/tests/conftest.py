"""The demo's tests run on the demo's settings: ``pytest project/tests --ds=project.settings``
(``make test`` does, after the app's own suite)."""

import pytest
from django.conf import settings

from tests.browser.chromium import (
    browser,
    page,
    pytest_collection_modifyitems,
    pytest_sessionfinish,
    pytest_terminal_summary,
)

__all__ = [
    "browser",
    "page",
    "pytest_collection_modifyitems",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
]


def pytest_configure(config: pytest.Config) -> None:
    # STATIC_ROOT exists only after collectstatic; tests serve static files
    # through the finders (live_server) or collect them first (test_static).
    config.addinivalue_line("filterwarnings", "ignore:No directory at:UserWarning")


if settings.SETTINGS_MODULE != "project.settings":
    raise pytest.UsageError(
        "project/tests needs the demo's settings: pytest project/tests --ds=project.settings"
    )
