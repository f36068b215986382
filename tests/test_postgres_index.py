"""The PostgreSQL fact index against the in-memory one, on a real PostgreSQL server."""
from __future__ import annotations

import json
import random
import time

import numpy as np
import pytest
from conftest import run_cli, word_tokenizer

from agent.errors import FactweaveError, IndexMismatchError
from agent.index import FactIndex
from agent.index.base import FactList, FactTree
from agent.index.pg_build import list_indexes, load_fact_index, partition
from agent.index.postgres import PostgresFactIndex, PostgresUnavailableError
from agent.knowledge.facts import Fact

pytestmark = pytest.mark.postgres


def token_index(seed: int, n: int = 3000, vocab: int = 7) -> FactIndex:
    rng = random.Random(seed)
    seqs = [[rng.randrange(vocab) for _ in range(rng.randrange(1, 9))] for _ in range(n)]
    return FactIndex.from_token_ids(seqs, [Fact(f"s{i}", "p", "o", f"row {i}") for i in range(n)], "test")


def assert_same_at(mem: FactIndex, pg: PostgresFactIndex, cur) -> None:
    assert pg.next_tokens(cur).tolist() == mem.next_tokens(cur).tolist()
    assert pg.can_end(cur) == mem.can_end(cur)
    assert pg.remaining(cur.node, cur.used) == mem.remaining(cur.node, cur.used)
    if mem.can_end(cur):
        assert pg.finish(cur) == mem.finish(cur)


def walk_all(mem: FactIndex, pg: PostgresFactIndex, cur) -> int:
    """Compare every node reachable from ``cur``; returns how many were compared."""
    assert_same_at(mem, pg, cur)
    seen = 1
    for tok in mem.next_tokens(cur):
        seen += walk_all(mem, pg, mem.step(cur, int(tok)))
    return seen


def test_rows_partition_the_node_ids():
    mem = token_index(1)
    for block_nodes in (1, 3, 16, 256):
        rows = list(partition(mem, block_nodes))
        assert rows[0][1] == 0 and rows[-1][2] == mem.node_count
        assert all(a[2] == b[1] for a, b in zip(rows, rows[1:]))
        for kind, lo, hi in rows:
            size = mem.subtree_end[lo] - lo
            assert (kind == "upper") == (size > block_nodes)
            assert kind == "upper" or hi - lo <= block_nodes


@pytest.mark.parametrize("block_nodes,prefetch", [(1, 1), (16, 64), (256, 4096)])
def test_every_node_and_used_set_matches_the_in_memory_index(pg_dsn, block_nodes, prefetch):
    mem = token_index(2)
    load_fact_index(pg_dsn, mem, name="fwtest_tokens", block_nodes=block_nodes)
    with PostgresFactIndex.open(pg_dsn, "fwtest_tokens", prefetch_nodes=prefetch, cache_rows=64) as pg:
        assert (len(pg), pg.node_count, pg.fingerprint) == (len(mem), mem.node_count, "test")
        assert isinstance(pg, FactTree) and isinstance(pg.facts, FactList)  # the decoder's cursor API
        assert walk_all(mem, pg, pg.root()) == mem.node_count
        rng = random.Random(block_nodes)
        for _ in range(5):
            used = tuple(int(t) for t in rng.sample(list(mem.fact_terminal), 400))
            assert walk_all(mem, pg, pg.root(used)) >= 1
        # every fact by id, its provenance included
        for i in rng.sample(range(len(mem)), 50):
            assert pg.facts[i] == mem.facts[i]
        assert list(pg.facts) == list(mem.facts)
        with pytest.raises(KeyError):
            pg.step(pg.root(), 99)
        assert pg.child(0, 99) == -1


@pytest.fixture(scope="module")
def demo_pg(pg_dsn, demo_index):
    """The demo KB's SmolLM2 index stored in PostgreSQL (small blocks so upper rows are exercised)."""
    report = load_fact_index(pg_dsn, demo_index, name="fwtest_demo", meta={"model": "smollm2-135m"}, block_nodes=64)
    assert (report.facts, report.nodes) == (len(demo_index), demo_index.node_count)
    with PostgresFactIndex.open(pg_dsn, "fwtest_demo", prefetch_nodes=512) as pg:
        yield pg


