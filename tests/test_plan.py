"""Reading a question into a plan, in wordings written for these tests (none is an example of
``prompts/plan/kinds.tsv``, none from an evaluation set): the kind, the two options, the order
asked, whose value is compared. No language model: the sentence embedder and the words."""
from __future__ import annotations

import pytest

from agent.pipeline.plan import PlanReader, find_options, order_asked

NAMES = ["Lorna Vidal", "Otto Brenner", "Harbor Lights", "Dune Sea", "The Iron Orchard", "Kestrel Bay",
         "Before Dawn, First Light Comes"]


@pytest.fixture(scope="module")
def reader():
    from agent.embeddings import Embedder

    return PlanReader(Embedder())


@pytest.mark.parametrize(("question", "kind", "order", "options"), [
    # a choice between two, in several wordings
    ("Who was born first, Lorna Vidal or Otto Brenner?", "choice", "earlier", ("Lorna Vidal", "Otto Brenner")),
    ("Between Lorna Vidal and Otto Brenner, who is the elder?", "choice", "earlier", ("Lorna Vidal", "Otto Brenner")),
    ("Which one came out later: Harbor Lights or Dune Sea?", "choice", "later", ("Harbor Lights", "Dune Sea")),
    ("Of Harbor Lights and Dune Sea, which was released more recently?", "choice", "later", ("Harbor Lights", "Dune Sea")),
    ("Who is younger, Otto Brenner or Lorna Vidal?", "choice", "later", ("Otto Brenner", "Lorna Vidal")),
    ("Which is longer, Harbor Lights or Dune Sea?", "choice", "more", ("Harbor Lights", "Dune Sea")),
    # an auxiliary verb first, but the two offered as alternatives: which, not whether
    ("Was Lorna Vidal or Otto Brenner born first?", "choice", "earlier", ("Lorna Vidal", "Otto Brenner")),
    ("Did Harbor Lights or Dune Sea come out later?", "choice", "later", ("Harbor Lights", "Dune Sea")),
    # whether the first comes before the other: yes or no
    ("Is Lorna Vidal older than Otto Brenner?", "verify", "earlier", ("Lorna Vidal", "Otto Brenner")),
    ("Did Harbor Lights come out before Dune Sea?", "verify", "earlier", ("Harbor Lights", "Dune Sea")),
    ("Was Otto Brenner born after Lorna Vidal?", "verify", "later", ("Otto Brenner", "Lorna Vidal")),
    # whether both share a value
    ("Were Lorna Vidal and Otto Brenner born in the same country?", "same", "", ("Lorna Vidal", "Otto Brenner")),
    ("Do Lorna Vidal and Otto Brenner have the same citizenship?", "same", "", ("Lorna Vidal", "Otto Brenner")),
    ("Lorna Vidal and Otto Brenner: same nationality?", "same", "", ("Lorna Vidal", "Otto Brenner")),
    # how far apart
    ("How many years separate the births of Lorna Vidal and Otto Brenner?", "difference", "",
     ("Lorna Vidal", "Otto Brenner")),
    ("What is the age gap between Lorna Vidal and Otto Brenner?", "difference", "", ("Lorna Vidal", "Otto Brenner")),
    ("How many years after Harbor Lights did Dune Sea come out?", "difference", "", ("Harbor Lights", "Dune Sea")),
    # look-ups, two names or one
    ("Where was the director of Harbor Lights born?", "lookup", "", ()),
    ("Who is the mother of Otto Brenner?", "lookup", "", ()),
    ("What did Lorna Vidal and Otto Brenner write together?", "lookup", "", ()),
    ("When did Otto Brenner marry Lorna Vidal?", "lookup", "", ()),
    # a statement that ends in what it asks (a wh-word, not a yes/no question) names two things
    ("Harbor Lights was filmed at a studio owned by Otto Brenner in which city?", "lookup", "", ()),
    ("Lorna Vidal and Otto Brenner, both painters, worked in what city?", "lookup", "", ()),
    ("Lorna Vidal and Otto Brenner, two painters, were trained during which decade?", "lookup", "", ()),
    ("Harbor Lights and Dune Sea were both filmed in which century?", "lookup", "", ()),
    ("The Iron Orchard and Kestrel Bay share a publisher based in what country?", "lookup", "", ()),
    # a title with a comma and an order word in it is one name: nothing is compared
    ("What is the original language of Before Dawn, First Light Comes?", "lookup", "", ()),
    ("In what language was the book \"Before Dawn, First Light Comes\" written?", "lookup", "", ()),
    # ... and an order word inside an option's name is not the order asked
    ("Of Before Dawn, First Light Comes and Dune Sea, which is newer?", "choice", "later",
     ("Before Dawn, First Light Comes", "Dune Sea")),
])
def test_the_kind_options_and_order_of_a_question(reader, question, kind, order, options):
    plan = reader.plan(question, NAMES)
    assert (plan.kind, plan.order, plan.options) == (kind, order, options), plan.how


