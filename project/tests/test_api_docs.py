"""/api/docs/ in a real headless Chromium: Swagger UI from local files, no CDN."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "browser-pass"


def test_api_docs_list_the_operations_without_leaving_the_server(
    page: Any, live_server: Any
) -> None:
    get_user_model().objects.create_superuser("staff", "staff@example.com", PASSWORD)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{live_server.url}/admin/login/?next=/api/docs/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/api/docs/")

    operation = page.locator(".opblock", has_text="List conversations").first
    operation.wait_for(state="visible")
    assert "/api/conversations/" in operation.inner_text()
    assert page.locator(".opblock").count() >= 10
    page.wait_for_load_state("networkidle")

    server = urlsplit(live_server.url).netloc
    assert requested
    elsewhere = [
        url
        for url in requested
        if urlsplit(url).scheme not in {"data", "blob"} and urlsplit(url).netloc != server
    ]
    assert elsewhere == []
    assert any("/static/drf_spectacular_sidecar/swagger-ui-dist/" in url for url in requested)
