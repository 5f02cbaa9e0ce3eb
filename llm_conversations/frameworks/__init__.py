"""Other agent frameworks' conversations kept in this app's tables.

One module per framework, each importing its framework only itself (the
optional extras ``agents``, ``pydantic-ai`` and ``langchain``):

- :mod:`~llm_conversations.frameworks.agents`: an OpenAI Agents SDK ``Session``;
- :mod:`~llm_conversations.frameworks.pydantic_ai`: pydantic-ai message history in and out;
- :mod:`~llm_conversations.frameworks.langchain`: a LangChain ``BaseChatMessageHistory``;
- :mod:`~llm_conversations.frameworks.django_ai_assistant`: importing django-ai-assistant's
  threads (no framework needed).

Every turn they write goes through the store's rules, as the app's own turns
do, so the admin, the API, shares, exports and the app's own loop read them.
Nothing here is imported by the package itself.
"""