@pytest.mark.parametrize(("question", "role"), [
    ("Which film has the director who died first, Harbor Lights or Dune Sea?", "director"),
    ("Whose author was born later, The Iron Orchard or Kestrel Bay?", "author"),
    ("Are the directors of Harbor Lights and Dune Sea from the same country?", "directors"),
    ("Which film came out first, Harbor Lights or Dune Sea?", ""),
    # a possessive names the role too (paraphrase set: the films' own years were compared)
    ("Of Harbor Lights and Dune Sea, which film's director is older?", "director"),
    ("Which film's director died first, Harbor Lights or Dune Sea?", "director"),
    ("Who died first, Lorna Vidal or Otto Brenner?", ""),
])
def test_whose_value_is_compared(reader, question, role):
    assert reader.plan(question, NAMES).role == role, reader.plan(question, NAMES).how


@pytest.mark.parametrize(("question", "of_both"), [
    ("Are Lorna Vidal and Otto Brenner both film directors?", "film directors"),
    ("Were both Lorna Vidal and Otto Brenner Austrian painters?", "Austrian painters"),
    ("Lorna Vidal and Otto Brenner: are they both novelists?", "novelists"),
    ("Are Lorna Vidal and Otto Brenner from the same country?", ""),
])
def test_what_a_same_question_says_of_both(reader, question, of_both):
    """"Are X and Y both P?" is a "same" question whose step reads P from each option's facts."""
    plan = reader.plan(question, NAMES)
    assert (plan.kind, plan.trait) == ("same", of_both), plan.how


@pytest.mark.parametrize(("question", "trait"), [
    ("Which singer is Austrian, Lorna Vidal or Otto Brenner?", "Austrian"),
    ("Who was a film director, Lorna Vidal or Otto Brenner?", "a film director"),
    ("Of Lorna Vidal and Otto Brenner, which one is a painter?", "a painter"),
    ("Between Lorna Vidal and Otto Brenner, who is a novelist?", "a novelist"),
])
def test_which_of_two_a_question_says_something_of(reader, question, trait):
    """"Which singer is American, X or Y?" names no order: a choice by what it says of one."""
    plan = reader.plan(question, NAMES)
    assert (plan.kind, plan.order, plan.trait, plan.options) == ("choice", "", trait, ("Lorna Vidal", "Otto Brenner")), \
        plan.how


@pytest.mark.parametrize("question", [
    "Who is the spouse of Lorna Vidal's coach Otto Brenner?",  # not offered as alternatives
    "What is the difference in age between Lorna Vidal and Otto Brenner?",
    "Where were Harbor Lights and Dune Sea filmed?",
])
def test_two_names_without_a_trait_to_choose_by(reader, question):
    assert not reader.plan(question, NAMES).trait


def test_order_words_and_what_is_not_one():
    assert order_asked("Is X older than Y?") == ("earlier", "older")
    assert order_asked("Which was released more recently, X or Y?") == ("later", "more recently")
    assert order_asked("Who lived longer, X or Y?") == ("more", "longer")
    assert order_asked("What is the first name of X?") == ("", "")
    assert order_asked("Where was X born?") == ("", "")


def test_options_are_the_knowledges_names_or_the_questions_own():
    assert find_options("Is Lorna Vidal older than Otto Brenner?", NAMES)[0] == ["Lorna Vidal", "Otto Brenner"]
    # names the knowledge does not hold: the question's capitalised names, split at "and"/"or"
    assert find_options("Were Ada Quint and Bo Rask born in the same town?", [])[0] == ["Ada Quint", "Bo Rask"]
    assert find_options("Where was Ada Quint born?", [])[0] == ["Ada Quint"]
    # a title's qualifier is part of its name, not a third option
    assert find_options("Did Harbor Lights (1954 film) or Dune Sea come out first?", [])[0] == [
        "Harbor Lights (1954 film)", "Dune Sea"]
    assert find_options("Are the makers of Grey Orchard (novel) and Lamp Street (1961 Film) from one country?",
                        [])[0] == ["Grey Orchard (novel)", "Lamp Street (1961 Film)"]
    assert find_options("Is Dune Sea older than Harbor Lights (1954 film)?", ["Dune Sea", "Harbor Lights"])[0] == [
        "Dune Sea", "Harbor Lights (1954 film)"]
    # the knowledge's titles match without their qualifier ("Mark King (musician)")
    assert find_options("Which singer is Austrian, Ada Quint or Bo Rask?", ["Ada Quint (singer)", "Bo Rask"])[0] == [
        "Ada Quint", "Bo Rask"]
    # a knowledge name that is the tail of a longer name the question writes is not the option
    assert find_options("Whose director was born first, One Harbor Night or Dune Sea?",
                        ["Harbor Night", "Dune Sea (film)"])[0] == ["One Harbor Night", "Dune Sea"]
    # a comma ends a name the question writes ("Austrian, Ada Quint" is two words of two things)
    assert "Ada Quint" in find_options("Which singer is Austrian, Ada Quint or Bo Rask?", [])[0]
