"""When browser tests run, skip or fail, and the line a run that skipped them prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import chromium
from tests.browser.chromium import browser_skip_summary, missing_chromium, running_under_ci


@pytest.mark.parametrize(
    ("value", "ci"),
    [("true", True), ("TRUE", True), ("1", True), ("", False), ("false", False), ("0", False)],
)
def test_ci_is_recognised_when_set_to_true(value: str, ci: bool) -> None:
    assert running_under_ci({"CI": value}) is ci
    assert running_under_ci({}) is False


def test_browser_tests_run_when_chromium_exists(tmp_path: Path) -> None:
    binary = tmp_path / "chromium"
    binary.touch()
    assert missing_chromium(str(binary), {}) == ("run", "")
    assert missing_chromium(str(binary), {"CI": "true"}) == ("run", "")


def test_missing_chromium_skips_locally_and_says_how_to_install(tmp_path: Path) -> None:
    action, reason = missing_chromium(str(tmp_path / "chromium"), {})
    assert action == "skip"
    assert f"Chromium not found at {tmp_path / 'chromium'}" in reason
    assert "apt-get install chromium" in reason


def test_missing_chromium_fails_under_ci(tmp_path: Path) -> None:
    action, reason = missing_chromium(str(tmp_path / "chromium"), {"CI": "true"})
    assert action == "fail"
    assert "apt-get install chromium" in reason
    assert "CI=true" in reason


def test_summary_line_only_when_browser_tests_skipped() -> None:
    assert browser_skip_summary(0, ci=False) is None
    line = browser_skip_summary(2, ci=False)
    assert line is not None
    assert line.startswith("2 browser test(s) SKIPPED")
    assert "apt-get install chromium" in line
    assert "this run fails" in (browser_skip_summary(1, ci=True) or "")


def test_collection_is_refused_under_ci_without_chromium(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    class Item:
        def get_closest_marker(self, name: str) -> object:
            return object() if name == "browser" else None

    monkeypatch.setattr(chromium, "CHROMIUM", str(tmp_path / "chromium"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.UsageError, match="may not be skipped"):
        chromium.pytest_collection_modifyitems(None, [Item()])  # type: ignore[arg-type, list-item]
    monkeypatch.setenv("CI", "")
    chromium.pytest_collection_modifyitems(None, [Item()])  # type: ignore[arg-type, list-item]


def test_a_run_that_skipped_browser_tests_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    class Report:
        keywords = {"browser": 1, "test_x": 1}

    class Reporter:
        stats = {"skipped": [Report()]}

    class Session:
        exitstatus = pytest.ExitCode.OK

        class config:
            class pluginmanager:
                @staticmethod
                def get_plugin(name: str) -> object:
                    return Reporter()

    session = Session()
    monkeypatch.setenv("CI", "")
    chromium.pytest_sessionfinish(session, 0)  # type: ignore[arg-type]
    assert session.exitstatus == pytest.ExitCode.OK
    monkeypatch.setenv("CI", "true")
    chromium.pytest_sessionfinish(session, 0)  # type: ignore[arg-type]
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
