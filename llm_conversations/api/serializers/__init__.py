"""Serializers: the shape of request input and one declaration per response shape.

Input serializers shape types and apply the API's own size limits; the rules
about messages, runs, providers and tools belong to the services, which raise
errors the API translates once (:mod:`llm_conversations.api.errors`).

:class:`RunSerializer` represents a run from its declared fields.
:class:`MessageSerializer` declares a message's fields and represents a row
through :func:`~llm_conversations.api.representations.message_data`, a fast
path for long histories; a test keeps the two field sets equal.
"""

from llm_conversations.api.serializers.chat import (
    ChatRequestSerializer,
    UIMessageChunkEventSerializer,
    UIMessageSerializer,
)
from llm_conversations.api.serializers.common import (
    ErrorSerializer,
    MaxIterationsField,
    MessagesInputSerializer,
    MetadataField,
    StrictTypes,
    ToolOutputField,
)
from llm_conversations.api.serializers.conversations import (
    ORDERING_FIELDS,
    ConversationListQuerySerializer,
    ConversationSerializer,
    MessageListQuerySerializer,
    MessagePageSerializer,
    MessageSerializer,
)
from llm_conversations.api.serializers.feedback import (
    FeedbackSerializer,
    MessageFeedbackSerializer,
)
from llm_conversations.api.serializers.forks import (
    EditSerializer,
    ForkCreateSerializer,
    RegenerateSerializer,
    run_options,
)
from llm_conversations.api.serializers.runs import (
    RunCreateSerializer,
    RunEventsQuerySerializer,
    RunListQuerySerializer,
    RunRetrySerializer,
    RunSerializer,
    StreamEventSerializer,
    SubmitToolOutputsSerializer,
    ToolDecisionSerializer,
    ToolSerializer,
    UserMessageField,
)

__all__ = [
    "ORDERING_FIELDS",
    "ChatRequestSerializer",
    "ConversationListQuerySerializer",
    "ConversationSerializer",
    "EditSerializer",
    "ErrorSerializer",
    "FeedbackSerializer",
    "ForkCreateSerializer",
    "MaxIterationsField",
    "MessageFeedbackSerializer",
    "MessageListQuerySerializer",
    "MessagePageSerializer",
    "MessageSerializer",
    "MessagesInputSerializer",
    "MetadataField",
    "RegenerateSerializer",
    "RunCreateSerializer",
    "RunEventsQuerySerializer",
    "RunListQuerySerializer",
    "RunRetrySerializer",
    "RunSerializer",
    "StreamEventSerializer",
    "StrictTypes",
    "SubmitToolOutputsSerializer",
    "ToolDecisionSerializer",
    "ToolOutputField",
    "ToolSerializer",
    "UIMessageChunkEventSerializer",
    "UIMessageSerializer",
    "UserMessageField",
    "run_options",
]
