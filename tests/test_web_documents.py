"""Reading corpora, chunking, keywords and decomposition (no servers, no model)."""
from __future__ import annotations

import json

import pytest
from conftest import DATA, REPO
from hypothesis import given
from hypothesis import strategies as st

from agent.errors import FactweaveError, InputError
from agent.web.decompose import (
    AtomicFact,
    DecompositionCache,
    SentenceDecomposer,
    best_sentence,
    decompose_cached,
    parse_fact_lines,
)
from agent.web.documents import Document, chunk_document, read_documents, sentence_spans
from agent.knowledge.keywords import extract_keywords, only_in_longer_names, triple_keywords
from agent.web.documents import keyword_id
from agent.web.subqueries import parse_queries

WEB = DATA / "web"


def test_reads_every_corpus_shape():
    docs = list(read_documents([WEB / "notes.md", WEB / "corpus.json", WEB / "rows.jsonl", WEB / "hotpot.json"]))
    titles = [d.title for d in docs]
    assert titles == ["Zorblax Station", "Mira Quell", "Norvik", "Tomas Berg", "Sea ice"]
    assert docs[-1].text == "Sea ice is frozen ocean water. It forms in polar regions."
    assert docs[3].source == "rows.jsonl:1"


def test_bad_row_names_file_and_line():
    with pytest.raises(InputError) as error:
        list(read_documents([WEB / "rows-bad.jsonl"]))
    assert "rows-bad.jsonl:2" in str(error.value)


def test_missing_and_unsupported_files_are_clear(tmp_path):
    with pytest.raises(FactweaveError, match="no such file"):
        list(read_documents([tmp_path / "nope.json"]))
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(FactweaveError, match="unsupported"):
        list(read_documents([tmp_path / "x.csv"]))


def test_same_document_same_id():
    a = Document("T", "Some text here.", "a.json#0")
    b = Document("T", "Some text here.", "b.json#3")
    assert a.id == b.id and a.id != Document("T", "Other text.", "a").id


def test_demo_corpus_reads():
    docs = list(read_documents([REPO / "agent" / "data" / "demo" / "web" / "corpus.json"]))
    assert len(docs) == 196
    questions = json.loads((REPO / "agent" / "data" / "demo" / "web" / "questions.json").read_text())
    titles = {d.title for d in docs}
    assert all(s["title"] in titles for q in questions for s in q["supporting"])


@given(st.lists(st.sampled_from(["Alpha beta gamma.", "Delta!", "Epsilon zeta? ", "Eta theta iota kappa lambda mu."]),
                min_size=1, max_size=30), st.integers(10, 120), st.integers(0, 40))
def test_chunks_cover_sentences_and_offsets_are_exact(sentences, size, overlap):
    text = " ".join(s.strip() for s in sentences)
    doc = Document("t", text, "s")
    chunks = chunk_document(doc, size=size, overlap=overlap)
    for chunk in chunks:
        assert doc.text[chunk.start:chunk.end] == chunk.text
    covered = {span for chunk in chunks for span in sentence_spans(text, chunk.start, chunk.end)}
    assert set(sentence_spans(text)) <= covered
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[0].start == sentence_spans(text)[0][0] and chunks[-1].end == len(text.rstrip())


def test_keywords():
    assert extract_keywords("Marie Curie was born in Warsaw in 1867.") == ["Marie Curie", "born", "Warsaw", "1867"]
    assert extract_keywords("How old was Leonardo da Vinci when he painted the Mona Lisa?") == \
        ["Leonardo da Vinci", "painted", "Mona Lisa"]
    assert keyword_id("Paris") == keyword_id("  paris ")
    # a question's first word asks, it starts no name; an article does, and so does a small
    # word opening a statement ("In Paris" stays as facts are keyed)
    assert extract_keywords("Did Lamp Street come out before Dune Sea?") == ["Lamp Street", "come", "Dune Sea"]
    assert extract_keywords("Are Ada Quint and Bo Rask both painters?")[0] == "Ada Quint and Bo Rask"
    assert extract_keywords("Is The Quiet Coast older than Dune Sea?")[:1] == ["The Quiet Coast"]
    assert extract_keywords("The Hague lies on which sea?")[0] == "The Hague"
    assert extract_keywords("In Paris he met her.")[0] == "In Paris"
    assert triple_keywords("Oslo", "oslo") == ["Oslo"]


