"""Whether the fact holding an answer says what the question asks: hand-checked cases for
triples (the relation against the question by embedding similarity, over the bundled Wikidata
relations) and for document statements (the local model as judge), each a right fact and a
fact of the right subject that says something else."""
from __future__ import annotations

import pytest

from agent.pipeline.asked import AskedChecker
from agent.pipeline.question_reading import asked_through
from agent.pipeline.relations import RelationLabels, RelationMatcher


@pytest.fixture(scope="module")
def matcher():
    from agent.embeddings import Embedder

    return RelationMatcher(Embedder(), RelationLabels.bundled())


@pytest.mark.parametrize(("question", "fact", "answer", "passed"), [
    # the case: the KB holds both; only the instrument says what is asked
    ("What instrument did Buck Owens play?", "<Buck Owens> <instrument> <guitar> .", "guitar", True),
    ("What instrument did Buck Owens play?", "<Buck Owens> <field of work> <country music> .", "country music", False),
    ("What instrument do they play?", "<Shahram Nazeri> <native language> <Persian> .", "Persian", False),
    ("Which ethnic group does Sade Adu belong to?", "<Sade Adu> <ethnic group> <Yoruba people> .", "Yoruba people",
     True),
    ("Which ethnic group does Sade Adu belong to?", "<Sade Adu> <country of citizenship> <United Kingdom> .",
     "United Kingdom", False),
    # other wordings than KAMEL's templates
    ("Which faith does Ramón Castro follow?", "<Ramón Castro> <religion or worldview> <Catholic Church> .",
     "Catholic Church", True),
    ("In which city did Ana María Matute pass away?", "<Ana María Matute> <place of death> <Barcelona> .",
     "Barcelona", True),
    ("In which city did Ana María Matute pass away?", "<Ana María Matute> <place of birth> <Barcelona> .",
     "Barcelona", False),
    # a bridge given as the answer: the fact says where, the question asks the language there
    ("What is the official language of the country Andraž Kirm was born in?",
     "<Andraž Kirm> <place of birth> <Ljubljana> .", "Ljubljana", False),
    ("What is the official language of the country Andraž Kirm was born in?",
     "<Slovenia> <official language> <Slovene> .", "Slovene", True),
])
def test_a_triple_says_what_is_asked_or_not(matcher, question, fact, answer, passed):
    result = AskedChecker(matcher).check(question, answer, [fact], [0])
    assert result.passed is passed, result.how
    if not passed:
        assert result.how.startswith("the fact says") and "the question asks" in result.how


def test_the_relations_held_for_the_subject_decide_between_close_ones(matcher):
    question = "Where did Buck Owens die?"
    fact = "<Buck Owens> <place of death> <Bakersfield> ."
    # Closest of all may be "date of death"; of what the KB holds for Buck Owens, "place of death" is.
    held = ["place of death", "instrument", "genre", "record label"]
    result = AskedChecker(matcher).check(question, "Bakersfield", [fact], [0], held=lambda subject: held)
    assert result.passed, result.how
    # Held relations never let through a relation far from what is asked.
    far = AskedChecker(matcher).check("What instrument did Buck Owens play?", "country music",
                                      ["<Buck Owens> <field of work> <country music> ."], [0],
                                      held=lambda subject: ["field of work", "place of death"])
    assert not far.passed and far.says == "field of work" and far.asks == "instrument"


# Written for these tests, in other wordings than any dataset's: a question that asks a relation
# of the thing another relation leads to. The first fact alone gives the step on the way (which
# has the relation asked, while the question's subject has not); the chain of two gives the answer.
# Not caught (a limit, stated): "Which city is the capital of the nation Ilse Brandt holds
# citizenship in?" answered "Austria": there the step's own relation is the question's closest
# (country of citizenship 0.49, capital 0.43), so nothing is asked more closely than it.
_KNOWN = {"Tarn Valley cheese": ["country of origin"], "Norvania": ["official language", "capital"],
          "Ilse Brandt": ["country of citizenship", "occupation"], "Austria": ["capital", "official language"],
          "Oskar Lind": ["place of birth", "occupation"], "Uppsala": ["head of government", "country"],
          "Buck Owens": ["place of death", "instrument"], "Bakersfield": ["country", "located in the administrative "
                                                                                   "territorial entity"]}


