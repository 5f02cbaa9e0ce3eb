"""The layer contracts of ``pyproject.toml`` hold, and they catch a broken layer.

``lint-imports`` (import-linter) checks them on the package; the same check on
a copy of the package with one import added shows that each contract fails
when the rule it states is broken.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(package_parent: Path, config: Path) -> subprocess.CompletedProcess[str]:
    """Run the contracts of ``config`` on the ``llm_conversations`` found in ``package_parent``."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)],
        capture_output=True,
        text=True,
        cwd=package_parent,
        # The copy comes first on the path, before the installed package.
        env={**os.environ, "PYTHONPATH": str(package_parent)},
        check=False,
        timeout=120,
    )


def test_the_package_keeps_every_contract() -> None:
    result = lint_imports(ROOT, ROOT / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 7 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("module", "added", "broken"),
    [
        # An upward import: the store reaching into the engine above it.
        (
            "conversations/store.py",
            "from llm_conversations.runs import service",
            "llm_conversations.conversations is not allowed to import llm_conversations.runs",
        ),
        # The tools and the providers side by side: neither imports the other.
        (
            "tools/mcp_config.py",
            "from llm_conversations.providers import registry",
            "llm_conversations.tools is not allowed to import llm_conversations.providers",
        ),
        # The pure core importing Django.
        (
            "core/messages.py",
            "import django.db",
            "llm_conversations.core is not allowed to import django",
        ),
        # The engine reaching up into the frameworks' integrations.
        (
            "runs/rounds.py",
            "from llm_conversations.frameworks import sessions",
            "llm_conversations.runs is not allowed to import llm_conversations.frameworks",
        ),
        # An optional framework imported outside its own module.
        (
            "conversations/store.py",
            "import pydantic_ai",
            "llm_conversations.conversations is not allowed to import pydantic_ai",
        ),
        (
            "frameworks/agents.py",
            "import langchain_core",
            "llm_conversations.frameworks.agents is not allowed to import langchain_core",
        ),
        # A cycle inside one folder: the lease module importing the service that uses it.
        (
            "runs/leases.py",
            "from llm_conversations.runs import service",
            "No cycles are allowed in llm_conversations.runs.",
        ),
    ],
)
def test_a_broken_rule_fails_its_contract(
    tmp_path: Path, module: str, added: str, broken: str
) -> None:
    shutil.copytree(
        ROOT / "llm_conversations",
        tmp_path / "llm_conversations",
        ignore=shutil.ignore_patterns("__pycache__", "static", "templates"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "llm_conversations" / module
    target.write_text(target.read_text() + f"\n{added}  # noqa\n")
    result = lint_imports(tmp_path, tmp_path / "pyproject.toml")
    assert result.returncode == 1, result.stdout + result.stderr
    assert broken in result.stdout
