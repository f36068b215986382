"""The agent pipeline on the real model, the real embedded graph server and real embeddings."""
from __future__ import annotations

import json
import threading

import pytest
from pydantic import TypeAdapter

from agent.events import AgentEvent
from agent.pipeline import FactAgent
from agent.pipeline.grounding import ground
from agent.knowledge.kamel import demo_kamel_root, kamel_questions
from agent.knowledge.loaders import load_facts
from agent.web.decompose import SentenceDecomposer
from agent.web.documents import read_documents
from agent.web.web import KnowledgeWeb
from conftest import DATA

pytestmark = pytest.mark.model
WEB = DATA / "web"


@pytest.fixture()
def small_web(tmp_path, graph, graph_server, embedder):
    web = KnowledgeWeb.open(tmp_path / "web", embedder=embedder, graph_uri=graph_server.uri,
                            graph_user=graph_server.user, graph_password=graph_server.password,
                            graph_database=graph_server.database)
    web.add_documents(read_documents([WEB / "notes.md", WEB / "corpus.json", WEB / "rows.jsonl"]),
                      SentenceDecomposer(), progress=False)
    web.add_triples(load_facts(WEB / "triples.tsv"), source="triples.tsv", progress=False)
    yield web
    web.close()


@pytest.mark.parametrize("tree", ["question", "both"])
def test_every_span_is_a_retrieved_or_kb_fact_and_the_trace_is_json(demo_generator, small_web, tree):
    agent = FactAgent(demo_generator, small_web, tree=tree, k=8)
    kb = {f.text for f in load_facts(demo_kamel_root())}
    questions = ["Who founded Zorblax Station?", "Where was Mira Quell born?",
                 *[q.text for q in kamel_questions(demo_kamel_root(), split="dev", limit=3)]]
    spans = 0
    for question in questions:
        reply = agent.answer(question)
        trace = json.loads(json.dumps(reply.trace))  # plain data all the way down
        retrieved = {h["text"]: h for s in trace["steps"] if s["step"] == "retrieve" for h in s["hits"]}
        hopped = {text for s in trace["steps"] if s["step"] == "hop" for text in s["added"]}
        attempts = [s for s in trace["steps"] if s["step"] == "generate"]
        assert attempts[0]["tree"] == "question"
        for fact in reply.facts:
            spans += 1
            assert reply.text[fact["start"]:fact["end"]] == fact["text"]
            if fact["tree"] == "question":  # a retrieved fact (or one a hop brought), with its web id and provenance
                assert fact["text"] in retrieved or fact["text"] in hopped
                if fact["text"] in retrieved:
                    assert fact["fact_id"] == retrieved[fact["text"]]["id"]
                assert fact["provenance"]["kind"] in ("document", "triple")
            else:
                assert tree == "both" and fact["text"] in kb and fact["fact_id"].startswith("kb:")
        if tree == "question":
            assert all(a["tree"] == "question" for a in attempts)
        assert trace["answer"] == reply.answer and "retrieve_s" in trace["timings"]
        assert trace["tokens"] == {"prompt": sum(a["prompt_tokens"] for a in attempts),
                                   "prompt_cached": sum(a.get("cached_prompt_tokens", 0) for a in attempts),
                                   "generated": sum(a["tokens"] for a in attempts)}
        assert trace["tokens"]["prompt_cached"] < trace["tokens"]["prompt"] or not trace["tokens"]["prompt"]
        assert trace["tokens"]["prompt"] > 0 or all(a.get("skipped") for a in attempts)
        if reply.knows:  # an answer is given only with a fact behind it
            assert reply.facts and trace["supported"]
        else:
            assert reply.answer == "I don't know."
    assert spans > 0, "no Fact: line in any answer"