@pytest.mark.parametrize(("question", "facts", "answer", "passed"), [
    ("What language is spoken officially in the country the Tarn Valley cheese comes from?",
     ["<Tarn Valley cheese> <country of origin> <Norvania> ."], "Norvania", False),
    ("What language is spoken officially in the country the Tarn Valley cheese comes from?",
     ["<Tarn Valley cheese> <country of origin> <Norvania> .", "<Norvania> <official language> <Norvanian> ."],
     "Norvanian", True),
    ("Which language is official in the land Ilse Brandt is a citizen of?",
     ["<Ilse Brandt> <country of citizenship> <Austria> ."], "Austria", False),
    ("Which city is the capital of the nation Ilse Brandt holds citizenship in?",
     ["<Ilse Brandt> <country of citizenship> <Austria> .", "<Austria> <capital> <Vienna> ."], "Vienna", True),
    ("Who is the mayor of Oskar Lind's birthplace?", ["<Oskar Lind> <place of birth> <Uppsala> ."], "Uppsala", False),
    ("Who is the mayor of Oskar Lind's birthplace?",
     ["<Oskar Lind> <place of birth> <Uppsala> .", "<Uppsala> <head of government> <Erik Holm> ."], "Erik Holm", True),
    # asked of the subject itself: the object's own relations do not make it a step
    ("Where was Oskar Lind born?", ["<Oskar Lind> <place of birth> <Uppsala> ."], "Uppsala", True),
    ("In which town did Buck Owens pass away?", ["<Buck Owens> <place of death> <Bakersfield> ."], "Bakersfield",
     True),
    # the noun "which" asks is a relation's label that the answer has: it is a step on the way
    ("In which country did Buck Owens pass away?", ["<Buck Owens> <place of death> <Bakersfield> ."], "Bakersfield",
     False),
    ("In which country did Buck Owens pass away?",
     ["<Buck Owens> <place of death> <Bakersfield> .", "<Bakersfield> <country> <United States> ."],
     "United States", True),
])
def test_a_step_on_the_way_is_not_the_answer_the_next_fact_is(matcher, question, facts, answer, passed):
    result = AskedChecker(matcher).check(question, answer, facts, list(range(len(facts))),
                                         held=lambda name: _KNOWN.get(name, []))
    assert result.passed is passed, result.how
    if not passed:
        assert result.by == "chain", result.how  # a step on the way, or asked through the birthplace


def test_the_failed_check_says_what_the_fact_says_and_what_is_asked(matcher):
    result = AskedChecker(matcher).check("What instrument did Buck Owens play?", "country music",
                                         ["<Buck Owens> <field of work> <country music> ."], [0])
    assert result.as_dict()["how"] == "the fact says 'field of work'; the question asks 'instrument'"
    assert result.fact == 0 and result.by == "relation"


@pytest.mark.parametrize(("question", "fact", "answer", "passed"), [
    ("Who founded Zorblax Station?", "Zorblax Station was founded in 1987 by Mira Quell.", "Mira Quell", True),
    ("Who directed Zorblax Station?", "Zorblax Station was founded in 1987 by Mira Quell.", "Mira Quell", False),
    ("Where was Tony Shields born?", "Tony Shields was born in Strabane, Northern Ireland.", "Strabane", True),
    ("Where did Tony Shields die?", "Tony Shields was born in Strabane, Northern Ireland.", "Strabane", False),
    ("Who published the Journal of Psychotherapy Integration?",
     "The Journal of Psychotherapy Integration is published by the American Psychological Association.",
     "American Psychological Association", True),
    # the type asked: "when" takes a date
    ("When was the Journal of Psychotherapy Integration founded?",
     "The Journal of Psychotherapy Integration is published by the American Psychological Association.",
     "American Psychological Association", False),
    ("When was Princess Feodora of Denmark born?",
     "Princess Feodora of Denmark (3 July 1910 – 17 March 1975) was a Danish princess.", "3 July 1910", True),
    # asked through a relative: her own birth date is not her father's
    ("When was Princess Feodora of Denmark's father born?",
     "Princess Feodora of Denmark (3 July 1910 – 17 March 1975) was a Danish princess.", "3 July 1910", False),
])
def test_a_statement_says_what_is_asked_or_not(matcher, question, fact, answer, passed):
    result = AskedChecker(matcher).check(question, answer, [fact], [0])
    assert result.passed is passed, result.how