@pytest.mark.model
def test_demo_kb_same_next_tokens_and_counts_for_random_prefixes(demo_pg, demo_index):
    mem, pg = demo_index, demo_pg
    rng = random.Random(7)
    terminals = np.sort(mem.fact_terminal)
    compared = 0
    for fact_id in rng.sample(range(len(mem)), 300):
        tokens = mem.fact_tokens(fact_id)
        # facts near this one in pre-order share its prefixes: spend some, and some far away
        at = int(np.searchsorted(terminals, mem.fact_terminal[fact_id]))
        near = terminals[max(0, at - rng.randrange(0, 30)) : at + rng.randrange(0, 30)]
        used = tuple(int(t) for t in np.concatenate([near, rng.sample(list(terminals), 5)]))
        for cursor_used in ((), used):
            cur = pg.root(cursor_used)
            for tok in tokens[: rng.randrange(0, len(tokens) + 1)]:
                assert_same_at(mem, pg, cur)
                compared += 1
                if tok not in mem.next_tokens(cur):
                    break
                nxt = pg.step(cur, tok)
                assert nxt == mem.step(cur, tok)
                cur = nxt
            assert_same_at(mem, pg, cur)
    assert compared > 1000
    stats = pg.stats()
    assert stats["cache_hits"] > stats["round_trips"]


@pytest.mark.model
def test_postgres_equals_the_embedded_disk_index_on_the_same_facts(demo_pg, demo_index, smollm, tmp_path):
    """The two on-disk backends side by side on the demo KB: same next tokens, same ends, same
    counts of facts below every random prefix, also once some facts were generated (each index
    marks a generated fact in its own ids, so the same facts are finished in both)."""
    from agent.index import load_index
    from agent.index.disk_writer import build_disk_index
    from agent.knowledge.kamel import demo_kamel_root
    from agent.knowledge.loaders import load_facts

    build_disk_index(load_facts(demo_kamel_root()), smollm.tokenizer, tmp_path / "demo.fwd")
    disk, pg = load_index(tmp_path / "demo.fwd", smollm.tokenizer), demo_pg
    assert len(disk) == len(pg)
    rng = random.Random(11)

    def walk(index, tokens, used):
        """What the index says at each prefix of ``tokens``, up to where no remaining fact goes on."""
        cur, seen = index.root(used), []
        for tok in tokens:
            allowed = index.next_tokens(cur).tolist()
            seen.append((allowed, index.can_end(cur), index.remaining(cur.node, cur.used)))
            if tok not in allowed:
                return seen, None
            cur = index.step(cur, tok)
        seen.append((index.next_tokens(cur).tolist(), index.can_end(cur), index.remaining(cur.node, cur.used)))
        return seen, cur

    def finish_all(index, facts):
        used: tuple = ()
        for tokens in facts:
            _, cur = walk(index, tokens, used)
            if cur is not None and index.can_end(cur):  # not said already
                used = index.finish(cur)[1].used
        return used

    compared = 0
    for fact_id in rng.sample(range(len(demo_index)), 200):
        tokens = demo_index.fact_tokens(fact_id)
        prefix = tokens[: rng.randrange(0, len(tokens) + 1)]
        said = [demo_index.fact_tokens(i) for i in rng.sample(range(len(demo_index)), 3)] + [tokens]
        for after_said in (False, True):
            used_disk = finish_all(disk, said) if after_said else ()
            used_pg = finish_all(pg, said) if after_said else ()
            on_disk, _ = walk(disk, prefix, used_disk)
            on_pg, _ = walk(pg, prefix, used_pg)
            assert on_disk == on_pg
            compared += len(on_disk)
    assert compared > 1000


@pytest.mark.model
def test_a_fact_costs_few_round_trips(pg_dsn, demo_pg, demo_index):
    """Walking a whole fact from a cold cache (the top of the tree as after opening): one round trip."""
    rng = random.Random(3)
    trips = []
    for fact_id in rng.sample(range(len(demo_index)), 30):
        demo_pg.clear_cache()
        before = demo_pg.round_trips
        cur = demo_pg.root()
        for tok in demo_index.fact_tokens(fact_id):
            demo_pg.next_tokens(cur)
            cur = demo_pg.step(cur, tok)
        assert demo_pg.finish(cur)[0] == fact_id
        trips.append(demo_pg.round_trips - before)
    assert max(trips) <= 1, trips  # the top of the tree is read on opening; below it one prefetch