def test_kb_tree_is_plain_constrained_generation(demo_generator):
    agent = FactAgent(demo_generator, None, tree="kb")
    question = kamel_questions(demo_kamel_root(), split="dev", limit=1)[0].text
    reply = agent.answer(question)
    direct = demo_generator.answer(question)
    first = reply.trace["steps"][0]
    assert [s["step"] for s in reply.trace["steps"]] in (["generate"], ["generate", "generate"])
    # The same generation, up to where a fact broke away from the question's chain (then cut).
    assert direct.text.startswith(first["text"])
    assert [f["fact_id"] for f in first["facts"]] == [f"kb:{f.id}" for f in direct.facts][: len(first["facts"])]
    if first.get("cut"):
        assert len(first["text"]) < len(direct.text) and not first["grounded"]
        assert not ground(question, direct.answer, [f.text for f in direct.facts]).grounded
    else:
        assert first["text"] == direct.text


@pytest.mark.parametrize(("question", "opening", "asked"), [
    ("What is Conrad Bursian's occupation?", "<Conrad Bursian> <place of death> <Munich> .",
     "<Conrad Bursian> <field of work> <philology> ."),
    ("What instrument did Buck Owens play?", "<Buck Owens> <field of work> <country music> .",
     "<Buck Owens> <instrument> <guitar> ."),
])
def test_a_fact_about_the_thing_asked_that_says_another_relation_is_followed_by_one_of_the_relation_asked(
        demo_generator, question, opening, asked):
    """The reply opens with a true fact about the thing the question names that says something
    else than what is asked (as the model states "<Buono!> <genre> <J-pop>" for "What is the label
    of Buono!?"); nothing answers from it (SmolLM2 writes "I don't know." after Bursian's place of
    death, and "Country music" after Owens's field of work, which the check withholds). The
    relation asked, which the knowledge holds for that thing, is the next fact's: Bursian's
    occupation is answered from it; SmolLM2 still answers "Country music" after Owens's
    instrument, and that answer stays withheld."""
    agent = FactAgent(demo_generator, None, tree="kb")
    records = agent.attempts.run(question, "kb", agent.kb_writer, question, demo_generator.index, None, 0,
                                 lead=opening)
    first, last = records[0], records[-1]
    assert not first["grounded"] and len(records) == 2
    assert last["continues"] == first["attempt"] and "asks" in last["why"]
    assert [f["text"] for f in last["facts"]] == [opening, asked]
    value = asked.rsplit("<", 1)[1].split(">")[0]
    if "Bursian" in question:
        assert last["grounded"] and last["answer"].lower() == value
        assert last["check"]["passed"] and last["grounding"]["facts"][-1] == 1
    else:
        assert last["answer"] == "Country music" and not last["grounded"]
        assert last["check"]["says"] == "field of work" and last["check"]["asks"] == "instrument"


def test_a_reply_rewound_to_a_fact_answers_from_there_without_the_facts_after_it(demo_generator):
    """A reply that stated a fact that answers, then went on to another: rewound to the end of
    the first, the facts after it are gone from its text, its spans and the chain, and the model
    answers from the first."""
    from agent.pipeline.replies import ReplyWriter

    question = "What is Conrad Bursian's field of work?"
    first, second = "<Conrad Bursian> <field of work> <philology> .", "<Conrad Bursian> <place of death> <Munich> ."
    writer = ReplyWriter(demo_generator)
    reply = writer.start(question, demo_generator.index, question=question, lead=first)
    assert writer.state_one(reply, [second]) == second
    assert [demo_generator.index.facts[f].text for f, _, _ in reply.session.trace.spans] == [first, second]
    part = writer.answer_after(reply, 0)
    assert [s.text for s in part.spans] == [first] and reply.guard.stated[0] == [first]
    assert "Munich" not in part.text and part.text.startswith(f"Fact: {first}\nAnswer:")
    assert part.answer.lower() == "philology" and part.continued


