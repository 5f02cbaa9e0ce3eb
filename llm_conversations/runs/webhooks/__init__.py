"""Webhooks of runs: which deliveries a run's end or pause makes
(:mod:`~llm_conversations.runs.webhooks.outbox`), the rules of an endpoint
(:mod:`~llm_conversations.runs.webhooks.endpoints`), sending them
(:mod:`~llm_conversations.runs.webhooks.delivery`, the tasks ``send_webhook`` and
``send_due_webhooks``) and where they may go
(:mod:`~llm_conversations.runs.webhooks.hosts`)."""
