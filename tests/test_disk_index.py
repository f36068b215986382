"""The disk fact index against the in-memory one, its build under a memory bound, its file checks,
and constrained generation over it with the real SmolLM2."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest
from conftest import enumerate_facts, word_tokenizer

from agent.errors import FactweaveError, IndexMismatchError
from agent.index import FactIndex, load_index
from agent.index.disk import DiskFactIndex
from agent.index.disk_format import read_disk_header
from agent.index.disk_writer import DiskIndexWriter, build_disk_index
from agent.index.external_sort import SequenceSorter, flatten
from agent.index.tokens import fact_token_ids
from agent.knowledge.facts import Fact
from agent.knowledge.synthetic import synthetic_facts


def disk_from_sequences(seqs, path, *, memory_bytes=1 << 20, vocab=None):
    """Sort ``seqs`` under ``memory_bytes`` and write a disk index (no tokenizer involved)."""
    vocab = vocab or (max(t for s in seqs for t in s) + 1)
    sorter = SequenceSorter(path.parent, memory_bytes=memory_bytes, unit=2 if vocab < 1 << 16 else 4)
    counts = np.zeros(vocab, dtype=np.int64)
    for i in range(0, len(seqs), 5000):
        flat, lengths = flatten(seqs[i : i + 5000])
        counts += np.bincount(flat, minlength=vocab)
        sorter.add(flat, lengths)
    writer = DiskIndexWriter(path, fingerprint="test", token_counts=counts)
    for keys in sorter.sorted_chunks(chunk_rows=3001):
        writer.add(np.frombuffer(keys.tobytes(), dtype=">u2" if vocab < 1 << 16 else ">u4").reshape(len(keys), -1))
    writer.finish()
    runs = len(sorter.runs)
    sorter.close()
    return DiskFactIndex.open(path), runs



def random_sequences(n, seed, alphabet=5, max_len=10, vocab=300):
    rng = random.Random(seed)
    # Mostly a small alphabet (deep shared prefixes, facts that are prefixes of others), some rare tokens.
    return [tuple(rng.randrange(alphabet) if rng.random() < 0.75 else rng.randrange(vocab)
                  for _ in range(rng.randint(1, max_len))) for _ in range(n)]


@pytest.mark.parametrize("n,seed", [(1, 0), (40, 1), (3000, 2), (12000, 3)])
def test_cursor_api_matches_the_in_memory_index(tmp_path, n, seed):
    seqs = random_sequences(n, seed)
    disk, _ = disk_from_sequences(seqs, tmp_path / "kb.fwd")
    distinct = sorted(set(seqs))
    ref = FactIndex.from_token_ids(distinct, [Fact("s", "p", "o")] * len(distinct), "test")
    assert len(disk) == len(ref) == len(distinct) and disk.node_count == ref.node_count
    found = enumerate_facts(disk, disk.root())
    assert found == distinct  # pre-order walk = sorted order, every fact exactly once
    rng = random.Random(seed)
    for fact in rng.sample(distinct, min(200, len(distinct))):
        k = rng.randint(0, len(fact))
        cur_d, cur_r = disk.root(), ref.root()
        for t in fact[:k]:
            cur_d, cur_r = disk.step(cur_d, t), ref.step(cur_r, t)
        assert disk.next_tokens(cur_d).tolist() == ref.next_tokens(cur_r).tolist()
        assert disk.can_end(cur_d) == ref.can_end(cur_r)
        assert disk.remaining(cur_d.node) == ref.remaining(cur_r.node)
        assert disk.fact_tokens(distinct.index(fact)) == list(fact)


def test_generated_facts_are_never_offered_again(tmp_path):
    seqs = random_sequences(400, 7, alphabet=3, max_len=6)
    disk, _ = disk_from_sequences(seqs, tmp_path / "kb.fwd")
    distinct = sorted(set(seqs))
    said = random.Random(1).sample(distinct, 60)
    cur = disk.root()
    for fact in said:
        c = cur
        for t in fact:
            c = disk.step(c, t)
        fid, cur = disk.finish(c)
        assert tuple(disk.fact_tokens(fid)) == fact
    assert set(enumerate_facts(disk, cur)) == set(distinct) - set(said)
    assert disk.remaining(0, cur.used) == len(distinct) - len(said)
    with pytest.raises(KeyError):
        c = disk.root(cur.used)
        for t in said[0]:
            c = disk.step(c, t)
        disk.finish(c)


def test_one_million_facts_enumerate_back_exactly(tmp_path):
    """Nothing lost at 1M: the facts read back from the file equal the distinct facts given
    (compared as sorted key arrays, so the check itself is vectorized)."""
    from agent.index.external_sort import keys_of, unique_sorted

    rng = np.random.default_rng(11)
    n = 1_000_000
    lengths = rng.integers(8, 24, size=n)
    # Wikidata-like sharing: Zipf-popular subjects (first 4 tokens), 40 predicates, then objects.
    subject = rng.zipf(1.5, size=n) % 150_000
    flat = rng.integers(0, 49_152, size=int(lengths.sum()))
    starts = np.cumsum(lengths) - lengths
    for j in range(4):
        flat[starts + j] = (subject * (j + 7919)) % 49_152
    flat[starts + 4] = rng.integers(0, 40, size=n)
    dup = slice(0, int(starts[1000]))  # the first 1000 facts again: duplicates collapse
    flat, lengths = np.concatenate([flat, flat[dup]]), np.concatenate([lengths, lengths[:1000]])
    counts = np.bincount(flat, minlength=49_152)
    sorter = SequenceSorter(tmp_path, memory_bytes=64 << 20, unit=2)
    cuts = np.searchsorted(np.cumsum(lengths), np.arange(1, 11) * (len(flat) // 10))
    bounds = np.cumsum(lengths)
    prev = 0
    for c in list(cuts[:-1]) + [len(lengths)]:
        a = 0 if prev == 0 else int(bounds[prev - 1])
        sorter.add(flat[a : int(bounds[c - 1])], lengths[prev:c])
        prev = c
    writer = DiskIndexWriter(tmp_path / "kb.fwd", fingerprint="test", token_counts=counts)
    for keys in sorter.sorted_chunks():
        writer.add(np.frombuffer(keys.tobytes(), dtype=">u2").reshape(len(keys), -1))
    writer.finish()
    assert len(sorter.runs) >= 2
    sorter.close()
    disk = DiskFactIndex.open(tmp_path / "kb.fwd", verify=True)
    given = unique_sorted(keys_of(flat, lengths, 2))
    assert len(disk) == len(given)
    matrix, lens = disk.token_matrix(0, len(disk))
    back = keys_of(matrix[np.arange(matrix.shape[1])[None, :] < lens[:, None]], lens, 2)
    width = max(back.dtype.itemsize, given.dtype.itemsize)
    assert np.array_equal(back.astype(f"S{width}"), given.astype(f"S{width}"))


def test_build_from_a_stream_bigger_than_the_memory_limit(smollm, tmp_path):
    facts = list(synthetic_facts(40_000, seed=5))
    facts += facts[:500]  # duplicates in the stream
    tok = smollm.tokenizer
    small = build_disk_index(iter(facts), tok, tmp_path / "small.fwd", memory_mb=1, batch=5_000)
    assert small["runs"] >= 3  # 40k facts x ~21 tokens do not fit in 1 MB: sorted runs were merged
    big = build_disk_index(iter(facts), tok, tmp_path / "big.fwd", memory_mb=512)
    assert big["runs"] == 0
    a, b = read_disk_header(tmp_path / "small.fwd"), read_disk_header(tmp_path / "big.fwd")
    assert {k: v["blake2b"] for k, v in a["sections"].items()} == {k: v["blake2b"] for k, v in b["sections"].items()}
    index = load_index(tmp_path / "small.fwd", tok)
    expected = {tuple(t) for t in fact_token_ids(tok, [f.text for f in facts])}
    assert len(index) == len(expected) == small["facts"]
    assert set(index.token_rows()) == expected
    texts = {f.text for f in facts}
    for i in random.Random(0).sample(range(len(index)), 200):
        assert index.facts[i].text in texts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.fwd", "small.fwd"]  # no temporary files left


def test_index_for_another_tokenizer_is_refused(tmp_path):
    path = tmp_path / "kb.fwd"
    build_disk_index([Fact("Paris", "capital of", "France")], word_tokenizer(), path, meta={"model": "words"})
    assert len(DiskFactIndex.open(path, word_tokenizer())) == 1
    with pytest.raises(IndexMismatchError, match="built for words"):
        load_index(path, word_tokenizer(extra=("Rome",)))


def test_a_tokenizer_that_loses_text_is_refused(tmp_path):
    # The word tokenizer maps "is" and "in" to <unk>: the text could not be read back from the file.
    with pytest.raises(FactweaveError, match="does not decode"):
        build_disk_index([Fact.from_statement("Paris is in France.")], word_tokenizer(), tmp_path / "kb.fwd")
    assert list(tmp_path.iterdir()) == []


def test_truncated_and_corrupt_files_are_refused(tmp_path):
    seqs = random_sequences(20_000, 4)
    disk_from_sequences(seqs, tmp_path / "kb.fwd")
    data = (tmp_path / "kb.fwd").read_bytes()
    header = read_disk_header(tmp_path / "kb.fwd")
    (tmp_path / "short.fwd").write_bytes(data[: len(data) - 10])
    with pytest.raises(FactweaveError, match="truncated"):
        load_index(tmp_path / "short.fwd")
    (tmp_path / "head.fwd").write_bytes(data[:100])
    with pytest.raises(FactweaveError, match="truncated"):
        load_index(tmp_path / "head.fwd")
    rest = header["data_start"] + header["sections"]["rest"]["offset"]
    flipped = bytearray(data)
    flipped[rest + 17] ^= 0x01
    (tmp_path / "bad.fwd").write_bytes(bytes(flipped))
    with pytest.raises(FactweaveError, match="corrupt"):
        load_index(tmp_path / "bad.fwd", verify="full")
    flipped = bytearray(data)
    flipped[header["data_start"] + header["sections"]["lcp_min64"]["offset"]] ^= 0x01
    (tmp_path / "bad2.fwd").write_bytes(bytes(flipped))
    with pytest.raises(FactweaveError, match="corrupt"):  # small sections are checked at every open
        load_index(tmp_path / "bad2.fwd")
    (tmp_path / "junk.fwd").write_bytes(b"FWDISK1\n" + b"\xff" * 20)
    with pytest.raises(FactweaveError, match="truncated|corrupt"):
        load_index(tmp_path / "junk.fwd")


def test_a_failed_build_leaves_nothing_behind(tmp_path):
    def facts():
        yield Fact("Paris", "capital of", "France")
        raise RuntimeError("stream broke")

    (tmp_path / "kb.fwd").write_bytes(b"old")
    with pytest.raises(RuntimeError):
        build_disk_index(facts(), word_tokenizer(), tmp_path / "kb.fwd")
    assert os.listdir(tmp_path) == ["kb.fwd"] and (tmp_path / "kb.fwd").read_bytes() == b"old"


def test_synthetic_facts_are_deterministic_and_varied():
    a = [f.text for f in synthetic_facts(3000, seed=3, entities=500)]
    assert a == [f.text for f in synthetic_facts(3000, seed=3, entities=500)]
    assert a[:1000] == [f.text for f in synthetic_facts(1000, seed=3, entities=500)]
    assert a != [f.text for f in synthetic_facts(3000, seed=4, entities=500)]
    facts = list(synthetic_facts(20_000, seed=1))
    assert len({f.predicate for f in facts}) >= 40
    per_subject = np.bincount(np.unique([f.subject for f in facts], return_inverse=True)[1])
    assert per_subject.max() >= 10 * np.median(per_subject)  # skewed fan-out
    assert any(f.object[:1].isdigit() and " " in f.object for f in facts)  # dates / quantities with units


@pytest.mark.model
def test_constrained_generation_over_a_disk_index_states_only_kb_facts(smollm, tmp_path):
    from agent.decoding import FactGenerator
    from agent.knowledge.kamel import demo_kamel_root, kamel_questions
    from agent.knowledge.loaders import load_facts

    kb = list(load_facts(demo_kamel_root())) + list(synthetic_facts(20_000, seed=2))
    build_disk_index(kb, smollm.tokenizer, tmp_path / "kb.fwd", memory_mb=4)
    index = load_index(tmp_path / "kb.fwd", smollm.tokenizer)
    texts = {f.text for f in kb}
    gen = FactGenerator(smollm.model, smollm.tokenizer, index, max_new_tokens=40)
    questions = [q.text for q in kamel_questions(demo_kamel_root(), split="dev", limit=3)]
    # The model is most of the cost (the index adds ~0.3% of it): two greedy answers, one with beams.
    answers = gen.answer_batch(questions[:2]) + gen.answer_batch(questions[2:], beams=2)
    for a in answers:
        ids = [s.id for s in a.facts]
        assert len(ids) == len(set(ids))
        for span in a.facts:
            assert span.text in texts and a.text[span.start : span.end] == span.text
    assert sum(len(a.facts) for a in answers) >= 2


def test_a_build_killed_midway_leaves_nothing_the_next_build_keeps(smollm, demo_index, cache_dir, tmp_path):
    """kill -9 during `factweave index build --backend disk`: no index under the real name, and the
    next build ends with the same facts as an uninterrupted one and no work folder left over."""
    import signal
    import subprocess
    import sys

    from conftest import REPO

    out = tmp_path / "demo.fwd"
    command = [sys.executable, "-m", "agent.cli", "index", "build", "--model", "smollm2-135m", "--backend", "disk",
               "--memory-mb", "16", "--out", str(out)]
    env = {**os.environ, "FACTWEAVE_CACHE": str(cache_dir), "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = b""
    while b"tokenizing" not in seen:  # the build has begun: its work folder exists
        piece = child.stderr.read1(4096)
        assert piece, f"the build ended before it could be killed: {seen[-300:]!r}"
        seen += piece
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=60) == -signal.SIGKILL
    child.stderr.close()
    assert not out.exists() and list(tmp_path.glob("demo.fwd.*"))  # killed with its work folder in place

    again = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert again.returncode == 0, again.stderr[-2000:]
    assert os.listdir(tmp_path) == ["demo.fwd"]  # the killed build's folder was removed too
    index = load_index(out, smollm.tokenizer)
    assert len(index) == len(demo_index)
    assert {index.facts[i].text for i in range(len(index))} == {f.text for f in demo_index.facts}


def test_every_fact_index_is_a_fact_tree_and_walks_the_same(tmp_path):
    """The in-memory tree, the disk index and a growing union of them implement the cursor API of
    :class:`agent.index.base.FactTree` and constrain a walk to the same facts (PostgreSQL's index
    is checked the same way in tests/test_postgres_index.py)."""
    from agent.index import GrowingFactIndex
    from agent.index.base import FactList, FactTree

    facts = [Fact("Paris", "capital of", "France"), Fact("Berlin", "capital of", "Germany"),
             Fact("Paris", "country", "France")]
    tok = word_tokenizer()
    memory = FactIndex.build(facts, tok)
    build_disk_index(iter(facts), tok, tmp_path / "kb.fwd")
    disk = DiskFactIndex.open(tmp_path / "kb.fwd", tok)
    grown = GrowingFactIndex(FactIndex.build(facts[:1], tok), tok)
    grown.grow(facts[1:])
    walked = []
    for index in (memory, disk, grown):
        assert isinstance(index, FactTree) and isinstance(index.facts, FactList)
        assert len(index) == 3
        walked.append(sorted(tok.decode(list(t)) for t in enumerate_facts(index, index.root())))
    assert walked[0] == walked[1] == walked[2] and len(walked[0]) == 3
    assert not isinstance(object(), FactTree)