def test_an_answer_line_among_the_stated_values_says_one_of_them_word_for_word(demo_generator):
    """The reply's answer line again, constrained to what its facts say: whatever the model
    picks is one of their values as written (never a paraphrase such as "Philosophy" for
    philology), and the facts stay as they were."""
    from agent.pipeline.grounding import answer_values
    from agent.pipeline.replies import ReplyWriter

    question = "What is Conrad Bursian's occupation?"
    facts = ["<Conrad Bursian> <place of death> <Munich> .", "<Conrad Bursian> <field of work> <philology> ."]
    writer = ReplyWriter(demo_generator)
    reply = writer.start(question, demo_generator.index, question=question, lead=facts[0])
    assert writer.state_one(reply, [facts[1]]) == facts[1]
    values = answer_values(facts)
    part = writer.answer_among(reply, values)
    assert part.continued and [s.text for s in part.spans] == facts
    assert part.text == f"Fact: {facts[0]}\nFact: {facts[1]}\nAnswer: {part.answer}\n"
    assert part.answer in values
    only = writer.answer_among(reply, ["philology"])
    assert only.answer == "philology" and only.text.endswith("Answer: philology\n")
    # After a fact the reply went on to (and answered nothing): the line again after the first
    # fact, the one after it dropped.
    reply = writer.start(question, demo_generator.index, question=question, lead=facts[0])
    assert writer.state_one(reply, [facts[1]]) == facts[1]
    first = writer.answer_among(reply, ["Munich"], fact=0)
    assert [s.text for s in first.spans] == facts[:1] and first.answer == "Munich"
    assert first.text == f"Fact: {facts[0]}\nAnswer: Munich\n"


def test_bad_configurations_are_refused(demo_generator):
    with pytest.raises(ValueError, match="tree must be"):
        FactAgent(demo_generator, None, tree="forest")
    with pytest.raises(ValueError, match="knowledge web"):
        FactAgent(demo_generator, None, tree="question")


def test_stream_events_build_up_to_the_answer(demo_generator, small_web):
    agent = FactAgent(demo_generator, small_web, tree="both", k=8)
    question = "Who founded Zorblax Station?"
    events = list(agent.stream(question))
    # Each event is what agent.events declares (every interface reads them by those types).
    declared = TypeAdapter(AgentEvent)
    for event in events:
        declared.validate_python(event, strict=True)
    assert {e["event"] for e in events} == {"step", "token", "fact", "answer"}
    assert events[-1]["event"] == "answer" and all(e["event"] != "answer" for e in events[:-1])
    final = events[-1]
    steps = [e["step"] for e in events if e["event"] == "step"]
    assert steps == final["trace"]["steps"]  # each step record was streamed when it ended
    for attempt in (s for s in steps if s["step"] == "generate"):
        n = attempt["attempt"]
        tokens = "".join(e["text"] for e in events if e["event"] == "token" and e["attempt"] == n)
        assert tokens == attempt["text"]
        assert [e["fact"] for e in events if e["event"] == "fact" and e["attempt"] == n] == attempt["facts"]
    again = agent.answer(question).as_dict()  # greedy: the same answer without streaming
    assert {k: again[k] for k in ("answer", "text", "facts")} == {k: final[k] for k in ("answer", "text", "facts")}
    json.dumps(final)


def test_unknown_question_searches_its_uncovered_keywords_then_says_so(demo_generator, small_web):
    """Nothing retrieved: the per-question tree is empty, one bounded round of sub-queries (no
    chat model: the question keywords no fact covers) finds nothing either, answer "I don't know."."""
    agent = FactAgent(demo_generator, small_web, tree="question", k=5, max_rounds=1)
    reply = agent.answer("Who is Qwxvbrt Plimsoll?")
    steps = reply.trace["steps"]
    assert [s["step"] for s in steps] == ["retrieve", "plan", "generate", "subquery", "retrieve", "generate"]
    assert steps[1]["kind"] == "lookup" and steps[2]["skipped"] and steps[5]["skipped"]
    assert steps[3]["queries"] and "keywords" in steps[3]["how"]
    assert steps[4]["queries"] == steps[3]["queries"]
    assert reply.answer == "I don't know." and reply.facts == [] and not reply.trace["supported"]
    assert [s["step"] for s in FactAgent(demo_generator, small_web, tree="question", max_rounds=0)
            .answer("Who is Qwxvbrt Plimsoll?").trace["steps"]] == ["retrieve", "plan", "generate"]


