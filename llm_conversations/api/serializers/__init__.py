"""Serializers: the shape of request input and one declaration per response shape.

Input serializers check types and the API's own size limits, each declared
once on its field (:class:`~llm_conversations.api.serializers.common.SizeLimit`),
where the schema reads it too; the rules about messages, runs, providers and
tools belong to the services, which raise errors the API translates once
(:mod:`llm_conversations.api.errors`).

:class:`RunSerializer` represents a run from its declared fields.
:class:`MessageSerializer` declares a message's fields and represents a row
through :func:`~llm_conversations.api.representations.message_data`, a fast
path for long histories; a test keeps the two field sets equal.
"""

from llm_conversations.api.serializers.chat import (
    ChatRequestSerializer,
    ChatStopSerializer,
    UIMessageChunkEventSerializer,
    UIMessageSerializer,
)
from llm_conversations.api.serializers.common import (
    BackgroundField,
    ErrorSerializer,
    MaxIterationsField,
    MetadataField,
    NamesSentFields,
    SizeLimit,
    StrictTypes,
    declared_limit,
)
from llm_conversations.api.serializers.conversations import (
    ORDERING_FIELDS,
    ConversationDeleteQuerySerializer,
    ConversationListQuerySerializer,
    ConversationSerializer,
    ConversationStateQuerySerializer,
    HideMessageSerializer,
    MessageListQuerySerializer,
    MessagePageSerializer,
    MessageSerializer,
)
from llm_conversations.api.serializers.decisions import (
    DecisionListQuerySerializer,
    DecisionRecordSerializer,
)
from llm_conversations.api.serializers.feedback import (
    FeedbackSerializer,
    MessageFeedbackSerializer,
)
from llm_conversations.api.serializers.forks import (
    EditSerializer,
    ForkCreateSerializer,
    RegenerateSerializer,
)
from llm_conversations.api.serializers.messages import (
    MessageContentField,
    MessageInputSerializer,
    MessagesInputSerializer,
    MessageTextField,
    ToolOutputField,
    UserMessageField,
)
from llm_conversations.api.serializers.run_answers import (
    SubmitToolOutputsSerializer,
    ToolDecisionSerializer,
)
from llm_conversations.api.serializers.runs import (
    RunCreateSerializer,
    RunEventsQuerySerializer,
    RunListQuerySerializer,
    RunOptionsSerializer,
    RunRetrySerializer,
    RunSerializer,
    StreamEventSerializer,
)
from llm_conversations.api.serializers.tools import ToolSerializer
from llm_conversations.api.serializers.waiting_calls import (
    WaitingCallQuerySerializer,
    WaitingCallSerializer,
)

__all__ = [
    "ORDERING_FIELDS",
    "BackgroundField",
    "ChatRequestSerializer",
    "ChatStopSerializer",
    "ConversationDeleteQuerySerializer",
    "ConversationListQuerySerializer",
    "ConversationSerializer",
    "ConversationStateQuerySerializer",
    "DecisionListQuerySerializer",
    "DecisionRecordSerializer",
    "EditSerializer",
    "ErrorSerializer",
    "FeedbackSerializer",
    "ForkCreateSerializer",
    "HideMessageSerializer",
    "MaxIterationsField",
    "MessageContentField",
    "MessageFeedbackSerializer",
    "MessageInputSerializer",
    "MessageListQuerySerializer",
    "MessagePageSerializer",
    "MessageSerializer",
    "MessageTextField",
    "MessagesInputSerializer",
    "MetadataField",
    "NamesSentFields",
    "RegenerateSerializer",
    "RunCreateSerializer",
    "RunEventsQuerySerializer",
    "RunListQuerySerializer",
    "RunOptionsSerializer",
    "RunRetrySerializer",
    "RunSerializer",
    "SizeLimit",
    "StreamEventSerializer",
    "StrictTypes",
    "SubmitToolOutputsSerializer",
    "ToolDecisionSerializer",
    "ToolOutputField",
    "ToolSerializer",
    "UIMessageChunkEventSerializer",
    "UIMessageSerializer",
    "UserMessageField",
    "WaitingCallQuerySerializer",
    "WaitingCallSerializer",
    "declared_limit",
]
