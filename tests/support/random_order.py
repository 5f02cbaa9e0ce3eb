"""The seed of the suite's random order (pytest-randomly), printed at its end.

pytest-randomly shows its seed in the header, which ``-q`` hides; this line
is the summary's last (after the failures and the coverage report), where a
run that failed in one order is replayed.
Both suites register it (tests/conftest.py, project/tests/conftest.py).
"""

from __future__ import annotations

import pytest
from _pytest.terminal import TerminalReporter

__all__ = ["SeedLine", "register"]


class SeedLine:
    """A plugin that writes ``-p randomly --randomly-seed=N`` as the summary's last line."""

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(
        self, terminalreporter: TerminalReporter, config: pytest.Config
    ) -> None:
        if not config.pluginmanager.hasplugin("randomly"):
            return
        if not config.getoption("randomly_reorganize"):
            return
        seed = config.getoption("randomly_seed")
        terminalreporter.write_line(
            f"Tests ran in random order; replay it with: -p randomly --randomly-seed={seed}"
        )


def register(config: pytest.Config) -> None:
    """Register :class:`SeedLine` once for this run."""
    if not config.pluginmanager.has_plugin("llm-conversations-seed-line"):
        config.pluginmanager.register(SeedLine(), "llm-conversations-seed-line")
