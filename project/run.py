"""``make run``: the demo's web server, a task worker and the reaper, as one command.

Starts ``manage.py runserver``, ``manage.py llm_worker`` (executes background
runs queued in the database, many at once, each picked up within 0.1 s on
SQLite and as it is committed on PostgreSQL) and
``manage.py reap_runs --loop 30`` (requeues runs whose worker died; the
database worker cannot schedule tasks itself).
Each child runs in its own process group; Ctrl-C (or SIGTERM) stops them all,
and so does any one of them exiting. Children still running after
``STOP_SECONDS`` are killed, so nothing is left behind.

Usage: ``python -m project.run [ADDRPORT]`` (default ``127.0.0.1:8000``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

STOP_SECONDS = 10.0
REAP_EVERY_SECONDS = 30


def commands(addrport: str) -> list[list[str]]:
    """The processes ``make run`` starts, each a ``manage.py`` command."""
    manage = [sys.executable, "manage.py"]
    return [
        [*manage, "runserver", addrport],
        [*manage, "llm_worker"],
        [*manage, "reap_runs", "--loop", str(REAP_EVERY_SECONDS)],
    ]


class Stop(Exception):
    """Raised in the main thread by SIGINT or SIGTERM."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def stop_all(children: Sequence[subprocess.Popen[bytes]], grace: float = STOP_SECONDS) -> None:
    """SIGINT to each child's process group, then SIGKILL to what still runs after ``grace``."""
    for child in children:
        if child.poll() is None:
            _signal_group(child, signal.SIGINT)
    deadline = time.monotonic() + grace
    for child in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(max(0.0, deadline - time.monotonic()))
    for child in children:
        # The group too: a child's own children (runserver's reloader) go with it.
        _signal_group(child, signal.SIGKILL)
        child.wait()


def _signal_group(child: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signum)


def main(argv: Sequence[str] = ()) -> int:
    addrport = argv[0] if argv else "127.0.0.1:8000"
    signal.signal(signal.SIGINT, _raise_stop)
    signal.signal(signal.SIGTERM, _raise_stop)
    children: list[subprocess.Popen[bytes]] = []
    names: list[str] = []
    try:
        for command in commands(addrport):
            # A session of its own: Ctrl-C reaches this launcher only, which
            # then stops each child in order.
            children.append(subprocess.Popen(command, start_new_session=True))
            names.append(command[2])
        print(
            f"Started the web server (http://{addrport}/), a task worker and the reaper; "
            "Ctrl-C stops them all.",
            flush=True,
        )
        while True:
            for name, child in zip(names, children, strict=True):
                code = child.poll()
                if code is not None:
                    print(f"manage.py {name} exited with {code}; stopping the rest.", flush=True)
                    return code or 1
            time.sleep(0.5)
    except Stop:
        print("\nStopping the web server, the task worker and the reaper...", flush=True)
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_all(children)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
