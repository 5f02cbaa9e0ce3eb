"""The demo's settings: DEBUG off by default, static files served by whitenoise."""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client, override_settings

SETTINGS_FILE = Path(settings.BASE_DIR) / "project" / "settings.py"


@pytest.mark.parametrize(
    ("value", "debug"),
    [(None, False), ("0", False), ("", False), ("1", True), ("true", True)],
)
def test_debug_is_off_unless_django_debug_is_set(
    monkeypatch: pytest.MonkeyPatch, value: str | None, debug: bool
) -> None:
    if value is None:
        monkeypatch.delenv("DJANGO_DEBUG", raising=False)
    else:
        monkeypatch.setenv("DJANGO_DEBUG", value)
    assert runpy.run_path(str(SETTINGS_FILE))["DEBUG"] is debug


def test_whitenoise_comes_right_after_the_security_middleware() -> None:
    assert settings.MIDDLEWARE[:2] == [
        "django.middleware.security.SecurityMiddleware",
        "whitenoise.middleware.WhiteNoiseMiddleware",
    ]


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``collectstatic`` into a temporary STATIC_ROOT, as before starting gunicorn."""
    root = tmp_path_factory.mktemp("staticfiles")
    with override_settings(STATIC_ROOT=root):
        call_command("collectstatic", interactive=False, verbosity=0)
    return root


@pytest.fixture
def production_client(collected: Path) -> Any:
    """A client whose middleware (whitenoise included) is built with DEBUG off."""
    with override_settings(DEBUG=False, STATIC_ROOT=collected):
        assert not settings.DEBUG
        yield Client()


def test_admin_css_is_served_with_debug_off(production_client: Client) -> None:
    response = production_client.get("/static/admin/css/base.css")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/css")
    assert b"".join(response.streaming_content)  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_chat_page_script_and_styles_are_served_with_debug_off(
    production_client: Client,
) -> None:
    user = get_user_model().objects.create_user("reader", password="pw")
    production_client.force_login(user)
    page = production_client.get("/")
    assert page.status_code == 200
    html = page.content.decode()
    script = re.search(r'<script src="([^"]+)"', html)
    style = re.search(r'<link rel="stylesheet" href="([^"]+)"', html)
    assert script is not None
    assert style is not None
    assert script.group(1) == "/static/project/chat.js"

    js = production_client.get(script.group(1))
    assert js.status_code == 200
    assert js["Content-Type"].split(";")[0] in {"text/javascript", "application/javascript"}
    source = Path(settings.BASE_DIR) / "project" / "static" / "project" / "chat.js"
    assert b"".join(js.streaming_content) == source.read_bytes()  # type: ignore[attr-defined]

    css = production_client.get(style.group(1))
    assert css.status_code == 200
    assert css["Content-Type"].startswith("text/css")


def test_swagger_ui_assets_are_served_locally(production_client: Client) -> None:
    response = production_client.get(
        "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"
    )
    assert response.status_code == 200
