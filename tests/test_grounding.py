"""When stated facts prove an answer: a connected chain from the question, the answer in it or
computed from it by a shown step (hand-checked cases, no model needed)."""
from __future__ import annotations

import pytest

from agent.pipeline.grounding import answer_values, clean_answer, ground, holds_answer, knows

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
    # words spread over a triple's relation and object name nothing it states (a saved 0.5B
    # answer, passed before)
    ("What party was Lornna Soto a member of?", "New Political Party",
     ["<Lornna Soto> <member of political party> <New Progressive Party> ."], False),
    ("What party was Lornna Soto a member of?", "the New Progressive Party",
     ["<Lornna Soto> <member of political party> <New Progressive Party> ."], True),
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


def test_an_answer_that_only_repeats_the_question_is_not_grounded():
    fact = ["Leonida Tonelli (19 April 1885 – 12 March 1946) was an Italian mathematician."]
    verdict = ground("What is Leonida Tonelli's occupation?", "Leonida Tonelli", fact)
    assert not verdict.grounded and verdict.how == "the answer only repeats a name the question asks about"
    assert ground("What is Leonida Tonelli's occupation?", "mathematician", fact).grounded
    # part of a name is not the name
    assert ground("Which country is Mexico City in?", "Mexico", ["<Mexico City> <country> <Mexico> ."]).grounded
    # a choice question's options are in the question by design
    assert ground("Which film is Canadian, Mirrow Lake or Quiet Harbour?", "Mirrow Lake", [ALPHA, BETA]).grounded


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
    from agent.pipeline.chaining import ChainGuard
    from agent.knowledge.keywords import bridge_entities

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


KRANZBERG = "Who lived longer, Bernhard Afinger or Melvin Kranzberg?"
AFINGER_LIFE = "Bernhard Afinger( 6 May 1813 – 25 December 1882) was a German sculptor."
KRANZBERG_LIFE = ("Melvin Kranzberg (November 22, 1917 – December 6, 1995) was an American historian, and "
                  "professor of history at Case Western Reserve University from 1952 until 1971.")




def test_a_title_joined_by_or_is_one_name_where_a_fact_writes_it_so():
    """"Harbour or Home" is one title where a stated fact writes it so: a look-alike ("Harbour
    Lights") names no part of the question and shares no name with the title's facts, so its
    director proves nothing; the title's own fact still does. Written for this test."""
    question = "Who directed the 1931 comedy Harbour or Home?"
    title = "Harbour or Home was produced by Norvik Pictures."
    lookalike = "Harbour Lights is a 1930 drama directed by Oskar Lind."
    assert not ground(question, "Oskar Lind", [title, lookalike]).grounded
    own = "Harbour or Home is a 1931 comedy directed by Ada Quint."
    assert ground(question, "Ada Quint", [own]).grounded
    # two names joined by "and" that no fact writes together stay two names: each is reached
    question = "Where were Lamp Street and Dune Sea filmed?"
    both = ["Lamp Street was filmed in Oslo.", "Dune Sea was also filmed in Oslo."]
    assert ground(question, "Oslo", both).grounded
    verdict = ground(question, "Oslo", both[:1])
    assert not verdict.grounded and "'Dune Sea'" in verdict.how


@pytest.mark.parametrize("question", [
    "Harbour Nights featured the actress who played which role in The Quay Street Mysteries?",
    "Which part in The Quay Street Mysteries did the actress of Harbour Nights play?",
    "In The Quay Street Mysteries, what part was played by the actress seen in Harbour Nights?",
])
def test_an_answer_whose_facts_never_reach_another_name_of_the_question_is_not_proven(question):
    """Two names asked together: the facts holding the answer must reach both. A fact about the
    film beside one about an actress of the series, sharing no entity, ties her to nothing the
    film holds (HotpotQA's "Lover Come Back ... The Brady Bunch": "Selma Archerd", wrong and
    grounded at eb08894). Names invented for this test, three wordings."""
    film = "Harbour Nights is a 1958 comedy directed by Oskar Lind."
    series = "Mara Vell has also appeared on The Quay Street Mysteries."
    verdict = ground(question, "Mara Vell", [film, series])
    assert not verdict.grounded
    assert "Harbour Nights" in verdict.how and "chain breaks" in verdict.how
    # tied by a fact that names the actress in the film, the chain holds
    cast = "Harbour Nights stars Mara Vell as a ferry pilot."
    role = "Mara Vell played Ines Marr on The Quay Street Mysteries."
    assert ground(question, "Ines Marr", [film, cast, role]).grounded


