"""The evaluation harness around the methods: stratified seeded sampling, HotpotQA, resuming an
interrupted run, knowledge-guided decoding as methods (with best-of-n), and `eval compare`."""
from __future__ import annotations

import json
from collections import Counter

import pytest
from conftest import DATA, REPO, run_cli

from agent.errors import FactweaveError, InputError
from agent.eval.compare import compare_markdown, expand_runs, load_run
from agent.eval.datasets import (EvalQuestion, hotpotqa_documents, knowledge_files, load_questions, question_files,
                                  sample_questions, twowiki_documents, twowiki_files)

EVAL = DATA / "eval"
POPQA = EVAL / "popqa_mini.json"
HOTPOT = EVAL / "hotpotqa_mini_with_context.json"
KAMEL = DATA / "kamel_mini"
TWOWIKI = EVAL / "2wiki_mini_questions.json"



# --- sampling and HotpotQA ----------------------------------------------------------------------


def _questions(strata: dict[str, int]) -> list[EvalQuestion]:
    return [EvalQuestion(f"{s}/{i}", f"q {s} {i}?", ("a",), {"relation": s}) for s, n in strata.items()
            for i in range(n)]


def test_sampling_is_stratified_seeded_and_deterministic():
    pool = _questions({"P106": 5, "P19": 3, "P2": 1})
    key = lambda q: q.meta["relation"]  # noqa: E731
    first = sample_questions(pool, key, limit=5, seed=0)
    # Round-robin over strata, numbers by value (P2, P19, P106), a stratum that runs out is skipped.
    assert [q.meta["relation"] for q in first] == ["P2", "P19", "P106", "P19", "P106"]
    assert sample_questions(pool, key, limit=5, seed=0) == first  # same arguments, same questions
    everything = sample_questions(pool, key, limit=None, seed=0)
    assert sorted(q.id for q in everything) == sorted(q.id for q in pool)  # without a limit: all, once each
    draws = {tuple(q.id for q in sample_questions(pool, key, limit=9, seed=s)) for s in range(6)}
    assert len(draws) > 1  # the seed shuffles within strata
    for order in draws:
        assert Counter(i.split("/")[0] for i in order[:3]) == Counter({"P2": 1, "P19": 1, "P106": 1})
    assert sample_questions(pool, key, limit=0, seed=0) == []


def test_popqa_sample_spreads_over_relations():
    questions = load_questions("popqa", POPQA, limit=2)
    assert len({q.meta["relation"] for q in questions}) == 2
    assert all(q.meta["passages"] for q in questions)  # each carries its two paragraphs


def test_hotpotqa_questions_context_and_corpus(tmp_path):
    questions = load_questions("hotpotqa", HOTPOT)
    assert Counter(q.meta["type"] for q in questions) == Counter({"bridge": 2, "comparison": 1})
    assert [q.meta["type"] for q in load_questions("hotpotqa", HOTPOT, limit=2)] == ["bridge", "comparison"]
    lilu = next(q for q in questions if q.text == "If Gallu is a demon Lilu is what?")
    assert lilu.answers == ("a spirit",) and lilu.id == "hotpotqa/5a77ec115542992a6e59dff7"
    # The context's sentences joined as they are stored (each keeps its leading space).
    assert lilu.meta["passages"][0] == "A lilu or lilû is a masculine Akkadian word for a spirit, related to Alû, demon."
    assert lilu.meta["passages"][1].startswith("In Akkadian and Sumerian mythology, Alû is a vengeful spirit of the Utukku")
    assert len(lilu.meta["passages"]) == 3
    assert question_files("hotpotqa", EVAL) == (HOTPOT, EVAL / "hotpotqa_mini_corpus.json")
    docs = list(hotpotqa_documents(HOTPOT))
    assert len(docs) == 9 and all(d.source.startswith("hotpotqa_mini_corpus.json#") for d in docs)
    alone = tmp_path / "mine.json"  # no corpus beside it: the contexts are the corpus
    alone.write_text(HOTPOT.read_text())
    assert {d.id for d in hotpotqa_documents(alone)} == {d.id for d in docs}
    bad = tmp_path / "bad_with_context.json"
    bad.write_text(json.dumps([{"question": "q?", "answer": "a", "context": [["title only"]]}]))
    with pytest.raises(InputError, match="bad_with_context.json:1: row 0 context 0: expected"):
        load_questions("hotpotqa", bad)