@pytest.mark.parametrize(("question", "fact", "answer", "passed"), [
    # a long statement about its subject says its birthplace in a few words beside the answer
    ("Where was Ada Quint born?",
     "Ada Quint (born 1966 in Tarnow) is a film director, screenwriter, cinematographer, editor and film historian.",
     "Tarnow", True),
    ("Where was Orm Vesterlund from?",
     "Orm Vesterlund (born in Lidby, Kallmark, Norway on 23 March 1945) is a Norwegian pop musician, record "
     "company manager and concert promoter.", "Norway", True),
    # ... and the words beside it say no spouse, nor does the whole
    ("Who is the spouse of Ada Quint?",
     "Ada Quint (born 1966 in Tarnow) is a film director, screenwriter, cinematographer, editor and film historian.",
     "Tarnow", False),
])
def test_what_a_statement_says_of_the_answer_is_read_beside_it(matcher, question, fact, answer, passed):
    result = AskedChecker(matcher).check(question, answer, [fact], [0])
    assert result.passed is passed, result.how


def test_a_question_asked_through_a_relative_needs_the_chain_to_reach_it(matcher):
    question = "When was Princess Feodora of Denmark's father born?"
    own = "Princess Feodora of Denmark (3 July 1910 – 17 March 1975) was a Danish princess."
    father = "Prince Harald of Denmark (8 May 1876 – 30 March 1949) was her father."
    alone = AskedChecker(matcher).check(question, "3 July 1910", [own], [0])
    assert not alone.passed and alone.by == "chain" and "father" in alone.how
    chained = AskedChecker(matcher).check(question, "8 May 1876", [own, father], [0, 1])
    assert chained.by != "chain"


# Written for this test: the one asked about named by a relative clause ("the man who directed X").
@pytest.mark.parametrize(("question", "facts", "answer", "passed"), [
    ("When did the man who directed Harbour Lights die?",
     ["Harbour Lights is a 1931 Norvanian film directed by Oskar Lind."], "1931", False),
    ("When did the man who directed Harbour Lights die?",
     ["Harbour Lights is a 1931 Norvanian film directed by Oskar Lind.",
      "Oskar Lind (2 May 1890 - 9 June 1957) was a Norvanian film director."], "9 June 1957", True),
    ("Where was the woman who founded Kestrel Records born?",
     ["Kestrel Records was founded in 1988 in Uppsala by Ilse Brandt."], "Uppsala", False),
    ("Who is the man who directed Harbour Lights?",
     ["Harbour Lights is a 1931 Norvanian film directed by Oskar Lind."], "Oskar Lind", True),
    ("Which country is the city that hosted the Velmora Games in?",  # the clause's own preposition
     ["The Velmora Games were held in Uppsala, Sweden."], "Sweden", True),
])
def test_a_relative_clause_names_the_one_asked_about(matcher, question, facts, answer, passed):
    result = AskedChecker(matcher).check(question, answer, facts, list(range(len(facts))))
    assert result.passed is passed, result.how
    if not passed:
        assert result.by == "chain", result.how


# Written for these tests: a question that describes a thing on its way to what it asks ("by a
# painter from what town?"), answered with that thing, and the answer one fact further.
@pytest.mark.parametrize(("question", "facts", "chain", "answer", "passed"), [
    ("Harbor Lights is a novel by a painter from what town?",
     ["Harbor Lights is a 1961 novel by painter Lorna Vidal."], [0], "Lorna Vidal", False),
    ("Harbor Lights is a novel by a painter from what town?",
     ["Harbor Lights is a 1961 novel by painter Lorna Vidal.", "Lorna Vidal was born in the town of Kestrel Bay."],
     [0, 1], "Kestrel Bay", True),
    ("The Iron Orchard was printed at a press located in which city?",
     ["The Iron Orchard was printed at Selden Press in 1902."], [0], "Selden Press", False),
    ("The Iron Orchard was printed at a press located in which city?",
     ["The Iron Orchard was printed at Selden Press in 1902.", "Selden Press is located in Tromsø."], [0, 1],
     "Tromsø", True),
    # the question's own name is not its answer, unless offered as one of two
    ("Which instrument did Otto Brenner play in the Dune Sea Quartet and the Harbor Trio?",
     ["Otto Brenner played cello in the Dune Sea Quartet."], [0], "Dune Sea Quartet", False),
])
def test_a_described_thing_or_a_named_one_is_not_what_is_asked(matcher, question, facts, chain, answer, passed):
    result = AskedChecker(matcher).check(question, answer, facts, chain)
    if passed:  # these checks let it stand (the relation check may still judge it)
        assert result.by not in ("chain", "name"), result.how
    else:  # the described thing says the relation that led to it, not the one asked of it
        assert not result.passed, result.how
        assert result.by in ("relation", "name"), result.how