def test_subquery_from_the_chat_model_feeds_the_next_tree(demo_generator, small_web):
    """The sub-query the chat model writes is searched, and its facts make the next tree."""
    from llm_fixtures import ScriptedChat

    chat = ScriptedChat("Zorblax Station founded")
    agent = FactAgent(demo_generator, small_web, tree="question", k=5, max_rounds=2, chat=chat)
    reply = agent.answer("Who is Qwxvbrt Plimsoll?")
    steps = reply.trace["steps"]
    assert [s["step"] for s in steps][:5] == ["retrieve", "plan", "generate", "subquery", "retrieve"]
    assert steps[3]["queries"] == ["Zorblax Station founded"] and len(chat.calls) >= 1
    regenerated = next(s for s in steps[5:] if s["step"] == "generate")
    assert steps[4]["new"] and regenerated["tree_facts"] == len(steps[4]["hits"])
    rounds = [s for s in steps if s["step"] == "subquery"]
    if reply.trace["supported"]:
        assert len(rounds) == 1
    else:  # a second round asks the same query again: it is not searched twice, and the loop ends
        assert len(rounds) == 2 and rounds[1]["queries"] == [] and steps[-1]["step"] == "subquery"


def test_kb_first_answers_from_the_kb_and_searches_only_when_that_is_not_grounded(demo_generator, small_web):
    """``kb-first``: the whole KB first, no retrieval; retrieval and the per-question tree only
    for a question the KB answer is not grounded for (Zorblax Station is in the web, not the KB)."""
    agent = FactAgent(demo_generator, small_web, tree="kb-first", k=8)
    kb = {f.text for f in load_facts(demo_kamel_root())}

    known = agent.answer("Where was Laurie Graff born?")
    assert known.answer == "New York" and known.trace["grounded"]
    assert [s["step"] for s in known.trace["steps"]][0] == "generate"
    assert all(s["step"] == "generate" and s["tree"] == "kb" for s in known.trace["steps"])  # nothing searched
    assert all(f["text"] in kb for f in known.facts) and known.facts

    unknown = agent.answer("Who founded Zorblax Station?")
    steps = unknown.trace["steps"]
    assert steps[0]["step"] == "generate" and steps[0]["tree"] == "kb" and not steps[0]["grounded"]
    kinds = [s["step"] for s in steps]
    assert "retrieve" in kinds and kinds.index("retrieve") > 0
    assert any(s["step"] == "generate" and s["tree"] == "question" for s in steps)
    if unknown.knows:  # an answer only with a retrieved fact behind it
        assert unknown.trace["grounded"] and all(f["tree"] == "question" for f in unknown.facts)


def test_the_listed_facts_are_read_and_a_fact_that_says_something_else_proves_nothing(demo_generator, small_web):
    """The look-up lists the retrieved facts in the prompt and the model copies the ones it uses
    under the fact constraint, in one reply. Whatever SmolLM2 picks, no answer to who directed the
    station stands on a fact that says who founded it (Mira Quell), and an answer that stands is
    one of the listed facts' words, checked to say what was asked."""
    agent = FactAgent(demo_generator, small_web, tree="question", k=8)
    reply = agent.answer("Who was the first director of Zorblax Station?")
    steps = reply.trace["steps"]
    attempt = next(s for s in steps if s["step"] == "generate")
    listed = [h["text"] for s in steps if s["step"] == "retrieve" for h in s["hits"]]
    hopped = {text for s in steps if s["step"] == "hop" for text in s["added"]}
    assert attempt["prompt_tokens"] > sum(len(t.split()) for t in listed)  # the facts were read
    assert all(f["text"] in listed or f["text"] in hopped for f in attempt["facts"])
    if reply.knows:
        holding = [f["text"] for f in reply.facts if reply.answer.lower() in f["text"].lower()]
        assert holding and not any("founded" in h for h in holding)
        assert reply.trace["grounding"]["check"]["passed"]
    elif attempt.get("check"):
        assert attempt["check"]["how"].startswith(("the statement says", "the fact says",
                                                   "the answer restates the whole statement"))


