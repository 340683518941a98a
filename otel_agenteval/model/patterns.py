"""The policy's regexes (``result_matches``, ``confirmation.affirm``/``deny``, ``regex:``
normalisers), safe by construction: they run on the host's thread as a span ends, so a pattern
that backtracks (``^(a+)+$``: 8 s for 28 characters with Python's ``re``) must not be possible.

With ``google-re2`` (a dependency; wheels for every usual platform) a pattern is compiled by RE2,
whose matching is linear in the text; what RE2 cannot do in linear time (backreferences,
lookaround) is refused when the policy is loaded, naming the field. Without it (a platform with
no wheel) Python's ``re`` runs only a vetted subset: no backreferences, no lookaround, and no
repeat over a group that itself repeats or alternates. Either way at most :data:`MAX_TEXT`
characters of a text are searched.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

MAX_TEXT = 64 << 10  # characters of one tool result or message searched (the head of a longer one)
RE2_MAX_MEM = 8 << 20  # RE2's memory for one compiled pattern


def _re2() -> Any:
    try:
        import re2  # type: ignore[import-untyped]  # google-re2

        return re2
    except ImportError:  # no wheel for this platform: the vetted subset on Python's re
        return None


RE2: Any = _re2()


def engine() -> str:
    """What runs the policy's regexes here: ``re2``, or ``re (vetted subset)``."""
    return "re2" if RE2 is not None else "re (vetted subset)"


class PolicyPattern:
    """One compiled policy regex: :meth:`search` on at most :data:`MAX_TEXT` characters."""

    __slots__ = ("_rx", "groups", "pattern")

    def __init__(self, pattern: str, ignore_case: bool = False) -> None:
        self.pattern = pattern
        self._rx = _compile_re2(pattern, ignore_case) if RE2 is not None else _compile_vetted(pattern, ignore_case)
        self.groups: int = self._rx.groups

    def search(self, text: str) -> Any:
        """The first match (``group(n)`` as ``re``'s) in the text's head, or None."""
        return self._rx.search(text if len(text) <= MAX_TEXT else text[:MAX_TEXT])


def compile_pattern(pattern: str, ignore_case: bool = False) -> PolicyPattern:
    """``pattern`` compiled for the policy; :class:`ValueError` saying why one is refused."""
    return PolicyPattern(pattern, ignore_case)


def _compile_re2(pattern: str, ignore_case: bool) -> Any:
    options = RE2.Options()
    options.log_errors = False  # the ValueError below says it, once, where the user looks
    options.max_mem = RE2_MAX_MEM
    options.case_sensitive = not ignore_case
    try:
        return RE2.compile(pattern, options)
    except Exception as exc:  # noqa: BLE001 - re2.error: what RE2 cannot run in linear time, or bad syntax
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(f"not a valid regex for the linear-time engine (RE2: no backreferences or "
                         f"lookaround): {reason}") from None


def _compile_vetted(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    try:
        compiled = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ValueError(f"not a valid regex: {exc}") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import sre_parse  # the standard library's own parse of the pattern

        tree: Any = sre_parse.parse(pattern)
    why = _unsafe(list(tree), sre_parse, inside_repeat=False)
    if why:
        raise ValueError(f"regex may backtrack without bound ({why}); install google-re2 to use it")
    return compiled


def _unsafe(items: list[Any], sp: Any, inside_repeat: bool) -> str:
    """Why a parsed pattern is outside the vetted subset ('' when inside it)."""
    for op, av in items:
        if op in (sp.GROUPREF, sp.GROUPREF_EXISTS):
            return "a backreference"
        if op in (sp.ASSERT, sp.ASSERT_NOT):
            return "a lookaround"
        if op in (sp.MAX_REPEAT, sp.MIN_REPEAT, getattr(sp, "POSSESSIVE_REPEAT", None)):
            low, high, sub = av
            repeats = high is sp.MAXREPEAT or high > 1
            if repeats and inside_repeat:
                return "a repeat inside a repeat"
            why = _unsafe(list(sub), sp, inside_repeat or repeats)
            if why:
                return why
        elif op is sp.SUBPATTERN:
            why = _unsafe(list(av[-1]), sp, inside_repeat)
            if why:
                return why
        elif op is sp.BRANCH:
            if inside_repeat:
                return "an alternation inside a repeat"
            for branch in av[1]:
                why = _unsafe(list(branch), sp, inside_repeat)
                if why:
                    return why
    return ""
