"""Where a value came from, for ``tainted_argument``.

``identifiers``: the typed identifiers in some text (IBANs, e-mail addresses, URLs, phone numbers),
normalised; past a short text, in linear time.
``tokens``: tool results kept as hashed, normalised tokens with their source, bounded in bytes.
"""
