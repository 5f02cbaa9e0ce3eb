"""The app's tasks on Django's Tasks framework: declaring and enqueueing them
(:mod:`~llm_conversations.tasks.enqueue`), the Celery backend
(:mod:`~llm_conversations.tasks.celery`) and the concurrent database worker
(:mod:`~llm_conversations.tasks.worker`).

The room spans two layers: ``enqueue`` and ``celery`` import nothing of the app
above ``conf``, so every layer may declare and enqueue tasks, while ``worker``
executes them and stands above the engine it wakes (docs/architecture.md).
"""
