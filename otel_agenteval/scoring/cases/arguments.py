"""A required call's arguments against a call's: the four modes and dotted keys, after normalisers.

``superset`` (every expected argument matches; the call may carry others), ``exact`` (the same
names, each matching; names whose normaliser is ``ignore`` aside), ``subset`` (every argument
the call carries is expected and matches), ``ignore`` (the tool only), or only some dotted
``keys`` (``a.b.c`` into nested objects; missing on both sides matches).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...model.normalise import PLAIN, ArgumentRule

_MISSING = object()


def _dig(args: Any, dotted: str) -> Any:
    """The value at ``a.b.c`` in nested mappings, or ``_MISSING``."""
    cur = args
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


class ExpectedCall:
    """A required call ready to compare: one :class:`ArgumentRule` per argument, and its mode.

    ``mode``: ``superset`` (every expected argument matches; the call may carry others),
    ``exact`` (the same names, each matching; names whose normaliser is ``ignore`` aside),
    ``subset`` (every argument the call carries is expected and matches), ``ignore`` (the tool
    only), or ``keys`` (only the dotted ``keys``, missing on both sides matching).
    """

    __slots__ = ("_compared", "_other", "args", "keys", "mode", "name", "position", "rules", "tool")

    def __init__(self, tool: str, args: dict[str, Any], name: str, position: int, specs: Mapping[str, Sequence[str]],
                 mode: str = "superset", keys: Sequence[str] | None = None) -> None:
        self.tool = tool
        self.args = args
        self.name = name
        self.position = position
        self.rules = {k: ArgumentRule(specs.get(k, ())) for k in args}
        # normalisers of names the reference does not give (exact and subset look at the call's names)
        self._other = {k: ArgumentRule(v) for k, v in specs.items() if k not in args}
        self.mode = "keys" if keys else mode
        self.keys = tuple(keys or ())
        if keys:
            self.rules = {k: ArgumentRule(specs.get(k, ())) for k in keys}
        self._compared = tuple((k, self.args[k], r) for k, r in self.rules.items() if not r.ignore and k in self.args)

    def _rule(self, k: str) -> ArgumentRule:
        r = self.rules.get(k)
        return r if r is not None else self._other.get(k, PLAIN)

    def accepts(self, arguments: dict[str, Any]) -> bool:
        """Whether a call's arguments satisfy this one (the tool is checked by the caller)."""
        mode = self.mode
        if mode == "superset" or mode == "exact":
            for k, exp, rule in self._compared:
                if k not in arguments or not rule.matches(exp, arguments[k]):
                    return False
            if mode == "exact":
                for k in arguments:
                    if k not in self.args and not self._rule(k).ignore:
                        return False
            return True
        return not self.wrong(arguments) if mode != "ignore" else True

    def wrong(self, arguments: dict[str, Any]) -> list[str]:
        """The argument names that keep the call from matching (``+name``: one not expected)."""
        mode = self.mode
        if mode == "ignore":
            return []
        if mode == "keys":
            bad = []
            for k, rule in self.rules.items():
                exp, got = _dig(self.args, k), _dig(arguments, k)
                if rule.ignore or (exp is _MISSING and got is _MISSING):
                    continue
                if exp is _MISSING or got is _MISSING or not rule.matches(exp, got):
                    bad.append(k)
            return bad
        if mode == "subset":
            bad = []
            for k, v in arguments.items():
                rule = self._rule(k)
                if rule.ignore:
                    continue
                if k not in self.args:
                    bad.append("+" + k)
                elif not rule.matches(self.args[k], v):
                    bad.append(k)
            return bad
        bad = [k for k, exp, rule in self._compared if k not in arguments or not rule.matches(exp, arguments[k])]
        if mode == "exact":
            bad += ["+" + k for k in arguments if k not in self.args and not self._rule(k).ignore]
        return bad

    def label(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        return f"{self.tool}({args})"
