"""A span → facts: the semantic-convention and OpenInference names, reading a span's fields (SDK or
replayed), each framework's quirks in one table (``frameworks``), a tool span as a ``ToolStep``,
model usage, message contents, confirmations and the dialogue they are read from (``dialogue/``),
label values made safe, spans read as nothing.

Stage 3 of 6: imports ``model`` and ``policy``. Pure: no state, nothing counted here.
"""