@pytest.mark.parametrize("question", [
    "What is the Harbour Tower an instance of in the city where Lorna Vidal was born?",
    "Which town was Lorna Vidal born in?",
    "Where does the painter Lorna Vidal come from?",
])
def test_a_statement_restated_whole_is_not_an_answer(matcher, question):
    fact = "Lorna Vidal is a painter who was born in the town of Kestrel Bay in 1931."
    whole = AskedChecker(matcher).check(question, fact.rstrip("."), [fact], [0])
    assert not whole.passed and whole.by == "whole", whole.how
    part = AskedChecker(matcher).check(question, "Kestrel Bay", [fact], [0])
    assert part.by != "whole", part.how


def test_an_offered_option_may_be_the_answer():
    from agent.pipeline.asked import repeats_a_name

    question = "Which painter was Danish, Lorna Vidal or Otto Brenner?"
    lorna = "Lorna Vidal was a Norwegian painter."
    otto = "Otto Brenner (1901-1970) was a Danish painter."
    assert repeats_a_name(question, "Otto Brenner", [lorna, otto]) == ""
    # a choice between the two is proven only by facts about each
    assert "nothing shows" in repeats_a_name(question, "Otto Brenner", [otto])
    assert "named by the question" in repeats_a_name("Who taught Lorna Vidal and Otto Brenner?", "Otto Brenner")


@pytest.mark.parametrize(("question", "clause"), [
    ("Harbor Lights is a character from a radio serial created by who?", "created by who?"),
    ("The Iron Orchard was printed at a press located in which city?", "located in which city?"),
    ("Harbor Lights is a novel by a painter from what town?", "from what town?"),
    ("Who founded Zorblax Station?", "Who founded Zorblax Station?"),  # nothing described on the way
    ("Who is an actor in Harbor Lights?", "Who is an actor in Harbor Lights?"),
])
def test_what_is_asked_of_the_last_thing_a_question_describes(question, clause):
    from agent.pipeline.question_reading import asked_clause

    assert asked_clause(question) == clause


# Written for these tests: a "what is ..." question whose closest relation takes numbers (read
# from the values the knowledge holds) is not answered by a name, whatever fact holds it; the
# same facts pass where a noun or wh-word asks for the name.
@pytest.mark.parametrize(("question", "fact", "answer", "passed"), [
    ("What is the population of the state where Kestrel Field Airport is located?",
     "Kestrel Field Airport is a public airport located in Kestrel City, Norvania.", "Kestrel City", False),
    ("What is the population of the state where Kestrel Field Airport is located?",
     "Norvania has a population of 2,913,123.", "2,913,123", True),
    ("What was the number of people living in Velmora in 2010?", "<Velmora> <country> <Norvania> .", "Norvania",
     False),
    ("What was the number of people living in Velmora in 2010?", "<Velmora> <population> <12400> .", "12,400", True),
    ("What is the year of birth of Oskar Lind?", "<Oskar Lind> <place of birth> <Uppsala> .", "Uppsala", False),
    ("What is the year of birth of Oskar Lind?", "<Oskar Lind> <date of birth> <1931> .", "1931", True),
    ("What was the number of episodes of Harbour Lights?", "<Harbour Lights> <country of origin> <Norvania> .",
     "Norvania", False),
    # the noun after "what", or the wh-word, asks for the name
    ("In what city was Oskar Lind born?", "<Oskar Lind> <place of birth> <Uppsala> .", "Uppsala", True),
    ("What is the birthplace of Oskar Lind?", "<Oskar Lind> <place of birth> <Uppsala> .", "Uppsala", True),
    ("Where was Oskar Lind born?", "<Oskar Lind> <place of birth> <Uppsala> .", "Uppsala", True),
    # the mirror: a bare number does not answer a question that asks a thing (the first two
    # passed before that check: only relations of numbers were compared with them)
    ("What is the mother tongue of Maren Holt?", "<Maren Holt> <UTC date of spacecraft launch> <2017> .", "2017",
     False),
    ("Which nation is the Vessel Institute in?", "<Vessel Institute> <population> <4200> .", "4200", False),
    ("Which language did Maren Holt grow up speaking?", "<Maren Holt> <date of birth> <1957> .", "1957", False),
    ("How many seasons did Quiet Harbor run for?", "<Quiet Harbor> <number of seasons> <3> .", "3", True),
])
def test_a_question_asking_a_number_or_a_thing_is_answered_by_one(matcher, question, fact, answer, passed):
    result = AskedChecker(matcher).check(question, answer, [fact], [0])
    assert result.passed is passed, result.how
    if not passed:
        assert result.by == "type" and "a number" in result.how and answer in result.how