def test_2wiki_questions_aliases_strata_corpus_and_bad_rows(tmp_path):
    questions = load_questions("2wiki", TWOWIKI)
    assert len(questions) == 3
    detroit = next(q for q in questions if "I Can'T See Myself Leaving You" in q.text)
    assert detroit.id == "2wiki/a1d9a65c0bd911eba7f7acde48001122"
    # The answer first, then its aliases, each once ("Detroit" is also an alias).
    assert detroit.answers == ("Detroit", "Detroit, Michigan", "Detroiter", "Motor City")
    assert detroit.meta["supporting"] == ["Aretha Franklin", "I Can't See Myself Leaving You"]
    assert "passages" not in detroit.meta  # KGD reads the web's facts, not gold passages
    # No type in the file: strata by supporting passages, taken round-robin (2 before 4).
    assert [q.meta["stratum"] for q in load_questions("2wiki", TWOWIKI, limit=2)] == ["2 passages", "4 passages"]
    assert twowiki_files(EVAL) == (TWOWIKI, EVAL / "2wiki_mini_corpus.json")  # the folder works too
    assert knowledge_files("2wiki", TWOWIKI) == [EVAL / "2wiki_mini_corpus.json"]
    docs = list(twowiki_documents(TWOWIKI))
    assert len(docs) == 9 and docs[0].title == "Teutberga" and docs[1].source == "2wiki_mini_corpus.json#1"
    assert {t for q in questions for t in q.meta["supporting"]} <= {d.title for d in docs}
    # The corpus of a file named X_dev100_questions.json is X_corpus.json.
    shared = tmp_path / "mine_dev3_questions.json"
    shared.write_text(TWOWIKI.read_text())
    (tmp_path / "mine_corpus.json").write_text((EVAL / "2wiki_mini_corpus.json").read_text())
    assert twowiki_files(shared)[1] == tmp_path / "mine_corpus.json"
    alone = tmp_path / "alone_questions.json"
    alone.write_text(TWOWIKI.read_text())
    assert len(load_questions("2wiki", alone)) == 3  # questions load without a corpus
    with pytest.raises(FactweaveError, match="no 2WikiMultiHopQA corpus beside"):
        list(twowiki_documents(alone))
    bad = tmp_path / "bad_questions.json"
    bad.write_text(json.dumps([{"question": "q?", "answer": "a"}, {"question": "q?", "answer": ""}]))
    with pytest.raises(InputError, match="bad_questions.json:1: row 1: 'answer' must be a non-empty string"):
        load_questions("2wiki", bad)
    bad.write_text(json.dumps([{"question": "q?", "answer": "a", "answer_aliases": [3]}]))
    with pytest.raises(InputError, match="bad_questions.json:1: row 0 answer_aliases: expected a list of strings"):
        load_questions("2wiki", bad)
    bad.write_text(json.dumps([{"question": "q?", "answer": "a", "supporting_facts": "Aretha"}]))
    with pytest.raises(InputError, match="bad_questions.json:1: row 0 supporting_facts: expected a list of titles"):
        load_questions("2wiki", bad)


# --- compare --------------------------------------------------------------------------------------


def _report(tmp_path, name, dataset, model, scores):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"dataset": dataset, "model": model, "settings": {"questions": 10, "split": None},
                                "scores": scores}))
    return path


