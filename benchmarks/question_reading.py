"""Reading a question costs about what its length says, whatever it is made of (no model).

Every step the agent runs on a question's text before and after the model (the rewrite of a
follow-up, keywords, the question type, the plan's options, the name and role asked through, the
answer checks, grounding, the chaining helpers, the listed-facts prompt) is timed on questions
of the largest length a door takes (``MAX_QUESTION_CHARS``) made to be hard: one name written
hundreds of times, with commas, parentheses, "and"/"or" between; hundreds of distinct names;
"of", possessives, quotes, one long run of capitalised words. Each is timed against a plain
question of the same length in the same run, and against its own first half; the ratios are
reported (not seconds), the least time of ``--rounds`` readings each.

Target: every hard question under 15x the plain one (a factor no fix of the kind below comes near
and no slow-down of that kind stays under), and twice the length under 3x the time (2.0 on an idle
machine; time growing with the square of the length would be 4x, a rescan per name read ~8x).

Measured before the second security review's fix (2 shared cores): "Ab, Ab, ..." 1,850x the plain
question (one name read back hundreds of times, each rescanning the question), "(Ab) (Ab) ..."
980x, "Ab and Ab and ..." 650x, 500 distinct names 35x, "he he he ..." 31x; twice the length of
"Ab, Ab, ..." took 7.7x the time. After it: every one under 5x, twice the length 2.2x.
These were timed tests until 2026-11; the targets live here now (timed tests fail on a loaded
machine and prove nothing on a fast one). ``tests/test_question_reading.py`` runs this script
once, untimed, so it cannot rot.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/question_reading.py [--rounds 5] \
        [--json benchmarks/results/question_reading.json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.pipeline import asked, chaining, comparison, grounding, plan, question_reading, values  # noqa: E402
from agent.pipeline.conversation import MAX_QUESTION_CHARS, check_question, rewrite_by_rules  # noqa: E402
from agent.prompts import listed_question  # noqa: E402
from agent.rerank.qtype import detect_question_type  # noqa: E402
from agent.knowledge.keywords import bridge_entities, extract_keywords  # noqa: E402

FACTS = ["<Lamp Street> <director> <Ann Lee> .", "Lamp Street is a 1961 drama directed by Ann Lee and starring Bo Rask.",
         "<Ann Lee> <spouse> <Bo Rask> .", "Ab Cd was born in Oslo in 1901."]
HISTORY = [{"role": "user", "content": "Where did Buck Owens die?"},
           {"role": "assistant", "content": "Fact: <Buck Owens> <place of death> <Bakersfield> .\nAnswer: Bakersfield"}]
RATIO_TARGET, GROWTH_TARGET = 15.0, 3.0


class Hit:
    def __init__(self, text: str) -> None:
        self.text, self.provenance = text, {"title": "Lamp Street"}


def read_question(question: str) -> None:
    """The agent's question-reading steps on ``question`` (as a follow-up, and as it reads the
    standalone question after), the model's parts left out."""
    question = rewrite_by_rules(check_question(question), HISTORY).standalone
    names = extract_keywords(question, limit=40)
    detect_question_type(question)
    found, _ = plan.find_options(question, ["Lamp Street", "Ann Lee", "Ab", *names])
    plan.order_asked(question)
    plan.said_of_both(question, found)
    plan.said_of_one(question, found)
    plan.role_nouns(question, found)
    the_plan = plan.QuestionPlan("choice", tuple(found[:2]) or ("Ab", "Cd"), "", {})
    comparison.same_attribute(question)
    comparison.asked_event(None, question, the_plan)
    named, noun = question_reading.asked_through(question)
    question_reading.ask_past(question, named or "Ab", noun or "director", "Ann Lee")
    question_reading.asked_clause(question)
    question_reading.asked_noun(question)
    values.answer_type_fits(question, "Ann Lee")
    question_reading.offered_alternatives(question)
    asked.repeats_a_name(question, "Ab", FACTS)
    checker = asked.AskedChecker(None)
    checker.check(question, "Ann Lee", FACTS, [0, 1, 2])
    checker.check(question, "Oslo", FACTS[3:], [0])
    grounding.ground(question, "Ann Lee", FACTS)
    grounding.connected_prefix(question, FACTS)
    grounding.asked_about(question)
    chaining.hop_query(question, FACTS[0], "Ann Lee")
    chaining.role_holder(FACTS[1], question, "director")
    chaining.role_lead([Hit(FACTS[1])], question, (named or "Lamp Street", noun or "director"))
    bridge_entities(FACTS[1], question)
    listed_question(question, FACTS)


