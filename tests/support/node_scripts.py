"""A Node script of tests/node, read while it runs, and where its npm packages are.

The tests' npm packages have one root, tests/package.json (with its lock):
``npm ci --prefix tests`` (``make install``) puts them in :data:`NODE_MODULES`,
where Node finds them from the scripts of tests/node and the MCP tests find the
reference server.

Run with ``progress`` in its spec, a script prints ``{"progress": ...}`` lines
as its client gets a reply's text, then its result (JSON) as its last line, so a
test can act while the reply streams (let the model go on, check the run) and
check the result afterwards.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["INSTALL_HINT", "NODE_MODULES", "SCRIPTS", "NodeScript"]

TESTS = Path(__file__).resolve().parents[1]
NODE_MODULES = TESTS / "node_modules"
SCRIPTS = TESTS / "node"
INSTALL_HINT = "run `npm ci --prefix tests` (make install does where npm exists)"


class NodeScript:
    """``node script '<spec as JSON>'``, its output lines read as they come."""

    def __init__(self, node: str, script: Path, spec: dict[str, Any]) -> None:
        self.process = subprocess.Popen(
            [node, str(script), json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.progress: list[Any] = []
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _line(self, deadline: float) -> Any:
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError("the Node script printed nothing in time") from None
        if line is None:
            self.process.wait()
            assert self.process.stderr is not None
            raise AssertionError(f"the Node script ended early: {self.process.stderr.read()}")
        return json.loads(line)

    def wait_for(self, progress: Any, seconds: float = 10) -> None:
        """Read progress lines until one is ``progress``."""
        deadline = time.monotonic() + seconds
        while not self.progress or self.progress[-1] != progress:
            line = self._line(deadline)
            assert "progress" in line, f"the script ended before showing {progress!r}: {line}"
            self.progress.append(line["progress"])

    def result(self, seconds: float = 30) -> dict[str, Any]:
        """The script's output, once it ended (progress lines before it are kept)."""
        deadline = time.monotonic() + seconds
        while "progress" in (line := self._line(deadline)):
            self.progress.append(line["progress"])
        assert self.process.wait(max(0.0, deadline - time.monotonic())) == 0
        result: dict[str, Any] = line
        return result

    def __enter__(self) -> NodeScript:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