def test_compare_puts_runs_side_by_side(tmp_path):
    a = _report(tmp_path, "a", "popqa", "m1", {"refactx": {"exact_accuracy": 0.5, "exact_precision": 0.625,
                                                          "seconds_per_question_median": 1.234},
                                               "kgd": {"exact_accuracy": 0.1, "best_of_n": {"exact_accuracy": 0.3}}})
    b = _report(tmp_path, "b", "kamel", "m2", {"rcd": {"exact_accuracy": 0.2, "set_macro": {"f1": 0.053}},
                                               "refactx": {"exact_accuracy": 0.9}})
    runs = [load_run(p) for p in expand_runs([a, b])]
    text = compare_markdown(runs, ["exact_accuracy", "set_f1", "best_of_n", "seconds", "judge_accuracy"])
    tables = {}
    for block in text.split("#### ")[1:]:
        heading, *lines = block.splitlines()
        tables[heading] = [line for line in lines if line.startswith("|")]
    acc = tables["EM accuracy (all questions)"]
    assert acc[0] == "| method | PopQA, m1 (10 q) | KAMEL, m2 (10 q) |"
    assert "| refactx | 50.0% | 90.0% |" in acc and "| kgd | 10.0% | - |" in acc and "| rcd | - | 20.0% |" in acc
    assert acc.index("| refactx | 50.0% | 90.0% |") < acc.index("| rcd | - | 20.0% |")  # METHODS order
    assert tables["set answers: macro F1 over relations"][2:] == ["| rcd | - | 5.3% |"]
    assert tables["best-of-n EM accuracy (sampling methods)"][2:] == ["| kgd | 30.0% | - |"]
    assert "| refactx | 1.23 | - |" in tables["seconds per question (median)"]
    assert "LLM-judge accuracy" not in tables  # no run has it: no empty table
    assert text.rstrip().endswith("Runs: `a.json`, `b.json`.")
    assert [p.name for p in expand_runs([tmp_path])] == ["a.json", "b.json"]  # a folder: its reports
    (tmp_path / "x.json").write_text("[1]")
    with pytest.raises(FactweaveError, match="x.json: not a report of `factweave eval`"):
        load_run(tmp_path / "x.json")
    with pytest.raises(FactweaveError, match="unknown metric 'f2'"):
        compare_markdown(runs, ["f2"])


# --- runs on the real model -------------------------------------------------------------------------


@pytest.mark.model
def test_kgd_methods_chunks_prompts_and_best_of_n(smollm):
    from agent.baselines.kgd import CachedEncoder, SimilarityScorer
    from agent.embeddings import Embedder
    from agent.eval.kgd import VARIANTS, KGDMethod, QuestionChunks, parse_short_answer

    questions = load_questions("popqa", POPQA, limit=2)
    encoder = CachedEncoder(Embedder())
    chunks = QuestionChunks(encoder, n=2)
    scorer = SimilarityScorer(encoder)
    made = {name: KGDMethod(smollm, VARIANTS[name], chunks, scorer, max_new_tokens=8, samples=2, seed=7)
            for name in ("kgd", "kgd-guide", "greedy", "chunks-beam")}
    top = chunks.top(questions[0])
    assert 1 <= len(top) <= 2 and all(any(c in p for p in questions[0].meta["passages"]) for c in top)
    for name, method in made.items():
        prompt = method.render(questions[0].text, top)
        assert prompt.endswith("Answer:") and questions[0].text in prompt
        assert (top[0].split()[0] in prompt.split("Question: What is the capital")[0]) == VARIANTS[name].in_prompt
    assert made["chunks-beam"].samples == 1 and made["chunks-beam"].batched  # beams stay deterministic
    answers = made["kgd"].answer_batch(questions[:1])
    again = made["kgd"].answer_batch(questions[:1])
    for a, b in zip(answers, again):
        assert len(a.extra["samples"]) == 2 and a.extra["samples"] == b.extra["samples"]  # seeded per question
        assert a.prediction == a.extra["samples"][0] == parse_short_answer(a.text)
        assert a.extra["chunks"] and a.tokens > 0
    # NLI rewards from the local model as judge (no cross-encoder here): it judges each step's
    # candidates against the chunks.
    from agent.baselines.kgd import EntailmentScorer, LocalLMJudge

    entailment = EntailmentScorer(LocalLMJudge(smollm))
    nli = KGDMethod(smollm, VARIANTS["kgd-nli"], QuestionChunks(encoder, n=1), entailment, max_new_tokens=4)
    (answer,) = nli.answer_batch(questions[:1])
    assert entailment.judge_calls >= 1 and entailment.misses >= 1 and answer.tokens <= 4
    single = KGDMethod(smollm, VARIANTS["greedy"], None, None, max_new_tokens=8)
    plain = single.answer_batch(questions)
    assert all("samples" not in a.extra and a.extra["chunks"] == [] for a in plain)
    assert parse_short_answer(" Answer: Oslo\nmore") == "Oslo"
    with pytest.raises(ValueError, match="kgd needs chunks"):
        KGDMethod(smollm, VARIANTS["kgd"], None, scorer)


