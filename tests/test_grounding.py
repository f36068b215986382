"""When stated facts prove an answer: a connected chain from the question, the answer in it or
computed from it by a shown step (hand-checked cases, no model needed)."""
from __future__ import annotations

import pytest

from agent.pipeline.grounding import clean_answer, ground, knows

EDITH = "What is the official language of the country Edith Frank-Holländer is a citizen of?"
CITIZEN = "<Edith Frank-Holländer> <country of citizenship> <Germany> ."
LANGUAGE = "<Germany> <official language> <German> ."
JOURNAL = ("Who was the first president of the association which published Journal of Psychotherapy "
           "Integration?")


@pytest.mark.parametrize(("question", "answer", "facts", "expected"), [
    # one fact naming the question's subject, the answer in it
    ("Where did Buck Owens die?", "Bakersfield", ["<Buck Owens> <place of death> <Bakersfield> ."], True),
    ("Where was Kuni Asahiko born?", "kyoto", ["<Kuni Asahiko> <place of birth> <Kyoto> ."], True),
    # the answer names nothing stated ("France" for Buck Owens: the failure)
    ("Where did Buck Owens die?", "France", ["<Buck Owens> <place of death> <Bakersfield> ."], False),
    # a possessive names the subject (the rules rewrite "his instrument" as "Buck Owens's instrument")
    ("What is Buck Owens's instrument?", "guitar", ["<Buck Owens> <instrument> <guitar> ."], True),
    ("What is Shi Changxu's occupation?", "scientist", ["<Shi Changxu> <occupation> <scientist> ."], True),
    # a two-fact chain: the second fact shares Germany with the first
    (EDITH, "German", [CITIZEN, LANGUAGE], True),
    (EDITH, "German", [LANGUAGE, CITIZEN], True),  # order stated does not matter
    # the second hop alone: no fact names the question's subject
    (EDITH, "German", [LANGUAGE], False),
    # a sentence as answer: its words in one chain fact (PopQA, qwen2.5-coder-0.5b)
    ("What is Carolyn Eisele's occupation?", "Carolyn Eisele is a mathematician.",
     ["<Carolyn Eisele> <occupation> <mathematician> ."], True),
    ("What is Carolyn Eisele's occupation?", "Carolyn Eisele is a physicist.",
     ["<Carolyn Eisele> <occupation> <mathematician> ."], False),
    # a statement anchors with a whole name of the question, not a first name alone
    ("In what city was Tony Shields born?", "Tony Clark",
     ["Tony Clark played in Major League Baseball as a first baseman from 1995 to 2009."], False),
    ("In what city was Tony Shields born?", "Strabane",
     ["Tony Shields was born in Strabane, Northern Ireland."], True),
    # a fact about someone else, unconnected to the chain
    ("Where did Buck Owens die?", "Paris", ["<Buck Owens> <place of death> <Bakersfield> .",
                                           "<Marie Curie> <place of death> <Paris> ."], False),
    # a fact about an unrelated name that shares only a short word
    ("Where was Kuni Asahiko born?", "Greece", ["Konstantina Kouneva is a Bulgarian immigrant in Greece."], False),
    # document facts: the chain goes through the association
    (JOURNAL, "G. Stanley Hall", [
        "The Journal of Psychotherapy Integration is published by the American Psychological Association.",
        "G. Stanley Hall was the first president of the American Psychological Association."], True),
    (JOURNAL, "G. Stanley Hall", [
        "G. Stanley Hall was the first president of the American Psychological Association."], False),
    # whole words only: "Berg" is not in "Bergen"
    ("Who founded Zorblax Station?", "Berg", ["Zorblax Station was founded in Bergen."], False),
    # no answer, no fact
    ("Where did Buck Owens die?", "I don't know.", ["<Buck Owens> <place of death> <Bakersfield> ."], False),
    ("Where did Buck Owens die?", "Answer: I don't know.", ["<Buck Owens> <place of death> <Bakersfield> ."], False),
    ("Where did Buck Owens die?", "Bakersfield", [], False),
])
def test_grounding_rule(question, answer, facts, expected):
    assert ground(question, answer, facts).grounded is expected


