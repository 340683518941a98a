"""``rerun``: every recorded conversation of some trace files, rerun by a candidate agent.

Conversations run one after another, or in ``jobs`` worker processes (``spawn``ed: the agent is
named ``MODULE:CALLABLE``, or is a callable that pickles by reference, a module-level function).
The trace files are only read; the candidate's spans are written to ``traces_out`` if given.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import importlib
import importlib.util
import multiprocessing
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..policy.policy import Policy
from .harness import ConversationResult, Settings, rerun_conversation
from .recording import RecordedConversation, read_conversations

Agent = Callable[..., Any]


class AgentError(ValueError):
    """``--agent`` or ``--stubs`` does not name something importable: the message says which."""


def load_agent(spec: str) -> Agent:
    """``package.module:callable`` or ``path/to/file.py:callable`` (a dotted attribute path after
    the colon) -> the callable."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise AgentError(f"invalid --agent {spec!r}: expected MODULE:CALLABLE")
    obj: Any = load_module(module_name, "--agent")
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AgentError(f"invalid --agent {spec!r}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise AgentError(f"invalid --agent {spec!r}: {attr} is not callable")
    return obj  # type: ignore[no-any-return]


def load_module(name: str, setting: str = "--stubs") -> ModuleType:
    """A module by name, or a ``.py`` file by path (imported once per process under its path)."""
    try:
        if not name.endswith(".py"):
            return importlib.import_module(name)
        path = Path(name).resolve()
        key = "_agenteval_rerun_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
        if key in sys.modules:
            return sys.modules[key]
        spec = importlib.util.spec_from_file_location(key, path)
        if spec is None or spec.loader is None or not path.is_file():
            raise ImportError(f"no such file: {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
        return module
    except Exception as exc:  # noqa: BLE001 - the user's module failing to import is bad input
        raise AgentError(f"invalid {setting} {name!r}: cannot import it ({type(exc).__name__}: {exc})") from None


@dataclass
class RerunResult:
    """What :func:`rerun` returns: one result per recorded conversation, in recorded order."""

    conversations: list[ConversationResult] = field(default_factory=list)
    recorded: int = 0  # conversations read
    settings: Settings = field(default_factory=Settings)


_POLICIES: dict[str, Policy] = {}  # a worker process's policy, read once from its file


def _policy_of(path: str) -> Policy:
    policy = _POLICIES.get(path)
    if policy is None:
        from ..engine.dispatch import load_custom_rules

        policy = _POLICIES[path] = Policy.from_file(path)
        if policy.custom_rules:
            load_custom_rules(policy)
    return policy


def _one(conversation: RecordedConversation, agent: Agent | str, settings: Settings) -> ConversationResult:
    if settings.policy is None and settings.policy_file:
        settings.policy = _policy_of(settings.policy_file)
    fn = load_agent(agent) if isinstance(agent, str) else agent
    stubs = load_module(settings.stubs) if settings.stubs else None
    return rerun_conversation(conversation, fn, settings, stubs)


def rerun(traces: Iterable[str | Path], agent: Agent | str, *, policy: Policy | None = None,
          on_divergence: str = "stop", stubs: str | None = None, jobs: int = 1, max_steps: int = 50,
          timeout_s: float = 60.0, normalisers: dict[str, dict[str, list[str]]] | None = None,
          traces_out: str | Path | None = None, policy_file: str | Path | None = None,
          conversations: Sequence[RecordedConversation] | None = None) -> RerunResult:
    """Rerun every recorded conversation of ``traces`` with ``agent``; see :mod:`otel_agenteval.rerun`.

    ``conversations`` (from :func:`read_conversations`) skips reading the files again. With
    ``jobs`` > 1, give ``policy_file`` (the file ``policy`` was read from): each worker reads it.
    """
    if on_divergence not in ("stop", "stub"):
        raise ValueError(f"invalid on_divergence {on_divergence!r}: stop or stub")
    if on_divergence == "stub" and not stubs:
        raise ValueError("on_divergence='stub' needs stubs (a module of stub functions)")
    if jobs < 1 or max_steps < 1 or timeout_s <= 0:
        raise ValueError("jobs and max_steps must be >= 1, timeout_s > 0")
    if isinstance(agent, str):
        load_agent(agent)  # a bad name is an error now, not in every worker
    if stubs:
        load_module(stubs)
    if policy is None and policy_file is not None:
        policy = _policy_of(str(policy_file))
    settings = Settings(policy, str(policy_file) if policy_file else None, on_divergence, stubs, max_steps, timeout_s,
                        normalisers, traces_out is not None)
    recorded = list(conversations) if conversations is not None else read_conversations(traces, policy)
    if jobs > 1:
        _picklable(agent, settings)
    if jobs == 1 or len(recorded) < 2:
        results = [_one(c, agent, settings) for c in recorded]
    else:
        if settings.policy_file:
            settings = dataclasses.replace(settings, policy=None)  # each worker reads the file
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_quiet) as pool:
            chunk = max(1, len(recorded) // (jobs * 4))
            results = list(pool.map(_one, recorded, [agent] * len(recorded), [settings] * len(recorded),
                                    chunksize=chunk))
    if traces_out is not None:
        _write(Path(traces_out), results)
    return RerunResult(results, len(recorded), dataclasses.replace(settings, policy=policy))


def _picklable(agent: Agent | str, settings: Settings) -> None:
    """What goes to a worker process must pickle: say which part does not, and what to pass instead."""
    import pickle

    for what, value, instead in (("agent", agent, "'MODULE:CALLABLE' or a module-level function"),
                                 ("policy", settings.policy if not settings.policy_file else None,
                                  "policy_file= (each worker reads it)")):
        try:
            pickle.dumps(value)
        except Exception:  # noqa: BLE001 - any pickling failure says the same
            raise ValueError(f"with jobs > 1 the {what} is sent to worker processes and cannot be: pass {instead}") from None


def _quiet() -> None:
    """A worker logs errors only, to stderr: its violations come back in the results, and standard
    output may be the report."""
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))


def _write(path: Path, results: list[ConversationResult]) -> None:
    with (gzip.open(path, "wt", encoding="utf-8") if path.suffix == ".gz" else open(path, "w", encoding="utf-8")) as f:
        for r in results:
            for line in r.spans:
                f.write(line + "\n")
            r.spans = []


__all__ = ["AgentError", "RerunResult", "load_agent", "rerun"]
