"""Reading a question costs about what its length says, whatever it is made of (no model).

Every step the agent runs on a question's text before and after the model (the rewrite of a
follow-up, keywords, the question type, the plan's options, the name and role asked through, the
answer checks, grounding, the chaining helpers, the listed-facts prompt) is timed on questions
of the largest length a door takes (``MAX_QUESTION_CHARS``) made to be hard: one name written
hundreds of times, with commas, parentheses, "and"/"or" between; hundreds of distinct names;
"of", possessives, quotes, one long run of capitalised words. Each is timed against a plain
question of the same length in the same run; the ratio is what is checked (not seconds).

Measured before the second security review's fix (this test, 2 shared cores): "Ab, Ab, ..." 1,850x
the plain question (one name read back hundreds of times, each rescanning the question),
"(Ab) (Ab) ..." 980x, "Ab and Ab and ..." 650x, 500 distinct names 35x, "he he he ..." 31x (made
standalone, every "he" a name: 6,000 characters read by every step after); twice the length of
"Ab, Ab, ..." took 7.7x the time. After it: every one under 5x the plain question, and twice the
length about twice the time (2.2x).
"""
from __future__ import annotations

import itertools
import time

import pytest

from agent.pipeline import asked, chaining, grounding, options, plan
from agent.pipeline.conversation import MAX_QUESTION_CHARS, check_question, rewrite_by_rules
from agent.prompts import listed_question
from agent.rerank.qtype import detect_question_type
from agent.web.keywords import bridge_entities, extract_keywords

FACTS = ["<Lamp Street> <director> <Ann Lee> .", "Lamp Street is a 1961 drama directed by Ann Lee and starring Bo Rask.",
         "<Ann Lee> <spouse> <Bo Rask> .", "Ab Cd was born in Oslo in 1901."]
HISTORY = [{"role": "user", "content": "Where did Buck Owens die?"},
           {"role": "assistant", "content": "Fact: <Buck Owens> <place of death> <Bakersfield> .\nAnswer: Bakersfield"}]
# A factor no fix of the kind above comes near, and no slow-down of that kind stays under.
RATIO = 15


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
    options.same_attribute(question)
    options.asked_event(None, question, the_plan)
    named, noun = asked.asked_through(question)
    asked.ask_past(question, named or "Ab", noun or "director", "Ann Lee")
    asked.asked_clause(question)
    asked.asked_noun(question)
    asked.answer_type_fits(question, "Ann Lee")
    asked.offered_alternatives(question)
    asked.repeats_a_name(question, "Ab", FACTS)
    asked.answers_a_description(question, "Ann Lee", FACTS[1])
    asked.names_another_of_the_kind(question, "Ann Lee", FACTS[1])
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


def best_of(question: str, rounds: int = 3) -> float:
    """The least time of ``rounds`` readings (one when it took over a second: far past any
    ratio a second try could bring under the bound)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        read_question(question)
        best = min(best, time.perf_counter() - started)
        if best > 1.0:
            break
    return best


def test_every_question_is_as_long_as_a_door_takes():
    assert len(PLAIN) == MAX_QUESTION_CHARS
    assert all(len(q) <= MAX_QUESTION_CHARS for q in ADVERSARIAL.values())


def test_a_hard_question_is_read_in_about_the_time_of_a_plain_one_of_its_length():
    plain = best_of(PLAIN)
    ratios = {name: best_of(question) / plain for name, question in ADVERSARIAL.items()}
    slow = {name: round(r, 1) for name, r in ratios.items() if r >= RATIO}
    assert not slow, f"read {RATIO}x slower or more than a plain question of their length: {slow}"


@pytest.mark.parametrize("name", ["one name, commas", "distinct names"])
def test_reading_a_question_grows_with_its_length_not_faster(name):
    """Twice the length, about twice the time (3x allowed: 2.0 on an idle machine, 2.7 once in a
    loaded CI run; time growing with the square of the length would be 4x, a rescan per name read
    was ~8x). The best of five readings each."""
    question = ADVERSARIAL[name]
    half = question[: MAX_QUESTION_CHARS // 2 - 1] + "?"
    assert best_of(question, rounds=5) / best_of(half, rounds=5) < 3.0


def test_a_follow_up_made_standalone_stays_within_the_question_bound():
    """Every "he" of "he he he ..." made "Buck Owens" would make a 6,000-character question that
    no door takes (the web's search refused it) and each later step reads whole: kept as asked."""
    question = of_length("he ")
    rewrite = rewrite_by_rules(question, HISTORY)
    assert rewrite.standalone == question and "kept as asked" in rewrite.how
    assert rewrite_by_rules("What instrument did he play?", HISTORY).standalone == \
        "What instrument did Buck Owens play?"