def test_a_relation_is_numeric_by_the_values_the_knowledge_holds():
    """The knowledge base's own relations: numeric when most of their values are numbers,
    whatever they are called; the bundled ones from KAMEL's values."""
    from agent.index import FactIndex
    from agent.knowledge.facts import Fact
    from conftest import word_tokenizer

    facts = [Fact("Velmora", "head count", "12,400"), Fact("Kestrel City", "head count", "310"),
             Fact("Uppsala", "head count", "177074"), Fact("Norvania", "head count", "unknown"),
             Fact("Velmora", "twin town", "Uppsala"), Fact("Uppsala", "twin town", "Velmora"),
             Fact("Kestrel City", "twin town", "2 Rivers")]
    index = FactIndex.build(facts, word_tokenizer(("Velmora", "Uppsala", "Kestrel", "City", "Norvania", "head",
                                                    "count", "twin", "town", "Rivers", "unknown", "12,400",
                                                    "310", "177074", "2")), progress=False)
    labels = RelationLabels.from_index(index)
    assert set(labels.labels) == {"head count", "twin town"} and labels.numeric == {"head count"}
    bundled = RelationLabels.bundled()
    assert {"population", "date of birth", "number of episodes"} <= bundled.numeric
    assert not {"place of birth", "country", "occupation"} & bundled.numeric
    assert labels.merged(bundled).numeric >= {"head count", "population"}


def test_the_name_and_role_a_question_asks_through():
    from agent.pipeline.question_reading import asked_through
    from agent.pipeline.chaining import role_holder

    assert asked_through("Who is the spouse of the director of film Lamp Street?") == ("Lamp Street", "director")
    assert asked_through("When was Ada Quint's father born?") == ("Ada Quint", "father")
    assert asked_through("Where did the man who composed Grey Orchard study?") == ("Grey Orchard", "man")
    assert asked_through("Who is Ada Quint's father?") == ("", "")
    # "the N of X" as the object of a verb other than "is": the question asks something else
    # (MuSiQue: "What movie stars A, B and the producer of The Jewel of the Nile?" was answered
    # with the producer, wrong and grounded); after "is" the N is the answer. Written for this test.
    assert asked_through("What film stars Ada Quint and the producer of Dune Sea?") == ("Dune Sea", "producer")
    assert asked_through("Which film was directed by the father of Ada Quint?") == ("Ada Quint", "father")
    assert asked_through("Who is the producer of Dune Sea?") == ("", "")
    assert asked_through("Who was the director of film Dune Sea?") == ("", "")
    # What the name is may be said with an article ("of the film", "of the documentary") in any
    # word: a model's rewording of 2Wiki's "of film X" (written for this test); a clause the name
    # opens ("the country X was born in") is not said of it.
    assert asked_through("Who is the spouse of the director of the film Lamp Street?") == ("Lamp Street", "director")
    assert asked_through("Where was the composer of the opera Grey Orchard born?") == ("Grey Orchard", "composer")
    assert asked_through("Who was the director of the documentary Dune Sea?") == ("", "")
    assert asked_through("What is the capital of the country Ada Quint was born in?") != ("Ada Quint", "capital")
    assert asked_through("Where was Ada Quint born?") == ("", "")
    fact = "Lamp Street is a 1961 drama directed by Robert G. Varn for Dune Pictures and starring Ethel Moor."
    assert role_holder(fact, "Who is the spouse of the director of film Lamp Street?", "director") == ["Robert G Varn"]
    assert role_holder("Lamp Street is a 1961 drama starring Ethel Moor.", "Who directed Lamp Street?", "director") == []
    # a relative clause describing what the question asks further of (written for this test)
    assert asked_through("What county borders the county in which Velmora Falls is located?") == (
        "Velmora Falls", "county")
    assert asked_through("How many people live in the state where Lamp City Airport is?") == (
        "Lamp City Airport", "state")
    assert asked_through("What is the county in which Velmora Falls is located?") == ("", "")
    assert asked_through("Which county is Velmora Falls in?") == ("", "")
    # a role's word inside a name says no role ("Ardent County" names no county of anything)
    assert role_holder("Velmora Falls is a village in Ardent County, Norvania.",
                       "What county borders the county in which Velmora Falls is located?", "county") == []