@pytest.mark.model
def test_constrained_generation_over_postgres_produces_only_kb_facts(smollm, demo_pg):
    from agent.decoding import FactGenerator
    from agent.knowledge.kamel import demo_kamel_root, kamel_questions
    from agent.knowledge.loaders import load_facts

    kb_texts = {f.text for f in load_facts(demo_kamel_root())}
    gen = FactGenerator(smollm.model, smollm.tokenizer, demo_pg, max_new_tokens=40)
    questions = [q.text for q in kamel_questions(demo_kamel_root(), split="dev", limit=4)]
    answers = gen.answer_batch(questions, beams=2)
    spans = [s for a in answers for s in a.facts]
    assert spans, "the model wrote no Fact: line for 4 questions"
    for a in answers:
        ids = [s.id for s in a.facts]
        assert len(ids) == len(set(ids))
        for s in a.facts:
            assert s.text in kb_texts and s.text == demo_pg.facts[s.id].text


@pytest.mark.model
def test_index_for_another_tokenizer_is_refused(demo_pg, pg_dsn):
    with pytest.raises(IndexMismatchError, match="built for smollm2-135m"):
        PostgresFactIndex.open(pg_dsn, "fwtest_demo", tokenizer=word_tokenizer())


def test_matching_tokenizer_is_accepted(pg_dsn):
    from agent.index.tokens import tokenizer_fingerprint

    tok = word_tokenizer()
    facts = [Fact("Paris", "capital of", "France"), Fact("Berlin", "capital of", "Germany")]
    mem = FactIndex.build(facts, tok)
    load_fact_index(pg_dsn, mem, name="fwtest_words")
    with PostgresFactIndex.open(pg_dsn, "fwtest_words", tokenizer=tok) as pg:
        assert pg.fingerprint == tokenizer_fingerprint(tok)
        assert walk_all(mem, pg, pg.root()) == mem.node_count
    assert any(i["name"] == "fwtest_words" and i["facts"] == 2 for i in list_indexes(pg_dsn))


def test_a_server_that_is_down_is_named_in_one_line():
    from agent.index.pg_local import _free_port

    port = _free_port()
    dsn = f"host=127.0.0.1 port={port} user=postgres password=secret dbname=facts connect_timeout=3"
    with pytest.raises(PostgresUnavailableError) as err:
        PostgresFactIndex.open(dsn, "kb")
    message = str(err.value)
    assert "\n" not in message
    assert f"127.0.0.1:{port}/facts" in message and "start it" in message
    assert "secret" not in message
    with pytest.raises(PostgresUnavailableError, match=f"127.0.0.1:{port}/facts"):
        load_fact_index(dsn, token_index(1, n=10), name="kb")


def test_a_missing_index_is_named(pg_dsn):
    with pytest.raises(FactweaveError, match="no fact index named 'nosuch'"):
        PostgresFactIndex.open(pg_dsn, "nosuch")
    with pytest.raises(FactweaveError, match="index name"):
        PostgresFactIndex.open(pg_dsn, "Robert'); DROP TABLE x;--")