def test_a_question_asked_through_a_role_hops_to_who_fills_it(smollm, agent_web):
    """"Where was the founder of Zorblax Station born?": once a fact of the station is stated,
    the tree grows with facts about its founder (the name after "founded"), found by name and
    kept when they are about her (open with her name or come from her own document) and name
    her (her document's "She was born in Oslo in 1951." connects to no stated fact: a chain
    through it proves nothing); without the role, the hop goes to the names the fact adds in
    their order (the island first)."""
    from types import SimpleNamespace

    from agent.pipeline.question_reading import asked_through
    from agent.pipeline.chaining import ChainingTree

    question = "Where was the founder of Zorblax Station born?"
    assert asked_through(question) == ("Zorblax Station", "founder")
    fact = SimpleNamespace(text="Zorblax Station is a research base on the island of Norvik. It was founded in 1987 "
                                "by Mira Quell.")
    hits = agent_web.search(question, 4).hits
    tree = ChainingTree(hits, smollm.tokenizer, agent_web, question, through=asked_through(question))
    tree.on_fact(fact)
    hops = tree.take_hops()
    assert [h["entity"] for h in hops] == ["Mira Quell"]
    added = hops[0]["added"]
    assert any("Oslo" in t for t in added), added  # where she was born: what is asked of her
    assert all("Quell" in t for t in added), added  # all about her, by name
    assert "She was born in Oslo in 1951." not in added
    plain = ChainingTree(hits, smollm.tokenizer, agent_web, question)
    plain.on_fact(fact)
    assert [h["entity"] for h in plain.take_hops()] != ["Mira Quell"]
    # A word that describes her before her name ("Norwegian glaciologist Mira Quell") is tried
    # first and has no facts about it: she is who the hop reaches; "starring Tomas Berg" after a
    # whole name fills another role, never tried.
    described = SimpleNamespace(text="Zorblax Station is a research base founded in 1987 by Norwegian "
                                     "glaciologist Mira Quell and starring Tomas Berg.")
    tree = ChainingTree(hits, smollm.tokenizer, agent_web, question, through=asked_through(question))
    tree.on_fact(described)
    hops = tree.take_hops()
    assert [h["entity"] for h in hops] == ["Norwegian", "Mira Quell"], hops
    assert not hops[0]["added"] and any("Oslo" in t for t in hops[1]["added"])


def test_a_look_up_through_a_role_opens_with_who_fills_it_then_a_fact_about_them(demo_generator, small_web):
    """"Where was the founder of Zorblax Station born?": the reply opens with the station's fact
    that says who founded it (stated by the agent, said so in the trace), then one fact about
    Mira Quell that the model picks among hers (constrained to them): the chain reaches the one
    the question asks about whatever SmolLM2 would have written first. An answer that stands is
    Oslo, from her fact."""
    agent = FactAgent(demo_generator, small_web, tree="question", k=8)
    reply = agent.answer("Where was the founder of Zorblax Station born?")
    attempt = next(s for s in reply.trace["steps"] if s["step"] == "generate")
    lead = attempt["lead"]["fact"]
    assert "founded" in lead and "Quell" in lead and "Zorblax Station" in lead
    stated = [f["text"] for f in attempt["facts"]]
    assert stated[0] == lead, stated
    assert len(stated) >= 2 and "Quell" in stated[1], stated
    if reply.knows:
        assert reply.answer == "Oslo" and reply.trace["grounded"]


