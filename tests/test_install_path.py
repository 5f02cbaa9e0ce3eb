"""The README's install path as a newcomer takes it: a project made by ``django-admin
startproject``, the README's settings and URLconf snippets pasted in (read from
README.md here, never copied), then ``manage.py`` in a subprocess.

Pasting extends what the project already has, as the snippets' ``# ...`` says: the
snippet's ``INSTALLED_APPS`` and ``urlpatterns`` are added to the project's lists;
every other statement is appended as written.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.test_docs import ROOT, fenced_blocks

README = ROOT / "README.md"
SECTION = "## Install into your project"
EXTENDED = {"INSTALLED_APPS", "urlpatterns"}
PROJECT = "newsite"


def install_blocks() -> list[str]:
    """The python blocks of the README's install section, in order."""
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    first = text[:start].count("\n") + 1
    last = text[:end].count("\n") + 1
    return [
        block.source
        for block in fenced_blocks(README)
        if block.language == "python" and first <= block.line <= last
    ]


def pasted(source: str) -> str:
    """``source`` as pasted into an existing module: the lists it names are extended."""
    statements = []
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in EXTENDED
        ):
            statements.append(
                ast.unparse(ast.AugAssign(target=node.targets[0], op=ast.Add(), value=node.value))
            )
        else:
            segment = ast.get_source_segment(source, node)
            assert segment is not None
            statements.append(segment)
    return "\n".join(statements) + "\n"


def target(source: str) -> str:
    """Where a snippet goes: the URLconf if it sets ``urlpatterns``, else the settings."""
    names = {
        t.id
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    return "urls.py" if "urlpatterns" in names else "settings.py"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fresh")
    subprocess.run(
        [sys.executable, "-m", "django", "startproject", PROJECT, str(root)],
        check=True,
        capture_output=True,
        env=without_settings(),
    )
    blocks = install_blocks()
    assert {target(block) for block in blocks} == {"settings.py", "urls.py"}
    for block in blocks:
        with (root / PROJECT / target(block)).open("a", encoding="utf-8") as module:
            module.write("\n" + pasted(block))
    return root


def without_settings(**extra: str) -> dict[str, str]:
    """This process's environment without Django's variables (its settings module,
    ``DJANGO_ALLOW_ASYNC_UNSAFE`` that other tests set), the API key and the suite's
    database URL (the fresh project has its own), plus ``extra``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("DJANGO_") and name not in {"OPENAI_API_KEY", "DATABASE_URL"}
    }
    return {**env, **extra}


def manage(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=project,
        env=without_settings(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_snippets_pasted_into_a_fresh_project_pass_check_deploy(project: Path) -> None:
    checked = manage(project, "check", "--deploy", OPENAI_API_KEY="sk-placeholder")
    # Django's own deployment warnings of a fresh project (DEBUG, SECRET_KEY, HTTPS)
    # are the project's to settle, and so is Django 6.1's error for the development
    # mail backend its startproject configures; the app and drf-spectacular report nothing.
    errors = set(re.findall(r"\((\w+\.E\d+)\)", checked.stderr))
    assert errors <= {"mail.E001"}, checked.stderr
    assert checked.returncode == (1 if errors else 0), checked.stderr
    assert "llm_conversations." not in checked.stderr
    assert "drf_spectacular." not in checked.stderr


def test_without_the_api_key_the_apps_own_check_speaks(project: Path) -> None:
    checked = manage(project, "check", "--deploy")
    assert checked.returncode == 1
    assert "Traceback" not in checked.stderr, checked.stderr
    assert "(llm_conversations.E014)" in checked.stderr
    assert "has no API_KEY" in checked.stderr


def test_check_with_the_apps_tag_runs_only_the_apps_checks(project: Path) -> None:
    assert manage(project, "check", "--tag", "llm_conversations").returncode == 1
    checked = manage(project, "check", "--tag", "llm_conversations", OPENAI_API_KEY="sk-x")
    assert (checked.returncode, checked.stdout.strip()) == (
        0,
        "System check identified no issues (0 silenced).",
    )


def test_llm_worker_without_the_tasks_db_extra_says_what_to_install(project: Path) -> None:
    worker = manage(project, "llm_worker", "--concurrency", "2", OPENAI_API_KEY="sk-x")
    assert worker.returncode == 1
    assert "Traceback" not in worker.stderr, worker.stderr
    assert "llm-conversations[tasks-db]" in worker.stderr
    assert '"django_tasks_db" to INSTALLED_APPS' in worker.stderr


def test_the_readme_names_every_extra() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index(SECTION) : text.index("\n## ", text.index(SECTION) + 1)]
    named = section[section.index("Optional extras:") :]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extras
    for extra in extras:
        assert f"`{extra}`" in named, extra


ID = re.compile(r"\b([EW])(\d{3})\b")
# Two ids joined by an en dash (U+2013) name every id between them.
RANGE = re.compile("`([EW])(\\d{3})`\u2013`[EW](\\d{3})`")


def test_the_readme_lists_every_check_id_and_no_other() -> None:
    from tests.checks.broken import BROKEN, BROKEN_PROJECT

    text = README.read_text(encoding="utf-8")
    start = text.index("System checks (all in")
    listed = text[start : text.index("\n\n", start)]
    ids = {f"{kind}{number}" for kind, number in ID.findall(listed)}
    for kind, first, last in RANGE.findall(listed):
        ids |= {f"{kind}{n:03d}" for n in range(int(first), int(last) + 1)}
    in_code = {
        check_id.removeprefix("llm_conversations.") for check_id in [*BROKEN, *BROKEN_PROJECT]
    }
    assert ids == in_code