@pytest.mark.model
def test_an_interrupted_run_resumes_and_scores_best_of_n(smollm, tmp_path):
    from agent.eval.evaluation import KGDOptions, run_evaluation
    from agent.settings import load_settings

    settings = load_settings(model="smollm2-135m", cache=tmp_path / "cache", max_tokens=24)
    out = tmp_path / "out"
    kwargs = dict(settings=settings, data=HOTPOT, methods=("kgd", "greedy"), limit=3, loaded=smollm, judge=False,
                  batch_size=2, progress=False, kgd=KGDOptions(samples=2, max_tokens=16), out_dir=out)

    class Stop(Exception):
        pass

    seen = []

    def stop_after_two(n):
        seen.append(n)
        if sum(seen) >= 2:
            raise Stop

    with pytest.raises(Stop):
        run_evaluation("hotpotqa", on_progress=stop_after_two, **kwargs)
    (log,) = out.glob(".hotpotqa-smollm2-135m-*.rows.jsonl")
    saved = [json.loads(line) for line in log.read_text().splitlines()]
    assert [s["method"] for s in saved] == ["kgd", "kgd"]  # sampling: one question at a time, saved at once
    # Mark one saved answer, and leave a line cut short as a crash would.
    saved[0]["row"]["prediction"] = "MARKED"
    log.write_text("".join(json.dumps(s) + "\n" for s in saved) + '{"method": "kgd", "row": {"id"')
    report = run_evaluation("hotpotqa", **kwargs)
    assert report.meta["resumed_rows"] == 2 and not log.exists()
    kgd, greedy = report.results
    assert [r["id"] for r in kgd.rows] == [q.id for q in load_questions("hotpotqa", HOTPOT, limit=3)]
    assert kgd.rows[[r["id"] for r in kgd.rows].index(saved[0]["row"]["id"])]["prediction"] == "MARKED"
    for r in (kgd, greedy):
        best = r.summary()["best_of_n"]
        assert best["n"] == 2
        assert best["exact_accuracy"] == sum(row["best_of_n"]["exact"] for row in r.rows) / 3
        assert best["exact_accuracy"] >= (r.score.exact_accuracy or 0)  # the prediction is sample 1
        assert all(row["stratum"] in ("bridge", "comparison") for row in r.rows)
    md = (out / "hotpotqa-smollm2-135m.md").read_text()
    assert "Best-of-n" in md and "| bridge | 2 |" in md
    assert not list(out.glob(".*.rows.jsonl"))


