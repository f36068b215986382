"""Retrieval-constrained decoding: the answer-set trie and processor, set metrics, the KAMEL
candidates and majority, and the rcd / rcd-static / vd / majority methods of the harness."""
from __future__ import annotations

import pytest

from agent.errors import FactweaveError
from conftest import DATA

KAMEL = DATA / "kamel_mini"
CANDIDATES = ["New York", "New Jersey", "Paris", "Los Angeles", "London"]


@pytest.fixture(scope="module")
def tokenizer(smollm):
    return smollm.tokenizer


def _ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_processor_allows_candidates_separator_and_end_and_never_a_repeat(tokenizer):
    from agent.baselines.rcd import AnswerSetLogitsProcessor, AnswerTrie

    trie = AnswerTrie.build([*CANDIDATES, "Paris", " paris; ", ""], tokenizer)
    assert trie.candidates == (*CANDIDATES, "paris,")  # unique surface forms; ';' is the separator
    proc = AnswerSetLogitsProcessor([trie], tokenizer, prompt_len=0)
    sep, newline, eos = _ids(tokenizer, ";")[0], _ids(tokenizer, "\n")[0], tokenizer.eos_token_id
    first = {_ids(tokenizer, " " + c)[0] for c in trie.candidates}
    assert set(proc.allowed(0, [])) == first  # an answer must start
    paris = _ids(tokenizer, " Paris")
    at_end = proc.allowed(0, paris)
    assert {sep, newline, eos} <= set(at_end)  # a complete answer: another, or the end
    after = proc.allowed(0, [*paris, sep])
    assert paris[0] not in after and set(after) == first - {paris[0]}  # Paris was given: not again
    assert proc.allowed(0, [*paris, newline]) == [eos]  # the line is over
    new = _ids(tokenizer, " New")
    assert sep not in proc.allowed(0, new) and newline not in proc.allowed(0, new)  # "New" is no candidate
    # Every candidate given once: no separator any more, only the end.
    said: list[int] = []
    for c in trie.candidates:
        said += _ids(tokenizer, " " + c) + [sep]
    last = said[:-1]
    assert sep not in proc.allowed(0, last) and eos in proc.allowed(0, last)


def test_parse_answer_set():
    from agent.baselines.rcd import parse_answer_set

    assert parse_answer_set(" New York; Paris ;New York\nAnswer: x") == ["New York", "Paris"]
    assert parse_answer_set("") == [] and parse_answer_set(" ; ") == []


@pytest.mark.model
def test_rcd_answers_are_candidates_with_beams_and_batches(smollm):
    from agent.baselines.rcd import AnswerSetGenerator, AnswerTrie

    gen = AnswerSetGenerator(smollm.model, smollm.tokenizer, max_new_tokens=24)
    cities = AnswerTrie.build(CANDIDATES, smollm.tokenizer)
    languages = AnswerTrie.build(["English", "French", "Tamil", "Basque"], smollm.tokenizer)
    questions = ["Where was Laurie Graff born?", "What is the original language of Kalakalappu 2?"]
    for beams in (1, 3):
        results = gen.answer_batch(questions, [cities, languages], beams=beams)
        for result, trie in zip(results, (cities, languages)):
            assert result.answers and set(result.answers) <= set(trie.candidates)
            assert len(result.answers) == len(set(result.answers))  # never a repeat
            assert result.finished
    free = gen.answer_batch(questions[:1], None)[0]
    assert free.text and free.answers  # vanilla decoding parses the same way


def test_set_scores_on_hand_checked_cases():
    from agent.eval.metrics import SetScore, macro_set_scores, set_score

    paris = [("Paris", "City of Light")]
    assert set_score(["paris!"], paris) == SetScore(1.0, 1.0, 1.0)  # case and punctuation
    assert set_score(["Paris", "Lyon"], paris) == SetScore(0.5, 1.0, 2 / 3)
    assert set_score(["City of Light", "Paris"], paris) == SetScore(1.0, 1.0, 1.0)  # aliases of one object
    assert set_score([], paris) == SetScore(0.0, 0.0, 0.0)  # an empty prediction
    assert set_score(["I don't know."], paris) == SetScore(0.0, 0.0, 0.0)
    two = [("Dutch",), ("French",), ("German",)]
    assert set_score(["Dutch", "the French"], two) == SetScore(1.0, 2 / 3, 0.8)
    macro = macro_set_scores([("P1", SetScore(1.0, 1.0, 1.0)), ("P1", SetScore(0.0, 0.0, 0.0)),
                              ("P2", SetScore(0.5, 1.0, 2 / 3))])
    # P1's means: 0.5 / 0.5 / 0.5; P2's: 0.5 / 1 / 0.667; macro: the mean of the two.
    assert macro == {"precision": 0.5, "recall": 0.75, "f1": round((0.5 + 2 / 3) / 2, 4), "groups": 2}


def test_kamel_candidates_and_majority():
    from agent.knowledge.kamel import kamel_questions, majority_objects, relation_objects

    objects = relation_objects(KAMEL)
    assert set(objects) == {"P19", "P106", "P364"}
    questions = kamel_questions(KAMEL, split="test")
    for q in questions:  # every gold object is a candidate of its relation
        assert q.objects and all(names[0] in objects[q.relation] for names in q.objects)
    majority = majority_objects(KAMEL, "train")
    train = relation_objects(KAMEL, ("train",))
    assert majority == {r: labels[0] for r, labels in train.items()}
    assert all(majority[r] in objects[r] for r in majority)


@pytest.mark.model
def test_rcd_vd_static_and_majority_in_the_harness(smollm, tmp_path):
    from agent.eval.evaluation import run_evaluation
    from agent.knowledge.kamel import majority_objects, relation_objects
    from agent.settings import load_settings

    settings = load_settings(model="smollm2-135m", cache=tmp_path / "cache", max_tokens=24)
    report = run_evaluation("kamel", settings=settings, data=KAMEL, split="test", limit=6, loaded=smollm,
                            methods=("majority", "vd", "rcd", "rcd-static"), batch_size=3, judge=False,
                            progress=False)
    assert [r.method for r in report.results] == ["rcd", "rcd-static", "vd", "majority"]
    by = {r.method: r for r in report.results}
    objects = relation_objects(KAMEL)
    every = {o for objs in objects.values() for o in objs}
    majority = majority_objects(KAMEL, "train")
    for row in by["rcd"].rows:
        assert set(row["answers"]) <= set(objects[row["relation"]])  # the question's own relation
    for row in by["rcd-static"].rows:
        assert set(row["answers"]) <= every
    for row in by["majority"].rows:
        assert row["answers"] == [majority[row["relation"]]]
    for r in report.results:
        macro = r.set_scores
        assert macro["groups"] == 3 and 0 <= macro["f1"] <= 1
        assert r.summary()["set_macro"] == macro
    text = report.markdown()
    assert "| rcd | " in text.split("macro F1")[1]
    with pytest.raises(FactweaveError, match="use it with `factweave eval kamel`"):
        run_evaluation("popqa", settings=settings, methods=("rcd",), loaded=smollm, progress=False)
