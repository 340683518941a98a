"""The confirmation model over the dialogue: what the agent proposed, what the user answered.

``lexicon``: what a turn says (asks, yes, no) in six languages, extendable in the policy.
``values``: a write's key values and whether a turn shows them, after normalisation.
``agreement``: which yes (if any) covers a write, or why none does.
"""

from .agreement import Dialogue, Reading, read
from .lexicon import Words

__all__ = ["Dialogue", "Reading", "Words", "read"]