def test_computed_answers_show_their_step():
    born_died = ["Anna Lindqvist was born in 1956.", "Anna Lindqvist died in 1990."]
    verdict = ground("How old was Anna Lindqvist when she died?", "34", born_died)
    assert verdict.grounded and verdict.how == "date difference: 1990 - 1956 = 34"
    assert not ground("How old was Anna Lindqvist when she died?", "35", born_died).grounded
    two = ["<Buck Owens> <instrument> <guitar> .", "<Buck Owens> <instrument> <fiddle> ."]
    assert ground("How many instruments did Buck Owens play?", "2", two).how.startswith("count: 2")
    same = ["<Film Alpha> <country of origin> <France> .", "<Film Beta> <country of origin> <France> ."]
    differ = ["<Film Alpha> <country of origin> <France> .", "<Film Beta> <country of origin> <Italy> ."]
    question = "Are Film Alpha and Film Beta from the same country?"
    assert ground(question, "yes", same).grounded and not ground(question, "no", same).grounded
    assert ground(question, "no", differ).grounded and not ground(question, "yes", differ).grounded


# Two statements, one on each side of a comparison (2WikiMultiHopQA-style wording, own facts).
ALPHA = "Mirrow Lake is a 1931 Canadian drama film directed by Ellen Tobe."
BETA = "Quiet Harbour is a 1928 Canadian silent film directed by Paul Dray."
GAMMA = "Quiet Harbour is a 1928 Danish silent film directed by Paul Dray."


def test_a_yes_shown_by_two_statements_that_hold_the_same_value():
    question = "Are both Mirrow Lake and Quiet Harbour from the same country?"
    verdict = ground(question, "Yes.", [ALPHA, BETA])
    assert verdict.grounded and verdict.how == "comparison: facts 1 and 2, one on each side, both say 'canadian'"
    # the facts are numbered as stated, whatever came before them
    after_another = ground(question, "Yes.", ["Laurie Graff was born in New York.", ALPHA, BETA])
    assert after_another.how == "comparison: facts 2 and 3, one on each side, both say 'canadian'"
    assert not ground(question, "Yes.", [ALPHA, GAMMA]).grounded  # nothing the two share
    assert not ground(question, "No.", [ALPHA, GAMMA]).grounded  # words do not show a difference
    assert not ground(question, "Yes.", [ALPHA]).grounded  # one side only
    # "both P": each side's fact says P (a form of each of its words)
    both = "Are Mirrow Lake and Quiet Harbour both drama films?"
    assert ground(both, "Yes.", [ALPHA, "Quiet Harbour is a 1928 Canadian drama film."]).how == \
        "comparison: facts 1 and 2, one on each side, both say 'drama films'"
    assert not ground(both, "Yes.", [ALPHA, BETA]).grounded  # Quiet Harbour's fact says silent, not drama
    # a value the question itself names is not evidence ("film" aside, "1928" is the question's)
    assert not ground("Were Mirrow Lake and Quiet Harbour both made in 1928?", "Yes.",
                      ["Mirrow Lake is a 1928 drama film.", "Quiet Harbour is a 1928 silent film."]).grounded


def test_an_answer_that_only_repeats_the_question_is_not_grounded():
    fact = ["Leonida Tonelli (19 April 1885 – 12 March 1946) was an Italian mathematician."]
    verdict = ground("What is Leonida Tonelli's occupation?", "Leonida Tonelli", fact)
    assert not verdict.grounded and verdict.how == "the answer only repeats a name the question asks about"
    assert ground("What is Leonida Tonelli's occupation?", "mathematician", fact).grounded
    # part of a name is not the name
    assert ground("Which country is Mexico City in?", "Mexico", ["<Mexico City> <country> <Mexico> ."]).grounded
    # a choice question's options are in the question by design
    assert ground("Which film is Canadian, Mirrow Lake or Quiet Harbour?", "Mirrow Lake", [ALPHA, BETA]).grounded


def test_a_choice_question_takes_one_of_its_options():
    question = "Which film is Canadian, Mirrow Lake or Quiet Harbour?"
    assert ground(question, "Quiet Harbour", [ALPHA, BETA]).grounded
    assert ground(question, "mirrow lake", [ALPHA, BETA]).grounded
    # the director is in a stated fact, but the question asks which of the two films
    verdict = ground(question, "Paul Dray", [ALPHA, BETA])
    assert not verdict.grounded and verdict.how == (
        "the question offers a choice (mirrow lake or quiet harbour) and the answer is neither")


