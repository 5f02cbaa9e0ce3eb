"""A run's durable event log: written, read, followed and pushed to its readers.

:mod:`~llm_conversations.runs.log.writer` appends events in the transaction of
what they report; :mod:`~llm_conversations.runs.log.reader` reads pages of
them; :mod:`~llm_conversations.runs.log.followers` follows a run as it logs;
:mod:`~llm_conversations.runs.log.pushes` and
:mod:`~llm_conversations.runs.log.listener` hand committed events to waiting
readers without a query. The events the loop yields are
:mod:`llm_conversations.runs.events`.
"""
