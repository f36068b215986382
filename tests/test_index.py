"""The fact index against a naive reference trie (property-based), and its storage format."""
from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import enumerate_facts, word_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.errors import FactweaveError, IndexMismatchError
from agent.index import FactIndex, load_index, save_index
from agent.knowledge.facts import Fact

sequences = st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=6), min_size=1, max_size=40)


def build(seqs):
    facts = [Fact(f"s{i}", "p", "o", f"row {i}") for i in range(len(seqs))]
    return FactIndex.from_token_ids(seqs, facts, "test")



@settings(max_examples=200, deadline=None)
@given(sequences)
def test_enumeration_equals_distinct_facts(seqs):
    index = build(seqs)
    distinct = {tuple(s) for s in seqs}
    found = enumerate_facts(index, index.root())
    assert len(found) == len(set(found)) == len(distinct) == len(index)
    assert set(found) == distinct


@settings(max_examples=200, deadline=None)
@given(sequences, st.data())
def test_counts_and_next_tokens_match_naive_trie(seqs, data):
    index = build(seqs)
    distinct = {tuple(s) for s in seqs}
    prefixes = {s[:k] for s in distinct for k in range(len(s) + 1)}
    for prefix in prefixes:
        cur = index.root()
        for t in prefix:
            cur = index.step(cur, t)
        below = [s for s in distinct if s[: len(prefix)] == prefix]
        assert index.leaf_counts[cur.node] == len(below)
        naive_next = sorted({s[len(prefix)] for s in below if len(s) > len(prefix)})
        assert index.next_tokens(cur).tolist() == naive_next
        assert index.can_end(cur) == (prefix in distinct)


@settings(max_examples=150, deadline=None)
@given(sequences, st.data())
def test_generated_facts_are_never_offered_again(seqs, data):
    index = build(seqs)
    distinct = sorted({tuple(s) for s in seqs})
    said = data.draw(st.lists(st.sampled_from(distinct), unique=True, max_size=len(distinct)))
    cur = index.root()
    for fact in said:
        c = cur
        for t in fact:
            c = index.step(c, t)
        fid, cur = index.finish(c)
        assert tuple(index.fact_tokens(fid)) == fact
    left = set(enumerate_facts(index, cur))
    assert left == set(distinct) - set(said)
    assert index.remaining(0, cur.used) == len(left)
    if not left:
        assert len(index.next_tokens(cur)) == 0 and not index.can_end(cur)


def test_prefix_fact_is_kept_and_duplicates_collapse():
    index = build([[1, 2, 3], [1, 2], [1, 2, 3], [4]])
    assert len(index) == 3
    cur = index.step(index.step(index.root(), 1), 2)
    assert index.can_end(cur) and index.next_tokens(cur).tolist() == [3]
    assert index.leaf_counts[0] == 3
    # the first occurrence keeps its provenance
    assert index.facts[index.terminal_fact[index.step(cur, 3).node]].source == "row 0"


def test_step_refuses_tokens_that_continue_no_fact():
    index = build([[1, 2]])
    with pytest.raises(KeyError):
        index.step(index.root(), 2)
    with pytest.raises(KeyError):
        index.finish(index.root())


def test_build_from_facts_with_a_real_tokenizer_round_trips(tmp_path):
    tok = word_tokenizer()
    facts = [Fact("Paris", "capital of", "France", "a:1"), Fact("Berlin", "capital of", "Germany", "a:2"),
             Fact("Paris", "capital of", "France", "a:3")]
    index = FactIndex.build(facts, tok)
    assert len(index) == 2
    path = save_index(index, tmp_path / "kb.fwi", meta={"model": "words"})
    again = load_index(path, tok)
    assert [f.text for f in again.facts] == [f.text for f in index.facts]
    assert again.facts[0].source == "a:1"
    for name, arr in index.arrays().items():
        assert np.array_equal(arr, again.arrays()[name]), name
    assert tok.decode(again.fact_tokens(1)).strip() == "<Berlin> <capital of> <Germany> ."


def test_index_for_another_tokenizer_is_refused(tmp_path):
    path = save_index(FactIndex.build([Fact("Paris", "country", "France")], word_tokenizer()), tmp_path / "kb.fwi",
                      meta={"model": "words"})
    with pytest.raises(IndexMismatchError, match="built for words"):
        load_index(path, word_tokenizer(extra=("Rome",)))


def test_truncated_and_corrupt_files_are_refused(tmp_path):
    index = FactIndex.build([Fact("Paris", "country", "France"), Fact("Berlin", "country", "Germany")], word_tokenizer())
    path = save_index(index, tmp_path / "kb.fwi")
    data = path.read_bytes()
    (tmp_path / "short.fwi").write_bytes(data[: len(data) - 10])
    with pytest.raises(FactweaveError, match="truncated"):
        load_index(tmp_path / "short.fwi")
    flipped = bytearray(data)
    flipped[-3] ^= 0xFF
    (tmp_path / "bad.fwi").write_bytes(bytes(flipped))
    with pytest.raises(FactweaveError, match="corrupt"):
        load_index(tmp_path / "bad.fwi")
    (tmp_path / "junk.fwi").write_bytes(b"hello world")
    with pytest.raises(FactweaveError, match="not a factweave index"):
        load_index(tmp_path / "junk.fwi")


def test_failed_save_leaves_nothing_behind(tmp_path):
    index = FactIndex.build([Fact("Paris", "country", "France")], word_tokenizer())


    bad_meta = {"model": object()}  # not JSON-serializable: fails before anything is renamed
    with pytest.raises(TypeError):
        save_index(index, tmp_path / "kb.fwi", meta=bad_meta)
    assert list(tmp_path.iterdir()) == []


def test_random_large_build_counts_are_exact():
    rng = random.Random(7)
    seqs = [[rng.randrange(50) for _ in range(rng.randrange(1, 9))] for _ in range(5000)]
    index = build(seqs)
    assert len(index) == len({tuple(s) for s in seqs}) == index.leaf_counts[0]


def test_statement_facts_round_trip_and_old_tables_read_as_triples(tmp_path):
    tok = word_tokenizer(("Zorblax", "founded", "by", "Mira"))
    facts = [Fact.from_statement("Zorblax founded by Mira .", "notes.md [0:24]"),
             Fact("Paris", "capital of", "France", "kb.tsv:1")]
    index = FactIndex.build(facts, tok)
    assert [f.text for f in index.facts] == ["Zorblax founded by Mira .", "<Paris> <capital of> <France> ."]
    save_index(index, tmp_path / "i.fwidx")
    loaded = load_index(tmp_path / "i.fwidx", tok)
    assert list(loaded.facts) == list(index.facts)
    assert loaded.facts[0].source == "notes.md [0:24]" and loaded.facts[0].subject == ""
    # A table written before the statement column existed: every fact is a triple.
    from agent.index.table import FactTable

    old = FactTable({k: v for k, v in index.facts.arrays.items() if not k.startswith("statement_")})
    assert old[1] == facts[1] and old[0].text == "<> <> <> ."
    with pytest.raises(ValueError):
        Fact.from_statement("   ")