def test_a_question_through_a_role_no_attempt_proved_is_asked_again_hop_by_hop(demo_generator, small_web):
    """One fact retrieved per query and no hop while generating: the reply to "Where was the
    founder of Zorblax Station born?" cannot reach her birthplace, so the question is asked again
    in two: who founded the station (the retrieved fact that names her after "founded", stated
    by the agent), then "Where was Mira Quell born?" with its own retrieval. The two chains joined
    answer the question as asked, proven; without the hops it is not answered."""
    question = "Where was the founder of Zorblax Station born?"
    reply = FactAgent(demo_generator, small_web, tree="question", k=1, max_hops=0).answer(question)
    attempts = [s for s in reply.trace["steps"] if s["step"] == "generate"]
    hops = [a["hop"]["question"] for a in attempts if "hop" in a]
    assert hops[0] == "Who is the founder of Zorblax Station?" and hops[-1] == "Where was Mira Quell born?", hops
    first = next(a for a in attempts if "hop" in a)
    assert "founded" in first["lead"]["fact"] and first["answer"] == "Mira Quell", first
    assert reply.answer == "Oslo" and reply.trace["grounded"], attempts[-1]
    stated = [f["text"] for f in reply.facts]
    assert "Mira Quell" in stated[0] and "Zorblax Station" in stated[0] and "Oslo" in stated[-1], stated
    assert all(reply.text[f["start"]:f["end"]] == f["text"] for f in reply.facts)
    # Through serve's OpenAI-compatible reply (every attempt's text, the hops' before the joined
    # one that answers, not the last written): each fact's offsets point at its text there.
    from agent.serve.agent_model import AgentModel
    from agent.serve.wire import ChatRequest

    served = FactAgent(demo_generator, small_web, tree="question", k=1, max_hops=0)
    pieces = list(AgentModel(served).reply(ChatRequest(messages=[{"role": "user", "content": question}]),
                                           threading.Event()))
    content, end = "".join(p for p in pieces if isinstance(p, str)), pieces[-1].extra["factweave"]
    assert end["answer"] == "Oslo" and end["supported"] and end["facts"], end
    assert all(content[f["start"]:f["end"]] == f["text"] for f in end["facts"]), (content, end["facts"])
    alone = FactAgent(demo_generator, small_web, tree="question", k=1, max_hops=0, hop_by_hop=False).answer(question)
    assert not alone.knows and not any("hop" in s for s in alone.trace["steps"])
    # an order asked ("younger than"): no chain of look-ups computes it, nothing is asked again
    ordered = FactAgent(demo_generator, small_web, tree="question", k=1, max_hops=0).answer(
        "Which base has a founder younger than the founder of Zorblax Station?")
    assert not any("hop" in s for s in ordered.trace["steps"])


