"""Scoring recorded runs against reference trajectories: matching, verdicts, pass^k, reports.

    cases = load_cases("cases.yaml")
    score = score_run(trajectory, cases[0], policy, violations)
    score.verdict, score.reasons, score.coverage, score.argument_accuracy
"""

from .cases.load import CasesError, ResolvedCase, cases_from_dict, cases_from_text, load_cases
from .reliability import CaseResult, TrialsError, mean_pass_hat_k, pass_at_k, pass_hat_k
from .score import RunScore, score_run

__all__ = [
    "CaseResult",
    "CasesError",
    "ResolvedCase",
    "RunScore",
    "TrialsError",
    "cases_from_dict",
    "cases_from_text",
    "load_cases",
    "mean_pass_hat_k",
    "pass_at_k",
    "pass_hat_k",
    "score_run",
]
