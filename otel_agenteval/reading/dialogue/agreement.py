"""Did the user agree to this write? The dialogue model, read at the write from the conversation.

The user's turns since the last *request* (a turn that answers nothing the agent asked) are read
backwards. A turn that answers an agent turn asking for agreement ("Shall I …?", "Please
confirm …") with an affirmation is a *yes*; with a refusal, a *no*. The *proposal* a yes answers
is the agent's turns since that request: it must name the action (a word of the policy's ``says``,
if set) and show the call's key values (see
:mod:`.values`), except an identifier established earlier in the dialogue when the proposal
names no rival of it (see :func:`_in_context`). The first yes whose proposal shows them covers
the call. One yes covers each distinct action its proposal showed
(``yes, cancel both``), each once: the key of what it covered is ``(turn, action)``.

:func:`read` gives a :class:`Reading`: the covering yes (if any), or why none covers, with the
message index of the reply and the proposal.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ..content import Message
from .lexicon import Words
from .values import KeyValue, Text, is_identifier, key_values, looks_like_handle, names_action, shows


class Turn:
    """One user turn as the model reads it."""

    __slots__ = ("answer", "asked", "index", "kind", "proposal")

    def __init__(self, index: int, kind: str, answer: str | None, asked: int | None, proposal: list[int]) -> None:
        self.index = index
        self.kind = kind  # yes | no | answer | request
        self.answer = answer
        self.asked = asked  # message index of the agent turn it answers, if that asked
        self.proposal = proposal  # message indexes of the agent's turns since the last request


class Dialogue:
    """The turns of one model call's input messages, each user turn classified when first read
    (walking back from the end, most are never read).

    ``earlier``: the dialogue of a previous model call of the run, read with the same words. What
    it read of the messages both share from the start (texts, turns) is taken over, not read again.
    """

    __slots__ = ("_compact", "_turns", "_words", "gaps", "messages", "texts", "users")

    def __init__(self, messages: Sequence[Message], words: Words, earlier: Dialogue | None = None) -> None:
        self.messages = list(messages)
        self.texts: dict[int, Text] = {}
        self._words = words
        self._turns: dict[int, Turn] = {}
        self._compact: dict[int, str] = {}
        self.users: list[int] = []  # message indexes of the user's turns with text
        self.gaps: list[list[int]] = []  # per user turn: the agent's turns with text just before it
        gap: list[int] = []
        for i, m in enumerate(self.messages):
            if not m.text.strip():
                continue
            if m.role == "assistant":
                gap.append(i)
            elif m.role == "user":
                self.users.append(i)
                self.gaps.append(gap)
                gap = []
        if earlier is not None and earlier._words is words:
            self._take_over(earlier)

    def _take_over(self, earlier: Dialogue) -> None:
        """Keep what ``earlier`` read of the leading messages both have alike."""
        same = 0
        for a, b in zip(self.messages, earlier.messages):
            if a is not b and a != b:
                break
            same += 1
        self.texts = {i: t for i, t in earlier.texts.items() if i < same}
        self._compact = {i: c for i, c in earlier._compact.items() if i < same}
        self._turns = {p: turn for p, turn in earlier._turns.items() if earlier.users[p] < same}

    def compact(self, index: int) -> str:
        """A message's letters and digits only, case folded (a cheap first look for an id)."""
        got = self._compact.get(index)
        if got is None:
            got = self._compact[index] = _compact_id(self.messages[index].text)
        return got

    def turn(self, pos: int) -> Turn:
        """The ``pos``-th user turn: yes or no (it answers an agent turn asking for agreement),
        an answer (to a question), or a request (it answers nothing)."""
        got = self._turns.get(pos)
        if got is None:
            gap = self.gaps[pos]
            kind, answer, asked = "request", None, None
            if gap:
                agent = self.messages[gap[-1]].text
                if self._words.asks(agent):
                    asked = gap[-1]
                    answer = self._words.answer(self.messages[self.users[pos]].text)
                    kind = answer or "answer"
                elif self._words.requests(agent):
                    kind = "answer"
            got = self._turns[pos] = Turn(self.users[pos], kind, answer, asked, [])
        return got

    def proposal(self, pos: int) -> list[int]:
        """The agent's turns since the last request before the ``pos``-th user turn."""
        out = list(self.gaps[pos])
        p = pos - 1
        while p >= 0 and self.turn(p).kind != "request":
            out = self.gaps[p] + out
            p -= 1
        return out

    def backwards(self) -> Iterator[Turn]:
        """The user's turns from the last back to the last request (included), proposals filled."""
        for pos in range(len(self.users) - 1, -1, -1):
            turn = self.turn(pos)
            if turn.kind in ("yes", "no") and not turn.proposal:
                turn.proposal = self.proposal(pos)
            yield turn
            if turn.kind == "request":
                return

    def text(self, index: int) -> Text:
        t = self.texts.get(index)
        if t is None:
            t = self.texts[index] = Text(self.messages[index].text)
        return t

    def turn_key(self, turn: Turn) -> tuple[int, int]:
        return (turn.index, hash(self.messages[turn.index].text))


