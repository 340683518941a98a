"""Label values that come from spans, made safe once, where they enter.

A span attribute can hold anything the SDK accepts: lone surrogates (which no exposition can
encode), control characters, 100k-character names. :func:`safe_label` turns such a value into
valid, printable UTF-8 of bounded length; a long value keeps a prefix and a short hash of the
whole, so distinct long names stay distinct. Plain short names pass through untouched.
"""

from __future__ import annotations

import hashlib

MAX_LABEL_LEN = 64  # characters of a label value taken from a span
REPLACEMENT = "\ufffd"


def safe_label(value: object, limit: int = MAX_LABEL_LEN) -> str:
    """``value`` as a label value: valid UTF-8, no control characters, at most ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit and text.isascii() and text.isprintable():
        return text  # the common case: one scan each, no copy
    if len(text) > limit:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
        text = text[: max(limit - 9, 1)] + "~" + digest
    clean = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> "?"
    if not clean.isprintable():
        clean = "".join(ch if ch.isprintable() else REPLACEMENT for ch in clean)
    return clean