@pytest.mark.model
def test_cli_hotpotqa_kgd_then_compare(tmp_path, cache_dir):
    out = tmp_path / "out"
    proc = run_cli("eval", "hotpotqa", "--data", str(HOTPOT), "--method", "kgd", "--method", "greedy", "--limit", "2",
               "--no-judge", "--model", "smollm2-135m", "--max-tokens", "24", "--out", str(out), cache=cache_dir)
    assert proc.returncode == 0, proc.stderr
    assert "and 3 figures" in proc.stdout
    data = json.loads((out / "hotpotqa-smollm2-135m.json").read_text())
    assert data["methods"] == ["kgd", "greedy"] and data["settings"]["kgd"]["chunks"] == 3
    assert data["settings"]["knowledge"] is None  # the questions carry their passages: no web built
    table = out / "comparison.md"
    proc = run_cli("eval", "compare", str(out), str(REPO / "benchmarks/results/eval/rcd/kamel-smollm2-135m.json"),
               "--metric", "exact_accuracy", "--metric", "set_f1", "--out", str(table), cache=cache_dir)
    assert proc.returncode == 0, proc.stderr
    text = table.read_text()
    assert text.strip() in proc.stdout
    assert "| method | HotpotQA, smollm2-135m (2 q) | KAMEL test, smollm2-135m (60 q) |" in text
    assert "| kgd | " in text and "| rcd | - | " in text
    proc = run_cli("eval", "compare", str(tmp_path / "missing.json"), cache=cache_dir)
    assert proc.returncode != 0 and "missing.json: no such run report" in proc.stderr
    assert "Traceback" not in proc.stderr


# --- F1, grounded answers and follow-ups in the runner and the report ------------------------------


class _Canned:
    """A method answering from a table: question id -> (prediction, fact texts, extra)."""

    batched = True

    def __init__(self, name, answers, grounds=True):
        self.name, self.answers, self.grounds = name, answers, grounds

    def answer_batch(self, questions):
        from agent.eval.methods import MethodAnswer

        out = []
        for q in questions:
            prediction, facts, extra = self.answers[q.id]
            out.append(MethodAnswer(prediction, True, f"Answer: {prediction}", [{"text": f} for f in facts], 3, 10,
                                    extra))
        return out


def test_grounded_rate_f1_and_follow_up_share_on_hand_made_records():
    from agent.eval.report import EvalReport
    from agent.eval.run import evaluate_methods

    fact = "<Ada Selden> <place of birth> <Lyon> ."
    questions = [EvalQuestion("f1", "Where were they born?", ("Lyon",), {"stratum": "follow-up"},
                              ({"role": "user", "content": "What is the occupation of Ada Selden?"},
                               {"role": "assistant", "content": "Fact: <Ada Selden> <occupation> <poet> .\nAnswer: poet"})),
                 EvalQuestion("s1", "Where was Ada Selden born?", ("Lyon",), {"stratum": "standalone"}),
                 EvalQuestion("f2", "And where did they die?", ("Paris",), {"stratum": "follow-up"}),
                 EvalQuestion("s2", "Where did Ada Selden die?", ("Paris",), {"stratum": "standalone"})]
    stating = _Canned("refactx", {
        "f1": ("Lyon", [fact], {}),                       # answered, in the fact: grounded, EM
        "s1": ("Lyon, France", [fact], {}),               # answered, "lyon france" is in no fact; F1 2/3
        "f2": ("I don't know.", [], {}),                  # not answered: no verdict, F1 0
        "s2": ("Paris", ["<Ada Selden> <place of death> <Paris> ."], {})})
    agent = _Canned("agent", {  # its own verdict wins over the facts
        "f1": ("Lyon", [], {"supported": True}), "s1": ("Lyon", [fact], {"grounded": False, "supported": True}),
        "f2": ("Rome", [], {"supported": False}), "s2": ("Paris", [], {"supported": True})})
    free = _Canned("llm-only", {q.id: ("Lyon", [fact], {}) for q in questions}, grounds=False)
    refactx, agent_result, llm = evaluate_methods([stating, agent, free], questions)
    assert [r["grounded"] for r in refactx.rows] == [True, False, None, True]
    assert refactx.grounded_rate == pytest.approx(2 / 3)
    assert [r["grounded"] for r in agent_result.rows] == [True, False, False, True]
    assert agent_result.grounded_rate == pytest.approx(2 / 4)
    assert llm.grounded_rate is None and all(r["grounded"] is None for r in llm.rows)  # states no facts
    assert [r["f1"] for r in refactx.rows] == [1.0, pytest.approx(2 / 3, abs=1e-4), 0.0, 1.0]
    assert refactx.score.f1 == pytest.approx((1 + 2 / 3 + 0 + 1) / 4, abs=1e-4)
    assert refactx.rows[0]["history"][0]["content"].endswith("Ada Selden?") and "history" not in refactx.rows[1]
    # Follow-ups: EM 1/2 against standalone EM 1/2 (s1 "Lyon, France" is no exact match) -> share 100%.
    follow = refactx.follow_up
    assert follow["items"] == 2 and follow["exact"] == 0.5 and follow["standalone_exact"] == 0.5
    assert follow["exact_share"] == 1.0
    assert follow["f1_share"] == pytest.approx(0.5 / ((2 / 3 + 1) / 2), abs=1e-4)
    summary = refactx.summary()
    assert summary["grounded"] == pytest.approx(2 / 3) and summary["f1"] == refactx.score.f1
    md = EvalReport("kamel-chat", "m", {"judge": None}, [refactx, agent_result, llm]).markdown()
    assert md.splitlines()[0] == "### KAMEL conversations, 4 questions, m"
    header = next(line for line in md.splitlines() if line.startswith("| method | answered"))
    assert "| F1 | grounded |" in header
    assert "| refactx | 3/4 | 50.0% | 66.7% | 75.0% | 100.0% | 66.7% | 66.7% |" in md
    assert "| llm-only | 4/4 | 50.0% | 50.0% | 50.0% | 50.0% | 50.0% | - |" in md
    assert "Follow-ups (pronoun, the first turn given)" in md and "| refactx | 2 | 50.0% | 50.0% | 100.0% |" in md
    assert "Per stratum: mean token F1:" in md and "| follow-up | 2 | 50.0% | 50.0% | 50.0% |" in md


