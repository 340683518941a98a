"""``make mutants`` (benchmarks/mutants.py) still does its job: every planted bug applies to the code
as it is, a site that no longer applies is named, and a planted bug is seen killed by its test.
The full run is minutes and stays outside the suite."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "mutants.py"


@pytest.fixture(scope="module")
def mutants() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutants", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutants"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_site_applies_to_the_code_as_it_is() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr  # a site that no longer applies: fix the site in benchmarks/mutants.py
    assert done.stdout.startswith("mutants: ") and done.stdout.endswith(" sites apply\n")


def test_a_site_that_no_longer_applies_is_named(mutants: ModuleType) -> None:
    gone = mutants.Mutant("policy/starter.py", "if seen >= rank and False:", "if seen > rank:", "moved on")
    twice = mutants.Mutant("policy/starter.py", "self.", "this.", "too common")
    assert mutants.check_sites(ROOT, [gone, twice]) == [
        "bad site 'policy/starter.py:if seen >= rank and False:': its text is not in policy/starter.py",
        f"bad site 'policy/starter.py:self.': its text is {(ROOT / 'otel_agenteval/policy/starter.py').read_text().count('self.')} "
        "times in policy/starter.py"]
    done = subprocess.run([sys.executable, str(SCRIPT), "--only", "nowhere/"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2 and "no site matches" in done.stderr


def test_a_planted_bug_is_killed_on_a_plain_python_copy(mutants: ModuleType, tmp_path: Path) -> None:
    """One mutant end to end (the same test passes on the unchanged code in the suite itself)."""
    [site] = [m for m in mutants.SITES if m.module == "policy/starter.py" and ">=" in m.old]
    mutants.copy_tree(ROOT, tmp_path)
    module = tmp_path / "otel_agenteval" / site.module
    assert not list(tmp_path.rglob("*.so"))  # plain Python, whatever the checkout was built as
    module.write_text(mutants.mutated(module.read_text(), site))
    assert mutants.run_tests(tmp_path, ["tests/test_init.py::test_init_from_a_few_runs_sets_budgets_those_runs_keep"],
                             120) == "failed"
