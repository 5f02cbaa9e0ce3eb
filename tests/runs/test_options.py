"""``RunOptions`` names exactly what ``ToolLoopService.start`` takes by keyword (but ``claim``,
which only the service itself passes), so the functions typed with it pass on every option."""

from __future__ import annotations

import inspect

from llm_conversations.core.parameters import PARAMETER_NAMES
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.forks import edit_message, regenerate
from llm_conversations.runs.options import RunOptions


def test_run_options_are_the_keyword_arguments_of_start() -> None:
    signature = inspect.signature(ToolLoopService.start)
    keywords = {
        name
        for name, parameter in signature.parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    own = set(RunOptions.__optional_keys__) - set(PARAMETER_NAMES)
    assert own == keywords - {"claim"}
    # The run parameters come in through start's **parameters, all of them optional.
    assert signature.parameters["parameters"].annotation == "Unpack[RunParameterInput]"
    assert set(PARAMETER_NAMES) <= set(RunOptions.__optional_keys__)
    assert RunOptions.__required_keys__ == frozenset()


def test_the_functions_that_pass_options_on_take_them_typed() -> None:
    for function in (ToolLoopService.send, edit_message, regenerate):
        options = inspect.signature(function).parameters["options"]
        assert options.kind is inspect.Parameter.VAR_KEYWORD
        assert options.annotation == "Unpack[RunOptions]", function