def test_a_name_written_without_its_middle_name_is_the_same_one():
    """"Scott Andrew Buchholz" and "Scott Buchholz" (HotpotQA, two sentences of one document)
    are one man: a chain through both holds; "Scott Buchholz" is not "Scott Morrison", nor is
    "Ada Quint" "Ada Vell Marr". Names other than the first invented for this test."""
    question = "Ada Lene Quint, a Danish painter, was a pupil of which sculptor?"
    born = "Ada Lene Quint (born 1968) is a Danish painter."
    pupil = "Ada Quint was a pupil of the sculptor Oskar Lind in Aarhus."
    assert ground(question, "Oskar Lind", [born, pupil]).grounded
    other = "Ada Marr was a pupil of the sculptor Oskar Lind in Aarhus."
    assert not ground(question, "Oskar Lind", [born, other]).grounded


@pytest.mark.parametrize("question", [
    "What coastal country on the Vell Sea is the birthplace of the painter Ada Quint?",
    "Which country bordering the Vell Sea was the painter Ada Quint born in?",
    "The painter Ada Quint was born in what country on the Vell Sea?",
])
def test_an_answer_must_reach_what_the_question_asks_about(question):
    """A fact that only says what the asking phrase says of the answer ("a coastal country on
    the Vell Sea") proves nothing about whom the question asks (HotpotQA: "Lesotho is a
    mountainous, landlocked country located in Southern Africa" for the birthplace of the artist
    Ayesha, wrong and grounded when the model was made to state a fact). Names invented for this
    test, three wordings."""
    coast = ["Norvia is a coastal country on the Vell Sea.", "Ostland is a small country on the Vell Sea."]
    verdict = ground(question, "Ostland", coast)
    assert not verdict.grounded and "Ada Quint" in verdict.how
    born = "Ada Quint (1901 - 1970) was a painter born in Ostland."
    assert ground(question, "Ostland", [born, coast[1]]).grounded


@pytest.mark.parametrize("question", [
    "This Norvian basketball team based in Ostberg is sponsored by which brewery?",
    "Which brewery sponsors the Norvian basketball team based in Ostberg?",
    "The Norvian basketball team from Ostberg has been sponsored by what brewery?",
])
def test_a_word_that_only_qualifies_a_noun_anchors_no_proof(question):
    """"Norvian" in "the Norvian basketball team" says what kind of team, not which: a fact about
    another Norvian thing is no proof (HotpotQA: "1979" from "The German edition was awarded
    Spiel des Jahres in 1979." for a German basketball team's sponsor)."""
    other = "The Norvian Brewers Guild was founded by Vell Breweries in 1902."
    assert not ground(question, "Vell Breweries", [other]).grounded
    team = "Ostberg Lions, a Norvian basketball team based in Ostberg, are sponsored by Vell Breweries."
    assert ground(question, "Vell Breweries", [team]).grounded


def test_a_value_both_names_share_stands_on_two_chains():
    """"Both A and B ...?": each name's facts hold the answer, each chain reaches its name."""
    question = "The Vell Terrier and the Norvik Hound were both bred in which century?"
    facts = ["The Vell Terrier is a dog breed that originated in Norvik in the 18th century.",
             "The Norvik Hound is a large breed of scent hound.",
             "The breed was developed in the Norvik Hound Society kennels during the 18th century."]
    assert ground(question, "18th century", facts).grounded


def test_a_comma_ends_a_bridge_name():
    """"Ford County, Kansas, United States" is three places to go on from, not one name searched
    as a whole (MuSiQue: the state's hop found only other counties of Kansas). Written for
    this test."""
    from agent.knowledge.keywords import bridge_entities

    fact = "Marlow Falls is the county seat of Breck County, Norvania, United States, named after Fort Breck."
    question = "What is the population of the state where Marlow Falls Airport is located?"
    assert bridge_entities(fact, question, limit=8) == ["Breck County", "Norvania", "United States", "Fort Breck"]


def test_a_name_particle_keeps_a_name_whole():
    """"Muhammad bin Musafir" is one name: a fact about him shares no entity with one about
    "Abdul-Aziz bin Muhammad" (2Wiki: "Tarum" for where Abdul-Aziz's father died, from a fact
    about another Muhammad, wrong and grounded at 443516d). Names invented for this test."""
    from agent.knowledge.keywords import extract_keywords

    assert extract_keywords("Karim bin Nasser ruled Velmora.")[0] == "Karim bin Nasser"
    question = "Where did Yusuf bin Karim's father die?"
    facts = ["Yusuf bin Karim was the son-in-law of Karim bin Haddad.",
             "Karim bin Nasser (died 953) was the ruler of Velmora."]
    assert not ground(question, "Velmora", facts).grounded


