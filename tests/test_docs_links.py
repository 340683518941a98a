"""Every relative link in the Markdown files resolves: the file exists, and an anchor names a
heading of that file (GitHub's slugs) or an explicit ``<a id>``/``name``. Code blocks are skipped."""

from __future__ import annotations

import re
import subprocess
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def markdown_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=False)
    names = listed.stdout.split() if listed.returncode == 0 and listed.stdout else \
        [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.md") if ".venv" not in p.parts]
    return sorted(ROOT / n for n in names if (ROOT / n).is_file())


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    out, fence = [], None
    for line in text.splitlines():
        m = re.match(r"^\s*(```|~~~)", line)
        if m:
            fence = None if fence == m.group(1) else fence or m.group(1)
            continue
        if fence is None:
            out.append(line)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text
    text = text.replace("`", "").lower()
    return "".join(c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LN").replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(path.read_text(encoding="utf-8")):
        out.update(EXPLICIT.findall(line))
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    out = []
    for line in _prose(path.read_text(encoding="utf-8")):
        line = re.sub(r"`[^`]*`", "", line)  # links inside inline code are not links
        for m in LINK.finditer(line):
            target = m.group(1) or m.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                out.append(f"{target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                where = dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest.name
                out.append(f"{target}: no heading #{anchor} in {where}")
    return out


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_checker_finds_a_broken_anchor_and_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title `x` (y)\n\n## Same\n## Same\n\n```\n[in code](nowhere.md)\n```\n"
                                   "[ok](#title-x-y) [ok](#same-1) [bad](#nope) [gone](b.md) [ok](a.md#same)\n")
    assert broken_links(tmp_path / "a.md") == ["#nope: no heading #nope in a.md", "b.md: no such file"]
