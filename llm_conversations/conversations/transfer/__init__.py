"""Conversations in and out of the app: the export forms
(:mod:`~llm_conversations.conversations.transfer.export`) and imports of our
full-fidelity form and other tools' files
(:mod:`~llm_conversations.conversations.transfer.importing`, reading a file a
record at a time in ``import_reading`` and ``import_buffer``, one parser per
foreign format in ``import_formats``), each conversation through the store's
rules."""
