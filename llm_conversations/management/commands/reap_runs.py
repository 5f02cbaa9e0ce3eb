"""``manage.py reap_runs``: requeue runs whose worker died, or fail them.

One pass of :func:`llm_conversations.runs.reaper.reap_runs` by default;
``--loop SECONDS`` repeats it every SECONDS until interrupted (Ctrl-C or
SIGTERM), for a deployment whose task worker cannot schedule the
``reap_lost_runs`` task itself (see ``docs/deployment.md``).
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections

from llm_conversations.runs.reaper import Reaped, reap_runs

logger = logging.getLogger("llm_conversations.leases")


def summary(reaped: Reaped) -> str:
    """One line saying what a pass did."""
    return (
        f"Requeued {len(reaped.requeued)} run(s), failed {len(reaped.failed)} run(s), "
        f"enqueued {len(reaped.reenqueued)} queued run(s) again."
    )


class Command(BaseCommand):
    help = (
        "Requeue running runs whose lease expired (their worker died), or fail them "
        "after MAX_ATTEMPTS attempts. One pass, or every SECONDS with --loop."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Set to stop the loop: by SIGTERM, or by a test.
        self.stopping = threading.Event()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--loop",
            type=float,
            metavar="SECONDS",
            help="Repeat every SECONDS until interrupted (Ctrl-C or SIGTERM).",
        )

    def handle(self, *args: Any, loop: float | None = None, **options: Any) -> None:
        if loop is None:
            self.stdout.write(summary(reap_runs()))
            return
        if loop <= 0:
            raise CommandError("--loop needs a positive number of seconds.")
        self._stop_on_sigterm()
        self.stdout.write(f"Reaping lost runs every {loop:g} s; Ctrl-C stops.")
        try:
            while not self.stopping.is_set():
                self._pass()
                self.stopping.wait(loop)
        except KeyboardInterrupt:
            pass
        self.stdout.write("Stopped reaping.")

    def _pass(self) -> None:
        """One pass; an error is logged and the next pass tries again."""
        close_old_connections()
        try:
            reaped = reap_runs()
        except Exception:
            logger.exception("Reaping lost runs failed; trying again at the next pass")
            return
        finally:
            close_old_connections()
        if reaped.requeued or reaped.failed or reaped.reenqueued:
            self.stdout.write(summary(reaped))

    def _stop_on_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def stop(signum: int, frame: FrameType | None) -> None:
            self.stopping.set()

        signal.signal(signal.SIGTERM, stop)