@pytest.mark.parametrize("question", [
    "When were the Harbour Games last held in the country that makes Norvik Gin?",
    "In the country where Norvik Gin is made, when did the Harbour Games last take place?",
    "Norvik Gin comes from a country; when was the last time it hosted the Harbour Games?",
])
def test_an_answer_must_reach_every_name_the_question_asks_about(question):
    """A fact about one name of the question is no proof when another name it asks about is never
    reached: the Harbour Games in some other country say nothing of Norvik Gin's (MuSiQue: "1964"
    for the Olympics in the country that released Han Vodka, from a fact about Tokyo's Games,
    wrong and grounded when an answer was proven by a fact found for it). Names invented for
    this test, three wordings."""
    games = "The Harbour Games returned to Ostberg in 2020 for the first time since 1964."
    verdict = ground(question, "1964", [games])
    assert not verdict.grounded and "'Norvik Gin'" in verdict.how
    chain = ["Norvik Gin is a dry gin made in Velmora.", "Velmora last hosted the Harbour Games in 1988."]
    assert ground(question, "1988", chain).grounded


def test_a_name_with_no_significant_word_asks_nothing_to_reach():
    """"CEO" is a name of the question with no word a fact could be matched on (three letters):
    it asks the proof to reach nothing, and the chain through the chairman's company stands
    (HotpotQA "Canton, Massachusetts" for Jon L. Luther's company, withheld for a moment by the
    rule that every name asked about be reached). Names invented for this test."""
    question = "Oskar T. Brandt was the chairman and CEO of a shipping company headquartered in what city?"
    facts = ["Oskar T. Brandt was the chairman and chief executive officer of Norvik Lines.",
             "Norvik Lines is headquartered in Velmora."]
    assert ground(question, "Velmora", facts).grounded


def test_the_values_an_answer_line_may_say_are_the_ends_of_the_stated_triples():
    """A triple offers its subject and object, each also capitalised, and "I don't know."; a
    statement offers nothing (any run of its words could be a wrong answer proven)."""
    triple = "<Conrad Bursian> <field of work> <philology> ."
    sentence = "Simon & Simon starred Gerald McRaney and Jameson Parker as the Simon brothers."
    assert answer_values([triple, sentence]) == ["Conrad Bursian", "philology", "Philology", "I don't know."]
    assert answer_values([sentence]) == []
    question = "What is Conrad Bursian's field of work?"
    assert all(ground(question, value, [triple]).grounded for value in ("philology", "Philology"))


def test_a_name_that_says_a_word_twice_is_named_only_by_a_fact_that_says_it_twice():
    # "Simon & Simon" (a series) is not named by a fact about another Simon: no chain starts there.
    question = "Tally & Tally starred which stage actor?"
    assert not ground(question, "Tally Marsh", ["Tally Marsh (born 1961 in Dayton) is a stage actor."]).grounded
    assert ground(question, "Rob Quill", ["Tally & Tally is a detective series starring Rob Quill."]).grounded
    # a name said once is still named by a fact that says it more than once
    assert ground("Where was Tally Marsh born?", "Dayton",
                  ["Tally Marsh, known as Tally, was born in Dayton."]).grounded


def test_a_computed_answer_is_of_the_type_asked():
    """A step over the chain's facts proves only an answer of the kind asked: a difference of two
    years answers "how many years", never "when" (the agent answered "When did the country that
    produced X become British?" with the years between two dates)."""
    facts = ["Varno Island was settled in 1802.", "Varno Island joined the Calder Union in 1820."]
    verdict = ground("When did Varno Island join the Calder Union?", "18", facts)
    assert not verdict.grounded and "asks when" in verdict.how
    assert ground("How many years after its settlement did Varno Island join the Calder Union?", "18",
                  facts).grounded
    assert ground("When did Varno Island join the Calder Union?", "1820", facts).grounded


def test_a_name_written_with_a_possessive_is_held_by_the_fact():
    """"Bo Holt's son" names Bo Holt (normalized alone, "holts" hid him); a title with its own
    possessive is still held as written. Written for this test."""
    assert holds_answer("Bo Holt's son was born in Oslo.", "Bo Holt")
    assert holds_answer("Bo Holt’s son was born in Oslo.", "Bo Holt")
    assert holds_answer("Ada's Tide is a 1961 film.", "Ada's Tide")
    assert not holds_answer("Bo Holt's son was born in Oslo.", "Bo Holten")
