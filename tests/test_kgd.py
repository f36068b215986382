"""Knowledge-Guided Decoding on real parts: the packaged SmolLM2-135M, the packaged
all-MiniLM-L6-v2, and a tiny cross-encoder built in-process (no model is mocked)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from agent.baselines.kgd import (
    BASELINES,
    NLI_LABELS,
    CachedEncoder,
    ChunkRetriever,
    CombinedScorer,
    CrossEncoderJudge,
    EntailmentScorer,
    KnowledgeGuidedLogitsProcessor,
    LocalLMJudge,
    SimilarityScorer,
    chunk_passages,
    chunk_spans,
    kgd_generate,
)
from agent.baselines.kgd.judges import _label_columns
from agent.errors import FactweaveError, ModelError

ZORBLAX = "Zorblax Station was founded by Mira Quell. It orbits the moon Tessaly."
PASSAGES = [
    ZORBLAX,
    "Lake Orvin is the deepest lake in Varnland, at 412 metres.",
    "The painter Ivo Brandt lived in Kesselmark and died in 1874.",
    "The Velmora Bridge opened in 1931 and crosses the river Tann.",
]
# The 135M model, asked plainly, ends its answer at once; KGD should lead it to the founder.
CHOICE = "Question: Who founded Zorblax Station, Olan Dray or Mira Quell?\nAnswer:"
LAKE = "Question: How deep is Lake Orvin?\nAnswer:"


def ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def next_logits(loaded, token_ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return loaded.model(input_ids=torch.tensor([token_ids])).logits[:, -1].float()


# --- chunking ------------------------------------------------------------------------------


def test_chunk_spans_hand_checked():
    text = "alpha beta gamma delta"
    assert chunk_spans(text, size=11, overlap=5) == [(0, 10), (6, 16), (11, 22)]
    assert chunk_passages([text], size=11, overlap=5) == ["alpha beta", "beta gamma", "gamma delta"]
    # no whitespace to cut at: hard cuts that overlap by exactly `overlap` characters
    assert chunk_passages(["abcdefghijklmnop"], size=6, overlap=2) == ["abcdef", "efghij", "ijklmn", "mnop"]
    # passages stay in order, blank ones vanish, surrounding whitespace is left out
    assert chunk_passages(["  one two  ", "   ", "three"], size=50, overlap=10) == ["one two", "three"]
    assert chunk_passages(["a b c d e f"], size=3, overlap=0) == ["a b", "c d", "e f"]


def test_chunks_of_a_long_text_respect_size_and_overlap():
    words = [("w" * (1 + i % 9)) + str(i) for i in range(400)]
    text = " ".join(words)
    spans = chunk_spans(text, size=500, overlap=100)
    assert len(spans) > 3
    for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
        assert e1 - s1 <= 500 and 0 < e1 - s2 <= 100  # neighbours share at most 100 characters
        assert text[s2 - 1] == " " and (e1 == len(text) or text[e1] == " ")  # whole words
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    # every word is inside some chunk
    chunks = [text[s:e].split() for s, e in spans]
    assert {w for c in chunks for w in c} == set(words)


def test_chunking_refuses_bad_windows():
    with pytest.raises(FactweaveError):
        chunk_spans("text", size=10, overlap=10)
    with pytest.raises(FactweaveError):
        chunk_passages("not a list")


# --- retrieval and similarity --------------------------------------------------------------


def test_retriever_finds_the_subjects_chunk(embedder):
    encoder = CachedEncoder(embedder)
    retriever = ChunkRetriever(encoder, chunk_passages(PASSAGES))
    assert encoder.encode_calls == 1 and encoder.misses == len(PASSAGES)  # chunks embedded once, together
    assert retriever.top("Who founded Zorblax Station?", 1) == [ZORBLAX]
    assert retriever.top("How deep is Lake Orvin?", 1) == [PASSAGES[1]]
    assert retriever.top("When did Ivo Brandt die?", 2)[0] == PASSAGES[2]
    assert sorted(retriever.top("anything", 10)) == sorted(PASSAGES)
    assert encoder.misses == len(PASSAGES) + 4  # only the questions were embedded since


def test_similarity_is_max_cosine_over_chunks(embedder):
    scorer = SimilarityScorer(embedder)
    chunks = [PASSAGES[1], ZORBLAX]
    r = scorer.score(["founded by Mira Quell", " ", "deepest lake"], [chunks, chunks, chunks[:1]])
    vectors = embedder.encode(["founded by Mira Quell", "deepest lake", *chunks])
    assert r[0] == pytest.approx(max(vectors[2:] @ vectors[0]), abs=1e-5)
    assert r[1] == 0.0  # nothing to compare yet
    assert r[2] == pytest.approx(float(vectors[2] @ vectors[1]), abs=1e-5)
    hits, misses = scorer.cache_counts()
    scorer.score(["founded by Mira Quell"], [chunks])
    assert scorer.cache_counts() == (hits + 3, misses)


# --- the logits processor ------------------------------------------------------------------


@pytest.mark.model
def test_processor_adds_weight_times_r_to_the_top_m_only(smollm, embedder):
    tok = smollm.tokenizer
    prompt, generated = ids(tok, "Question: Who founded Zorblax Station?\nAnswer:"), ids(tok, " It was founded by")
    logits = next_logits(smollm, prompt + generated)
    proc = KnowledgeGuidedLogitsProcessor(tok, SimilarityScorer(embedder), [[ZORBLAX, PASSAGES[1]]],
                                          top_m=4, weight=2.0, prompt_len=len(prompt))
    out = proc(torch.tensor([prompt + generated]), logits.clone())
    top = logits[0].topk(4).indices.tolist()
    changed = torch.nonzero(out[0] != logits[0]).flatten().tolist()
    assert set(changed) <= set(top)
    chunk_vectors = embedder.encode([ZORBLAX, PASSAGES[1]])
    expected = []
    for token in top:
        text = tok.decode(generated + [token], skip_special_tokens=True).strip()
        expected.append(2.0 * float(max(chunk_vectors @ embedder.encode([text])[0])))
    assert (out[0, top] - logits[0, top]).tolist() == pytest.approx(expected, abs=1e-4)
    assert len(set(np.round(expected, 4))) > 1  # the candidates were told apart
    assert proc.stats()["steps"] == 1 and proc.candidates == 4 and proc.scorer_calls == 1
    proc(torch.tensor([prompt + generated]), logits.clone())
    assert proc.cache_hits == 4 + 2  # the same texts and chunks again: all from the cache


@pytest.mark.model
def test_similarity_guidance_raises_the_founder(smollm, embedder):
    tok = smollm.tokenizer
    chunks = ChunkRetriever(embedder, chunk_passages(PASSAGES)).top("Who founded Zorblax Station?", 2)
    mira = ids(tok, " Mira")[0]
    scorer = SimilarityScorer(embedder)
    for prompt in (CHOICE, f"{ZORBLAX}\nQuestion: Who founded Zorblax Station?\nAnswer:"):
        logits = next_logits(smollm, ids(tok, prompt))
        guided = KnowledgeGuidedLogitsProcessor(tok, scorer, [chunks])(torch.tensor([ids(tok, prompt)]), logits.clone())
        before, after = logits.softmax(-1)[0], guided.softmax(-1)[0]
        assert after[mira] > before[mira]
        assert int(guided[0].argmax()) == mira
    # without guidance the model picks something else for the plain question
    assert int(next_logits(smollm, ids(tok, CHOICE))[0].argmax()) != mira


@pytest.mark.model
def test_kgd_generate_greedy_beam_and_batch(smollm, embedder):
    chunks = [[ZORBLAX], [PASSAGES[1]]]
    scorer = SimilarityScorer(embedder)
    plain = kgd_generate(smollm, [CHOICE, LAKE], chunks, None, max_new_tokens=3)
    guided = kgd_generate(smollm, [CHOICE, LAKE], chunks, scorer, max_new_tokens=3)
    assert not plain[0].strip().startswith("Mira") and guided[0].strip().startswith("Mira")
    assert kgd_generate(smollm, [CHOICE, LAKE], chunks, scorer, max_new_tokens=3, weight=0.0) == plain
    stats: dict = {}
    beams = kgd_generate(smollm, [CHOICE, LAKE], chunks, scorer, max_new_tokens=3, num_beams=4, stats=stats)
    assert len(beams) == 2 and all(isinstance(t, str) for t in beams)
    assert stats["steps"] == 3 and stats["candidates"] > 4 * 2 * stats["steps"]  # more than 2 rows a step
    assert stats["new_tokens"] > 0 and stats["tokens_per_s"] > 0


@pytest.mark.model
def test_processor_and_generate_refuse_mistakes(smollm, embedder):
    proc = KnowledgeGuidedLogitsProcessor(smollm.tokenizer, SimilarityScorer(embedder), [[ZORBLAX]] * 2)
    with pytest.raises(FactweaveError, match="rows"):
        proc(torch.zeros((3, 5), dtype=torch.long), torch.zeros((3, 10)))
    with pytest.raises(FactweaveError):
        KnowledgeGuidedLogitsProcessor(smollm.tokenizer, SimilarityScorer(embedder), [[ZORBLAX]], top_m=0)
    with pytest.raises(FactweaveError):
        kgd_generate(smollm, [CHOICE, LAKE], [[ZORBLAX]], None, max_new_tokens=1)


@pytest.mark.model
def test_contrastive_search_fails_in_one_line_offline(smollm, embedder, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    try:
        out = kgd_generate(smollm, [CHOICE], [[ZORBLAX]], SimilarityScorer(embedder), max_new_tokens=2,
                           **BASELINES["contrastive"])
    except FactweaveError as error:  # transformers 5 fetches contrastive search from the Hub
        assert "contrastive search" in str(error) and "\n" not in str(error)
    else:  # where that code is cached, it runs
        assert len(out) == 1 and isinstance(out[0], str)


# --- entailment ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lm_judge(smollm):
    return LocalLMJudge(smollm)


@pytest.mark.model
def test_local_lm_judge_reads_the_label_tokens(smollm, lm_judge):
    """Mechanics only: SmolLM2-135M labels 4 of 12 hand-made pairs right (it says
    "contradiction" to every pair), so its verdicts are checked against an independent
    computation, not against the truth."""
    tok = smollm.tokenizer
    pairs = [(ZORBLAX, "Zorblax Station was founded by Mira Quell."),
             (ZORBLAX, "Zorblax Station was founded by Olan Dray, a long time ago."),
             (ZORBLAX, "Zorblax Station has a blue hull.")]
    assert lm_judge.prefix  # the worked examples are cached once
    got = lm_judge.label_logprobs(pairs)
    first = [ids(tok, " " + label)[0] for label in NLI_LABELS]
    for row, (premise, hypothesis) in enumerate(pairs[:2]):  # two lengths: padding is exercised
        whole = ids(tok, lm_judge.render(premise, hypothesis))  # one unpadded prompt, no cache
        expected = torch.log_softmax(next_logits(smollm, whole)[0], -1)[first].numpy()
        assert got[row] == pytest.approx(expected, abs=1e-3)
    labels = lm_judge.judge(pairs)
    assert labels == [NLI_LABELS[i] for i in got.argmax(1)]

    scorer = EntailmentScorer(lm_judge, alpha=5.0, beta=10.0)
    r = scorer.score([h for _, h in pairs] + ["  "], [[ZORBLAX]] * 4)
    value = {"entailment": 5.0, "contradiction": -10.0, "neutral": 0.0}
    assert r.tolist() == [value[label] for label in labels] + [0.0]
    assert scorer.judge_calls == 1 and scorer.misses == 3
    scorer.score([pairs[0][1]], [[ZORBLAX]])
    assert scorer.judge_calls == 1 and scorer.hits == 1


@pytest.mark.model
def test_entailment_rule_over_several_chunks_and_combined(smollm, lm_judge, embedder):
    entail = EntailmentScorer(lm_judge, alpha=1.0, beta=2.0)
    text, chunks = "Lake Orvin is 412 metres deep.", [PASSAGES[1], PASSAGES[3]]
    labels = set(entail.labels([(c, text) for c in chunks]))
    expected = 1.0 if "entailment" in labels else -2.0 if "contradiction" in labels else 0.0
    assert entail.score([text], [chunks])[0] == expected
    similarity = SimilarityScorer(embedder)
    combined = CombinedScorer(similarity, entail, gamma=1.5)
    assert combined.score([text], [chunks])[0] == pytest.approx(
        similarity.score([text], [chunks])[0] + 1.5 * expected, abs=1e-6)


def _tiny_cross_encoder(folder, winner: int):
    """A 1-layer BERT NLI classifier whose labels are in an unusual order and whose output
    column ``winner`` always wins."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "man", "eats", "someone", "."]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    id2label = {0: "NEUTRAL", 1: "CONTRADICTION", 2: "ENTAILMENT"}
    config = BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, num_labels=3, id2label=id2label,
                        label2id={v: k for k, v in id2label.items()})
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([5.0 if i == winner else 0.0 for i in range(3)]))
    model.save_pretrained(folder)
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    return id2label[winner].lower()


@pytest.mark.parametrize("winner", [0, 1, 2])
def test_cross_encoder_judge_maps_the_models_labels(tmp_path, monkeypatch, winner):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    label = _tiny_cross_encoder(tmp_path, winner)
    judge = CrossEncoderJudge(str(tmp_path))
    assert judge.judge([("a man eats .", "someone eats ."), ("a", "man")]) == [label, label]


def test_label_columns_need_all_three_labels():
    assert _label_columns({0: "contradiction", 1: "entailment", 2: "neutral"}, "m") == [1, 0, 2]
    with pytest.raises(ModelError, match="neutral"):
        _label_columns({0: "CONTRADICTION", 1: "ENTAILMENT"}, "m")
