"""A fixed corpus of conversations for measuring token estimates (tests/core/test_tokens.py)."""

from __future__ import annotations

from llm_conversations.core.messages import ChatMessage
from llm_conversations.core.tool_calls import ToolCall

PROSE = (
    "The quarterly report shows revenue grew by 12% compared with last year, driven mostly "
    "by the new subscription tier. Costs rose more slowly, so the margin improved. Next "
    "quarter the team plans to expand into two new regions and hire support staff."
)
QUESTION = "Could you summarise the main risks in this plan, and suggest what to watch first?"
CODE = '''def fibonacci(n: int) -> list[int]:
    """Return the first n Fibonacci numbers."""
    numbers = [0, 1]
    while len(numbers) < n:
        numbers.append(numbers[-1] + numbers[-2])
    return numbers[:n]

for i, value in enumerate(fibonacci(10)):
    print(f"{i:>3}: {value}")
'''
CJK = "東京の天気は明日晴れの予報です。週末は雨が降るかもしれません。気温は二十度前後です。"
GERMAN = (
    "Die Übersetzung des Vertrags enthält mehrere Änderungen, über die wir nächste Woche "
    "sprechen müssen; bitte prüfen Sie die Fußnoten."
)
WEATHER = '{"city": "Paris", "temperature_c": 18.5, "conditions": "partly cloudy", "wind_kph": 12}'
LOG = (
    "2026-11-30T18:11:17Z INFO request id=7f3a2c method=GET path=/api/v1/items status=200 "
    "duration_ms=42\n2026-11-30T18:11:18Z WARN cache miss key=items:page:3"
)


def corpus() -> list[list[ChatMessage]]:
    """Conversations of different kinds of text, tool turns included."""
    calls = [
        ToolCall(f"call_{i:02d}", "get_weather", {"city": city, "unit": "celsius"})
        for i, city in enumerate(["Paris", "Berlin", "Tokyo", "Lima"])
    ]
    tools_turn = [
        ChatMessage.user("What is the weather in Paris, Berlin, Tokyo and Lima?"),
        ChatMessage.assistant_tool_calls(calls),
        *[
            ChatMessage.tool_result(c.id, WEATHER.replace("Paris", c.arguments["city"]))
            for c in calls
        ],
        ChatMessage.assistant("Paris is partly cloudy at 18.5 °C; the others are similar."),
    ]
    return [
        [
            ChatMessage.system("You are a concise assistant."),
            ChatMessage.user(PROSE + " " + QUESTION),
            ChatMessage.assistant(PROSE * 2),
        ],
        [
            ChatMessage.user("Explain this code:\n" + CODE),
            ChatMessage.assistant(CODE + "\n" + PROSE),
        ],
        [ChatMessage.user(CJK * 3), ChatMessage.assistant(CJK * 2)],
        [ChatMessage.user(GERMAN * 2), ChatMessage.assistant(GERMAN)],
        [ChatMessage.user("What went wrong here?\n" + LOG * 3), ChatMessage.assistant(PROSE)],
        tools_turn,
        [ChatMessage.user(QUESTION)] + tools_turn * 3,
    ]