def test_a_noun_the_role_has_is_asked_through_the_role_and_a_kind_of_it_is_not():
    """"What nationality is the director of film X?" asks the director's nationality; "What city
    is the capital of X?" asks the capital, a city. Which one is the reader's to say (the local
    model in the agent; here a table standing in for its readings); without one, the role is
    the answer as before. Written for this test."""
    readings = {("director", "nationality"): False, ("father", "religion"): False, ("capital", "city"): True}

    def kinds(role: str, noun: str) -> bool:
        return readings[role, noun]

    assert asked_through("What nationality is the director of film Lamp Street?", kinds) == ("Lamp Street", "director")
    assert asked_through("What religion was Ada Quint's father?", kinds) == ("Ada Quint", "father")
    # a name cut at its comma into the question's names: the rest of it stands before the role
    assert asked_through("What religion is Sir Bo Quint, 2Nd Baronet's father?", kinds)[1] == "father"
    assert asked_through("What city is the capital of Norvania?", kinds) == ("", "")
    assert asked_through("What nationality is the director of film Lamp Street?") == ("", "")
    # the role's last word the noun asked: a kind, the reader not asked
    assert asked_through("What language is the official language of Norvania?", kinds) == ("", "")
    # not the shape: "the N of X" as what is asked after "is"
    assert asked_through("Who is the director of film Lamp Street?", kinds) == ("", "")


def test_a_role_that_is_the_place_where_asks_is_not_asked_through_though_words_follow():
    """"Where is the headquarters of X located?" asks the headquarters, a place; "Where was the
    director of film X born?" asks the director's birthplace. Words after the name do not decide
    it: the reader does (``is_place``: a place, or a person or organization). Without a reader,
    a role with words after it is asked through, as before. Written for this test."""
    places = {"headquarters": True, "headquarter": True, "director": False, "father": False}

    class Reader:
        def __call__(self, role: str, noun: str) -> bool:
            return False

        def is_place(self, role: str) -> bool:
            return places[role]

    kinds = Reader()
    assert asked_through("Where is the headquarter of Tarnby Works located?", kinds) == ("", "")
    assert asked_through("Where are Tarnby Works's headquarters located?", kinds) == ("", "")
    assert asked_through("Where is the headquarter of Tarnby Works located?") == ("Tarnby Works", "headquarter")
    assert asked_through("Where was the director of film Lamp Street born?", kinds) == ("Lamp Street", "director")
    assert asked_through("Where was Ada Quint's father born?", kinds) == ("Ada Quint", "father")
    # only after "where": a city's capital asked of in other words is read as before
    assert asked_through("In which city was Ada Quint's father born?", kinds) == ("Ada Quint", "father")


@pytest.mark.parametrize("question", [
    "What is Ada Quint's record label?",
    "Which is Ada Quint's football club?",
    "What was Ada Quint's home town?",
    "What is Ada Quint's country of citizenship?",
    "Who was Ada Quint's doctoral advisor?",
    "What is Ada Quint's number of children?",
])
def test_a_noun_phrase_after_a_possessive_is_asked_of_the_name_itself(question):
    """"What is X's record label?" asks X's record label (the answer), not the label of X's
    record: the words after the possessive's noun only continue its noun phrase (KAMEL follow-up
    "And what is their record label?" was withheld: "the question asks about the record of
    'Buono'; the fact is about 'Buono' itself"). A relative asked something further stays asked
    through. Written for this test."""
    assert asked_through(question) == ("", "")


@pytest.mark.parametrize(("question", "through"), [
    ("When was Ada Quint's father born?", ("Ada Quint", "father")),
    ("What is Ada Quint's mother's birthplace?", ("Ada Quint", "mother")),
    ("Who was Ada Quint's father married to?", ("Ada Quint", "father")),
    ("What is Ada Quint's father known for?", ("Ada Quint", "father")),
])
def test_a_relative_asked_something_further_is_asked_through(question, through):
    assert asked_through(question) == through


