"""Who may run with what: the run policy (``RUN_POLICY``) and the active-run limit.

A policy is a class named by the ``RUN_POLICY`` setting. For one user it says
which providers, models and tools a run may use and how many model calls it may
make; each method returns ``None`` for "no restriction". :class:`RunPolicy`, the
default, allows everything to authenticated users and nothing to anonymous ones.

``ToolLoopService.start`` and ``retry`` apply it when they are given a user
(:func:`check_run`, before anything is stored), the API lists only what it
allows (:func:`permitted_providers`, :func:`permitted_tools`), and
:func:`lock_active_runs` applies ``MAX_ACTIVE_RUNS_PER_USER`` under a lock.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.utils.module_loading import import_string

from llm_conversations.conf import conf
from llm_conversations.core.messages import ToolCall
from llm_conversations.core.parameters import ParameterSupport
from llm_conversations.exceptions import RunNotPermitted, TooManyActiveRuns
from llm_conversations.models import ACTIVE_RUN_STATUSES, Decision, Run
from llm_conversations.providers.backends import backend_class
from llm_conversations.users import AnyUser

__all__ = [
    "PermittedProvider",
    "RunPolicy",
    "RunRequest",
    "Verdict",
    "check_run",
    "default_iterations",
    "lock_active_runs",
    "permitted_providers",
    "permitted_tools",
    "run_policy",
]


@dataclass(frozen=True)
class Verdict:
    """What an approval rule decided about a call, and why (kept with the decision)."""

    decision: Decision
    reason: str = ""

    @classmethod
    def approve(cls, reason: str = "") -> Verdict:
        return cls(Decision.APPROVED, reason)

    @classmethod
    def deny(cls, reason: str = "") -> Verdict:
        return cls(Decision.DENIED, reason)


class RunPolicy:
    """The default policy: authenticated users may use every provider, model and
    tool and up to ``MAX_ITERATIONS_LIMIT`` model calls; anonymous users nothing.

    Subclass it and name the subclass in ``RUN_POLICY``. Every method gets the
    user (``request.user`` in the API); ``None`` means no restriction.
    """

    def allowed_providers(self, user: AnyUser) -> Collection[str] | None:
        """Names of ``PROVIDERS`` the user may run with."""
        return None if user.is_authenticated else ()

    def allowed_models(self, user: AnyUser, provider: str) -> Collection[str] | None:
        """Models of ``provider`` (its ``MODEL`` and ``MODELS``) the user may ask for."""
        return None if user.is_authenticated else ()

    def allowed_tools(self, user: AnyUser) -> Collection[str] | None:
        """Names of tools (as ``GET tools/`` lists them) a run of the user may offer."""
        return None if user.is_authenticated else ()

    def decide_call(self, run: Run, call: ToolCall) -> Verdict | None:
        """Approve or deny a call waiting for approval by rule, before a person is asked;
        ``None`` (the default, for every call) asks a person. ``run.conversation``
        names the owner; the verdict is kept in the decision trail as the rule's."""
        return None

    def max_iterations(self, user: AnyUser) -> int | None:
        """The highest ``max_iterations`` the user may ask for (``MAX_ITERATIONS_LIMIT`` bounds it
        anyway)."""
        return None if user.is_authenticated else 0


def run_policy() -> RunPolicy:
    """An instance of the class ``RUN_POLICY`` names."""
    policy: RunPolicy = import_string(conf.RUN_POLICY)()
    return policy


def _allows(allowed: Collection[str] | None, name: str) -> bool:
    return allowed is None or name in allowed


@dataclass(frozen=True)
class RunRequest:
    """What one run asks for, every default resolved."""

    provider: str
    model: str
    tools: tuple[str, ...]
    max_iterations: int

    @classmethod
    def of_run(cls, run: Run) -> RunRequest:
        """What a stored run uses (a retry asks for it again)."""
        return cls(run.provider, run.model, tuple(run.offered_tool_names), run.max_iterations)