def of_length(unit: str, head: str = "") -> str:
    """``head``, then ``unit`` over and over, to :data:`MAX_QUESTION_CHARS` with the "?"."""
    body = head + unit * (MAX_QUESTION_CHARS // len(unit) + 1)
    return body[: MAX_QUESTION_CHARS - 1] + "?"


PLAIN = of_length("the river stone house by the garden was quiet under bright music and paper windows, ",
                  "Which market near Oslo sold letters when ")
ADVERSARIAL = {
    "one name, commas": of_length("Ab, "),
    "one name, and": of_length("Ab and "),
    "one name, or": of_length("Ab or "),
    "one name, parentheses": of_length("(Ab) "),
    "one name, quotes": of_length('"Ab" '),
    "one long name": of_length("Ab "),
    "capitalised words": of_length("Abc Def Ghi Jkl Mno Pqr Stu Vwx "),
    "distinct names": ", ".join(f"A{a}{b}" for a, b in itertools.product("abcdefghijklmnopqrstuvwxyz", repeat=2))
                      [: MAX_QUESTION_CHARS - 1] + "?",
    "of": of_length("the director of ", "Who is "),
    "name of name": of_length("Ab of ", "Who is "),
    "possessives": of_length("Ab's ", "When was "),
    "possessive roles": of_length("Ab's father "),
    "relative clauses": of_length("Who directed Ab "),
    "pronouns": of_length("he "),
    "digits": of_length("1, "),
}


def best_of(question: str, rounds: int) -> float:
    """The least time of ``rounds`` readings (one when it took over a second: far past any
    ratio a second try could bring under the target)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        read_question(question)
        best = min(best, time.perf_counter() - started)
        if best > 1.0:
            break
    return best


def measure(rounds: int) -> dict:
    plain = best_of(PLAIN, rounds)
    rows = []
    for name, question in ADVERSARIAL.items():
        whole = best_of(question, rounds)
        half = best_of(question[: MAX_QUESTION_CHARS // 2 - 1] + "?", rounds)
        rows.append({"question": name, "chars": len(question), "seconds": round(whole, 5),
                     "ratio_to_plain": round(whole / plain, 2), "twice_the_length": round(whole / half, 2)})
    return {"environment": {"python": platform.python_version(), "machine": platform.machine(),
                            "cpus": os.cpu_count(), "loadavg_1m_after": round(os.getloadavg()[0], 2)},
            "max_question_chars": MAX_QUESTION_CHARS, "rounds": rounds, "plain_seconds": round(plain, 5),
            "targets": {"ratio_to_plain_under": RATIO_TARGET, "twice_the_length_under": GROWTH_TARGET},
            "results": rows,
            "over_target": [r["question"] for r in rows
                            if r["ratio_to_plain"] >= RATIO_TARGET or r["twice_the_length"] >= GROWTH_TARGET]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="readings per question; the least time is kept")
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "question_reading.json")
    args = parser.parse_args()
    out = measure(max(1, args.rounds))
    print(f"plain question of {MAX_QUESTION_CHARS} characters: {out['plain_seconds'] * 1000:.1f} ms")
    print("| question | x plain | twice the length: x time |")
    print("|---|---|---|")
    for r in out["results"]:
        print(f"| {r['question']} | {r['ratio_to_plain']} | {r['twice_the_length']} |")
    print(f"over target: {', '.join(out['over_target']) or 'none'} (load {out['environment']['loadavg_1m_after']})")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
