"""The chat page's run settings panel, without a browser (test_chat_page.py drives it in one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

SCRIPT = Path(settings.BASE_DIR) / "project" / "static" / "project" / "chat.js"


@pytest.mark.django_db
def test_chat_page_serves_the_settings_panel(client: Client) -> None:
    user: Any = get_user_model().objects.create_user("reader", password="pw")
    client.force_login(user)
    html = client.get("/").content.decode()
    for control in ("provider", "model", "instructions", "temperature", "structured"):
        assert f'id="{control}"' in html
    script = SCRIPT.read_text()
    # The panel is filled from GET providers/ and sends what it sets with each run.
    assert 'api("/providers/")' in script
    assert "...runOptions()" in script
    assert "options.response_format = ANSWER_SCHEMA" in script


@pytest.mark.django_db
def test_the_panel_reads_providers_from_the_api(client: Client) -> None:
    user: Any = get_user_model().objects.create_user("reader", password="pw")
    client.force_login(user)
    (echo,) = client.get("/api/providers/").json()
    assert (echo["name"], echo["default"], echo["models"]) == ("echo", True, ["echo"])
    assert echo["parameters"]["response_format"] is True
    assert "temperature" in echo["parameters"]["sampling"]


@pytest.mark.django_db
def test_the_composer_chooses_what_a_message_sent_while_busy_does(client: Client) -> None:
    user: Any = get_user_model().objects.create_user("reader", password="pw")
    client.force_login(user)
    html = client.get("/").content.decode()
    assert 'id="if-busy"' in html
    for strategy in ("reject", "enqueue", "interrupt", "rollback"):
        assert f'<option value="{strategy}">' in html
    script = SCRIPT.read_text()
    assert 'options.if_busy = $("if-busy").value' in script
