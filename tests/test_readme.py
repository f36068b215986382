"""The README as a reader meets it: short, every `factweave` command it shows that needs no model
runs as shown, and every relative link (file and #anchor) leads somewhere."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_LINES = 300
# Subcommands that read no model and reach no network: their README lines run as they are.
NO_MODEL = {"models"}


def _fenced_lines(text: str) -> list[str]:
    """The lines inside fenced code blocks (``` or ~~~), stripped."""
    lines, fence = [], None
    for line in text.splitlines():
        stripped = line.strip()
        marker = stripped[:3]
        if marker in ("```", "~~~"):
            fence = None if fence == marker else (fence or marker)
            continue
        if fence:
            lines.append(stripped)
    return lines


def readme_commands() -> list[str]:
    """The README's `factweave ...` lines that need no model: `--help`, or a NO_MODEL subcommand."""
    commands = []
    for line in _fenced_lines(README.read_text(encoding="utf-8")):
        if not line.startswith("factweave "):
            continue
        args = shlex.split(line, comments=True)[1:]
        if "--help" in args or (args and args[0] in NO_MODEL):
            commands.append(line)
    return commands


def _headings(text: str) -> list[str]:
    """ATX headings outside fenced code blocks, as written."""
    headings, fence = [], None
    for line in text.splitlines():
        marker = line.strip()[:3]
        if marker in ("```", "~~~"):
            fence = None if fence == marker else (fence or marker)
            continue
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match and not fence:
            headings.append(match.group(1))
    return headings


def slug(heading: str) -> str:
    """The anchor GitHub and MkDocs both give these headings: markup dropped, lowercase, characters
    other than letters, digits, spaces, hyphens and underscores dropped, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"[`*]", "", text).lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return text.strip().replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in _headings(path.read_text(encoding="utf-8"))}


def relative_links(text: str) -> list[str]:
    """Markdown link and image targets that are not URLs (no scheme)."""
    targets = re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines (at most {MAX_LINES}): move text to docs/"


def test_the_readme_shows_commands_to_try():
    helps = [c for c in readme_commands() if "--help" in c]
    assert len(helps) >= 3, helps


@pytest.mark.parametrize("line", readme_commands())
def test_a_readme_command_runs_as_shown(line, tmp_path):
    args = shlex.split(line, comments=True)[1:]
    env = {**os.environ, "PYTHONPATH": str(REPO), "FACTWEAVE_CACHE": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True,
                            cwd=REPO, env=env, timeout=120, check=False)
    assert result.returncode == 0, f"{line}: exit {result.returncode}\n{result.stderr[-2000:]}"
    assert result.stdout.strip(), f"{line}: printed nothing"


def test_every_relative_link_of_the_readme_leads_somewhere():
    text = README.read_text(encoding="utf-8")
    links = relative_links(text)
    assert any(link.startswith("docs/") for link in links)
    broken = []
    for link in links:
        path, _, anchor = link.partition("#")
        target = (README.parent / path).resolve() if path else README
        if not target.exists():
            broken.append(f"{link}: no file {path}")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link}: no heading of {path or 'README.md'} has the anchor #{anchor}")
    assert not broken, "\n".join(broken)


def test_the_slug_rule():
    assert slug("Agent latency: where an answer's time goes") == "agent-latency-where-an-answers-time-goes"
    assert slug("Serving the agent (OpenAI-compatible)") == "serving-the-agent-openai-compatible"
    assert slug("Reasoning: the four methods on the reasoning datasets (qwen2.5-coder-0.5b)") == \
        "reasoning-the-four-methods-on-the-reasoning-datasets-qwen25-coder-05b"
    assert slug("`overhead.py`: constrained vs free generation") == "overheadpy-constrained-vs-free-generation"