def test_a_sentence_that_says_a_stated_triple_is_answered_by_its_object():
    occupation = ["<Carolyn Eisele> <occupation> <mathematician> ."]
    question = "What is Carolyn Eisele's occupation?"
    assert ground(question, "Carolyn Eisele is a mathematician.", occupation).short == "mathematician"
    assert ground(question, "Her occupation is mathematician.", occupation).short == "mathematician"
    assert ground(question, "mathematician", occupation).short == ""  # already short
    # a sentence grounded in a statement stays as it is
    assert ground("Where was Tony Shields born?", "He was born in Strabane.",
                  ["Tony Shields was born in Strabane."]).short == ""


def test_chain_indices_and_answer_label():
    verdict = ground(EDITH, "Answer: German", [CITIZEN, LANGUAGE])
    assert verdict.grounded and verdict.facts == (0, 1) and "fact 2" in verdict.how
    assert clean_answer("Answer: Answer: Kyoto") == "Kyoto"
    assert knows("Kyoto") and not knows("  i don't know, sorry") and not knows(" ")
    assert not knows("Answer: I don't know.") and not knows("I do not know")


def test_connected_prefix_stops_where_the_chain_breaks():
    from agent.pipeline.grounding import connected_prefix

    buck = "What instrument did Buck Owens play?"
    assert connected_prefix(buck, ["<Buck Owens> <instrument> <guitar> .",
                                   "<gorgonzola> <country of origin> <Italy> .",
                                   "<Italy> <official language> <Italian> ."]) == 1
    assert connected_prefix(EDITH, [CITIZEN, LANGUAGE]) == 2
    assert connected_prefix(EDITH, [LANGUAGE, CITIZEN]) == 0  # the first fact must name the question's entity
    assert connected_prefix(EDITH, []) == 0
    # between triples only the same entity links: a name inside another is another entity
    # (seen: qwen2.5-coder-0.5b went on from <Latin> to <Latin Americans> and answered "Spanish")
    latin = "What languages has Cassius Felix written in?"
    assert connected_prefix(latin, ["<Cassius Felix> <writing language> <Latin> .",
                                    "<Latin Americans> <native language> <Spanish> ."]) == 1
    assert connected_prefix("What languages does Ralph Habib speak?", [
        "<Ralph Habib> <languages spoken, written or signed> <French> .",
        "<French Mandate for Syria and the Lebanon> <official language> <Arabic> ."]) == 1
    # a statement's name may still be part of a triple's entity (documents write names their way)
    assert connected_prefix("Where did Marie Curie work?", [
        "<Marie Curie> <employer> <University of Paris> .",
        "The University of Paris was founded around 1150."]) == 2


def test_chain_guard_cuts_at_the_first_fact_off_the_chain_and_hops_only_on_it():
    from agent.decoding.spans import CompletedFact
    from agent.pipeline.chaining import ChainGuard, bridge_entities

    followed: list[str] = []
    guard = ChainGuard(EDITH, lambda done: followed.append(done.text))
    for i, text in enumerate([CITIZEN, LANGUAGE, "<gorgonzola> <country of origin> <Italy> .", "<Italy> <x> <y> ."]):
        guard.on_fact(CompletedFact(i, text, "", 0, 0, 1))
        if i == 1:
            assert not guard.cut
    assert guard.cut == {0} and followed == [CITIZEN, LANGUAGE]  # nothing after the break is searched
    assert bridge_entities(CITIZEN, EDITH) == ["Germany"]
    assert bridge_entities(LANGUAGE, EDITH) == ["German", "Germany"]
    assert bridge_entities("The Journal of Psychotherapy Integration is published by the American Psychological "
                           "Association.", JOURNAL) == ["American Psychological Association"]


def test_the_reply_to_answer_again_from_ends_with_the_last_connected_fact():
    from agent.pipeline.chaining import connected_reply

    question = "Where was Sargis Hovhannisyan born?"
    text = ("Fact: <Sargis Hovhannisyan> <place of birth> <Yerevan> .\n"
            "Fact: <Yerzovka> <country> <Russia> .\n")
    facts = [("<Sargis Hovhannisyan> <place of birth> <Yerevan> .", text.index("\n")),
             ("<Yerzovka> <country> <Russia> .", len(text) - 1)]
    assert connected_reply(question, text, facts) == (
        1, "Fact: <Sargis Hovhannisyan> <place of birth> <Yerevan> .\nAnswer:")
    assert connected_reply(question, text, facts[:1]) == (1, "")  # nothing broke: nothing to redo
    assert connected_reply("Where did Buck Owens die?", text, facts) == (0, "")  # nothing connected