def test_a_name_inside_a_longer_name_is_another_thing():
    # "Selden Press for Children" is not Selden Press: its facts say nothing of it.
    assert only_in_longer_names("Selden Press for Children opened in 1990.", "Selden Press")
    assert only_in_longer_names("The Kestrel Bay Hotel opened in 1931.", "Kestrel Bay")
    assert not only_in_longer_names("Selden Press (publisher) opened in 1890.", "Selden Press")
    assert not only_in_longer_names("Selden Press, a publisher, opened in 1890.", "selden press")
    assert not only_in_longer_names("Lorna Vidal and Otto Brenner met in Oslo.", "Lorna Vidal")
    assert not only_in_longer_names("Otto Brenner of the Harbor Trio played cello.", "Otto Brenner")
    assert not only_in_longer_names("Kestrel Bay Hotel faces Kestrel Bay.", "Kestrel Bay")
    assert not only_in_longer_names("Nothing here.", "Kestrel Bay")


def test_sentence_decomposer_resolves_leading_pronoun():
    doc = next(read_documents([WEB / "rows.jsonl"]))
    facts = SentenceDecomposer().decompose(doc.title, doc.text, chunk_document(doc)[0])
    assert [f.text for f in facts] == ["Tomas Berg was the first director of Zorblax Station.",
                                       "Tomas Berg later taught in Tromso."]
    assert doc.text[facts[1].start:facts[1].end] == "He later taught in Tromso."


def test_parse_fact_lines_keeps_list_items_only():
    reply = "Here are the facts:\n- Oslo is a city.\n2. Oslo is in Norway\n- Oslo is a city.\n* ok\nTrailing prose."
    assert parse_fact_lines(reply) == ["Oslo is a city.", "Oslo is in Norway."]


def test_best_sentence_picks_the_source():
    text = "Oslo is the capital of Norway. Bergen is rainy."
    spans = sentence_spans(text)
    assert text[slice(*best_sentence("Bergen has rainy weather", spans, text))] == "Bergen is rainy."


def test_decomposition_cache_survives_a_cut_line(tmp_path):
    path = tmp_path / "d.jsonl"
    doc = Document("T", "One sentence here. Another sentence there.", "s")
    chunk = chunk_document(doc)[0]

    class Counting(SentenceDecomposer):
        calls = 0

        def decompose(self, title, text, chunk):
            Counting.calls += 1
            return super().decompose(title, text, chunk)

    cache = DecompositionCache(path)
    first = decompose_cached(Counting(), cache, doc.title, doc.text, chunk)
    with path.open("a") as stream:
        stream.write('{"key": "cut-sho')  # an interrupted append
    again = decompose_cached(Counting(), DecompositionCache(path), doc.title, doc.text, chunk)
    assert again == first and Counting.calls == 1
    other = Document("U", "Third sentence now.", "s")
    cache2 = DecompositionCache(path)
    cache2.put("k", [AtomicFact("x y z.", 0, 5)])
    assert DecompositionCache(path).get("k") == [AtomicFact("x y z.", 0, 5)]
    assert other.id != doc.id


def test_parse_queries():
    reply = "Search queries:\n1. birthplace of Ada Lovelace\n- \"founder of Zorblax\"\nWho founded it?\nwho founded it?"
    assert parse_queries(reply, 5, "Who founded it?") == ["birthplace of Ada Lovelace", "founder of Zorblax"]


def test_llm_decomposer_keeps_supported_facts_with_offsets(serve_chat):
    from llm_fixtures import ScriptedChat

    from agent.llm import OpenAIChat
    from agent.web.decompose import LLMDecomposer

    reply = ("Here are the facts:\n- Tomas Berg was the first director of Zorblax Station.\n"
             "- He later taught in Tromso.\n- Ada Lovelace was an English mathematician.\n- ok")
    scripted = ScriptedChat(reply)
    client = OpenAIChat("scripted", base_url=serve_chat(scripted))  # real HTTP, real SDK
    doc = next(read_documents([WEB / "rows.jsonl"]))
    facts = LLMDecomposer(client).decompose(doc.title, doc.text, chunk_document(doc)[0])
    # the echoed worked example is dropped (not supported by the passage), the pronoun resolved
    assert [f.text for f in facts] == ["Tomas Berg was the first director of Zorblax Station.",
                                       "Tomas Berg later taught in Tromso."]
    assert doc.text[facts[1].start:facts[1].end] == "He later taught in Tromso."
    sent = scripted.calls[0]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert "Tomas Berg" in sent[-1]["content"] and "Ada Lovelace" not in sent[-1]["content"]


