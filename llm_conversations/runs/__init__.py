"""The run engine: starting, executing and deciding runs of the tool loop.

:class:`ToolLoopService` is the one entry point; every state change of a run
is a conditional ``UPDATE`` (:mod:`~llm_conversations.runs.transitions`), a
lease guards its execution (:mod:`~llm_conversations.runs.leases`), and its
event log is written, read and waited on in
:mod:`~llm_conversations.runs.log`.
No database transaction is held across a provider or tool call.

The tasks of Django's Tasks framework are declared beside what they run:
``execute_run`` (:mod:`~llm_conversations.runs.service`) and
``reap_lost_runs`` (:mod:`~llm_conversations.runs.reaper`).
"""

from llm_conversations.runs.reaper import reap_lost_runs
from llm_conversations.runs.service import RunRef, ToolLoopService, enqueue_run, execute_run

__all__ = ["RunRef", "ToolLoopService", "enqueue_run", "execute_run", "reap_lost_runs"]