def test_a_failed_rebuild_keeps_the_old_index(pg_dsn):
    old = token_index(4, n=500)
    load_fact_index(pg_dsn, old, name="fwtest_swap")
    reader = PostgresFactIndex.open(pg_dsn, "fwtest_swap")
    # PostgreSQL text cannot hold NUL: the COPY of the facts fails half-way through the load.
    bad_facts = [Fact(f"s{i}", "p", "o\x00" if i == 300 else "o", "") for i in range(600)]
    bad = FactIndex.from_token_ids([[i % 5, i // 5 % 7, i] for i in range(600)], bad_facts, "other")
    with pytest.raises(FactweaveError, match="previous index is unchanged"):
        load_fact_index(pg_dsn, bad, name="fwtest_swap")
    with PostgresFactIndex.open(pg_dsn, "fwtest_swap") as again:
        assert (len(again), again.fingerprint) == (len(old), "test")
        assert walk_all(old, again, again.root()) == old.node_count
    reader.clear_cache()
    assert walk_all(old, reader, reader.root()) == old.node_count

    # A rebuild that succeeds replaces it; a reader of the old one is told to reopen, not fed a mix.
    new = token_index(5, n=200)
    load_fact_index(pg_dsn, new, name="fwtest_swap")
    reader.clear_cache(top=False)
    with pytest.raises(FactweaveError, match="rebuilt or dropped"):
        reader.next_tokens(reader.root())
    reader.close()
    with PostgresFactIndex.open(pg_dsn, "fwtest_swap") as fresh:
        assert walk_all(new, fresh, fresh.root()) == new.node_count


def cli(*args: str, cache, check: bool = True):
    """``factweave ARGS`` without a PostgreSQL DSN from the environment (the tests pass their own)."""
    import os

    saved = os.environ.pop("FACTWEAVE_PG_DSN", None)
    try:
        proc = run_cli(*args, cache=cache, timeout=600)
    finally:
        if saved is not None:
            os.environ["FACTWEAVE_PG_DSN"] = saved
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.model
def test_cli_builds_lists_and_opens_a_postgres_index(pg_dsn, cache_dir, smollm, tmp_path):
    kb = tmp_path / "facts.tsv"
    kb.write_text("Zorblax\tinvented by\tMira Quell\nZorblax\tfirst shown in\tLyon\nMira Quell\tplace of birth\tOslo\n")
    out = cli("index", "build", "--kb", str(kb), "--model", "smollm2-135m", "--backend", "postgres",
                  "--dsn", pg_dsn, "--name", "fwtest_cli", cache=cache_dir).stdout
    assert "3 facts" in out and "'fwtest_cli'" in out
    listed = json.loads(cli("index", "list", "--dsn", pg_dsn, "--json", cache=cache_dir).stdout)
    assert {"name": "fwtest_cli", "facts": 3, "model": "smollm2-135m"}.items() <= \
        next(i for i in listed if i["name"] == "fwtest_cli").items()
    with PostgresFactIndex.open(pg_dsn, "fwtest_cli", tokenizer=smollm.tokenizer) as pg:
        assert sorted(f.text for f in pg.facts) == sorted(f.text for f in FactIndex.build(
            [Fact("Zorblax", "invented by", "Mira Quell"), Fact("Zorblax", "first shown in", "Lyon"),
             Fact("Mira Quell", "place of birth", "Oslo")], smollm.tokenizer).facts)


def test_cli_says_which_server_is_down_in_one_line(tmp_path):
    from agent.index.pg_local import _free_port

    port = _free_port()
    proc = cli("index", "list", "--dsn", f"host=127.0.0.1 port={port} dbname=kb connect_timeout=3",
                   cache=tmp_path, check=False)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: PostgreSQL at 127.0.0.1:") and f":{port}/kb" in lines[0]


def test_token_ids_beyond_16_bits(pg_dsn):
    """Qwen's vocabulary (151,936) does not fit uint16: blocks then store int32 tokens."""
    rng = random.Random(9)
    alphabet = [0, 3, 65535, 65536, 151935]
    seqs = [[rng.choice(alphabet) for _ in range(rng.randrange(1, 7))] for _ in range(800)]
    mem = FactIndex.from_token_ids(seqs, [Fact(f"s{i}", "p", "o") for i in range(800)], "qwen-like")
    load_fact_index(pg_dsn, mem, name="fwtest_wide", block_nodes=8)
    with PostgresFactIndex.open(pg_dsn, "fwtest_wide", prefetch_nodes=32) as pg:
        assert pg.info["token_dtype"] == "<i4"
        assert walk_all(mem, pg, pg.root()) == mem.node_count


def test_threads_share_one_index(pg_dsn):
    """Sequences decoded in parallel threads share the pool and the cache, and see the same tree."""
    import threading

    mem = token_index(6)
    load_fact_index(pg_dsn, mem, name="fwtest_threads", block_nodes=8)
    errors: list[BaseException] = []
    with PostgresFactIndex.open(pg_dsn, "fwtest_threads", prefetch_nodes=16, cache_rows=32, pool_size=3) as pg:
        def work(seed: int) -> None:
            rng = random.Random(seed)
            try:
                for fact_id in rng.sample(range(len(mem)), 150):
                    cur = pg.root()
                    for tok in mem.fact_tokens(fact_id):
                        assert_same_at(mem, pg, cur)
                        cur = pg.step(cur, tok)
                    assert pg.finish(cur)[0] == fact_id
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[0]


def test_a_server_that_stops_while_in_use_is_named(pg_dsn):
    from agent.index.pg_local import LocalPostgres

    mem = token_index(8, n=300)
    with LocalPostgres() as own:
        load_fact_index(own.dsn, mem, name="fwtest_gone", block_nodes=4)
        pg = PostgresFactIndex.open(own.dsn, "fwtest_gone", prefetch_nodes=4)
        own.stop()
        pg.clear_cache(top=False)
        with pytest.raises(PostgresUnavailableError, match=f"127.0.0.1:{own.port}/postgres .*start it"):
            pg.next_tokens(pg.root())
        pg.close()


def test_a_restarted_server_is_reconnected_by_the_next_lookup(pg_dsn):
    from agent.index.pg_local import LocalPostgres

    mem = token_index(8, n=300)
    with LocalPostgres() as own:
        load_fact_index(own.dsn, mem, name="fwtest_restart", block_nodes=4)
        pg = PostgresFactIndex.open(own.dsn, "fwtest_restart", prefetch_nodes=4)
        try:
            expected = sorted(pg.next_tokens(pg.root()))
            own.restart()  # every connection the pool holds is now broken
            pg.clear_cache(top=False)
            assert sorted(pg.next_tokens(pg.root())) == expected
            fact = mem.facts[7]
            assert pg.facts[7].text == fact.text
        finally:
            pg.close()


@pytest.mark.model
def test_settings_open_the_kb_tree_from_postgres(pg_dsn, demo_pg, smollm, monkeypatch):
    from agent.runtime import open_generator
    from agent.settings import load_settings

    monkeypatch.setenv("FACTWEAVE_PG_DSN", pg_dsn)
    monkeypatch.setenv("FACTWEAVE_PG_INDEX", "fwtest_demo")
    settings = load_settings()
    assert settings.public()["pg_dsn"] == "***"
    gen = open_generator(loaded=smollm, pg_dsn=settings.pg_dsn.get_secret_value(), pg_index=settings.pg_index)
    try:
        assert isinstance(gen.index, PostgresFactIndex) and gen.index.name == "fwtest_demo"
        assert len(gen.index) == len(demo_pg)
    finally:
        gen.index.close()


def _backends(pg_dsn) -> set[int]:
    """Process ids of the connections open on the test database, other than the one asking."""
    import psycopg

    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                            "AND pid <> pg_backend_pid()").fetchall()
    return {pid for (pid,) in rows}


@pytest.mark.model
def test_closing_the_agent_closes_its_postgres_connections(pg_dsn, demo_pg, smollm, monkeypatch):
    from agent.runtime import open_agent
    from agent.settings import load_settings

    settings = load_settings(model="smollm2-135m", tree="kb", max_tokens=48, pg_dsn=pg_dsn, pg_index="fwtest_demo")
    before = _backends(pg_dsn)
    agent = open_agent(settings, loaded=smollm, progress=False)
    reply = agent.answer("What is the original language of Kalakalappu 2?")
    assert reply.facts and "Tamil" in reply.answer  # answered from the PostgreSQL index
    opened = _backends(pg_dsn) - before  # the agent's own; others may come and go meanwhile
    assert opened
    agent.close()
    deadline = time.monotonic() + 10  # a backend leaves pg_stat_activity just after its client hangs up
    while opened & _backends(pg_dsn) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not opened & _backends(pg_dsn)


@pytest.mark.model
def test_the_ui_answers_from_postgres_and_uploads_overlay_it(pg_dsn, smollm, embedder, tmp_path):
    from agent.knowledge.facts import verbalize
    from agent.settings import load_settings
    from agent.web.web import KnowledgeWeb
    from ui.runtime import AskOptions, UIRuntime

    tower = Fact("Brannock Tower", "architect", "Ilse Varga", source="towers.tsv:1")
    load_fact_index(pg_dsn, FactIndex.build([tower], smollm.tokenizer), name="fwtest_ui",
                    meta={"model": "smollm2-135m"})
    settings = load_settings(model="smollm2-135m", max_tokens=48, pg_dsn=pg_dsn, pg_index="fwtest_ui")
    with KnowledgeWeb.open(tmp_path / "web", embedder=embedder) as web:
        runtime = UIRuntime(settings, loaded=smollm, web=web, progress=False)
        try:
            assert runtime.counts()["index_facts"] == 1  # the KB is the PostgreSQL index, not the demo KB
            upload = tmp_path / "harbours.tsv"
            upload.write_text("Quillon Harbour\tbuilt by\tAsha Merrow\n")
            assert runtime.add_files([upload])["index_added"] == 1
            assert runtime.counts()["index_facts"] == 2
            for question, fact in [("Who was the architect of Brannock Tower?", tower.text),
                                   ("Who built Quillon Harbour?", verbalize("Quillon Harbour", "built by", "Asha Merrow"))]:
                reply = list(runtime.stream(question, AskOptions(tree="kb", beams=1)))[-1]
                assert fact in [f["text"] for f in reply["facts"]], (question, reply["answer"])
        finally:
            runtime.close()
