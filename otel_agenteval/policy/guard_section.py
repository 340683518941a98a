"""The policy's ``guard`` section: whether the guard stops calls or only says it would, per tool
or for all, and what it does when it cannot decide. See ``docs/guard.md``.

```yaml
guard:
  mode: enforce          # or observe: decide and count, block nothing (roll-out)
  on_error: closed       # closed | open; unset: closed for writes, open for other tools
  allow_rules: [write_retried_after_error]   # found, noted on the decision, not blocking
  tools:
    issue_refund: {mode: observe}
```
"""

from __future__ import annotations

from typing import Literal

from .sections import _Model

GuardMode = Literal["enforce", "observe"]
FailMode = Literal["closed", "open"]


class GuardToolPolicy(_Model):
    mode: GuardMode | None = None  # None: the section's mode
    on_error: FailMode | None = None


class GuardPolicy(_Model):
    mode: GuardMode = "enforce"
    on_error: FailMode | None = None  # None: closed for writes (and tools needing a yes), open for others
    # rules whose findings do not stop a call: a retry after a failed write may be what the user wants
    allow_rules: list[str] = ["write_retried_after_error"]
    tools: dict[str, GuardToolPolicy] = {}
