"""The demo's tests run on the demo's settings: ``pytest project/tests --ds=project.settings``
(``make test`` does, after the app's own suite)."""

import pytest
from django.conf import settings

from tests.browser.chromium import browser, page

__all__ = ["browser", "page"]

if settings.SETTINGS_MODULE != "project.settings":
    raise pytest.UsageError(
        "project/tests needs the demo's settings: pytest project/tests --ds=project.settings"
    )
