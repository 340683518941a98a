"""The policy's ``judge`` section: which finished runs a judge scores, on which dimensions, through
which endpoint, and whether any dimension is trusted yet. See ``docs/judge.md``.

```yaml
judge:
  rate: 0.10               # the share of runs judged, decided by trace id (every replica, every replay)
  agents: {billing: 0.5}   # per-agent rates
  include_flagged: true    # a run with a critical finding is always judged
  content: false           # argument values, results and messages are sent only when true
  endpoint: {base_url: "http://127.0.0.1:8000/v1", model: gpt-4o-mini, timeout_s: 10}
  trust_threshold: 0.6     # the team's bar: agreement (kappa) a dimension needs to be trusted
  dimensions:
    explanation_quality:
      rubric: "Does the agent explain what it did and why?"
      labels: [good, poor]
      trusted: true
      agreement: {kappa: 0.72, labels: 140, measured: "2026-11-30"}
```

A judge informs: it never adds a violation and never blocks a call, trusted or not.
"""

from __future__ import annotations

import re

from pydantic import Field, StrictBool, field_validator, model_validator

from .sections import _Model

DIMENSION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")  # a metric label value: short, safe


class Agreement(_Model):
    """A recorded agreement with human labels (``otel-agenteval agreement``): what ``trusted`` rests on."""

    kappa: float = Field(ge=-1, le=1)
    labels: int = Field(gt=0)  # how many human labels it was measured on
    measured: str = ""  # when (free text: a date, a report's path)


class Dimension(_Model):
    rubric: str = Field(min_length=1)
    labels: list[str] = ["pass", "fail"]  # the labels the judge may answer with
    trusted: StrictBool = False
    agreement: Agreement | None = None


class Endpoint(_Model):
    """An OpenAI-compatible chat completions endpoint (``POST {base_url}/chat/completions``)."""

    base_url: str
    model: str = Field(min_length=1)
    api_key_env: str | None = None  # the environment variable holding the key (never the key itself)
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    retries: int = Field(default=2, ge=0, le=10)
    backoff_s: float = Field(default=0.5, ge=0, le=60)
    concurrency: int = Field(default=2, gt=0, le=64)  # requests in flight at once (the judge's threads)
    max_chars: int = Field(default=8000, ge=500)  # the rendered run, cut past this

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r}: must be an http:// or https:// URL")
        return value.rstrip("/")


class JudgePolicy(_Model):
    rate: float = Field(default=0.0, ge=0, le=1)
    agents: dict[str, float] = {}
    include_flagged: StrictBool = True
    content: StrictBool = False
    endpoint: Endpoint | None = None
    queue_size: int = Field(default=1000, gt=0)  # sampled runs waiting for the judge; more are dropped, counted
    trust_threshold: float | None = Field(default=None, ge=-1, le=1)
    min_labels: int = Field(default=50, gt=0)  # fewer human labels than this is not a measurement
    dimensions: dict[str, Dimension] = {}

    @field_validator("agents")
    @classmethod
    def _rates(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [name for name, rate in value.items() if not 0.0 <= rate <= 1.0]
        if bad:
            raise ValueError(f"rate of {', '.join(map(repr, bad))}: must be between 0 and 1")
        return value

    @field_validator("dimensions")
    @classmethod
    def _names(cls, value: dict[str, Dimension]) -> dict[str, Dimension]:
        bad = [name for name in value if not DIMENSION_NAME.match(name)]
        if bad:
            raise ValueError(f"{', '.join(map(repr, bad))}: a dimension is named in lower case letters, digits "
                             "and _ (it becomes a metric label)")
        return value

    @model_validator(mode="after")
    def _trust_is_measured(self) -> JudgePolicy:
        for name, d in self.dimensions.items():
            if not d.trusted:
                continue
            where = f"dimensions.{name}.trusted"
            if self.trust_threshold is None:
                raise ValueError(f"{where}: set judge.trust_threshold (the agreement your team requires) first")
            if d.agreement is None:
                raise ValueError(f"{where}: needs a recorded agreement (dimensions.{name}.agreement, "
                                 "from `otel-agenteval agreement`)")
            if d.agreement.labels < self.min_labels:
                raise ValueError(f"{where}: its agreement rests on {d.agreement.labels} labels, fewer than "
                                 f"judge.min_labels ({self.min_labels}): not a measurement")
            if d.agreement.kappa < self.trust_threshold:
                raise ValueError(f"{where}: its agreement (kappa {d.agreement.kappa}) is below "
                                 f"judge.trust_threshold ({self.trust_threshold})")
        return self

    @property
    def enabled(self) -> bool:
        """Some run can be judged: a dimension, and a rate or flagged runs."""
        return bool(self.dimensions) and (self.rate > 0 or any(self.agents.values()) or self.include_flagged)

    def rate_for(self, agent: str) -> float:
        return self.agents.get(agent, self.rate)
