"""One reader per recorded format, each into :class:`~otel_agenteval.replay.spanview.RecordedSpan`:
OTLP protobuf (``wire`` over ``wire_format``, its C twin ``_wire_c.c`` through ``native``, protobuf's
own parser in ``protobuf`` for what they leave), OTLP/JSON (``typed_json``, ``otlp_json`` the
reference), the SDK's ``to_json`` (``sdk_json``); ``decode`` picks one for a request body."""
