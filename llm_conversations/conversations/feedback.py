"""Feedback on assistant turns: a user's rating, changed or removed.

Owns the rules of a rating: only assistant turns are rated, the rating is 1
or -1, the comment is storable text of at most ``MAX_COMMENT_CHARS``; one row
per user and message (the unique constraint), so rating again changes it.
Who may rate which message (the owner of its conversation) is the caller's
scoping, as everywhere in the API. :func:`with_feedback` reads a user's
rating beside message rows in the same query.
"""

from __future__ import annotations

from typing import Any

from django.db.models import F, FilteredRelation, Q, QuerySet

from llm_conversations.core.messages import Role
from llm_conversations.core.text import text_problem
from llm_conversations.exceptions import FeedbackError
from llm_conversations.models import MAX_COMMENT_CHARS, Feedback, Message, Rating
from llm_conversations.users import AnyUser, User

__all__ = ["FEEDBACK_COLUMNS", "check_rating", "delete_feedback", "rate_message", "with_feedback"]

# The columns with_feedback() adds to message rows: the user's rating and comment.
FEEDBACK_COLUMNS = ("feedback_rating", "feedback_comment")


def check_rating(message: Message, rating: Any, comment: Any) -> None:
    """Raise :class:`FeedbackError` unless ``rating`` and ``comment`` may rate ``message``."""
    if message.role != Role.ASSISTANT:
        raise FeedbackError("not_an_assistant_message", "only assistant messages can be rated.")
    # bool is an int subclass, but True is a mistake here, not 1.
    if isinstance(rating, bool) or rating not in Rating.values:
        raise FeedbackError("invalid_rating", "rating must be 1 or -1.", field="rating")
    if not isinstance(comment, str):
        raise FeedbackError("invalid_comment", "comment must be text.", field="comment")
    if len(comment) > MAX_COMMENT_CHARS:
        raise FeedbackError(
            "too_large",
            f"comment may have at most {MAX_COMMENT_CHARS} characters.",
            field="comment",
        )
    problem = text_problem(comment)
    if problem is not None:
        raise FeedbackError("invalid_text", f"{problem} cannot be stored.", field="comment")


def rate_message(message: Message, user: User, rating: int, comment: str = "") -> Feedback:
    """Store ``user``'s rating of an assistant ``message``, or change the one stored.

    Raises :class:`~llm_conversations.exceptions.FeedbackError` and stores
    nothing when a rule is broken. Two concurrent ratings by one user leave
    one row: the unique constraint makes the later one an update.
    """
    check_rating(message, rating, comment)
    feedback, _ = Feedback.objects.update_or_create(
        message=message, user=user, defaults={"rating": rating, "comment": comment}
    )
    return feedback


def delete_feedback(message: Message, user: User) -> bool:
    """Remove ``user``'s rating of ``message``; whether there was one."""
    deleted, _ = Feedback.objects.filter(message=message, user=user).delete()
    return bool(deleted)


def with_feedback(rows: QuerySet[Message], user: AnyUser) -> QuerySet[Message]:
    """``rows`` with ``user``'s rating and comment as ``FEEDBACK_COLUMNS``, by one join.

    ``None`` where the user has not rated the message (or is anonymous). The
    unique constraint makes it at most one row per message, so the join never
    duplicates a message.
    """
    user_id = user.pk if getattr(user, "is_authenticated", False) else None
    return rows.annotate(
        own_feedback=FilteredRelation("feedback", condition=Q(feedback__user_id=user_id)),
        feedback_rating=F("own_feedback__rating"),
        feedback_comment=F("own_feedback__comment"),
    )
