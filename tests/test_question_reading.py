"""The hardest questions a door takes are read whole, and a follow-up's rewrite keeps the bound.

How long reading them takes, against a plain question of their length, is a benchmark
(``benchmarks/question_reading.py``: targets and figures there, not in a timed test); it is run
here once, untimed, so it keeps working.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent.pipeline.conversation import MAX_QUESTION_CHARS, rewrite_by_rules

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import question_reading as bench  # noqa: E402


def test_every_question_is_as_long_as_a_door_takes():
    assert len(bench.PLAIN) == MAX_QUESTION_CHARS
    assert all(len(q) <= MAX_QUESTION_CHARS for q in bench.ADVERSARIAL.values())


def test_the_benchmark_reads_every_hard_question_and_reports_its_ratios(tmp_path):
    out = tmp_path / "reading.json"
    proc = subprocess.run([sys.executable, "benchmarks/question_reading.py", "--rounds", "1", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert [r["question"] for r in result["results"]] == list(bench.ADVERSARIAL)
    assert all(r["ratio_to_plain"] > 0 and r["twice_the_length"] > 0 for r in result["results"])
    assert "loadavg_1m_after" in result["environment"] and "| one name, commas |" in proc.stdout


def test_a_follow_up_made_standalone_stays_within_the_question_bound():
    """Every "he" of "he he he ..." made "Buck Owens" would make a 6,000-character question that
    no door takes (the web's search refused it) and each later step reads whole: kept as asked."""
    question = bench.of_length("he ")
    rewrite = rewrite_by_rules(question, bench.HISTORY)
    assert rewrite.standalone == question and "kept as asked" in rewrite.how
    assert rewrite_by_rules("What instrument did he play?", bench.HISTORY).standalone == \
        "What instrument did Buck Owens play?"
