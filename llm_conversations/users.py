"""The types of the users the app is given, for annotations.

``User`` is an instance of the project's user model (``AUTH_USER_MODEL``):
django-stubs' mypy plugin resolves it to that model, so a project with a
custom user model sees its own class in the app's signatures (``ToolContext.user``,
``create_conversation(owner=...)``); without the plugin it is ``AbstractBaseUser``.
``AnyUser`` is what ``request.user`` may be: a ``User`` or ``AnonymousUser``.

Both are names for type checkers only: their targets exist in django-stubs,
not at run time, and this module imports nothing from Django, so it can be
imported before the app registry is ready.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    # django-stubs' alias of AUTH_USER_MODEL, the one its own login() and
    # DRF's Request.user use; it is defined in the stubs only.
    from django.contrib.auth.models import AnonymousUser, _User

__all__ = ["AnyUser", "User"]

User: TypeAlias = "_User"
AnyUser: TypeAlias = "_User | AnonymousUser"