@pytest.mark.parametrize(("question", "fact", "answer"), [
    # the fact writes the name with a possessive: it is still about the name itself
    ("Where did Princess Ada Of Varn's father die?",
     "Princess Ada of Varn's husband was Prince Olaf of Norvania and Denmark.", "Denmark"),
    # a title's qualifier between the name and its possessive
    ("When did Ada Quint (Painter)'s father die?",
     "Around 1920, Ada Quint moved to Tarnow with her husband, Ola Brun.", "1920"),
])
def test_a_fact_about_the_name_itself_does_not_answer_what_is_asked_of_its_relative(matcher, question, fact, answer):
    """Asked of X's father, a fact about X alone is withheld, however it writes X: "X's husband"
    (2WikiMultiHopQA's "Where did Grand Duchess Elena Vladimirovna Of Russia's father die?" was
    answered "Denmark" from her husband's title, proven) or with the title's qualifier the
    question gives. Written for this test; fails on the code before (the possessive hid the name
    from the check, the qualifier hid the possessive)."""
    result = AskedChecker(matcher).check(question, answer, [fact], [0])
    assert not result.passed and result.by == "chain", result.how


def test_an_answer_that_is_the_thing_a_relative_clause_describes_is_withheld(matcher):
    """"What county borders the county in which Velmora Falls is located?": the county the fact
    about Velmora Falls gives is the one described on the way, not the one asked."""
    question = "What county borders the county in which Velmora Falls is located?"
    fact = "Velmora Falls is a village in Ardent County, Norvania."
    result = AskedChecker(matcher).check(question, "Ardent County", [fact], [0])
    assert not result.passed and result.by == "chain", result.how


# Written for this test: a question asked through a role, asked again of whom the chain reached.
@pytest.mark.parametrize(("question", "holder", "asked"), [
    ("Who is the spouse of the director of film Lamp Street?", "Ann Lee", "Who is the spouse of Ann Lee?"),
    ("When was Ada Quint's father born?", "Bo Quint", "When was Bo Quint born?"),
    ("Where did the director of film Reverse Tide (Film) study?", "Ola Brun", "Where did Ola Brun study?"),
    ("When did the man who directed Harbour Lights die?", "Oskar Lind", "When did Oskar Lind die?"),
    # a name with its title after a comma is one name ("Sir Edward Acton, 3Rd Baronet's father")
    ("When did Sir Ola Quint, 3rd Baronet's father die?", "Bo Quint", "When did Bo Quint die?"),
    ("Where was Ada Quint, Duchess Of Tarnow's mother born?", "Eva Lind", "Where was Eva Lind born?"),
])
def test_a_question_through_a_role_is_asked_again_of_whom_it_reached(question, holder, asked):
    from agent.pipeline.question_reading import ask_past

    named, role = asked_through(question)
    assert ask_past(question, named, role, holder) == asked


# Written for this test: who fills the role, asked in the question's own words (the first hop of a
# question asked again hop by hop).
@pytest.mark.parametrize(("question", "first"), [
    ("Who is the spouse of the director of film Lamp Street?", "Who is the director of film Lamp Street?"),
    ("When was Ada Quint's father born?", "Who is Ada Quint's father?"),
    ("Where was the composer of song Grey Orchard (Song) born?", "Who is the composer of song Grey Orchard (Song)?"),
    ("When did Sir Ola Quint, 3rd Baronet's father die?", "Who is Sir Ola Quint, 3rd Baronet's father?"),
])
def test_who_fills_the_role_a_question_asks_through_is_asked_in_its_own_words(question, first):
    from agent.pipeline.question_reading import ask_holder

    assert ask_holder(question, *asked_through(question)) == first
    # that question asks the role itself: nothing is asked through it (a title's qualifier,
    # "(Song)", names nothing asked)
    assert asked_through(first) == ("", "")


