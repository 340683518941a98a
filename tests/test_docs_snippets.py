"""Every Python and shell block in README.md and docs/*.md runs (issue 26, item 4).

Each document's blocks run in order, as a reader would type them, in a copy of the repository's
tracked files (so they can write ``runs.jsonl.gz`` next to ``examples/``). The rules:

- A block that must not run has ``<!-- snippet: skip (why) -->`` on the line before its fence;
  each is reported here as a skipped test with its reason, and counted.
- A shell block runs in bash with ``pipefail``; every failing command fails the test, unless
  its comment says ``exit 1`` and that is the status it ended with.
- Lines that create a venv or ``pip install`` are not run here (this environment has the
  package already); ``.ci/first-hour.sh`` runs the README's first block as written, from a fresh
  clone in a fresh venv.
- The default ports (9464, 4317, 4318) become free ports, the same for a whole document.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
SKIP = re.compile(r"<!--\s*snippet:\s*skip\s*\((?P<why>.+)\)\s*-->")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)")
INSTALL = re.compile(r"^\s*(python3? -m venv\b|([A-Z_]+=\S+\s+)*pip install\b)")
EXIT_1 = re.compile(r"#.*\bexit 1\b")
PORTS = ("9464", "4317", "4318")
BLOCK_TIMEOUT_S = 180


@dataclass(frozen=True)
class Block:
    doc: str
    line: int  # of the opening fence
    lang: str  # "python" | "sh"
    text: str
    skip: str | None  # why it is not run

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The runnable-language blocks of one Markdown file, with their skip markers."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        lang = RUN.get(m.group("lang").lower())
        if lang is not None:
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marked = SKIP.search(before)
            out.append(Block(str(path.relative_to(ROOT)), i + 1, lang, "\n".join(lines[i + 1:end]),
                             marked.group("why") if marked else None))
        i = end + 1
    return out


ALL = [b for doc in DOCS for b in blocks(doc)]


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", "build"}


def _repo_files() -> list[str]:
    """The checkout's files (git's list), or every file of a copy that is not a checkout: .ci/test-pure.sh
    runs the suite in a copy of the tracked files, without .git."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True)
    if listed.returncode == 0 and (ROOT / ".git").exists():
        return listed.stdout.decode().split("\0")
    found = []
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in SKIPPED_DIRS]
        found += [str(Path(d, f).relative_to(ROOT)) for f in names if not f.endswith((".so", ".pyc"))]
    return found


def _copy_of_repo(dest: Path) -> Path:
    for name in filter(None, _repo_files()):
        src = ROOT / name
        if src.is_file() and not name.startswith("tests/frameworks/"):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / name)
    return dest


def run_block(b: Block, cwd: Path, ports: dict[str, str]) -> tuple[list[str], str]:
    """Run one block; (what went wrong, its output)."""
    text = b.text
    for port, free in ports.items():
        text = re.sub(rf"\b{port}\b", free, text)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if b.lang == "python":
        done = subprocess.run([sys.executable, "-c", text], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=BLOCK_TIMEOUT_S)
        output = done.stdout + done.stderr
        return ([] if done.returncode == 0 else [f"exit {done.returncode}"]), output
    lines = ["" if INSTALL.match(line) else line for line in text.splitlines()]
    status = cwd / ".snippet-status"
    status.write_text("")
    script = "\n".join([f"set -o pipefail; trap 'echo \"$LINENO $?\" >> {status}' ERR", *lines,
                        "trap - ERR; kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; true"])
    done = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT_S)
    problems = []
    for entry in status.read_text().split("\n"):
        if not entry:
            continue
        lineno, code = (int(x) for x in entry.split())
        source = lines[lineno - 2] if 2 <= lineno <= len(lines) + 1 else "?"
        if not (code == 1 and EXIT_1.search(source)):
            problems.append(f"line {b.line + lineno - 1}: exit {code}: {source.strip()}")
    return problems, done.stdout + done.stderr


@pytest.mark.parametrize("doc", [d for d in DOCS if any(b.skip is None for b in blocks(d))],
                         ids=lambda d: d.name)
def test_every_block_of_the_document_runs(doc: Path, tmp_path: Path) -> None:
    cwd = _copy_of_repo(tmp_path)
    ports = {p: _free_port() for p in PORTS}
    failed = []
    for b in blocks(doc):
        if b.skip is not None:
            continue
        problems, output = run_block(b, cwd, ports)
        if problems:
            failed.append(f"{b.where} ({b.lang}): {'; '.join(problems)}\n{output[-3000:]}")
        elif b is README_QUICK_START:
            # the headline, found with no policy: in the log and in /metrics
            assert "agenteval.violation: create_claim called again with identical arguments" in output, output
            assert re.search(r'agenteval_violations_total\{[^}]*rule="duplicate_write"[^}]*severity="warning"'
                             r'[^}]*tool="create_claim"[^}]*\} 1\.0', output), output
    assert not failed, "\n\n".join(failed)


@pytest.mark.parametrize("block", [b for b in ALL if b.skip is not None], ids=lambda b: b.where)
def test_marked_blocks_are_reported_skipped(block: Block) -> None:
    pytest.skip(f"{block.where}: not run: {block.skip}")


README_QUICK_START = blocks(ROOT / "README.md")[0]


def test_the_readme_opens_with_the_quick_start_and_every_skip_says_why() -> None:
    assert README_QUICK_START.skip is None and "examples/quickstart/main.py" in README_QUICK_START.text
    assert all(b.skip and b.skip.strip() for b in ALL if b.skip is not None)
    run, skipped = sum(b.skip is None for b in ALL), sum(b.skip is not None for b in ALL)
    print(f"docs snippets: {run} run, {skipped} skipped (marked)")
    assert run >= 7 and skipped <= run  # the parser found the blocks; skipping stays the exception


def test_blocks_are_found_with_their_markers(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("text\n```sh\necho 1\n```\n\n<!-- snippet: skip (needs Docker) -->\n\n```python\nprint(2)\n```\n"
                   "```yaml\na: 1\n```\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        found = blocks(doc)
    finally:
        ROOT = saved
    assert [(b.line, b.lang, b.text, b.skip) for b in found] == [
        (2, "sh", "echo 1", None), (8, "python", "print(2)", "needs Docker")]
