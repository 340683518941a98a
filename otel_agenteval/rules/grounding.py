"""``ungrounded_argument`` (opt-in per tool): a write's value that came from nowhere.

Grounded means it appears in the user's input or in an earlier tool result of the
conversation. Needs content capture; without any captured content the rule reports nothing
and says so once in the log.
"""

from __future__ import annotations

from ..model.product_log import product_log
from ..model.trajectory import ToolStep
from ..model.violation import Violation
from ..reading.content import messages_of, shows_value
from ..reading.span_values import result_text
from .check import Check, Event, applies_to

log = product_log()  # structlog as the app set it up; stderr when it did not
_warned = False
MAX_TEXTS = 32


def grounding_texts(check: Check, step: ToolStep) -> list[str]:
    t = check.trajectory
    texts = [x for s in t.steps if s.end_ns <= step.start_ns and (x := result_text(s.raw_result))]
    conv = t.conversation
    if conv is not None:
        texts.extend(conv.extra.get("grounding_texts", ()))
    chat = t.chat_before(step.start_ns)
    if chat is not None:
        msgs = messages_of(chat[1]) or []
        texts.extend(m.text for m in msgs if m.role == "user" and m.text)
    return texts


@applies_to((ToolStep,), lambda p: frozenset(n for n, t in p.tools.items() if t.grounded))
def ungrounded_argument(event: Event, check: Check) -> list[Violation] | None:
    global _warned
    if not isinstance(event, ToolStep):
        return None
    tp = check.policy.tools.get(event.tool)
    if tp is None or not tp.grounded:
        return None
    texts = grounding_texts(check, event)
    if not texts:
        if not _warned:
            _warned = True
            log.info("agenteval.ungrounded_argument: no captured content (messages or tool results); "
                     "the rule reports nothing until content capture is on")
        return None
    corpus = "\n".join(texts)
    names = tp.grounded if isinstance(tp.grounded, list) else list(event.arguments)
    bad = [a for a in names if a in event.arguments and not isinstance(event.arguments[a], (dict, list))
           and not shows_value(event.arguments[a], corpus)]
    if not bad:
        return None
    return [check.violation("ungrounded_argument", "warning",
                            f"{event.tool} argument(s) {', '.join(bad)} appear in no user input or earlier tool result",
                            event, arguments=bad)]
