"""``manage.py chat``: a conversation in the terminal, every turn stored.

Each line read from stdin is sent through ``ToolLoopService``; the reply, tool
calls and tool results are printed as the loop's events arrive. When a run
pauses, each call is decided on stdin (approve or deny, or an output typed for
a client-side tool). EOF or ``/quit`` ends the chat.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, cast

from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from llm_conversations.conf import conf
from llm_conversations.conversations import create_conversation
from llm_conversations.conversations.history import stored_message
from llm_conversations.core.messages import ChatMessage, InvalidMessage, ToolCall
from llm_conversations.core.model_info import cost_shown
from llm_conversations.core.parameters import REASONING_EFFORTS, RunParameterInput, RunParameters
from llm_conversations.exceptions import (
    ConversationBusy,
    ParameterError,
    RunNotPermitted,
    RunStateError,
    TooManyActiveRuns,
)
from llm_conversations.models import (
    Conversation,
    Message,
    Run,
    RunStatus,
    TerminationReason,
    WaitReason,
)
from llm_conversations.providers import get_provider
from llm_conversations.runs import ToolLoopService
from llm_conversations.runs.events import (
    MessageStored,
    RunCompleted,
    RunFailed,
    RunRequiresAction,
    TextDelta,
    ToolResultStored,
)
from llm_conversations.tools import ToolError

QUIT_COMMANDS = {"/quit", "/exit"}
APPROVE = {"y", "yes", "a", "approve"}
DENY = {"n", "no", "d", "deny"}
# Long tool results are cut on screen only; the stored turn is complete.
RESULT_PREVIEW_CHARS = 500


def _preview(text: str) -> str:
    return text if len(text) <= RESULT_PREVIEW_CHARS else text[:RESULT_PREVIEW_CHARS] + "..."


@contextmanager
def _quiet_app_logs(verbosity: int) -> Iterator[None]:
    """The app's INFO lines (a run claimed, ...) kept out of the transcript unless
    ``--verbosity 2`` or more asks for them; warnings and errors still show."""
    app = logging.getLogger("llm_conversations")
    level = app.level
    if verbosity < 2:
        app.setLevel(max(logging.WARNING, level))
    try:
        yield
    finally:
        app.setLevel(level)


class Command(BaseCommand):
    """Chat with the configured provider and tools; every turn is stored."""

    help = (
        "Chat in the terminal with the configured provider and tools, storing every turn. "
        "End with /quit or EOF (Ctrl-D). The app's INFO log lines show with -v 2."
    )
    # call_command(..., stdin=StringIO(...)) feeds the lines in tests.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--conversation", metavar="ID", help="Continue this conversation instead of a new one."
        )
        parser.add_argument(
            "--user",
            metavar="USERNAME",
            help="Chat as this user: new conversations are theirs, and RUN_POLICY and "
            "MAX_ACTIVE_RUNS_PER_USER apply to their runs. Required for a new conversation; "
            "with --conversation the default is its owner.",
        )
        parser.add_argument(
            "--provider",
            metavar="NAME",
            help="A name of LLM_CONVERSATIONS['PROVIDERS'] (default: DEFAULT_PROVIDER).",
        )
        run = parser.add_argument_group("run parameters (each run of the chat uses them)")
        run.add_argument("--model", help="One of the provider entry's models (MODEL, MODELS).")
        run.add_argument("--instructions", help="A system prompt sent first, not stored.")
        run.add_argument("--temperature", type=float)
        run.add_argument("--max-output-tokens", type=int, metavar="N")
        run.add_argument("--reasoning-effort", choices=REASONING_EFFORTS)
        run.add_argument(
            "--response-format",
            metavar="FILE",
            help="A JSON Schema file: answers must match it; the parsed value is printed.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.input: IO[str] = options.get("stdin") or sys.stdin
        # Piped input is not echoed by a terminal, so print it to keep the transcript readable.
        self.echo_input = not (hasattr(self.input, "isatty") and self.input.isatty())
        self.call_names: dict[str, str] = {}
        name = options.get("provider")
        self.user = self.find_user(options.get("user"))
        try:
            provider = get_provider(name)
            service = ToolLoopService(name)
            tool_names = service.default_tools()
            self.parameters = self.run_parameters(options)
            provider.check_parameters(
                RunParameters.from_input(self.parameters), name=name, tools=tool_names
            )
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        except ParameterError as exc:
            flag = (exc.field or "").split(".")[0].split("[")[0].replace("_", "-")
            raise CommandError(f"--{flag}: {exc.message}") from None
        ref = options.get("conversation")
        if ref is None and self.user is None:
            # An ownerless conversation is invisible in the API and the demo.
            raise CommandError(
                "--user is required for a new conversation: it is that user's, "
                "and shows in their API and the demo."
            )
        conversation = self.conversation(ref)
        if self.user is None:
            self.user = conversation.owner
        elif conversation.owner_id != self.user.pk:
            raise CommandError(f"Conversation {conversation.pk} is not {self.user}'s.")
        model = self.parameters.get("model") or provider.model
        self.stdout.write(
            f"Provider: {name or conf.DEFAULT_PROVIDER} ({provider.backend}, model {model}); "
            f"tools: {', '.join(tool_names) or 'none'}.\n"
            "Type a message; /quit or EOF ends."
        )
        try:
            with _quiet_app_logs(options.get("verbosity", 1)):
                self.resume_waiting(service, conversation)
                self.loop(service, conversation)
        except KeyboardInterrupt:
            self.stdout.write("")
        conversation.refresh_from_db(fields=["message_count"])
        self.stdout.write(
            f"Conversation {conversation.pk}: {conversation.message_count} message(s) stored."
        )

    # Setup -----------------------------------------------------------------

    def run_parameters(self, options: dict[str, Any]) -> RunParameterInput:
        """The run parameters the flags set; a schema file is read here."""
        chosen: dict[str, Any] = {
            key: options[key]
            for key in ("model", "instructions", "temperature", "max_output_tokens")
            if options.get(key) is not None
        }
        if options.get("reasoning_effort"):
            chosen["reasoning_effort"] = options["reasoning_effort"]
        path = options.get("response_format")
        if path:
            try:
                chosen["response_format"] = json.loads(Path(path).read_text())
            except (OSError, ValueError) as exc:
                raise CommandError(f"--response-format: cannot read {path}: {exc}") from None
        return cast(RunParameterInput, chosen)

    def find_user(self, username: str | None) -> Any:
        """The user named by ``--user``, or ``None``."""
        if username is None:
            return None
        users = get_user_model()._default_manager
        try:
            return users.get_by_natural_key(username)
        except users.model.DoesNotExist:
            raise CommandError(f"No user {username!r}.") from None

    def conversation(self, ref: str | None) -> Conversation:
        """The conversation to continue, or a new one whose id is printed."""
        if ref is None:
            conversation = create_conversation(owner=self.user, title="Terminal chat")
            self.stdout.write(f"New conversation {conversation.pk}")
            return conversation
        try:
            conversation = Conversation.objects.get(pk=uuid.UUID(ref))
        except (ValueError, Conversation.DoesNotExist):
            raise CommandError(f"No conversation with id {ref!r}.") from None
        self.stdout.write(
            f"Continuing conversation {conversation.pk} "
            f"({conversation.message_count} message(s) stored)"
        )
        return conversation

    def resume_waiting(self, service: ToolLoopService, conversation: Conversation) -> None:
        """Finish a run this conversation left paused or queued before reading new lines."""
        run = (
            Run.objects.filter(
                conversation=conversation, status__in=[RunStatus.REQUIRES_ACTION, RunStatus.QUEUED]
            )
            .order_by("-created_at")
            .first()
        )
        if run is None:
            return
        for pending in run.waiting_calls:
            self.call_names[pending.call.id] = pending.call.name
        if run.status == RunStatus.REQUIRES_ACTION:
            self.stdout.write("The last run is waiting for a decision.")
            self.follow(service, run.pk, paused=run)
        else:
            self.follow(service, run.pk)

    # Reading ---------------------------------------------------------------

    def read(self, prompt: str) -> str | None:
        """One line from stdin without its newline; ``None`` at EOF."""
        self.stdout.write(prompt, ending="")
        self.stdout.flush()
        line = self.input.readline()
        if not line:
            self.stdout.write("")
            return None
        line = line.rstrip("\r\n")
        if self.echo_input:
            self.stdout.write(line)
        return line

    def loop(self, service: ToolLoopService, conversation: Conversation) -> None:
        """Read lines until EOF or ``/quit``, sending each as a user turn."""
        while (line := self.read("you> ")) is not None:
            text = line.strip()
            if not text:
                continue
            if text in QUIT_COMMANDS:
                return
            try:
                run = service.start(
                    conversation, ChatMessage.user(text), user=self.user, **self.parameters
                )
            except (
                ConversationBusy,
                InvalidMessage,
                RunStateError,
                ToolError,
                RunNotPermitted,
                TooManyActiveRuns,
            ) as exc:
                self.stderr.write(f"Not sent: {getattr(exc, 'message', exc)}")
                continue
            if not self.follow(service, run.pk):
                return

    # Running ---------------------------------------------------------------

    def follow(self, service: ToolLoopService, run_id: Any, paused: Run | None = None) -> bool:
        """Print the run's events until it ends; decide pauses on stdin.

        Returns False when stdin ended during a decision (the run stays waiting).
        """
        while True:
            if paused is None:
                paused = self.print_events(service.events(run_id))
            if paused is None:
                return True
            if not self.decide(service, paused):
                return False
            paused = None

    def print_events(self, events: Iterable[Any]) -> Run | None:
        """Print events as they arrive; the paused run, if the run paused."""
        # Set while the text of the coming assistant turn is printed as it streams.
        streamed = False
        for event in events:
            if isinstance(event, TextDelta):
                if not streamed:
                    self.stdout.write("assistant> ", ending="")
                    streamed = True
                self.stdout.write(event.text, ending="")
                self.stdout.flush()
                continue
            if streamed:
                self.stdout.write("")
            if isinstance(event, MessageStored):
                self.print_reply(event.message, streamed=streamed)
            elif isinstance(event, ToolResultStored):
                self.print_result(event.message)
            elif isinstance(event, RunRequiresAction):
                return event.run
            elif isinstance(event, RunCompleted):
                run = event.run
                if run.termination_reason != TerminationReason.COMPLETED:
                    self.stdout.write(f"(run ended: {run.termination_reason})")
                # Nothing for a model without prices, whose turns cost nothing known.
                if run.cost:
                    self.stdout.write(f"(run cost: {cost_shown(run.cost)} USD)")
            elif isinstance(event, RunFailed):
                run = event.run
                self.stderr.write(f"Run failed: {run.error_type}: {run.error_message}")
            streamed = False
        if streamed:
            self.stdout.write("")
        return None

    def print_reply(self, message: Message, *, streamed: bool) -> None:
        """The assistant turn: its text unless already streamed, then its calls."""
        chat = stored_message(message)
        # Text arrives as TextDelta when streaming; print it only when it did not.
        if chat.content and not streamed:
            self.stdout.write(f"assistant> {chat.content}")
        if message.parsed is not None:
            self.stdout.write(f"  parsed: {json.dumps(message.parsed, ensure_ascii=False)}")
        for call in chat.tool_calls or ():
            self.call_names[call.id] = call.name
            self.stdout.write(f"  tool call {self.label(call)}")

    def label(self, call: ToolCall) -> str:
        return f"{call.name}({call.arguments_json}) [{call.id}]"

    def print_result(self, message: Message) -> None:
        name = self.call_names.get(message.tool_call_id or "", "tool")
        kind = "error" if message.is_error else "result"
        self.stdout.write(
            f"  {kind} of {name} [{message.tool_call_id}]: {_preview(message.content)}"
        )

    def decide(self, service: ToolLoopService, run: Run) -> bool:
        """Ask about each waiting call, then record the answers; False at EOF."""
        approved: list[str] = []
        denied: list[str] = []
        outputs: dict[str, str] = {}
        for pending in run.waiting_calls:
            call = pending.call
            self.call_names[call.id] = call.name
            if pending.reason is WaitReason.CLIENT_SIDE:
                answer = self.read(f"  output for {self.label(call)}> ")
                if answer is None:
                    break
                outputs[call.id] = answer
                continue
            self.stdout.write(f"  {call.name} needs approval: {self.label(call)}")
            while (answer := self.read("  approve? [y/n] ")) is not None:
                if answer.strip().lower() in APPROVE | DENY:
                    break
            if answer is None:
                break
            (approved if answer.strip().lower() in APPROVE else denied).append(call.id)
        else:
            try:
                service.answer(run.pk, approve=approved, deny=denied, outputs=outputs, resume=False)
            except RunStateError as exc:
                self.stderr.write(f"Could not continue the run: {exc.message}")
                return False
            return True
        self.stdout.write(
            "The run is still waiting; continue it with "
            f"manage.py chat --conversation {run.conversation_id}"
        )
        return False
