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

if settings.SETTINGS_MODULE != "project.settings":
    raise pytest.UsageError(
        "project/tests needs the demo's settings: pytest project/tests --ds=project.settings"
    )
