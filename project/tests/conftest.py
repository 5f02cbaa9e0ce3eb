"""The demo's tests run on the demo's settings: ``pytest project/tests --ds=project.settings``
(``make test`` does, after the app's own suite)."""

import pytest
from django.conf import settings

from project.tests.slow_provider import provider
from tests.browser.chromium import (
    browser,
    page,
    pytest_collection_modifyitems,
    pytest_sessionfinish,
    pytest_terminal_summary,
)
from tests.support import random_order

__all__ = [
    "browser",
    "page",
    "provider",
    "pytest_collection_modifyitems",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings_parallel_suffix: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """On SQLite, the test database in a file rather than in memory.

    The live server answers a page's parallel requests (the providers and the
    conversation list as it loads) in threads of its own. An in-memory test
    database is one connection they all share, and two queries at once fail
    in sqlite3 ("bad parameter or other API misuse"); with a file each thread
    has its own connection.
    """
    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        path = tmp_path_factory.mktemp("database") / "test.sqlite3"
        database.setdefault("TEST", {})["NAME"] = str(path)


def pytest_configure(config: pytest.Config) -> None:
    # STATIC_ROOT exists only after collectstatic; tests serve static files
    # through the finders (live_server) or collect them first (test_static).
    config.addinivalue_line("filterwarnings", "ignore:No directory at:UserWarning")
    random_order.register(config)


if settings.SETTINGS_MODULE != "project.settings":
    raise pytest.UsageError(
        "project/tests needs the demo's settings: pytest project/tests --ds=project.settings"
    )
