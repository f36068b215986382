"""The step over two options, computed in code from the values read for each and the facts
stated for them (no model): a value counts only when a fact of its option holds it; dates and
numbers compared by what their texts say; "same" by the words, "different" only when the two
values are far apart."""
from __future__ import annotations

from agent.pipeline.options import OptionReading, compute_step
from agent.pipeline.plan import QuestionPlan

FACTS = ["Quiet Harbour is a 1954 drama directed by Paul Amsel.",
         "Paul Amsel (12 March 1901 – 4 May 1970) was a German director.",
         "The Winter Gate is a 1961 film directed by Helga Stern.",
         "Helga Stern (born 8 June 1915) is an Austrian film director."]


def _readings(a_value: str, b_value: str, a_facts=(0, 1), b_facts=(2, 3)):
    return [OptionReading("Quiet Harbour", facts=list(a_facts), value=a_value, read_from=[a_facts[-1]]),
            OptionReading("The Winter Gate", facts=list(b_facts), value=b_value, read_from=[b_facts[-1]])]


def test_a_choice_by_the_dates_the_facts_give():
    plan = QuestionPlan("choice", ("Quiet Harbour", "The Winter Gate"), "earlier", role="director")
    answer, shown, how, used = compute_step(plan, _readings("12 March 1901", "8 June 1915"), FACTS)
    assert (answer, shown, used) == ("Quiet Harbour", True, (0, 1, 2, 3))
    assert how.startswith("compared: Quiet Harbour 12 March 1901 (fact 2), The Winter Gate 8 June 1915 (fact 4)")
    later = QuestionPlan("choice", ("Quiet Harbour", "The Winter Gate"), "later", role="director")
    assert compute_step(later, _readings("12 March 1901", "8 June 1915"), FACTS)[0] == "The Winter Gate"


def test_verify_answers_yes_or_no():
    plan = QuestionPlan("verify", ("Quiet Harbour", "The Winter Gate"), "earlier")
    assert compute_step(plan, _readings("12 March 1901", "8 June 1915"), FACTS)[:2] == ("yes", True)
    plan = QuestionPlan("verify", ("Quiet Harbour", "The Winter Gate"), "later")
    assert compute_step(plan, _readings("12 March 1901", "8 June 1915"), FACTS)[:2] == ("no", True)


def test_a_value_no_fact_of_its_option_holds_shows_nothing():
    plan = QuestionPlan("choice", ("Quiet Harbour", "The Winter Gate"), "earlier")
    # 1961 is the other option's year; 3 May 1902 is in no fact at all
    for a_value in ("1961", "3 May 1902", "unknown", ""):
        answer, shown, how, _ = compute_step(plan, _readings(a_value, "8 June 1915"), FACTS)
        assert (answer, shown) == ("", False) and "Quiet Harbour" in how


def test_dates_that_do_not_say_which_is_first_decide_nothing():
    facts = ["Harbor Lights was released in 1954.", "Dune Sea was released on 3 May 1954."]
    readings = [OptionReading("Harbor Lights", facts=[0], value="1954", read_from=[0]),
                OptionReading("Dune Sea", facts=[1], value="3 May 1954", read_from=[1])]
    plan = QuestionPlan("choice", ("Harbor Lights", "Dune Sea"), "earlier")
    answer, shown, how, _ = compute_step(plan, readings, facts)
    assert not shown and "do not say which is earlier" in how


def test_who_lived_longer_compares_the_spans_of_the_lives():
    facts = ["Bernhard Afinger (6 May 1813 – 25 December 1882) was a German sculptor.",
             "Melvin Kranzberg (November 22, 1917 – December 6, 1995) was an American historian."]
    readings = [OptionReading("Bernhard Afinger", facts=[0], value="6 May 1813", read_from=[0]),
                OptionReading("Melvin Kranzberg", facts=[1], value="November 22, 1917", read_from=[1])]
    plan = QuestionPlan("choice", ("Bernhard Afinger", "Melvin Kranzberg"), "more")
    assert compute_step(plan, readings, facts)[:2] == ("Melvin Kranzberg", True)  # 78 years against 69


def test_same_or_different_values():
    facts = ["Ada Varga (1920–1999) was a Hungarian sculptor.", "Ines Varro was an Italian painter.",
             "Bo Rask was a Hungarian poet."]

    def readings(b: int, b_value: str):
        return [OptionReading("Ada Varga", facts=[0], value="Hungarian", read_from=[0]),
                OptionReading("Other", facts=[b], value=b_value, read_from=[b])]

    plan = QuestionPlan("same", ("Ada Varga", "Other"))
    assert compute_step(plan, readings(2, "Hungarian"), facts)[:2] == ("yes", True)
    far = lambda a, b: 0.1  # noqa: E731 - an embedder's cosine, far apart
    near = lambda a, b: 0.9  # noqa: E731 - two names of one thing
    assert compute_step(plan, readings(1, "Italian"), facts, far)[:2] == ("no", True)
    assert compute_step(plan, readings(1, "Italian"), facts, near)[:2] == ("", False)
    assert compute_step(plan, readings(1, "Italian"), facts)[:2] == ("", False)  # no embedder: not shown


def test_a_difference_of_dates_in_whole_years():
    plan = QuestionPlan("difference", ("Quiet Harbour", "The Winter Gate"))
    answer, shown, how, _ = compute_step(plan, _readings("12 March 1901", "8 June 1915"), FACTS)
    assert (answer, shown) == ("14", True) and "14 years" in how
