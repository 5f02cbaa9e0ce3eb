"""The throttles of run starts (``RUN_RATE``) and of shared snapshots
(``SHARE_RATE``), per user, in Django's cache.

DRF's rate throttle keeps each user's recent request times in the default
cache. With several processes that cache must be shared (Redis, Memcached, the
database cache): a per-process ``LocMemCache`` counts each process apart.
"""

from __future__ import annotations

from rest_framework.throttling import UserRateThrottle

from llm_conversations.conf import conf

__all__ = ["RunStartThrottle", "ShareReadThrottle"]


class RunStartThrottle(UserRateThrottle):
    """Run starts and retries of one user (anonymous callers by address), at most
    ``RUN_RATE`` (DRF's ``"20/min"`` form); not throttled when it is ``None``."""

    scope = "llm_conversations_runs"

    def get_rate(self) -> str | None:
        return conf.RUN_RATE


class ShareReadThrottle(UserRateThrottle):
    """Reads and forks of shared snapshots by one user (anonymous readers by address),
    at most ``SHARE_RATE``; not throttled when it is ``None``."""

    scope = "llm_conversations_shares"

    def get_rate(self) -> str | None:
        return conf.SHARE_RATE
