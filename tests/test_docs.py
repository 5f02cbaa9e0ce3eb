"""Every ```python example of README.md and docs/*.md runs, so the docs cannot drift.

The blocks of one file run in document order in one namespace, so a later block
may use names an earlier one defined, in a database test on the app's test
settings (the echo provider, the tools of ``tests.support.loop_tools``). Before the
first block the namespace holds only ``request``: a request whose ``user`` is a
saved user, as a view would have.

A block that assigns an upper-case name (``INSTALLED_APPS``,
``LLM_CONVERSATIONS``, ...) is a settings excerpt: it runs on its own as plain
assignments, with placeholder API keys in the environment, and the
``LLM_CONVERSATIONS`` it builds must pass the app's system checks
(``llm_conversations.checks``).

Other fences are not run: ```json, ```js, ```sh and plain ``` blocks, and
```python-settings, kept for the few examples that cannot run here (the docs
source says why in an HTML comment above each one). The README's quickstart is
checked to be exactly ``make run`` and ``make test``.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.checks import ERROR, CheckMessage
from django.test import RequestFactory, override_settings

import llm_conversations
from llm_conversations.checks import (
    check_attachments,
    check_mcp_servers,
    check_providers,
    check_run_limits,
    check_settings,
    check_share_links,
    check_tools,
    check_trash,
    check_webhooks,
)
from llm_conversations.core.model_info import DEFAULT_MODEL_INFO
from llm_conversations.models.run_states import RUN_MOVES, RunStatus

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
# Environment variables the settings examples read their keys from.
# "python" blocks run; the others are data, shell sessions, output or diagrams.
# (a "mermaid" diagram is checked against the code it draws: test_the_tour_draws_every_move...)
LANGUAGES = {"python", "python-settings", "json", "js", "sh", "console", "bash", "text", "mermaid"}
PLACEHOLDER_KEYS = (
    "OPENAI_API_KEY",
    "GROQ_API_KEY",
    "ANTHROPIC_API_KEY",
    "DEEPSEEK_API_KEY",
    "GEMINI_API_KEY",
    # Named by the MCP servers' HEADERS and ENV in docs/mcp.md.
    "DOCS_MCP_AUTHORIZATION",
    "GITHUB_TOKEN",
)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # the line of the opening fence, 1-based
    language: str
    source: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    blocks: list[Block] = []
    opened: tuple[int, str] | None = None
    body: list[str] = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = FENCE.match(text)
        if opened is None:
            if match:
                opened, body = (number, match.group(1)), []
        elif text.strip() == "```":
            blocks.append(Block(path, opened[0], opened[1], "\n".join(body) + "\n"))
            opened = None
        else:
            body.append(text)
    assert opened is None, f"{path}: the fence opened on line {opened[0]} is never closed"
    return blocks


def python_blocks(path: Path) -> list[Block]:
    return [block for block in fenced_blocks(path) if block.language == "python"]


def is_settings(block: Block) -> bool:
    """A settings excerpt assigns at least one upper-case name at the top level."""
    for node in ast.parse(block.source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id.isupper() for t in targets):
                return True
    return False


def run(block: Block, namespace: dict[str, Any]) -> None:
    # Padding keeps the document's line numbers in tracebacks.
    code = compile("\n" * block.line + block.source, block.where, "exec")
    exec(code, namespace)


def app_check_errors(llm_conversations: Any) -> list[CheckMessage]:
    with override_settings(LLM_CONVERSATIONS=llm_conversations):
        messages = [
            *check_settings(),
            *check_providers(),
            *check_tools(),
            *check_mcp_servers(),
            *check_run_limits(),
            *check_attachments(),
            *check_webhooks(),
            *check_share_links(),
            *check_trash(),
        ]
    return [message for message in messages if message.level >= ERROR]


def run_settings(block: Block) -> None:
    namespace: dict[str, Any] = {"__name__": "settings"}
    run(block, namespace)
    if "INSTALLED_APPS" in namespace:
        assert "llm_conversations" in namespace["INSTALLED_APPS"], block.where
    if "LLM_CONVERSATIONS" in namespace:
        assert app_check_errors(namespace["LLM_CONVERSATIONS"]) == [], block.where


@pytest.fixture
def placeholder_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PLACEHOLDER_KEYS:
        monkeypatch.setenv(name, f"placeholder-{name.lower()}")


@pytest.fixture
def restore_admin() -> Any:
    registry = dict(admin.site._registry)
    yield
    admin.site._registry.clear()
    admin.site._registry.update(registry)


@pytest.mark.django_db
@pytest.mark.usefixtures("placeholder_keys", "restore_admin")
@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: path.name)
def test_python_examples_run(path: Path) -> None:
    request = RequestFactory().get("/")
    request.user = get_user_model().objects.create_user("reader")
    namespace: dict[str, Any] = {"__name__": "docs_example", "request": request}
    for block in python_blocks(path):
        if is_settings(block):
            run_settings(block)
        else:
            run(block, namespace)


def test_every_document_has_a_python_example() -> None:
    """Guards the extraction itself: a changed fence syntax would run nothing."""
    assert python_blocks(ROOT / "README.md")
    assert sum(len(python_blocks(path)) for path in DOCUMENTS) >= 20


def test_settings_check_fails_on_a_broken_example() -> None:
    """The check the settings examples pass is not vacuous."""
    errors = app_check_errors({"PROVIDERS": {"x": {"BACKEND": "openai"}}, "DEFAULT_PROVIDER": "y"})
    assert {error.id for error in errors} >= {
        "llm_conversations.E013",
        "llm_conversations.E015",
    }


def test_every_fence_names_a_known_language() -> None:
    """A bare fence could hide an example; an exception must say why it is not run."""
    for path in DOCUMENTS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for block in fenced_blocks(path):
            assert block.language in LANGUAGES, block.where
            if block.language == "python-settings":
                assert lines[block.line - 2].rstrip().endswith("-->"), (
                    f"{block.where}: say in an HTML comment above it why it is not run"
                )


# The hosted models' names (OpenAI, Anthropic, Google); local and other servers' models
# have no list price the app could ship.
HOSTED_MODEL = re.compile(r"(gpt|claude|gemini)-[\w.-]+")
NAMED_MODELS = re.compile(r'"MODELS?": *(\[[^]]*\]|"[^"]*")')


def test_every_hosted_model_the_docs_configure_has_shipped_prices() -> None:
    """A newcomer who copies an example sees what its runs cost, not ``null``."""
    named = {
        model
        for path in DOCUMENTS
        for value in NAMED_MODELS.findall(path.read_text(encoding="utf-8"))
        for model in re.findall(r'"([^"]+)"', value)
        if HOSTED_MODEL.fullmatch(model)
    }
    assert {"gpt-5", "gpt-5-mini", "gpt-4.1", "gpt-4o-mini"} <= named
    unpriced = sorted(m for m in named if (DEFAULT_MODEL_INFO.get(m) or {}).get("prices") is None)
    assert unpriced == []


def test_readme_quickstart_is_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    quickstart = [
        block
        for block in fenced_blocks(ROOT / "README.md")
        if block.language in {"sh", "console", "bash", "shell"} and block.source in section
    ]
    assert len(quickstart) == 1
    commands = [
        line.split("#", 1)[0].strip().removeprefix("$ ")
        for line in quickstart[0].source.splitlines()
        if line.split("#", 1)[0].strip()
    ]
    assert commands == ["make run", "make test"]


TOUR = ROOT / "docs" / "tour.md"
MOVE = re.compile(r"^\s*(\[\*\]|\w+) --> (\[\*\]|\w+)(?:: (.+))?$")
OWNER = re.compile(r"\b(\w+)\.([a-z_]+)\b")


def test_the_tour_draws_every_move_of_a_run_and_no_other() -> None:
    """The diagram of docs/tour.md is RUN_MOVES, each move labelled with functions that exist."""
    (diagram,) = [block for block in fenced_blocks(TOUR) if block.language == "mermaid"]
    moves: set[tuple[RunStatus, RunStatus]] = set()
    starts: set[RunStatus] = set()
    for line in diagram.source.splitlines()[1:]:
        match = MOVE.match(line)
        assert match, f"{diagram.where}: not a move: {line!r}"
        source, target, label = match.groups()
        if target == "[*]":
            assert RunStatus(source).moves == frozenset(), line
            continue
        owners = OWNER.findall(label or "")
        assert owners, f"{diagram.where}: the move {line.strip()!r} names no owner"
        for name, function in owners:
            # A module of runs/ and its function, or a class runs/ exports and its method.
            owner = (
                getattr(importlib.import_module("llm_conversations.runs"), name)
                if name[0].isupper()
                else importlib.import_module(f"llm_conversations.runs.{name}")
            )
            assert callable(getattr(owner, function, None)), f"{name}.{function}"
        if source == "[*]":
            starts.add(RunStatus(target))
        else:
            moves.add((RunStatus(source), RunStatus(target)))
    assert moves == {(a, b) for a, reachable in RUN_MOVES.items() for b in reachable}
    assert starts == {RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING}


def test_every_module_the_tour_names_exists() -> None:
    named = re.findall(r"`(llm_conversations/[\w/]+(?:\.py|/))`", TOUR.read_text(encoding="utf-8"))
    assert len(named) >= 15
    assert [path for path in named if not (ROOT / path).exists()] == []


def test_every_document_is_listed_in_the_index() -> None:
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\]\(([\w-]+\.md)\)", index))
    assert {path.name for path in DOCUMENTS if path.parent.name == "docs"} - {"index.md"} == listed


def nav_pages(entries: list[Any]) -> list[str]:
    """The pages of a MkDocs ``nav``, its sections flattened, in order."""
    pages: list[str] = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages.extend(nav_pages(value) if isinstance(value, list) else [value])
    return pages


def test_the_sites_nav_lists_every_document_once() -> None:
    # `make docs` (mkdocs build --strict) warns of a page left out of the nav, but a
    # page listed twice passes it.
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = nav_pages(config["nav"])
    assert len(pages) == len(set(pages))
    assert set(pages) == {path.name for path in DOCUMENTS if path.parent.name == "docs"}


def test_the_changelog_releases_the_packages_version() -> None:
    # Keep a Changelog: an "Unreleased" section first, then the releases, newest
    # first, each dated, in its four categories at most.
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", changelog, flags=re.MULTILINE)
    assert sections[0] == "[Unreleased]"
    assert re.fullmatch(r"\[(\S+)\] - \d{4}-\d{2}-\d{2}", sections[1])
    assert sections[1].startswith(f"[{llm_conversations.__version__}] ")
    categories = set(re.findall(r"^### (.+)$", changelog, flags=re.MULTILINE))
    assert categories <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
