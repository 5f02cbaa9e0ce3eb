"""Tools the demo project offers the model.

They return made-up but stable data, so the demo works offline. Point
``LLM_CONVERSATIONS["TOOLS"]`` at them by dotted path, e.g.
``"project.tools.get_weather"``.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from llm_conversations.tools import tool

# Demo exchange rates against the US dollar; not real data.
RATES = {"USD": Decimal("1"), "EUR": Decimal("0.92"), "GBP": Decimal("0.79"), "JPY": Decimal("151")}

TOOL_PATHS = [
    "project.tools.get_weather",
    "project.tools.get_time",
    "project.tools.convert_currency",
    "project.tools.send_email",
]


@tool
def get_weather(city: str, unit: str = "celsius") -> dict[str, object]:
    """Current weather for a city (demo data, the same for a city every time)."""
    # A hash rather than randomness keeps the demo and its tests repeatable.
    seed = int(hashlib.sha256(city.strip().lower().encode()).hexdigest(), 16)
    celsius = seed % 30
    temperature = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32)
    conditions = ["sunny", "cloudy", "rain", "wind", "fog"][seed % 5]
    return {"city": city, "temperature": temperature, "unit": unit, "conditions": conditions}


@tool
def get_time(timezone: str = "UTC") -> str:
    """The current time in an IANA time zone such as Europe/Paris."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {timezone!r}") from None
    return datetime.now(UTC).astimezone(zone).isoformat(timespec="seconds")


@tool
def convert_currency(amount: float, to: str, from_currency: str = "USD") -> str:
    """Convert an amount between USD, EUR, GBP and JPY; other currencies fail."""
    source, target = from_currency.upper(), to.upper()
    for code in (source, target):
        if code not in RATES:
            raise ValueError(f"unknown currency {code!r}")
    converted = Decimal(str(amount)) / RATES[source] * RATES[target]
    return f"{converted.quantize(Decimal('0.01'))} {target}"


@tool(requires_approval=True)
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email (the run waits for an operator's approval; the demo sends nothing)."""
    return f"Email to {to} with subject {subject!r} accepted (demo: nothing was sent)."
