"""Background runs in the demo: queued in the database, executed by ``db_worker``;
and ``python -m project.run`` (``make run``) starting and stopping its processes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from llm_conversations.conversations import create_conversation, load_messages
from llm_conversations.models import Run, RunEvent
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.reaper import reap_lost_runs

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_queues_tasks_in_the_database() -> None:
    assert settings.TASKS["default"]["BACKEND"] == "django_tasks_db.DatabaseBackend"
    assert settings.LLM_CONVERSATIONS["BACKGROUND_RUNS"] is False


# db_worker closes database connections after each task: committed data, no
# test transaction to lose.
@pytest.mark.django_db(transaction=True)
def test_a_background_run_is_executed_by_db_worker() -> None:
    conversation = create_conversation(title="background")
    run = ToolLoopService().start(conversation, "hello there", background=True)
    run.refresh_from_db()
    assert run.status == "queued"  # in the database queue, not executed yet

    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", stdout=StringIO())

    run.refresh_from_db()
    assert (run.status, run.attempts) == ("completed", 1)
    assert run.lease_owner == ""  # released when it ended
    assert [m.role for m in load_messages(conversation)] == ["user", "assistant"]
    types = list(RunEvent.objects.filter(run=run).values_list("type", flat=True))
    assert types[0] == "run.running"
    assert types[-1] == "run.completed"


@pytest.mark.django_db(transaction=True)
def test_reaping_as_a_database_task() -> None:
    result = reap_lost_runs.enqueue()
    assert Run.objects.count() == 0
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", stdout=StringIO())
    result.refresh()
    assert result.return_value == {"requeued": 0, "failed": 0, "reenqueued": 0}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _descendants(pid: int) -> set[int]:
    """Processes whose parent chain leads to ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads processes from /proc")
def test_make_run_starts_server_worker_and_reaper_and_ctrl_c_stops_them(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "PYTHONUNBUFFERED": "1",
    }
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120
    )
    port = free_port()
    log = (tmp_path / "run.log").open("w+")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "project.run", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    children: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while True:
            assert launcher.poll() is None, Path(log.name).read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/schema/", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, Path(log.name).read_text()
                time.sleep(0.3)
        children = _descendants(launcher.pid)
        commands = {
            " ".join(Path(f"/proc/{pid}/cmdline").read_text().split("\0")[1:3]) for pid in children
        }
        assert {"manage.py runserver", "manage.py llm_worker", "manage.py reap_runs"} <= commands

        launcher.send_signal(signal.SIGINT)  # what Ctrl-C sends
        assert launcher.wait(timeout=30) == 0
        output = Path(log.name).read_text()
        assert "Stopping the web server, the task worker and the reaper" in output
        assert "Stopped reaping." in output
        assert not [pid for pid in children if _alive(pid)]
    finally:
        for pid in {launcher.pid, *children}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        launcher.wait()
        log.close()
