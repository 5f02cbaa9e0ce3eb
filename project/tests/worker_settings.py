"""Settings of the worker processes that ``test_llm_worker.py`` starts (see worker_tools)."""

import os

from project.settings import *  # noqa: F403
from project.settings import LLM_CONVERSATIONS
from project.tests.worker_tools import conversation_settings

LLM_CONVERSATIONS = conversation_settings(LLM_CONVERSATIONS, os.environ["WORKER_PROVIDER_URL"])
