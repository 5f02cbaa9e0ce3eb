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
