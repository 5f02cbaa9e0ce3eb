from tests.browser.chromium import browser, page

__all__ = ["browser", "page"]