def test_an_option_is_dated_from_its_own_document_when_no_fact_found_by_its_name_dates_it(
        demo_generator, tmp_path, graph, graph_server, embedder):
    """"Which was founded first, Ember Quay Bakery or Dune Sea Pies?" with no listed fact that
    dates the bakery: its name finds a dozen facts that name it (none dated: the search's top
    ten), and its own document's "The company was founded in 1961 ..." names no bakery. The
    option's own document is read whole, so the step is computed from that sentence (a search
    for the name alone never reaches it: checked below)."""
    from agent.pipeline.comparison import ComparisonStep
    from agent.pipeline.plan import QuestionPlan

    mentions = [f"Guest {i} of the Velmora fair wrote that Ember Quay Bakery sells rye loaves on stall {i}."
                for i in range(12)]
    corpus = [{"title": "Ember Quay Bakery", "text": "Ember Quay Bakery is a bakery chain in Velmora. The company was "
                                                    "founded in 1961 and is based in Port Ilse."},
              {"title": "Dune Sea Pies", "text": "Dune Sea Pies was founded on 3 May 1958 by Ada Quint."},
              {"title": "Velmora fair", "text": " ".join(mentions)}]
    (tmp_path / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    web = KnowledgeWeb.open(tmp_path / "web", embedder=embedder, graph_uri=graph_server.uri,
                            graph_user=graph_server.user, graph_password=graph_server.password,
                            graph_database=graph_server.database)
    try:
        web.add_documents(read_documents([tmp_path / "corpus.json"]), SentenceDecomposer(), progress=False)
        dated = "The company was founded in 1961 and is based in Port Ilse."
        assert dated not in {h.text for h in web.search("Ember Quay Bakery", 10).hits}
        question = "Which was founded first, Ember Quay Bakery or Dune Sea Pies?"
        listed = [h for h in web.search(question, 20).hits if h.text != dated and "1961" not in h.text]
        plan = QuestionPlan("choice", ("Ember Quay Bakery", "Dune Sea Pies"), "earlier")
        result = ComparisonStep(demo_generator, web).run(question, plan, listed)
    finally:
        web.close()
    assert dated in result.text and "Answer: 1961" in result.text, result.text
    assert (result.answer, result.grounded) == ("Dune Sea Pies", True), result.how


def test_a_life_asked_of_options_that_have_none_is_read_of_whom_their_facts_name(
        demo_generator, tmp_path, graph, graph_server, embedder):
    """"Which director died first, Quiet Harbour or The Winter Gate?" names no role with "the"
    or "whose", and films have no death: the question's word that the films' facts follow with a
    name ("directed by Paul Amsel") leads to whose deaths are compared (the films' years would
    give the other film). "Which film is older?" of the same films compares their own years.
    "Who lived longer, Ada Quint or Bo Rask?" reads each from a fact with both dates of the
    life (Bo Rask's top facts give years of his work). Written for this test."""
    from agent.pipeline.relations import RelationLabels, RelationMatcher
    from agent.pipeline.comparison import ComparisonStep
    from agent.pipeline.plan import QuestionPlan

    corpus = [{"title": "Quiet Harbour", "text": "Quiet Harbour is a 1954 drama film directed by Paul Amsel."},
              {"title": "The Winter Gate", "text": "The Winter Gate is a 1961 film directed by Helga Stern."},
              {"title": "Paul Amsel", "text": "Paul Amsel (12 March 1901 – 4 May 1970) was a German director."},
              {"title": "Helga Stern", "text": "Helga Stern (8 June 1915 – 2 January 1969) was an Austrian director."},
              {"title": "Ada Quint", "text": "Ada Quint (6 May 1813 – 25 December 1882) was a Danish sculptor."},
              {"title": "Bo Rask", "text": "Bo Rask taught history at Velmora from 1952 to 1971. Bo Rask "
                                           "(22 November 1917 – 6 December 1995) was a Swedish historian."}]
    (tmp_path / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    web = KnowledgeWeb.open(tmp_path / "web", embedder=embedder, graph_uri=graph_server.uri,
                            graph_user=graph_server.user, graph_password=graph_server.password,
                            graph_database=graph_server.database)
    matcher = RelationMatcher(embedder, RelationLabels.bundled())
    films = ("Quiet Harbour", "The Winter Gate")
    try:
        step = ComparisonStep(demo_generator, web, matcher=matcher)
        web.add_documents(read_documents([tmp_path / "corpus.json"]), SentenceDecomposer(), progress=False)
        question = "Which director died first, Quiet Harbour or The Winter Gate?"
        died = step.run(question, QuestionPlan("choice", films, "earlier"), web.search(question, 2).hits)
        question = "Which film is older, Quiet Harbour or The Winter Gate?"
        older = step.run(question, QuestionPlan("choice", films, "earlier", age=True), web.search(question, 2).hits)
        question = "Who lived longer, Ada Quint or Bo Rask?"
        listed = [h for h in web.search(question, 10).hits if "–" not in h.text or "Quint" in h.text]
        lived = step.run(question, QuestionPlan("choice", ("Ada Quint", "Bo Rask"), "more", length=True), listed)
    finally:
        web.close()
    assert "Answer: 2 January 1969" in died.text and "Answer: 4 May 1970" in died.text, died.text
    assert (died.answer, died.grounded) == ("The Winter Gate", True), died.how
    assert (older.answer, older.grounded) == ("Quiet Harbour", True), older.how
    assert "1954" in older.how and "1901" not in older.text, older.text
    assert "Bo Rask (22 November 1917 – 6 December 1995)" in lived.text, lived.text
    assert (lived.answer, lived.grounded) == ("Bo Rask", True), lived.how  # 78 years against 69
