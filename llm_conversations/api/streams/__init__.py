"""A run's log as a stream, in the format the request chose.

- :mod:`.base`: what every format's renderer shares (:class:`~.base.LogRenderer`);
- :mod:`.events`, :mod:`.ai_sdk`, :mod:`.ag_ui`: the three formats (the default
  events, the AI SDK's UI message stream, AG-UI's events);
- :mod:`.formats`: the one choice of a format, DRF's content negotiation;
- :mod:`.responses`: the responses that carry a stream, executing a run or
  following its log.
"""