def check_run(user: AnyUser, request: RunRequest, policy: RunPolicy | None = None) -> None:
    """Raise :class:`RunNotPermitted` for the first thing ``request`` asks beyond the
    user's policy: provider, model, a tool, then the iteration limit."""
    policy = policy or run_policy()
    if not _allows(policy.allowed_providers(user), request.provider):
        raise RunNotPermitted(
            "provider_not_permitted",
            f"you may not run with provider {request.provider!r}.",
            field="provider",
        )
    if not _allows(policy.allowed_models(user, request.provider), request.model):
        raise RunNotPermitted(
            "model_not_permitted",
            f"you may not run with model {request.model!r} of provider {request.provider!r}.",
            field="model",
        )
    allowed_tools = policy.allowed_tools(user)
    for index, name in enumerate(request.tools):
        if not _allows(allowed_tools, name):
            raise RunNotPermitted(
                "tool_not_permitted", f"you may not offer tool {name!r}.", field=f"tools[{index}]"
            )
    highest = policy.max_iterations(user)
    if highest is not None and request.max_iterations > highest:
        raise RunNotPermitted(
            "max_iterations_not_permitted",
            f"you may ask for at most {highest} model call(s) a run.",
            field="max_iterations",
        )


def default_iterations(user: AnyUser | None, policy: RunPolicy | None = None) -> int:
    """``MAX_ITERATIONS``, lowered to what the user may ask for (at least 1); no
    user, no policy."""
    default = conf.MAX_ITERATIONS
    if user is None:
        return default
    highest = (policy or run_policy()).max_iterations(user)
    return default if highest is None else max(1, min(default, highest))


def permitted_tools(
    user: AnyUser, names: Iterable[str], policy: RunPolicy | None = None
) -> list[str]:
    """The ones of ``names`` the user may offer, in order."""
    allowed = (policy or run_policy()).allowed_tools(user)
    return [name for name in names if _allows(allowed, name)]


@dataclass(frozen=True)
class PermittedProvider:
    """A ``PROVIDERS`` entry as a user may use it: never its key, URL or headers."""

    name: str
    backend: str
    model: str
    """Its ``MODEL``, what a run uses when it names none."""
    models: tuple[str, ...]
    """The models the user may ask for (``MODEL`` first when permitted)."""
    default: bool
    support: ParameterSupport
    """The run parameters its adapter honours."""


def permitted_providers(user: AnyUser, policy: RunPolicy | None = None) -> list[PermittedProvider]:
    """The providers the user may run with, in settings order, with their permitted models.

    Read from the entries and adapter classes: no provider is built and no
    connection made.
    """
    policy = policy or run_policy()
    allowed = policy.allowed_providers(user)
    found: list[PermittedProvider] = []
    for name, entry in conf.PROVIDERS.items():
        if not _allows(allowed, name):
            continue
        cls = backend_class(entry["BACKEND"])
        model = entry["MODEL"]
        every = (model, *(m for m in entry.get("MODELS", ()) if m != model))
        models = policy.allowed_models(user, name)
        found.append(
            PermittedProvider(
                name=name,
                backend=cls.backend or str(entry["BACKEND"]),
                model=model,
                models=tuple(m for m in every if _allows(models, m)),
                default=name == conf.DEFAULT_PROVIDER,
                support=cls.parameter_support,
            )
        )
    return found


def lock_active_runs(user: AnyUser | None) -> None:
    """In a transaction: lock the user's row and refuse a new active run over
    ``MAX_ACTIVE_RUNS_PER_USER`` (:class:`TooManyActiveRuns`).

    The lock serialises concurrent starts of one user, so the count each sees
    includes the runs the others inserted (SQLite serialises writers anyway).
    """
    limit = conf.MAX_ACTIVE_RUNS_PER_USER
    if limit is None or user is None or user.pk is None:
        return
    users = get_user_model()._default_manager
    list(users.select_for_update().filter(pk=user.pk).values_list("pk"))
    active = Run.objects.filter(conversation__owner=user.pk, status__in=ACTIVE_RUN_STATUSES)
    if active.count() >= limit:
        raise TooManyActiveRuns(limit)
