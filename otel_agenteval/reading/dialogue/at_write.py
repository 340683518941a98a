"""The dialogue read at a write: only then, and once per model call (never on every span).

The model call that issued the write carries the conversation so far in its input messages
(kept by the engine on the run, ``Trajectory.chat_before``, when the policy needs content). It is parsed
and classified the first time a write asks, and kept on the run until the next model call; the
next one's reading starts from it: only the messages added since are parsed and classified.
"""

from __future__ import annotations

from typing import Any

from ...model.trajectory import ToolStep, Trajectory, short_hash
from ...policy.policy import Policy, ToolPolicy
from ...policy.sections import Lexicon
from ..content import messages_after
from .agreement import Dialogue, Reading, read
from .lexicon import Words
from .values import key_values

_WORDS: dict[int, tuple[Lexicon, Words]] = {}


def words_for(policy: Policy) -> Words:
    """The compiled lexicon of this policy (built once per lexicon)."""
    lex = policy.confirmation.lexicon
    got = _WORDS.get(id(lex))
    if got is None or got[0] is not lex:
        got = (lex, Words(lex))
        if len(_WORDS) > 64:
            _WORDS.clear()
        _WORDS[id(lex)] = got
    return got[1]


def shows_paths(tp: ToolPolicy) -> list[str] | None:
    """What a proposal must show: ``confirmation.shows``, else ``confirm_arguments``, else inferred."""
    if tp.confirmation is not None and tp.confirmation.shows is not None:
        return tp.confirmation.shows
    return tp.confirm_arguments


def dialogue_at(step: ToolStep, t: Trajectory, policy: Policy) -> tuple[Dialogue, Any] | None:
    """The classified dialogue before this write and the span it was read from; ``None`` if the
    spans carry no messages."""
    chat = t.chat_before(step.start_ns)  # the latest model call that ended before the write started
    if chat is None:
        return None
    cached = t.extra.get("dialogue")
    if cached is not None and cached[0] is chat:
        return cached[1], chat[1]
    got = messages_after(chat[1], cached[3] if cached is not None else None)
    if got is None or not got.messages:
        return None
    d = Dialogue(got.messages, words_for(policy), cached[1] if cached is not None else None)
    t.extra["dialogue"] = (chat, d, {}, got)  # and the readings of the writes made after it, by span; the messages read
    return d, chat[1]


def reading_at(step: ToolStep, t: Trajectory, policy: Policy) -> tuple[Reading, Any] | None:
    """What the dialogue says about this write, and the model-call span it was read from."""
    found = dialogue_at(step, t, policy)
    if found is None:
        return None
    d, span = found
    memo: dict[Any, Reading] = t.extra["dialogue"][2]
    key = (step.span_id, step.call_key, len(t.steps))  # the guard asks before a call has its span
    got = memo.get(key)
    if got is None:
        tp = policy.tools.get(step.tool)
        paths = shows_paths(tp) if tp is not None else None
        says = tp.confirmation.says if tp is not None and tp.confirmation is not None else None
        got = memo[key] = read(d, step.tool, step.arguments, paths, _Rivals(t, step), says)
    return got, span


class _Rivals:
    """Per key path, the values earlier calls of the run passed for it (computed if asked)."""

    def __init__(self, t: Trajectory, step: ToolStep) -> None:
        self._t = t
        self._step = step
        self._got: dict[str, list[Any]] = {}

    def __call__(self, path: str) -> list[Any]:
        got = self._got.get(path)
        if got is None:
            got = self._got[path] = [v for s in self._t.steps if s is not self._step and s.start_ns <= self._step.start_ns
                                     for _, v in key_values(s.arguments, [path])]
        return got


def _span_hex(span: Any) -> str | None:
    ctx = getattr(span, "context", None)
    sid = getattr(ctx, "span_id", None)
    return format(sid, "016x") if isinstance(sid, int) else None


def reasons(step: ToolStep, t: Trajectory, policy: Policy, used: Any, agreed: dict[Any, Any]) -> dict[str, Any]:
    """Why no confirmation from the dialogue covers this write: the finding's reason fields.

    ``reason``: ``not_asked`` | ``not_shown`` | ``declined`` | ``changed_after_agreement`` |
    ``already_used`` | ``no_messages``; with ``not_shown`` (the key paths the proposal did not
    show), ``changed_after_agreement`` (path → [agreed, called], hashed), and ``reply`` /
    ``proposal``: the span the dialogue was read from and the message indexes.
    """
    found = reading_at(step, t, policy)
    if found is None:
        return {"reason": "no_messages"}
    r, span = found
    out: dict[str, Any] = {"reason": r.reason}
    if r.reason == "covered":  # a yes that showed it all, already used by the same action
        out["reason"] = "already_used"
    if r.not_shown:
        out["not_shown"] = list(r.not_shown)
        before = next((v for k, v in agreed.items() if k[0] == r.reply), None)  # a call already made under this yes
        if before is not None and before[0] == step.tool:
            now, called = _by_path(before), _by_path(r.action)
            changed = {p: [short_hash(repr(now[p])), short_hash(repr(called[p]))]
                       for p in r.not_shown if p in now and p in called and now[p] != called[p]}
            if changed:
                out["reason"] = "changed_after_agreement"
                out["changed_after_agreement"] = changed
    where = _span_hex(span)
    if r.reply is not None:
        out["reply"] = {"span_id": where, "message": r.reply}
    if r.proposal:
        out["proposal"] = {"span_id": where, "messages": list(r.proposal)}
    return out


def _by_path(action: tuple[Any, ...]) -> dict[str, list[str]]:
    """An action's key values grouped by path (see :func:`.agreement.action_of`)."""
    out: dict[str, list[str]] = {}
    for path, value in action[1:]:
        out.setdefault(path, []).append(value)
    return out
