"""Signals for host projects.

``message_appended``: sent once the store's write of new messages is
committed, with ``sender=Message``, ``conversation_id`` (UUID) and
``messages`` (the new ``Message`` rows in order).

``run_finished``: sent when a run ends (completed, failed or cancelled), with
``sender=Run`` and ``run``. Not sent when a run pauses for action.

``run_requires_action``: sent once a run's pause for approvals or client-side
outputs is committed, with ``sender=Run`` and ``run`` (its waiting calls in
``run.waiting_calls``).

``waiting_run_queued``: sent once a run that waited behind the conversation's
active run (busy strategy ``enqueue``) is queued, its user turn stored, with
``sender=Run`` and ``run``. The app's own receiver enqueues it for a task worker.
"""

from django.dispatch import Signal

message_appended = Signal()
run_finished = Signal()
run_requires_action = Signal()
waiting_run_queued = Signal()