def test_an_answer_the_question_asks_past_is_a_bridge():
    from agent.pipeline.chaining import asks_past

    banff = "What is the official language of the country Banff National Park Pavilion is located in?"
    stated = ["<Banff National Park Pavilion> <country> <Canada> ."]
    tree = [*stated, "<Canada> <official language> <English> .", "<Canada> <capital> <Ottawa> ."]
    assert asks_past(banff, "Canada", stated, tree) == "official language"
    # the same fact answers the one-hop question: nothing asked past it
    assert asks_past("What country is Banff National Park Pavilion located in?", "Canada", stated, tree) == ""
    # the answer already is the asked relation's object
    done = [*stated, "<Canada> <official language> <English> ."]
    assert asks_past(banff, "English", done, tree) == ""
    # no tree fact goes on from the answer
    assert asks_past(banff, "Canada", stated, stated) == ""


def test_a_statement_answer_that_fills_a_role_the_question_goes_past_is_a_bridge():
    from agent.pipeline.chaining import asks_past

    film = ["Mirrow Lake is a 1931 Canadian drama film directed by Ellen Tobe and produced by Paul Dray."]
    assert asks_past("Who is the mother of the director of film Mirrow Lake?", "Ellen Tobe", film, []) == "director"
    assert asks_past("Where did the director of Mirrow Lake study?", "Ellen Tobe", film, []) == "director"
    # the role is what is asked: Ellen Tobe is the answer
    assert asks_past("Who is the director of film Mirrow Lake?", "Ellen Tobe", film, []) == ""
    assert asks_past("Who directed Mirrow Lake?", "Ellen Tobe", film, []) == ""
    # the answer is in the fact, but not in the role ("produced by")
    assert asks_past("Who is the mother of the director of film Mirrow Lake?", "Paul Dray", film, []) == ""
    father = ["Anna Vell was born in Oslo; her father Jon Vell was a painter."]
    assert asks_past("What is the place of death of Anna Vell's father?", "Jon Vell", father, []) == "father"
    assert asks_past("Where did Anna Vell's father die?", "Jon Vell", father, []) == "father"
    assert asks_past("Who was Anna Vell's father?", "Jon Vell", father, []) == ""  # asked, not past
    assert asks_past("Where did Anna Vell's father die?", "Oslo", father, []) == ""  # no role before it


def test_a_follow_up_chain_starts_from_the_whole_conversation():
    from agent.pipeline.chaining import asked_text
    from agent.pipeline.grounding import connected_prefix

    turns = [{"role": "system", "content": "Be brief."},
             {"role": "user", "content": "Where did Buck Owens die?"}, {"role": "assistant", "content": "Bakersfield"},
             {"role": "user", "content": "What instrument did he play?"}]
    asked = asked_text(turns)
    assert "Be brief" not in asked
    assert connected_prefix(asked, ["<Buck Owens> <instrument> <guitar> ."]) == 1
    assert connected_prefix(turns[-1]["content"], ["<Buck Owens> <instrument> <guitar> ."]) == 0


TOAD = "Toad Hall is a residential hall in a university located in what Australian city?"
TOAD_FACTS = ["Toad Hall is a student residence at the Australian National University.",
              "The Australian National University is a public research university located in Canberra.",
              "Canberra is the capital city of Australia.",
              "Sea ice covers the Barents Sea in winter."]


@pytest.mark.parametrize(("question", "answer", "expected"), [
    # the facts that hold the answer, on a chain from the question ("Australian" anchors the
    # university's fact): the hall's fact is not needed, the unrelated one never
    (TOAD, "Canberra", [1, 2]),
    # one fact names the subject and holds the answer: that fact alone
    ("Where was Mira Quell born?", "Oslo", [1]),
    # the answer in a fact no chain reaches: not kept, nothing to state
    ("Where was Mira Quell born?", "Barents Sea", []),
    # a name the listed facts do not hold
    (TOAD, "Sydney", []),
])
def test_evidence_chain_keeps_the_listed_facts_that_hold_the_answer(question, answer, expected):
    from agent.pipeline.evidence import evidence_chain

    listed = TOAD_FACTS if question == TOAD else ["Mira Quell is a Norwegian glaciologist.",
                                                  "Mira Quell was born in Oslo in 1951.",
                                                  "Sea ice covers the Barents Sea in winter."]
    check, chain = evidence_chain(question, answer, listed)
    assert chain == expected and check.grounded == bool(expected)
    if chain:  # what is kept grounds the answer by itself, as an attempt stating it would
        assert ground(question, answer, [listed[i] for i in chain]).grounded