def test_past_a_role_the_fact_about_whom_it_reached_is_checked_against_what_is_asked_of_them(matcher):
    """"Who is the spouse of the director of film Lamp Street?": the fact about the director is
    checked against "Who is the spouse of Ann Lee?" (the whole question asks "director" most);
    a relation whose values are numbers says nothing of a name ("had three children by her
    husband, Bo Rask" says no number of children of him), one of things nothing of a date."""
    question = "Who is the spouse of the director of film Lamp Street?"
    film = "Lamp Street is a 1961 drama directed by Ann Lee."
    spouse = AskedChecker(matcher).check(question, "Bo Rask", [film, "Ann Lee had three children by her husband, "
                                                                      "the actor Bo Rask."], [0, 1])
    assert spouse.passed and spouse.fact == 1, spouse.how
    born = AskedChecker(matcher).check(question, "Bergen", [film, "Ann Lee was born in Bergen in 1920."], [0, 1])
    assert not born.passed, born.how
    died = "When did the man who directed Harbour Lights die?"
    life = ["Harbour Lights is a 1931 Norvanian film directed by Oskar Lind.",
            "Oskar Lind (2 May 1890 - 9 June 1957) was a Norvanian film director."]
    assert AskedChecker(matcher).check(died, "9 June 1957", life, [0, 1]).passed


def test_a_title_with_a_comma_asked_through_a_role_needs_the_chain_to_reach_it(matcher):
    """The title's keyword drops its comma ("Sleeping Waking"), the question keeps it: the
    question still asks about the director, and a fact about the film alone does not answer.
    Written for this test."""
    question = "Where was the director of Sleeping, Waking born?"
    fact = "Sleeping, Waking is a 1983 Norvanian comedy about the fictional hero Ola Brun."
    result = AskedChecker(matcher).check(question, "Norvanian", [fact], [0])
    assert not result.passed and result.by == "chain", result.how


def test_a_title_with_lowercase_words_is_not_cut_into_a_name_asked_through(matcher):
    """"What is the language of The Isle of the Moon?" asks the title's language: "The Isle" is
    not a name asked through ("the language of X of the Moon"), since the fact holds the title
    whole. Written for this test (a golden question of this shape was lost to that reading)."""
    result = AskedChecker(matcher).check("What is the language of The Isle of the Moon?", "Latin",
                                         ["<The Isle of the Moon> <language of work or name> <Latin> ."], [0])
    assert result.passed, result.how


@pytest.mark.parametrize(("question", "name", "relation"), [
    ("Where was the Swedish performance artist Ayla Norr born?", "Ayla Norr", "place of birth"),
    ("What language does the Iranian vocalist Daran Sohr speak natively?", "Daran Sohr", "native language"),
    ("Which club did the Dutch footballer Kees Varn play for?", "Kees Varn", "member of sports team"),
    ("Which city is the French football club Olympique Varnais based in?", "Olympique Varnais",
     "headquarters location"),
    ("Who was the husband of the Irish actress Maura Quell?", "Maura Quell", "spouse"),
])
def test_a_name_s_description_says_what_it_is_not_what_is_asked(matcher, question, name, relation):
    """"the Swedish performance artist X": the words between "the" and a name describe it;
    left in, "performance" drew "location of first performance" over "place of birth" (HotpotQA,
    a right answer withheld at eb08894). Written for this test; on 16 such questions the right
    relation rose to the closest in 9 (mean rank 5.3 -> 1.4), and fell in none."""
    assert matcher.ranked(question, [name])[0][0] == relation


@pytest.mark.parametrize(("question", "facts", "answer", "passed"), [
    # the answer is the only name of the statement holding it: "Mount Tarn <relation> Mount Tarn"
    # fits every relation alike, so nothing shows that it answers (MuSiQue dev, wrong and grounded
    # at e7fc9d7: "The continent includes Madagascar and various archipelagos.")
    ("What is the highest peak of the range with the coldest winters?",
     ["The range is crossed by the Velm river.", "The range includes Mount Tarn and two glaciers."], "Mount Tarn", False),
    # another name beside the answer: the statement is checked as what it says of that one
    ("Who directed Harbour Lights?",
     ["Harbour Lights is a 1990 film directed by Ada Varga.", "Ada Varga is a Norvanian film director."], "Ada Varga",
     True),
])
def test_a_statement_naming_only_the_answer_says_nothing_of_it(matcher, question, facts, answer, passed):
    """Names invented for this test."""
    result = AskedChecker(matcher).check(question, answer, facts, list(range(len(facts))))
    assert result.passed is passed, result.how
    if not passed:
        assert result.by == "name" and "names nothing but" in result.how, result.how
