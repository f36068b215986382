"""The ``Fact:`` trigger: at line start, any case, however a tokenizer splits it."""
from __future__ import annotations

import pytest
from conftest import word_tokenizer

from agent.decoding.vocab import OTHER, TokenVocab, advance_line


def fires(text: str, line: str | None = "") -> list[int]:
    """Character positions where the trigger completes when ``text`` is fed one char at a time."""
    out = []
    for i, ch in enumerate(text):
        line, fired = advance_line(line, ch)
        if fired:
            out.append(i)
    return out


@pytest.mark.parametrize("text", ["Fact:", "fact:", "FACT:", "  Fact:", "\tfAcT:", "Answer: x\nFact:"])
def test_trigger_fires_at_line_start_in_any_case(text):
    assert fires(text) == [len(text) - 1]


@pytest.mark.parametrize("text", ["In fact:", "Facts:", "Fact :", "The fact: x", "fact", "- Fact:", "Artifact:"])
def test_trigger_does_not_fire_elsewhere(text):
    assert fires(text) == []


def test_trigger_needs_line_start_after_the_prompt():
    assert fires("Fact:", line=OTHER) == []
    assert fires("\nFact:", line=OTHER) == [5]


def test_trigger_split_across_tokens_fires_once_at_the_colon():
    line, total = "", []
    for piece in ["F", "act", ":", " <", "x"]:
        line, fired = advance_line(line, piece)
        total.append(fired)
    assert total == [False, False, True, False, False]


def test_tokens_running_past_the_trigger_are_masked():
    tok = word_tokenizer(extra=(": <", "Fact: <", ".\nFact: ", ":\n"))
    vocab = TokenVocab.from_tokenizer(tok)
    ids = {p: i for i, p in enumerate(vocab.pieces) if p}
    assert ids[": <"] in vocab.overrun["fact"]
    assert ids[":\n"] in vocab.overrun["fact"]  # "Fact:" then an empty fact
    assert ids["Fact: <"] in vocab.overrun[""]
    assert ids[".\nFact: "] in vocab.overrun[OTHER]
    assert ids[":"] not in vocab.overrun["fact"]  # the plain colon completes the trigger
    assert ids[": <"] not in vocab.overrun[OTHER]  # mid-line, ": <" is ordinary text
    assert ids["\n"] in vocab.end_tokens and tok.eos_token_id not in vocab.end_tokens


@pytest.mark.model
def test_real_tokenizer_masks_are_small_and_exact(smollm):
    vocab = TokenVocab.from_tokenizer(smollm.tokenizer, smollm.model.config.vocab_size)
    for state, banned in vocab.overrun.items():
        assert len(banned) < 200, state
        for i in banned:
            piece = vocab.pieces[i]
            assert ":" in piece
    # "Fact" then ":" must stay possible, and so must a plain newline
    colon = smollm.tokenizer.convert_tokens_to_ids(":")
    assert colon not in set(vocab.overrun["fact"].tolist())
    nl = smollm.tokenizer("\n", add_special_tokens=False)["input_ids"]
    assert len(nl) == 1 and nl[0] in vocab.end_tokens