KRANZBERG = "Who lived longer, Bernhard Afinger or Melvin Kranzberg?"
AFINGER_LIFE = "Bernhard Afinger( 6 May 1813 – 25 December 1882) was a German sculptor."
KRANZBERG_LIFE = ("Melvin Kranzberg (November 22, 1917 – December 6, 1995) was an American historian, and "
                  "professor of history at Case Western Reserve University from 1952 until 1971.")


@pytest.mark.parametrize(("question", "answer", "facts", "winner"), [
    # lifespans from "(born – died)" (2WikiMultiHopQA's passages): 69 and 78 years
    (KRANZBERG, "Melvin Kranzberg lived longer.", [AFINGER_LIFE, KRANZBERG_LIFE], "Melvin Kranzberg"),
    # the model named the other option: the dates decide, not the model
    (KRANZBERG, "Bernhard Afinger", [AFINGER_LIFE, KRANZBERG_LIFE], "Melvin Kranzberg"),
    # "older": the earlier birth; "born 1961" and "born May 5, 1934"
    ("Who is older, Kevin Hennessy or Emilia Bayer?", "Kevin Hennessy",
     ["Kevin Hennessy (born 1961) is an Irish hurler.", "Emilia Bayer was born May 5, 1934 in Sofia, Bulgaria."],
     "Emilia Bayer"),
    # a work's own year: "came out first" picks the earlier film
    ("Which film came out first, Mirrow Lake or Quiet Harbour?", "Mirrow Lake", [ALPHA, BETA], "Quiet Harbour"),
    # a role of the option: each film's director, then the directors' deaths
    ("Which film has the director who died earlier, Mirrow Lake or Quiet Harbour?", "Mirrow Lake",
     [ALPHA, BETA, "Ellen Tobe (3 March 1890 – 9 June 1950) was a Canadian director.",
      "Paul Dray (1901 – 1977) was a Canadian film director."], "Mirrow Lake"),
])
def test_a_date_comparison_is_computed_from_the_stated_dates(question, answer, facts, winner):
    verdict = ground(question, answer, facts)
    assert verdict.grounded and verdict.short == winner and verdict.how.startswith("compared: ")
    assert verdict.how.endswith(f": {winner}") or f": {winner} (the model said" in verdict.how


def test_a_date_comparison_without_both_dates_is_not_grounded():
    # one side's date only: naming an option shows nothing
    verdict = ground(KRANZBERG, "Melvin Kranzberg", [KRANZBERG_LIFE])
    assert not verdict.grounded and "both options' dates" in verdict.how
    # the same year and no day: the facts do not say who was born first
    same = ["Ann Roe (born 1950) is a poet.", "Bo Lind (born 1950) is a painter."]
    assert not ground("Who was born first, Ann Roe or Bo Lind?", "Ann Roe", same).grounded


def test_a_fact_holding_the_answer_says_what_is_asked_or_not():
    from agent.pipeline.grounding import says_what_is_asked

    director = "Who was the first director of Zorblax Station?"
    assert not says_what_is_asked(director, "Zorblax Station was founded in 1987 by Mira Quell.")
    assert says_what_is_asked(director, "Tomas Berg was the first director of Zorblax Station.")
    assert says_what_is_asked("Where did Buck Owens die?", "<Buck Owens> <place of death> <Bakersfield> .")
    assert says_what_is_asked("Which island is Zorblax Station on?", "Norvik is an island in the Barents Sea.")
    assert not says_what_is_asked("Which island is Zorblax Station on?", "<Zorblax Station> <located on> <Norvik> .")


def test_a_yes_shown_by_a_shared_value_stands_when_the_reading_is_restated():
    """The listed-facts reading says "Yes." to a same-country question; the model then states the
    two facts (both "American") and answers "I don't know.": the reading's computed answer stands
    on the stated facts (it had been withheld, no fact holding the word "yes"). A "yes" with
    different values is not shown."""
    from agent.pipeline.evidence import reading_holds

    question = "Are both Cupid The Cowpuncher and Hashimura Togo from the same country?"
    stated = ["Cupid the Cowpuncher is a 1920 American comedy film directed by Clarence G. Badger.",
              "Hashimura Togo is a 1917 American comedy silent film directed by William C. de Mille."]
    held = reading_holds(question, "Yes.", stated)
    assert held.grounded and held.computed and "american" in held.how and held.facts == (0, 1)
    other = [stated[0], "Hashimura Togo is a 1917 silent film made in Canada by William C. de Mille."]
    assert not reading_holds(question, "Yes.", other).grounded
