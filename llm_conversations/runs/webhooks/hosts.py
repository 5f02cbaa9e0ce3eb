"""Where a webhook may go: http(s) URLs, and hosts whose every address is public.

Endpoints are URLs users choose, so a webhook could be aimed at the server's
own network (server-side request forgery). :func:`host_problem` decides,
under ``WEBHOOK_ALLOWED_HOSTS``:

- ``None`` (the default): a host is reached only when every address it
  resolves to passes :func:`address_problem`: global (the ``ipaddress``
  module's ``is_global``) and not multicast; an IPv6 address that carries an
  IPv4 one (IPv4-mapped, IPv4-compatible, NAT64's ``64:ff9b::/96``) is judged
  by the IPv4 address it leads to; 6to4 (``2002::/16``, whose relay picks the
  host) and local-use NAT64 (``64:ff9b:1::/48``) are refused, on every Python
  version alike.
- a list of host names or addresses: exactly those hosts, private ones
  included. This is the one way to a receiver on a private network, loopback
  included (the test suite's receivers on 127.0.0.1 are allowed so).

The API checks an endpoint's URL when it is written and every attempt checks
it again before connecting (``runs/webhooks/delivery.py``).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from llm_conversations.conf import conf

__all__ = [
    "UNRESOLVED",
    "Resolve",
    "address_problem",
    "host_problem",
    "url_host",
    "url_problem",
]

Resolve = Callable[[str], list[str]]
"""Resolves a host name to its addresses (``socket.getaddrinfo`` by default)."""

UNRESOLVED = "the host does not resolve"
""":func:`host_problem`'s answer for a name without addresses."""

# IPv6 ranges that carry an IPv4 address in their last 32 bits.
_CARRIERS = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("::/96"))
# IPv6 ranges refused outright, whatever they carry: a relay or a local
# translator decides where they lead.
_REFUSED = {
    "6to4": ipaddress.ip_network("2002::/16"),
    "local-use NAT64": ipaddress.ip_network("64:ff9b:1::/48"),
}


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a webhook URL (not http(s), no host); ``None`` if it can."""
    if any(c.isspace() or not c.isprintable() for c in url):
        return "the URL holds spaces or control characters"
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # a malformed IPv6 host or port
        return "the URL cannot be read"
    if parts.scheme not in ("http", "https"):
        return "only http and https URLs are sent webhooks"
    if not host:
        return "the URL has no host"
    return None


def url_host(url: str) -> str:
    """The host of a URL :func:`url_problem` accepts."""
    return urlsplit(url).hostname or ""


def _refused_kind(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """What kind of address no webhook goes to ``ip`` is (``None``: a public one)."""
    if ip.is_multicast:
        return "multicast"
    if ip.is_global:
        return None
    for kind in ("loopback", "link_local", "unspecified", "private"):
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")
    return "reserved"


def address_problem(address: str) -> str | None:
    """Why a webhook may not connect to ``address`` (an IP address); ``None`` if it may."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return f"the host has an address that cannot be read ({address})"
    shown = str(ip)
    kind = _refused_kind(ip)
    if isinstance(ip, ipaddress.IPv6Address):
        carried = ip.ipv4_mapped
        # ::1 and :: are themselves, not IPv4-compatible addresses.
        own = ip.is_loopback or ip.is_unspecified
        if carried is None and not own and any(ip in network for network in _CARRIERS):
            carried = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if carried is not None:
            kind, shown = _refused_kind(carried), f"{carried}, inside {ip}"
        else:
            kind = next((k for k, net in _REFUSED.items() if ip in net), kind)
    if kind is None:
        return None
    article = "an" if kind[0] in "aeiou" else "a"
    return f"the host has {article} {kind} address ({shown}), not a public one"


def _resolve(host: str) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, None)]


def host_problem(host: str, *, resolve: Resolve = _resolve) -> str | None:
    """Why a webhook may not reach ``host`` under ``WEBHOOK_ALLOWED_HOSTS``; ``None`` if it may.

    Without a list, the host is resolved (``resolve``) and every address it
    has must pass :func:`address_problem`.
    """
    allowed = conf.WEBHOOK_ALLOWED_HOSTS
    if allowed is not None:
        names = {name.lower() for name in allowed}
        return None if host.lower() in names else "the host is not in WEBHOOK_ALLOWED_HOSTS"
    try:
        addresses = resolve(host)
    except (OSError, UnicodeError):
        return UNRESOLVED
    if not addresses:
        return UNRESOLVED
    for address in addresses:
        if (problem := address_problem(address)) is not None:
            return problem
    return None
