"""A sampled judge beside the rules: it scores a share of finished runs on dimensions a rule
cannot decide (explanation quality, tone), and informs without gating. ``sampling`` (which runs,
by trace id), ``result`` (``JudgeResult``, the judge's answer), ``render`` (a run as the judge
reads it: what is sent), ``chat`` (an OpenAI-compatible endpoint as a judge), ``worker`` (the
bounded queue and its threads), ``sink`` (finished runs in, judgements out: events, series,
callbacks), ``offline`` (``replay --judge``, ``score --judge``), ``agreement`` and its command.

A judge never adds a violation and never blocks a call. Stage 7 (after ``metrics``): imports the
stages below it; imported by the doors (processor, cli).
"""

from .result import Judge, Judgement, JudgeResult

__all__ = ["Judge", "JudgeResult", "Judgement"]
