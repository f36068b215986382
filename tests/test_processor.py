"""The constrained logits processor on hand-built token sequences (real tokenizer, no model)."""
from __future__ import annotations

import math

import torch
from conftest import word_tokenizer

from agent.decoding import FactConstrainedLogitsProcessor, FactTracker, TokenVocab
from agent.index import FactIndex
from agent.knowledge.facts import Fact

FACTS = [Fact("Paris", "country", "France", "t:1"), Fact("Paris", "capital of", "France", "t:2")]


def setup():
    tok = word_tokenizer()
    index = FactIndex.build(FACTS, tok)
    tracker = FactTracker(index, TokenVocab.from_tokenizer(tok))
    return tok, index, tracker


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def allowed_after(tok, tracker, prompt, generated, beams=1):
    """Token ids left finite by the processor after ``generated`` text."""
    proc = FactConstrainedLogitsProcessor(tracker, [prompt], num_beams=beams)
    p = ids(tok, prompt)
    g = ids(tok, generated)
    # feed the sequence step by step as generate would
    for k in range(len(g) + 1):
        seq = torch.tensor([p + g[:k]] * beams)
        scores = proc(seq, torch.zeros(beams, len(tok)))
    return {i for i in range(len(tok)) if math.isfinite(scores[0, i].item())}


def test_free_text_is_left_alone():
    tok, _, tracker = setup()
    assert len(allowed_after(tok, tracker, "Question: x\n", "In fact")) == len(tok)


def test_after_trigger_only_fact_continuations():
    tok, _, tracker = setup()
    allowed = allowed_after(tok, tracker, "Question: x\n", "Fact:")
    assert allowed == set(ids(tok, " "))
    allowed = allowed_after(tok, tracker, "Question: x\n", "Fact: <Paris> <")
    assert allowed == {tok.convert_tokens_to_ids("country"), tok.convert_tokens_to_ids("capital")}


def test_in_fact_mid_line_does_not_trigger():
    tok, _, tracker = setup()
    assert len(allowed_after(tok, tracker, "Question: x\n", "I know In fact:")) == len(tok)


def test_fact_end_allows_only_a_newline():
    tok, _, tracker = setup()
    allowed = allowed_after(tok, tracker, "Q\n", "Fact: <Paris> <country> <France> .")
    assert allowed == {tok.convert_tokens_to_ids("\n")}


def test_repeated_fact_is_blocked():
    tok, _, tracker = setup()
    said = "Fact: <Paris> <country> <France> .\nFact: <Paris> <"
    assert allowed_after(tok, tracker, "Q\n", said) == {tok.convert_tokens_to_ids("capital")}
    both = "Fact: <Paris> <country> <France> .\nFact: <Paris> <capital of> <France> .\nFact:"
    # every fact spent: only ending the line is possible
    assert allowed_after(tok, tracker, "Q\n", both) == {tok.convert_tokens_to_ids("\n")}


def test_beams_and_batch_items_have_separate_states():
    tok, _, tracker = setup()
    proc = FactConstrainedLogitsProcessor(tracker, ["Q\n", "Q\n"], num_beams=2)
    prompt = ids(tok, "Q\n")
    rows = [ids(tok, t) for t in ("Fact: <Paris> <", "In fact <", "Fact: <Paris> <", "Fact: <Paris> <")]
    width = max(map(len, rows))
    rows = [r + ids(tok, " ") * (width - len(r)) for r in rows]  # equal lengths, as in generate
    for k in range(width + 1):
        scores = proc(torch.tensor([prompt + r[:k] for r in rows]), torch.zeros(4, len(tok)))
    finite = (scores > float("-inf")).sum(dim=1).tolist()
    assert finite[1] == len(tok) and finite[0] < len(tok)


def test_replay_reports_spans_and_used_facts():
    tok, index, tracker = setup()
    text = "Fact: <Paris> <country> <France> .\nAnswer: France"
    state = tracker.replay("Q\n", ids(tok, text))
    assert [index.facts[f].text for f, _, _ in state.spans] == ["<Paris> <country> <France> ."]
    assert not state.active and len(state.cursor.used) == 1
