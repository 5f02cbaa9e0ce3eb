"""Searching conversations and messages by text.

On PostgreSQL a message matches through full-text search: its content as a
``tsvector`` in the ``simple`` configuration (no stemming, no stop words, so
any language works the same) against ``websearch_to_tsquery`` of the text,
served by the GIN index ``llmconv_message_search`` (migration 0005), and
conversations can be ordered by the rank of their best message. On SQLite
(and other databases) a message matches when its content contains every term
of the text, case-insensitively, without an index or a rank.

User turns, answers and tool results are searched; system turns are not (they
are instructions, often the same in every conversation), nor tool-call
arguments, nor hidden messages (``Message.hidden_at``: kept for audit, not
part of the conversation any more). ``docs/feedback-search-titles.md`` describes the differences for users.
"""

from __future__ import annotations

from django.db import connections
from django.db.models import F, FilteredRelation, Max, Q, QuerySet
from django.utils.text import smart_split, unescape_string_literal

from llm_conversations.core.messages import Role
from llm_conversations.models import Conversation, Message

__all__ = [
    "MAX_SEARCH_CHARS",
    "SEARCH_CONFIG",
    "SEARCH_INDEX",
    "matching_messages",
    "order_by_relevance",
    "search_conversations",
    "search_terms",
    "unquote_term",
]

# The text search configuration of the index and of every query; changing it
# needs a migration that recreates the index with the same expression.
SEARCH_CONFIG = "simple"
SEARCH_INDEX = "llmconv_message_search"
# The longest search text the API accepts.
MAX_SEARCH_CHARS = 200


def unquote_term(bit: str) -> str:
    """A word of :func:`~django.utils.text.smart_split` without its quotes."""
    if len(bit) > 1 and bit[0] in "\"'" and bit[-1] == bit[0]:
        return unescape_string_literal(bit)
    return bit


def search_terms(text: str) -> list[str]:
    """The words of ``text``; a quoted phrase is one term."""
    return [term for term in map(unquote_term, smart_split(text)) if term]


def _full_text(queryset: QuerySet[Message] | QuerySet[Conversation]) -> bool:
    return connections[queryset.db].vendor == "postgresql"


def _full_text_match(text: str, path: str = "") -> Q:
    """PostgreSQL: the condition that the message at ``path`` (``""``, or a
    relation such as ``"messages__"``) is found by ``text``. Its expression is
    the one the index holds."""
    from django.contrib.postgres.search import SearchQuery, SearchVector, SearchVectorExact

    vector = SearchVector(f"{path}content", config=SEARCH_CONFIG)
    query = SearchQuery(text, config=SEARCH_CONFIG, search_type="websearch")
    return ~Q(**{f"{path}role": Role.SYSTEM}) & Q(SearchVectorExact(vector, query))


def matching_messages(rows: QuerySet[Message], text: str) -> QuerySet[Message]:
    """The messages of ``rows`` that ``text`` finds (all of them for blank text),
    never a hidden one.

    PostgreSQL: full-text search with web search syntax (``"a phrase"``,
    ``or``, ``-word``). Elsewhere: the content contains every term.
    """
    terms = search_terms(text)
    if not terms:
        return rows
    rows = rows.filter(hidden_at__isnull=True)
    if _full_text(rows):
        return rows.filter(_full_text_match(text))
    rows = rows.exclude(role=Role.SYSTEM)
    for term in terms:
        rows = rows.filter(content__icontains=term)
    return rows


def search_conversations(
    conversations: QuerySet[Conversation], text: str
) -> QuerySet[Conversation]:
    """The conversations of ``conversations`` whose title contains every term of
    ``text`` or that have a message :func:`matching_messages` finds.

    The messages are one ``IN`` subquery over the same conversations, so the
    rows are never duplicated and the count stays one query.
    """
    terms = search_terms(text)
    if not terms:
        return conversations
    title = Q()
    for term in terms:
        title &= Q(title__icontains=term)
    found = matching_messages(
        Message.objects.filter(conversation__in=conversations.values("pk")), text
    )
    return conversations.filter(title | Q(pk__in=found.values("conversation_id")))


def order_by_relevance(conversations: QuerySet[Conversation], text: str) -> QuerySet[Conversation]:
    """On PostgreSQL, the best-matching conversations first: by the rank
    (``ts_rank``) of their best message, then by last activity; conversations
    found by their title alone (rank 0) come after. Elsewhere ``conversations``
    as they are.

    The matching messages are joined to their conversations by one ``LEFT
    JOIN`` whose condition the index serves, and grouped by conversation, so a
    rank is computed for each matching message only.
    """
    if not search_terms(text) or not _full_text(conversations):
        return conversations
    from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector

    query = SearchQuery(text, config=SEARCH_CONFIG, search_type="websearch")
    hits = FilteredRelation(
        "messages",
        condition=_full_text_match(text, "messages__") & Q(messages__hidden_at__isnull=True),
    )
    rank = SearchRank(SearchVector("search_hit__content", config=SEARCH_CONFIG), query)
    return conversations.annotate(search_hit=hits, search_rank=Max(rank)).order_by(
        F("search_rank").desc(nulls_last=True), "-updated_at"
    )
