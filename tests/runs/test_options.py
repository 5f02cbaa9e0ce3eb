"""``RunOptions`` names exactly what ``ToolLoopService.start`` takes by keyword (but ``claim``,
which only the service itself passes), so the functions typed with it pass on every option,
and ``StartRequest`` carries each of them."""

from __future__ import annotations

import dataclasses
import inspect

from llm_conversations.core.parameters import PARAMETER_NAMES
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.forks import edit_message, regenerate
from llm_conversations.runs.options import RunOptions
from llm_conversations.runs.starts import StartRequest


def test_run_options_are_the_keyword_arguments_of_start() -> None:
    signature = inspect.signature(ToolLoopService.start)
    keywords = {
        name
        for name, parameter in signature.parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert keywords == {"claim"}
    # Every option, the run parameters included, comes in through start's **options.
    assert signature.parameters["options"].annotation == "Unpack[RunOptions]"
    assert set(PARAMETER_NAMES) <= set(RunOptions.__optional_keys__)
    assert RunOptions.__required_keys__ == frozenset()


def test_a_start_request_holds_every_option() -> None:
    """``StartRequest`` has a field for each option (the run parameters in one), so
    ``StartRequest.of`` carries every option ``start`` takes."""
    fields = {field.name for field in dataclasses.fields(StartRequest)}
    own = set(RunOptions.__optional_keys__) - set(PARAMETER_NAMES)
    assert fields == own | {"conversation", "message", "claim", "parameters"}
    request = StartRequest.of(
        "c", "hi", {"provider": "echo", "background": True, "temperature": 0.5}, claim=True
    )
    assert (request.provider, request.background, request.claim) == ("echo", True, True)
    assert request.parameters == {"temperature": 0.5}
    # A name that is no option is a run parameter, refused (and named) as one.
    assert StartRequest.of("c", "hi", {"temprature": 1}).parameters == {"temprature": 1}  # type: ignore[typeddict-unknown-key]


def test_the_functions_that_pass_options_on_take_them_typed() -> None:
    for function in (ToolLoopService.send, edit_message, regenerate):
        options = inspect.signature(function).parameters["options"]
        assert options.kind is inspect.Parameter.VAR_KEYWORD
        assert options.annotation == "Unpack[RunOptions]", function
