"""The user manual (docs/, built by mkdocs.yml) stays a manual: it builds without a warning,
its pages stay short enough to read, it speaks to users rather than about the work log, and
the README's links into it resolve.

The history of how results were reached lives in docs/history/, which is exempt from the
length and wording rules: it is a record, not a manual page.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MAX_PAGE_LINES = 300

# An issue reference: "issue 13", "issues 9 and 14", "Issue #13", "item 5 of ...", or a bare
# "#13". A bare "#" counts only before digits and not inside a word, a link anchor, a hex
# colour or a name such as "t#0", so "#fff", "](page.md#13-x)" and "t#0" stay legal.
ISSUE_REFERENCE = re.compile(
    r"\b[Ii]ssues?\s+#?\d+"
    r"|\b[Ii]tems?\s+\d+\s+of\b"
    r"|(?<![\w#/.-])(?<!\]\()#\d+(?![\w-])"
)
# Work-log narration that a manual has no use for.
NARRATION = re.compile(
    r"\bthis session\b|\b(first|second|third|fourth|fifth|sixth|seventh) session\b"
    r"|\b[Pp]ass \d+\b",
)
README_DOC_LINK = re.compile(r"\]\((docs/[^)#\s]+)(?:#[^)\s]*)?\)")


def user_pages() -> list[Path]:
    """Every manual page: docs/*.md, not the history record under docs/history/."""
    return sorted(DOCS.glob("*.md"))


def problems_in(text: str) -> list[str]:
    """The issue references and work-log phrases in a page's text, one entry per hit."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for pattern in (ISSUE_REFERENCE, NARRATION):
            found += [f"line {number}: {m.group(0)!r}" for m in pattern.finditer(line)]
    return found


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs not installed")
def test_the_manual_builds_in_strict_mode(tmp_path: Path) -> None:
    """Broken links, broken anchors and pages missing from the nav are warnings, and strict
    mode turns any warning into a failed build."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # the theme's banner is no warning
    )
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert result.returncode == 0 and not warnings, result.stderr[-4000:]
    assert (tmp_path / "index.html").is_file()


def test_there_are_user_pages() -> None:
    names = {page.name for page in user_pages()}
    assert {"index.md", "install.md", "model-card.md", "architecture.md"} <= names


@pytest.mark.parametrize("page", user_pages(), ids=lambda page: page.name)
def test_user_page_is_short(page: Path) -> None:
    lines = len(page.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_PAGE_LINES, f"{page.name}: {lines} lines (move history to docs/history/)"


@pytest.mark.parametrize("page", user_pages(), ids=lambda page: page.name)
def test_user_page_has_no_issue_numbers_or_work_log(page: Path) -> None:
    problems = problems_in(page.read_text(encoding="utf-8"))
    assert not problems, f"{page.name}: " + "; ".join(problems)


@pytest.mark.parametrize(
    "text",
    [
        "Fixed in issue 13.",
        "See #13 for details.",
        "(#13)",
        "Issues 9 and 14 say so.",
        "This is item 5 of the plan.",
        "As measured in this session.",
        "In pass 3 the gain vanished.",
        "Measured in the fourth session.",
    ],
)
def test_the_wording_check_catches(text: str) -> None:
    assert problems_in(text)


@pytest.mark.parametrize(
    "text",
    [
        "colour #fff and #13ab2f",
        "see [steady state](steady-state.md#13-runs)",
        "[the table](#13-workers)",
        "copies are named `t#0 .. t#<w-1>`",
        "a session's context is compacted",
        "the first pass of the router",
        "N = 13 servers, 5 items",
    ],
)
def test_the_wording_check_leaves_alone(text: str) -> None:
    assert not problems_in(text)


def test_readme_links_to_docs_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = README_DOC_LINK.findall(readme)
    assert targets, "the README links no docs page"
    missing = sorted({target for target in targets if not (ROOT / target).is_file()})
    assert not missing, f"README links to missing docs: {missing}"