def test_llm_decomposer_on_the_local_model(local_chat):
    from agent.web.decompose import LLMDecomposer

    doc = next(read_documents([WEB / "corpus.json"]))
    chunk = chunk_document(doc)[0]
    facts = LLMDecomposer(local_chat, max_tokens=96).decompose(doc.title, doc.text, chunk)
    for fact in facts:  # whatever the small model writes, what is kept is traceable and supported
        assert chunk.start <= fact.start < fact.end <= chunk.end
        assert fact.text.endswith((".", "!", "?", '"', "'", ")"))


def test_initials_and_abbreviations_do_not_end_sentences():
    text = "The study began with G. Stanley Hall's book. Dr. Quell lives in St. Louis. She is 70."
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "The study began with G. Stanley Hall's book.", "Dr. Quell lives in St. Louis.", "She is 70."]


class _PassageChat:
    """A real ChatClient (served over real HTTP) that states the passage's first sentence and
    counts the requests in flight at once; each waits until ``wait_for`` are in flight (at most
    2 s), so a decomposer that sends fewer at a time shows up as a lower peak. ``fail_on``: the
    title whose request fails."""

    def __init__(self, wait_for: int = 1, fail_on: str | None = None) -> None:
        import threading

        self.name, self.wait_for, self.fail_on = "passages", wait_for, fail_on
        self.titles: list[str] = []
        self.in_flight = self.peak = 0
        self._changed = threading.Condition()

    def complete(self, messages, *, max_tokens=256, temperature=0.0, stop=None) -> str:
        title, passage = (line.split(": ", 1)[1] for line in messages[-1]["content"].splitlines()[:2])
        with self._changed:
            self.titles.append(title)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self._changed.notify_all()
            self._changed.wait_for(lambda: self.in_flight >= self.wait_for, timeout=2)
        try:
            if title == self.fail_on:
                raise RuntimeError("the model is down")
            return "- " + passage.split(". ")[0].rstrip(".") + "."
        finally:
            with self._changed:
                self.in_flight -= 1


def test_llm_decomposer_sends_bounded_concurrent_requests_and_resumes_from_its_cache(serve_chat, tmp_path):
    from agent.errors import FactweaveError
    from agent.llm import OpenAIChat
    from agent.serve import ServerLimits
    from agent.web.decompose import LLMDecomposer, decompose_many

    docs = [Document(f"Station {i}", f"Station {i} was founded in {1900 + i} by Ada Berg. It is cold.", "s")
            for i in range(8)]
    work = [(d.title, d.text, chunk_document(d)[0]) for d in docs]
    path = tmp_path / "decompositions.jsonl"
    limits = ServerLimits(max_concurrency=8, max_queue=8)  # the server would take 8 at once

    def decomposer(chat: _PassageChat, concurrency: int | None = None) -> LLMDecomposer:
        client = OpenAIChat("passages", base_url=serve_chat(chat, limits=limits), max_retries=0)
        return LLMDecomposer(client, concurrency=concurrency)

    failing = _PassageChat(wait_for=4, fail_on="Station 5")
    with pytest.raises(FactweaveError):
        decompose_many(decomposer(failing), DecompositionCache(path), work)  # 4 at a time by default
    assert failing.peak == 4
    assert len(DecompositionCache(path)) == len(set(failing.titles)) - 1 >= 4  # all answered ones kept

    chat = _PassageChat()
    facts = decompose_many(decomposer(chat, concurrency=1), DecompositionCache(path), work)
    assert sorted(chat.titles) == sorted({d.title for d in docs} - set(failing.titles) | {"Station 5"})
    assert chat.peak == 1
    assert [[f.text for f in per_chunk] for per_chunk in facts] == \
        [[f"Station {i} was founded in {1900 + i} by Ada Berg."] for i in range(8)]
    assert all(d.text[f[0].start:f[0].end] == f[0].text for d, f in zip(docs, facts))

    again = _PassageChat()
    assert decompose_many(decomposer(again), DecompositionCache(path), work) == facts
    assert again.titles == []
