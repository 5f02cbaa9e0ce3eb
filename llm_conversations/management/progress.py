"""A progress bar on a command's stderr, shared by the commands that delete in batches.

On a terminal the bar redraws in place; otherwise (a log file, cron) each
update is a line of its own.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand

__all__ = ["BAR_WIDTH", "ProgressBar", "progress_line"]

BAR_WIDTH = 30


def progress_line(done: int, total: int) -> str:
    """``[#####.....]  500/1000 (50%)``; ``total`` may be exceeded by rows aged meanwhile."""
    total = max(total, done, 1)
    filled = BAR_WIDTH * done // total
    percent = 100 * done // total
    return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total} ({percent}%)"


class ProgressBar:
    """Call it with the number done so far; :meth:`close` ends the line on a terminal."""

    def __init__(self, command: BaseCommand, total: int) -> None:
        self._stderr = command.stderr
        self._total = total
        self._interactive = command.stderr.isatty()

    def __call__(self, done: int) -> None:
        line = progress_line(done, self._total)
        if self._interactive:
            self._stderr.write(f"\r{line}", ending="")
            self._stderr.flush()
        else:
            self._stderr.write(line)

    def close(self) -> None:
        """End the redrawn line (a terminal only)."""
        if self._interactive:
            self._stderr.write("")
