"""The reference MCP server (``@modelcontextprotocol/server-everything``) for the MCP tests.

It is installed from the npm registry at the exact version of
``tests/package-lock.json`` by ``npm ci --prefix tests`` (``make install`` runs
it where npm exists). Over stdio the app starts it for each exchange; over
Streamable HTTP the ``everything_url`` fixture serves it on a free
127.0.0.1 port for the module and stops it after.

Without node, the package or the ``mcp`` SDK, the tests that need them skip
locally with a reason that says what to install; under CI (``CI=true``) they
fail instead, so CI cannot pass without them.

Every test here ends by checking that it left no child process behind.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import pytest
from django.test import override_settings

from llm_conversations.tools.mcp_config import mcp_installed
from tests.browser.chromium import running_under_ci
from tests.support.node_scripts import INSTALL_HINT, NODE_MODULES

EVERYTHING = NODE_MODULES / "@modelcontextprotocol/server-everything/dist/index.js"


SDK_MISSING = "the mcp package is not installed (pip install -r requirements.txt)"


def missing_requirements(
    environ: Mapping[str, str],
    *,
    node: str | None,
    everything: Path,
    sdk: bool,
) -> tuple[Literal["run", "skip", "fail"], str]:
    """What a test that needs the reference server does: run, skip (locally) or fail (CI)."""
    problems = []
    if not sdk:
        problems.append(SDK_MISSING)
    if node is None:
        problems.append("node is not on PATH (Node 20 or later)")
    if not everything.exists():
        problems.append(f"{everything} is missing; {INSTALL_HINT}")
    if not problems:
        return "run", ""
    reason = "; ".join(problems)
    if running_under_ci(environ):
        return "fail", f"{reason}. CI=true: MCP tests may not be skipped."
    return "skip", f"{reason} (MCP tests skip without it; under CI=true they fail)"


def require_everything() -> str:
    """The path of ``node``, or skip or fail the test as :func:`missing_requirements` says."""
    node = shutil.which("node")
    action, reason = missing_requirements(
        os.environ, node=node, everything=EVERYTHING, sdk=mcp_installed()
    )
    if action == "fail":
        pytest.fail(reason)
    if action == "skip":
        pytest.skip(reason)
    assert node is not None
    return node


def sdk_module(name: str) -> ModuleType:
    """Import ``name``, a module that needs the SDK, for a test module; without the SDK
    the test module is skipped (under CI it fails to collect)."""
    if not mcp_installed():
        if running_under_ci(os.environ):
            pytest.fail(f"{SDK_MISSING}. CI=true: MCP tests may not be skipped.", pytrace=False)
        pytest.skip(f"{SDK_MISSING} (under CI=true: a failure)", allow_module_level=True)
    return importlib.import_module(name)


def children() -> set[int]:
    """The ids of this process's live child processes (zombies included), from /proc."""
    me = str(os.getpid())
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        if stat.rsplit(")", 1)[1].split()[1] == me:
            found.add(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def leaves_no_child_process() -> Iterator[None]:
    """Each test ends with every child process it started ended (and reaped).

    The module's HTTP server, set up before this fixture, is among ``before``.
    """
    before = children()
    yield
    assert children() - before == set(), "a child process was left running"


@pytest.fixture
def node() -> str:
    return require_everything()


def stdio_entry(node: str, **options: Any) -> dict[str, Any]:
    """An ``MCP_SERVERS`` entry that starts the reference server over stdio."""
    return {"COMMAND": node, "ARGS": [str(EVERYTHING), "stdio"], **options}


def mcp_settings(servers: dict[str, dict[str, Any]], **extra: Any) -> override_settings:
    """Test settings (the echo provider, no Python tools unless ``extra`` has some)."""
    return override_settings(
        LLM_CONVERSATIONS={
            "DEFAULT_PROVIDER": "echo",
            "PROVIDERS": {"echo": {"BACKEND": "echo", "MODEL": "echo"}},
            "MCP_SERVERS": servers,
            **extra,
        }
    )


def free_port() -> int:
    """A port nothing listens on now, on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def everything_over_http(node: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The reference server over Streamable HTTP on a free port: its URL and process."""
    port = free_port()
    server = subprocess.Popen(
        [node, str(EVERYTHING), "streamableHttp"],
        env={"PATH": os.environ.get("PATH", ""), "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server-everything did not listen on {port}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", server
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def everything_url() -> Iterator[str]:
    """The reference server over Streamable HTTP, for the module."""
    with everything_over_http(require_everything()) as (url, _):
        yield url