class Reading:
    """What the dialogue says about one write: the covering yes, or the reason there is none."""

    __slots__ = ("action", "key", "not_shown", "proposal", "reason", "reply")

    def __init__(self) -> None:
        self.key: Any = None  # set when a yes covers the call: (turn key, action)
        self.reason = "not_asked"  # not_asked | not_shown | declined | covered
        self.not_shown: list[str] = []
        self.reply: int | None = None  # message index of the user's reply
        self.proposal: list[int] = []  # message indexes of the proposal's agent turns
        self.action: tuple[Any, ...] = ()


def action_of(tool: str, values: list[KeyValue]) -> tuple[Any, ...]:
    """An action as a yes covers it: the tool and its key values, in a stable order."""
    return (tool, *sorted((p, repr(v)) for p, v in values))


def _in_context(d: Dialogue, turn: Turn, value: Any, rivals: Iterable[Any], texts: list[Text]) -> bool:
    """An identifier the proposal does not name, established earlier in the dialogue (the
    reservation being talked about), unless the proposal names a rival: another value of the
    same argument the run used before (then the yes was to something else)."""
    if not is_identifier(value) or any(shows(r, t) for r in rivals if r != value for t in texts):
        return False
    needle = _compact_id(value)
    return any(needle in d.compact(i) and shows(value, d.text(i)) for i, m in enumerate(d.messages[:turn.index])
               if m.role in ("user", "assistant"))


_NOT_ALNUM = re.compile(r"[\W_]+")


def _compact_id(text: str) -> str:
    return _NOT_ALNUM.sub("", text.casefold())


def _handle(d: Dialogue, value: Any) -> bool:
    """An internal handle: named like ``credit_card_4421486`` and never said in the dialogue (the
    user hears "the card ending in 7447"), so no proposal can show it."""
    if not looks_like_handle(value):
        return False
    needle = _compact_id(value)
    return not any(needle in d.compact(i) for i, m in enumerate(d.messages) if m.role in ("user", "assistant"))


def _missing(d: Dialogue, turn: Turn, values: list[KeyValue], rivals: Callable[[str], Iterable[Any]],
             words: Sequence[str] | None, inferred: bool = False) -> list[str]:
    texts = [d.text(i) for i in turn.proposal]
    seen: list[str] = [] if any(names_action(words, t) for t in texts) else ["action"]
    for path, value in values:
        if path in seen or any(shows(value, t) for t in texts):
            continue
        if inferred and _handle(d, value):
            continue
        if not _in_context(d, turn, value, rivals(path), texts):
            seen.append(path)
    return seen


def _no_rivals(path: str) -> Iterable[Any]:
    return ()


def read(d: Dialogue, tool: str, arguments: dict[str, Any], shows_paths: Sequence[str] | None,
         rivals: Callable[[str], Iterable[Any]] | None = None, says: Sequence[str] | None = None) -> Reading:
    """The user's agreement to ``tool(arguments)`` in this dialogue (see the module's docstring).
    ``rivals``: per key path, the values earlier calls of the run passed for it; ``says``: words
    naming the action, one of which the proposal must have (``None``: not checked)."""
    rivals = rivals or _no_rivals
    values = key_values(arguments, shows_paths)
    r = Reading()
    r.action = action_of(tool, values)
    first: Reading | None = None
    for turn in d.backwards():
        if turn.kind == "yes":
            missing = _missing(d, turn, values, rivals, says, shows_paths is None)
            if not missing:
                r.reason, r.reply, r.proposal = "covered", turn.index, turn.proposal
                r.key = (d.turn_key(turn), r.action)
                return r
            if first is None:
                first = Reading()
                first.reason, first.not_shown, first.reply, first.proposal = "not_shown", missing, turn.index, turn.proposal
        elif turn.kind == "no" and first is None:
            first = Reading()
            first.reason, first.reply, first.proposal = "declined", turn.index, turn.proposal
    if first is not None:
        first.action = r.action
        return first
    return r