def test_a_right_chain_withheld_is_counted_and_reported():
    from agent.eval.report import EvalReport
    from agent.eval.run import evaluate_methods

    fact = "<Ada Selden> <place of birth> <Lyon> ."
    questions = [EvalQuestion("a", "Where was Ada Selden born?", ("Lyon",)),
                 EvalQuestion("b", "Where did Ada Selden die?", ("Paris",)),
                 EvalQuestion("c", "What did Ada Selden write?", ("Grey Orchard",)),
                 EvalQuestion("d", "Who taught Ada Selden?", ("Otto Brenner",)),
                 EvalQuestion("e", "Where was Ada Selden baptised?", ("Lyon",))]
    attempt = lambda answer, facts, held=True: {"tree": "question", "answer": answer, "facts": facts,  # noqa: E731
                                                "in_facts": held and facts > 0, "grounded": False}
    agent = _Canned("agent", {
        # stated and right, then withheld: the question ends "I don't know."
        "a": ("I don't know.", [], {"supported": False, "attempts": [attempt("Lyon", 1), attempt("", 0)]}),
        # right and given: nothing withheld
        "b": ("Paris", [fact], {"supported": True, "attempts": [attempt("Paris", 1)]}),
        # a right answer with no fact stated is no chain
        "c": ("I don't know.", [], {"supported": False, "attempts": [attempt("Grey Orchard", 0)]}),
        # a wrong answer withheld is what the checks are for
        "d": ("I don't know.", [], {"supported": False, "attempts": [attempt("Lorna Vidal", 2)]}),
        # right, but in none of the facts it stated: the model knew it, no chain holds it
        "e": ("I don't know.", [], {"supported": False, "attempts": [attempt("Lyon", 2, held=False)]})})
    plain = _Canned("refactx", {q.id: ("Lyon", [fact], {}) for q in questions})
    result, other = evaluate_methods([agent, plain], questions)
    assert result.right_withheld_rate == pytest.approx(1 / 5)
    assert result.summary()["right_withheld"] == pytest.approx(1 / 5)
    assert other.right_withheld_rate is None and "right_withheld" not in other.summary()
    md = EvalReport("2wiki", "m", {"judge": None}, [result, other]).markdown()
    assert "Right chains withheld" in md and "agent 20.0% (1)" in md
