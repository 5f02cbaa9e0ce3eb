"""Permission and authentication classes of the API, read from settings on each request.

``LLM_CONVERSATIONS["PERMISSION_CLASSES"]`` (default: authenticated users only)
and ``LLM_CONVERSATIONS["AUTHENTICATION_CLASSES"]`` (default: DRF's
``DEFAULT_AUTHENTICATION_CLASSES``) are lists of dotted paths. Authorisation
of single objects is not a permission class: querysets are scoped to
``request.user``, so another user's objects do not exist (404) for the caller.
"""

from __future__ import annotations

from typing import cast

from django.utils.module_loading import import_string
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.settings import api_settings

from llm_conversations.conf import conf

__all__ = ["authentication_classes", "permission_classes"]


def permission_classes() -> list[type[BasePermission]]:
    """The permission classes named by ``PERMISSION_CLASSES``."""
    return [import_string(path) for path in conf.PERMISSION_CLASSES]


def authentication_classes() -> list[type[BaseAuthentication]]:
    """The classes named by ``AUTHENTICATION_CLASSES``, or DRF's defaults when unset."""
    paths = conf.AUTHENTICATION_CLASSES
    if paths is None:
        return cast(
            list[type[BaseAuthentication]], list(api_settings.DEFAULT_AUTHENTICATION_CLASSES)
        )
    return [import_string(path) for path in paths]
