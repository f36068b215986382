"""A fact index stored in PostgreSQL, read through the same cursor API as :class:`FactIndex`.

The tree is the in-memory one (pre-order node ids, exact leaf counts, explicit ends of facts),
cut into rows. Every node lives in exactly one row, so nothing is merged at read time:

* an *upper* node, one whose subtree has more than ``block_nodes`` nodes, has a row of its own
  (``hi = lo + 1``) holding its subtree end, its fact count, the fact ending at it, and in
  ``data`` its children's tokens, subtree ends and fact counts (one lookup answers
  ``next_tokens`` even with facts already used);
* every other node is in a *block*: a run of consecutive complete small subtrees, at most
  ``block_nodes`` nodes together. ``data`` holds, per node, its subtree end (relative) and the
  token leading to it, and, per node where a fact ends, that fact's id. Children cost nothing:
  in pre-order the first child of ``n`` is ``n + 1`` and each next sibling starts where the
  previous one's subtree ends.

The rows partition the node ids into contiguous ranges, keyed by their first id ``lo``; the row
of node ``n`` is the last one with ``lo <= n``. Opening reads the top of the tree (the upper
nodes whose subtrees exceed ``prefetch_nodes``; a few hundred rows at 1M facts) in one query.
Below it, the row of an upper node brings every row of its subtree in the same query (one range
scan), and a block is a whole small subtree: a fact whose rows are not cached costs one round
trip. Rows are decoded when first used, and kept in an LRU shared by all sequences and threads.

Why not one row per node: facts average ~15 nodes, and a row costs ~60-100 bytes of tuple and
index overhead plus a round trip per token. Blocks of plain little-endian integers (``bytea``;
no pickle, nothing that runs code when read) cost ~5-7 bytes per node.

Tables, in one schema per build (``fwi_<name>_<random>``), named in ``public.factweave_indexes``:

* ``tree(lo bigint primary key, hi, subtree_end, leaf_count, fact_id, data bytea)``
* ``facts(id int primary key, subject, predicate, object, source, statement)``
* ``meta(key text primary key, value text)``: format version, tokenizer fingerprint, counts.

A build loads a fresh schema with ``COPY`` and points the registry at it in the same
transaction, dropping the old schema: a failed build leaves the old index untouched, and a
reader that opened the old one gets a clear error instead of a mix of both.

Usage::

    report = load_fact_index(dsn, FactIndex.build(facts, tokenizer), name="kb")
    with PostgresFactIndex.open(dsn, "kb", tokenizer=tokenizer) as index:
        cur = index.step(index.root(), token_id)
"""
from __future__ import annotations

import bisect
import json
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..errors import FactweaveError, IndexMismatchError
from ..extras import require
from ..knowledge.facts import Fact
from .cursor import FactCursor
from .table import COLUMNS
from .tokens import refuse_other_tokenizer
from .trie import FactIndex

FORMAT = "factweave-pg-index"
FORMAT_VERSION = 1
REGISTRY = "factweave_indexes"
DEFAULT_BLOCK_NODES = 256
DEFAULT_PREFETCH_NODES = 4096
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_START_HINT = ("start it (Debian: `pg_ctlcluster 15 main start` or `sudo systemctl start postgresql`) "
               "or point FACTWEAVE_PG_DSN at a running server")


class PostgresUnavailableError(FactweaveError):
    """The PostgreSQL server cannot be reached (or refused the login)."""


def _psycopg():
    require("postgres", "the PostgreSQL index")
    import psycopg  # lazy: the [postgres] extra

    return psycopg


def describe_dsn(dsn: str) -> str:
    """``host:port/db`` of a connection string, without user or password (for messages)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(dsn)
    except Exception:  # a malformed DSN: say so rather than echo it (it may hold a password)
        return "(unparsable DSN)"
    host = info.get("host") or info.get("hostaddr") or "localhost"
    return f"{host}:{info.get('port') or 5432}/{info.get('dbname') or info.get('user') or 'postgres'}"


# How long a query asked again after a failed connection waits for a fresh one.
_RETRY_WAIT_S = 5.0


def _unreachable(dsn: str, exc: Exception) -> PostgresUnavailableError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    reason = first.rsplit("failed: ", 1)[-1].strip()
    return PostgresUnavailableError(f"PostgreSQL at {describe_dsn(dsn)} is not reachable ({reason}); {_START_HINT}")


def connect(dsn: str, **kwargs: Any):
    """A psycopg connection, or :class:`PostgresUnavailableError` in one line."""
    psycopg = _psycopg()
    try:
        return psycopg.connect(dsn, connect_timeout=kwargs.pop("connect_timeout", 5), **kwargs)
    except psycopg.OperationalError as exc:
        raise _unreachable(dsn, exc) from None


# ---- the row layout -----------------------------------------------------------------------

def _token_dtype(max_token: int) -> np.dtype:
    return np.dtype("<u2") if max_token < 2**16 else np.dtype("<i4")


def _encode_upper(tokens: np.ndarray, ends: np.ndarray, leaves: np.ndarray) -> bytes:
    """Children of an upper node: tokens int32, subtree ends int64, fact counts int64."""
    return (tokens.astype("<i4").tobytes() + ends.astype("<i8").tobytes() + leaves.astype("<i8").tobytes())


def _encode_block(lo: int, hi: int, subtree_end: np.ndarray, token_in: np.ndarray, terminal_fact: np.ndarray,
                  token_dtype: np.dtype) -> tuple[bytes, int]:
    """A block of nodes ``[lo, hi)``: fact ids int32[t], incoming tokens [n], relative subtree
    ends uint16[n], relative positions of the fact ends uint16[t]. Returns the bytes and t."""
    term = terminal_fact[lo:hi]
    where = np.nonzero(term >= 0)[0]
    data = (term[where].astype("<i4").tobytes() + token_in[lo:hi].astype(token_dtype).tobytes()
            + (subtree_end[lo:hi] - lo).astype("<u2").tobytes() + where.astype("<u2").tobytes())
    return data, len(where)


class _Raw(NamedTuple):
    """A row as read, decoded on first use."""

    lo: int
    hi: int
    end: int
    leaf: int
    fact: int | None
    data: bytes


@dataclass
class _Upper:
    lo: int
    end: int
    leaf: int
    fact: int
    tokens: np.ndarray
    children: np.ndarray
    ends: np.ndarray
    leaves: np.ndarray

    @property
    def hi(self) -> int:
        return self.lo + 1

    @classmethod
    def decode(cls, lo: int, end: int, leaf: int, fact: int | None, data: bytes) -> _Upper:
        k = len(data) // 20
        tokens = np.frombuffer(data, "<i4", k, 0)
        ends = np.frombuffer(data, "<i8", k, 4 * k)
        leaves = np.frombuffer(data, "<i8", k, 12 * k)
        children = np.empty(k, np.int64)
        if k:
            children[0] = lo + 1
            children[1:] = ends[:-1]
        return cls(lo, end, leaf, -1 if fact is None else fact, tokens, children, ends, leaves)

    def own(self, node: int) -> tuple[int, int, int]:
        return self.end, self.leaf, self.fact

    def kids(self, node: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.tokens, self.children, self.ends, self.leaves


@dataclass
class _Block:
    lo: int
    hi: int
    ends: np.ndarray  # int64 absolute subtree end per node
    tokens: np.ndarray  # incoming token per node
    facts: np.ndarray  # int32 fact id ending at each node, or -1
    cum: np.ndarray  # int64 [n + 1]: facts ending before each node of the block
    _kids: dict[int, tuple] = field(default_factory=dict)

    @classmethod
    def decode(cls, lo: int, hi: int, t: int, data: bytes, token_dtype: np.dtype) -> _Block:
        n = hi - lo
        fact_ids = np.frombuffer(data, "<i4", t, 0)
        off = 4 * t
        tokens = np.frombuffer(data, token_dtype, n, off).astype(np.int32)
        off += token_dtype.itemsize * n
        ends = np.frombuffer(data, "<u2", n, off).astype(np.int64) + lo
        where = np.frombuffer(data, "<u2", t, off + 2 * n).astype(np.int64)
        facts = np.full(n, -1, np.int32)
        facts[where] = fact_ids
        cum = np.zeros(n + 1, np.int64)
        np.cumsum(facts >= 0, out=cum[1:])
        return cls(lo, hi, ends, tokens, facts, cum)

    def own(self, node: int) -> tuple[int, int, int]:
        i = node - self.lo
        end = int(self.ends[i])
        return end, int(self.cum[end - self.lo] - self.cum[i]), int(self.facts[i])

    def kids(self, node: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        got = self._kids.get(node)
        if got is None:
            lo, ends = self.lo, self.ends
            ids = []
            c, stop = node + 1, int(ends[node - lo])
            while c < stop:
                ids.append(c)
                c = int(ends[c - lo])
            rel = np.asarray(ids, np.int64) - lo
            kid_ends = ends[rel]
            got = (self.tokens[rel], rel + lo, kid_ends, self.cum[kid_ends - lo] - self.cum[rel])
            self._kids[node] = got  # a dict store is atomic: racing threads compute the same value
        return got


# ---- building -----------------------------------------------------------------------------

def partition(index: FactIndex, block_nodes: int = DEFAULT_BLOCK_NODES) -> Iterator[tuple[str, int, int]]:
    """The rows of ``index``: ``("upper", n, n + 1)`` for a node whose subtree exceeds
    ``block_nodes``, else ``("block", lo, hi)`` for a run of consecutive complete subtrees of at
    most ``block_nodes`` nodes together. The ranges cover ``[0, node_count)`` in order."""
    if not 1 <= block_nodes <= 65535:
        raise ValueError("block_nodes must be in 1..65535 (relative ends are stored as uint16)")
    ends = index.subtree_end.astype(np.int64)
    total = len(ends)
    pos = 0
    while pos < total:
        end = int(ends[pos])
        if end - pos > block_nodes:
            yield "upper", pos, pos + 1
            pos += 1
            continue
        hi = end
        while hi < total:
            nxt = int(ends[hi])
            if nxt - pos > block_nodes:
                break
            hi = nxt
        yield "block", pos, hi
        pos = hi


@dataclass(frozen=True)
class PgBuildReport:
    name: str
    schema: str
    facts: int
    nodes: int
    rows: int
    seconds: float
    tree_bytes: int
    facts_bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "schema": self.schema, "facts": self.facts, "nodes": self.nodes,
                "rows": self.rows, "seconds": round(self.seconds, 2), "tree_bytes": self.tree_bytes,
                "facts_bytes": self.facts_bytes}


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise FactweaveError(f"index name {name!r}: use 1-40 lowercase letters, digits or _, starting with a letter")
    return name


def _ensure_registry(cur) -> None:
    from psycopg import sql

    cur.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, schema_name text NOT NULL, "
                        "built_at timestamptz NOT NULL DEFAULT now())").format(sql.Identifier(REGISTRY)))


def _tree_rows(index: FactIndex, block_nodes: int, token_dtype: np.dtype) -> Iterator[tuple]:
    n = index.node_count
    token_in = np.zeros(n, np.int64)
    token_in[index.edge_children] = index.edge_tokens
    ends = index.subtree_end.astype(np.int64)
    leaves = index.leaf_counts.astype(np.int64)
    for kind, lo, hi in partition(index, block_nodes):
        if kind == "upper":
            a, b = index.child_offsets[lo], index.child_offsets[lo + 1]
            kids = index.edge_children[a:b]
            fact = int(index.terminal_fact[lo])
            yield (lo, hi, int(ends[lo]), int(leaves[lo]), fact if fact >= 0 else None,
                   _encode_upper(index.edge_tokens[a:b], ends[kids], leaves[kids]))
        else:
            data, t = _encode_block(lo, hi, ends, token_in, index.terminal_fact, token_dtype)
            yield lo, hi, hi, t, None, data


def load_fact_index(dsn: str, index: FactIndex, *, name: str = "kb", meta: dict[str, Any] | None = None,
                    block_nodes: int = DEFAULT_BLOCK_NODES) -> PgBuildReport:
    """Store ``index`` in PostgreSQL under ``name``, replacing any index of that name atomically
    (a failure rolls everything back and leaves the old one in place)."""
    psycopg = _psycopg()
    from psycopg import sql

    _check_name(name)
    start = time.perf_counter()
    schema = f"fwi_{name}_{secrets.token_hex(4)}"
    max_token = int(index.edge_tokens.max()) if len(index.edge_tokens) else 0
    token_dtype = _token_dtype(max_token)
    info = {"format": FORMAT, "format_version": FORMAT_VERSION, "tokenizer_fingerprint": index.fingerprint,
            "fact_count": len(index), "node_count": index.node_count, "block_nodes": block_nodes,
            "token_dtype": token_dtype.str, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "meta": meta or {}}
    s = sql.Identifier(schema)
    rows = 0
    with connect(dsn) as conn:
        try:
            with conn.transaction(), conn.cursor() as cur:
                _ensure_registry(cur)
                cur.execute(sql.SQL("SELECT pg_advisory_xact_lock(hashtext({}))").format(sql.Literal(REGISTRY + name)))
                cur.execute(sql.SQL("CREATE SCHEMA {}").format(s))
                cur.execute(sql.SQL("CREATE TABLE {}.meta (key text PRIMARY KEY, value text NOT NULL)").format(s))
                cur.execute(sql.SQL("CREATE TABLE {}.tree (lo bigint NOT NULL, hi bigint NOT NULL, "
                                    "subtree_end bigint NOT NULL, leaf_count bigint NOT NULL, fact_id integer, "
                                    "data bytea NOT NULL)").format(s))
                cur.execute(sql.SQL("CREATE TABLE {}.facts (id integer NOT NULL, subject text NOT NULL, "
                                    "predicate text NOT NULL, object text NOT NULL, source text NOT NULL, "
                                    "statement text NOT NULL)").format(s))
                with cur.copy(sql.SQL("COPY {}.tree (lo, hi, subtree_end, leaf_count, fact_id, data) "
                                      "FROM STDIN (FORMAT BINARY)").format(s)) as copy:
                    copy.set_types(["int8", "int8", "int8", "int8", "int4", "bytea"])
                    for row in _tree_rows(index, block_nodes, token_dtype):
                        copy.write_row(row)
                        rows += 1
                with cur.copy(sql.SQL("COPY {}.facts (id, {}) FROM STDIN (FORMAT BINARY)").format(
                        s, sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS))) as copy:
                    copy.set_types(["int4"] + ["text"] * len(COLUMNS))
                    for i, fact in enumerate(index.facts):
                        copy.write_row((i, *(getattr(fact, c) for c in COLUMNS)))
                cur.executemany(sql.SQL("INSERT INTO {}.meta (key, value) VALUES (%s, %s)").format(s),
                                [(k, json.dumps(v, ensure_ascii=False)) for k, v in info.items()])
                # Keys after the load: one sorted index build instead of a b-tree insert per row.
                cur.execute(sql.SQL("ALTER TABLE {}.tree ADD PRIMARY KEY (lo)").format(s))
                cur.execute(sql.SQL("ALTER TABLE {}.facts ADD PRIMARY KEY (id)").format(s))
                # The few upper nodes with big subtrees are read all at once when the index opens.
                cur.execute(sql.SQL("CREATE INDEX tree_upper ON {}.tree ((subtree_end - lo)) "
                                    "WHERE subtree_end > hi").format(s))
                cur.execute(sql.SQL("ANALYZE {}.tree").format(s))
                cur.execute(sql.SQL("SELECT schema_name FROM {} WHERE name = %s FOR UPDATE").format(
                    sql.Identifier(REGISTRY)), (name,))
                old = cur.fetchone()
                cur.execute(sql.SQL("INSERT INTO {} (name, schema_name) VALUES (%s, %s) ON CONFLICT (name) DO UPDATE "
                                    "SET schema_name = EXCLUDED.schema_name, built_at = now()").format(
                    sql.Identifier(REGISTRY)), (name, schema))
                if old:
                    cur.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(old[0])))
                cur.execute(sql.SQL("SELECT pg_total_relation_size({}), pg_total_relation_size({})").format(
                    sql.Literal(f"{schema}.tree"), sql.Literal(f"{schema}.facts")))
                tree_bytes, facts_bytes = cur.fetchone()
        except psycopg.OperationalError as exc:
            raise _unreachable(dsn, exc) from None
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise FactweaveError(f"building PostgreSQL index {name!r} at {describe_dsn(dsn)} failed, "
                                 f"the previous index is unchanged: {first}") from None
    return PgBuildReport(name, schema, len(index), index.node_count, rows, time.perf_counter() - start,
                         int(tree_bytes), int(facts_bytes))


def build_postgres_index(dsn: str, facts, tokenizer: Any, *, name: str = "kb", meta: dict[str, Any] | None = None,
                         block_nodes: int = DEFAULT_BLOCK_NODES, progress: bool = False) -> PgBuildReport:
    """Tokenize ``facts`` (an iterable of :class:`Fact`) for ``tokenizer``, build the tree and store it."""
    index = FactIndex.build(facts, tokenizer, progress=progress)
    return load_fact_index(dsn, index, name=name, meta=meta, block_nodes=block_nodes)


def list_indexes(dsn: str) -> list[dict[str, Any]]:
    """The indexes stored at ``dsn``: name, schema, build time, fact count, tokenizer fingerprint."""
    _psycopg()
    from psycopg import sql

    with connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (REGISTRY,))
        if not cur.fetchone()[0]:
            return []
        cur.execute(sql.SQL("SELECT name, schema_name, built_at FROM {} ORDER BY name").format(sql.Identifier(REGISTRY)))
        out = []
        for name, schema, built in cur.fetchall():
            cur.execute(sql.SQL("SELECT key, value FROM {}.meta").format(sql.Identifier(schema)))
            info = {k: json.loads(v) for k, v in cur.fetchall()}
            out.append({"name": name, "schema": schema, "built_at": built.isoformat(),
                        "facts": info.get("fact_count"), "nodes": info.get("node_count"),
                        "tokenizer_fingerprint": info.get("tokenizer_fingerprint"),
                        "model": info.get("meta", {}).get("model", "")})
        return out


# ---- reading ------------------------------------------------------------------------------

class PostgresFacts:
    """``index.facts[i]``: fact ``i`` read from the ``facts`` table (an LRU cache in front)."""

    def __init__(self, index: PostgresFactIndex, cache_size: int = 4096) -> None:
        self._index = index
        self._cache: OrderedDict[int, Fact] = OrderedDict()
        self._size = cache_size
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, i: int) -> Fact:
        i = int(i)
        if not 0 <= i < len(self):
            raise IndexError(f"fact id {i} out of range (0..{len(self) - 1})")
        with self._lock:
            fact = self._cache.get(i)
            if fact is not None:
                self._cache.move_to_end(i)
                return fact
        rows = self._index._query(self._index._sql_fact, (i,))
        fact = Fact(*rows[0])
        with self._lock:
            self._cache[i] = fact
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return fact

    def __iter__(self) -> Iterator[Fact]:
        step = 10000
        for lo in range(0, len(self), step):
            for row in self._index._query(self._index._sql_facts, (lo, lo + step)):
                yield Fact(*row)


class PostgresFactIndex:
    """A :class:`FactIndex` read from PostgreSQL: the same ``root/next_tokens/can_end/step/finish/
    remaining/child`` API and ``facts[i]``, so :mod:`agent.decoding` uses it unchanged.

    Rows are fetched on demand through a connection pool and kept in an LRU cache shared by all
    sequences and threads (``cache_rows`` rows); a cursor stays the tiny immutable
    :class:`FactCursor`. ``round_trips`` counts the queries sent (for benchmarks).

    Example::

        with PostgresFactIndex.open("host=127.0.0.1 dbname=kb", "kb", tokenizer=tok) as index:
            gen = FactGenerator(model, tok, index)
    """

    def __init__(self, dsn: str, name: str, schema: str, info: dict[str, Any], *, cache_rows: int,
                 prefetch_nodes: int, pool_size: int) -> None:
        from psycopg import sql
        from psycopg_pool import ConnectionPool

        self.dsn, self.name, self.schema, self.info = dsn, name, schema, info
        self.fingerprint: str = info["tokenizer_fingerprint"]
        self._facts_n = int(info["fact_count"])
        self.node_count = int(info["node_count"])
        self._token_dtype = np.dtype(info["token_dtype"])
        self.prefetch_nodes = prefetch_nodes
        self.cache_rows = max(16, cache_rows)
        self._rows: OrderedDict[int, _Raw | _Upper | _Block] = OrderedDict()
        self._starts: list[int] = []
        self._lock = threading.Lock()
        self.round_trips = 0
        self.cache_hits = 0
        s = sql.Identifier(schema)
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS)
        # The row holding the node, and when it is an upper node with a small subtree, every row
        # of that subtree too: one round trip prefetches all a fact's path below it.
        self._sql_row = sql.SQL(
            "WITH r AS (SELECT lo, hi, subtree_end, leaf_count, fact_id, data FROM {s}.tree "
            "WHERE lo <= %(n)s ORDER BY lo DESC LIMIT 1) "
            "SELECT lo, hi, subtree_end, leaf_count, fact_id, data FROM r UNION ALL "
            "SELECT t.lo, t.hi, t.subtree_end, t.leaf_count, t.fact_id, t.data FROM {s}.tree t, r "
            "WHERE r.subtree_end > r.hi AND r.subtree_end - r.lo <= %(p)s AND t.lo > r.lo AND t.lo < r.subtree_end"
        ).format(s=s)
        self._sql_top = sql.SQL(
            "SELECT lo, hi, subtree_end, leaf_count, fact_id, data FROM {s}.tree "
            "WHERE subtree_end > hi AND subtree_end - lo > %(p)s ORDER BY subtree_end - lo DESC LIMIT %(k)s"
        ).format(s=s)
        self._sql_fact = sql.SQL("SELECT {c} FROM {s}.facts WHERE id = %s").format(c=cols, s=s)
        self._sql_facts = sql.SQL("SELECT {c} FROM {s}.facts WHERE id >= %s AND id < %s ORDER BY id").format(c=cols, s=s)
        self._pool = ConnectionPool(dsn, min_size=1, max_size=max(1, pool_size), open=True, timeout=10,
                                    kwargs={"autocommit": True, "prepare_threshold": 0},
                                    name=f"factweave-{name}")
        try:
            with self._pool.connection() as conn:  # render the statements once, not per query
                self._sql_row, self._sql_top, self._sql_fact, self._sql_facts = (
                    q.as_string(conn) for q in (self._sql_row, self._sql_top, self._sql_fact, self._sql_facts))
            self.facts = PostgresFacts(self)
            self._preload_top()
            self._row(0)
        except BaseException:
            self._pool.close()
            raise

    @classmethod
    def open(cls, dsn: str, name: str = "kb", *, tokenizer: Any | None = None, cache_rows: int = 16384,
             prefetch_nodes: int = DEFAULT_PREFETCH_NODES, pool_size: int = 4) -> PostgresFactIndex:
        """Open the index ``name`` at ``dsn``; with ``tokenizer``, refuse one built for another."""
        _psycopg()
        from psycopg import sql

        import psycopg

        _check_name(name)
        where = describe_dsn(dsn)
        with connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
            for attempt in range(3):  # a rebuild may swap the index between reading its name and its meta
                cur.execute("SELECT to_regclass(%s) IS NOT NULL", (REGISTRY,))
                found = cur.fetchone()[0]
                row = None
                if found:
                    cur.execute(sql.SQL("SELECT schema_name FROM {} WHERE name = %s").format(
                        sql.Identifier(REGISTRY)), (name,))
                    row = cur.fetchone()
                if row is None:
                    raise FactweaveError(f"no fact index named {name!r} in PostgreSQL at {where} (build one with "
                                         f"`factweave index build --backend postgres --dsn ... --name {name}`)")
                schema = row[0]
                try:
                    cur.execute(sql.SQL("SELECT key, value FROM {}.meta").format(sql.Identifier(schema)))
                except psycopg.errors.UndefinedTable:
                    if attempt == 2:
                        raise FactweaveError(f"fact index {name!r} at {where} keeps being rebuilt; try again") from None
                    continue
                info = {k: json.loads(v) for k, v in cur.fetchall()}
                break
        if info.get("format") != FORMAT or info.get("format_version") != FORMAT_VERSION:
            raise IndexMismatchError(f"fact index {name!r} at {where} has format {info.get('format')} version "
                                     f"{info.get('format_version')}; this factweave reads version {FORMAT_VERSION}: "
                                     "rebuild it with `factweave index build --backend postgres`")
        if tokenizer is not None:
            refuse_other_tokenizer(f"fact index {name!r} at {where}", info["tokenizer_fingerprint"],
                                   info.get("meta", {}).get("model") or "", tokenizer,
                                   "`factweave index build --backend postgres --model <your model>`")
        from psycopg_pool import PoolTimeout

        try:
            return cls(dsn, name, schema, info, cache_rows=cache_rows, prefetch_nodes=prefetch_nodes,
                       pool_size=pool_size)
        except (psycopg.OperationalError, PoolTimeout) as exc:  # the server went away since the check above
            raise _unreachable(dsn, exc) from None

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> PostgresFactIndex:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- rows -----------------------------------------------------------------------------
    def _query(self, statement, params) -> list[tuple]:
        import psycopg
        from psycopg_pool import PoolTimeout

        self.round_trips += 1
        for attempt in range(2):
            try:
                # The second attempt waits less: a restarted server takes new connections at once.
                with self._pool.connection(timeout=None if attempt == 0 else _RETRY_WAIT_S) as conn:
                    return conn.execute(statement, params, binary=True).fetchall()
            except psycopg.errors.UndefinedTable:
                raise FactweaveError(f"fact index {self.name!r} at {describe_dsn(self.dsn)} was rebuilt or dropped "
                                     "since it was opened; open it again") from None
            except psycopg.OperationalError as exc:
                if attempt == 0:
                    # The server may have restarted: the connections the pool keeps idle are
                    # broken too. Drop those and ask once more on a fresh connection.
                    self._pool.check()
                    continue
                raise _unreachable(self.dsn, exc) from None
            except PoolTimeout as exc:
                raise _unreachable(self.dsn, exc) from None
        raise AssertionError("unreachable")

    def _decode(self, raw: _Raw) -> _Upper | _Block:
        lo, hi, end, leaf, fact, data = raw
        if end > hi:
            return _Upper.decode(lo, end, leaf, fact, data)
        return _Block.decode(lo, hi, leaf, data, self._token_dtype)

    def _preload_top(self) -> None:
        """Read every upper node whose subtree is too big to prefetch whole (the top of the tree,
        shared by all facts; at most half the cache) in one query: from then on, a fact whose
        rows are not cached costs one round trip."""
        rows = self._query(self._sql_top, {"p": self.prefetch_nodes, "k": self.cache_rows // 2})
        with self._lock:
            for row in reversed(rows):  # the biggest subtrees last: the most recently used
                self._remember(_Raw(*row[:5], bytes(row[5])))

    def _remember(self, row: _Raw | _Upper | _Block) -> None:
        if row.lo not in self._rows:
            bisect.insort(self._starts, row.lo)
        self._rows[row.lo] = row
        self._rows.move_to_end(row.lo)

    def _fetch(self, node: int) -> _Upper | _Block:
        # Rows come back raw and are decoded when first used: a prefetched subtree costs its
        # transfer, not the decoding of branches this fact will not take.
        raws = [_Raw(*row[:5], bytes(row[5])) for row in self._query(self._sql_row, {"n": node, "p": self.prefetch_nodes})]
        raw = next((r for r in raws if r.lo <= node < r.hi), None)
        if raw is None:
            raise KeyError(f"node {node} is not in fact index {self.name!r}")
        found = self._decode(raw)
        with self._lock:
            for row in raws:
                self._remember(found if row is raw else row)
            self._rows.move_to_end(found.lo)
            while len(self._rows) > self.cache_rows:
                lo, _ = self._rows.popitem(last=False)
                del self._starts[bisect.bisect_left(self._starts, lo)]
        return found

    def _row(self, node: int) -> _Upper | _Block:
        if not 0 <= node < self.node_count:
            raise KeyError(f"node {node} out of range (0..{self.node_count - 1})")
        with self._lock:
            i = bisect.bisect_right(self._starts, node) - 1
            if i >= 0:
                row = self._rows[self._starts[i]]
                if node < row.hi:
                    self._rows.move_to_end(row.lo)
                    self.cache_hits += 1
                    if isinstance(row, _Raw):
                        row = self._rows[row.lo] = self._decode(row)
                    return row
        return self._fetch(node)

    def clear_cache(self, *, top: bool = True) -> None:
        """Forget every cached row, then (``top``) read the top of the tree again, as on opening."""
        with self._lock:
            self._rows.clear()
            self._starts.clear()
        if top:
            self._preload_top()

    # ---- the FactIndex API ----------------------------------------------------------------
    def __len__(self) -> int:
        return self._facts_n

    def root(self, used: tuple[int, ...] = ()) -> FactCursor:
        """A cursor at the start of a fact; ``used`` are terminal nodes of facts already said."""
        return FactCursor(0, used)

    @staticmethod
    def _spent(node: int, end: int, used: tuple[int, ...]) -> int:
        return sum(1 for t in used if node <= t < end)

    def remaining(self, node: int, used: tuple[int, ...] = ()) -> int:
        """Facts below ``node`` that have not been generated yet."""
        end, leaf, _ = self._row(node).own(node)
        return leaf - self._spent(node, end, used)

    def next_tokens(self, cursor: FactCursor) -> np.ndarray:
        """Token ids that continue at least one fact not generated yet (sorted)."""
        tokens, children, ends, leaves = self._row(cursor.node).kids(cursor.node)
        if not cursor.used or len(children) == 0:
            return tokens
        used = np.asarray(cursor.used, dtype=np.int64)
        spent = ((children[:, None] <= used[None, :]) & (used[None, :] < ends[:, None])).sum(axis=1)
        return tokens[leaves - spent > 0]

    def can_end(self, cursor: FactCursor) -> bool:
        """True when a fact ends here and has not been generated yet."""
        return self._row(cursor.node).own(cursor.node)[2] >= 0 and cursor.node not in cursor.used

    def _child(self, node: int, token: int) -> tuple[int, int, int]:
        tokens, children, ends, leaves = self._row(node).kids(node)
        j = int(np.searchsorted(tokens, token))
        if j < len(tokens) and tokens[j] == token:
            return int(children[j]), int(ends[j]), int(leaves[j])
        return -1, -1, 0

    def child(self, node: int, token: int) -> int:
        """The child of ``node`` along ``token``, or -1."""
        return self._child(node, token)[0]

    def step(self, cursor: FactCursor, token: int) -> FactCursor:
        """Follow ``token``; raises ``KeyError`` when no remaining fact continues with it."""
        node, end, leaf = self._child(cursor.node, token)
        if node < 0 or leaf - self._spent(node, end, cursor.used) == 0:
            raise KeyError(f"token {token} continues no remaining fact at node {cursor.node}")
        return FactCursor(node, cursor.used)

    def finish(self, cursor: FactCursor) -> tuple[int, FactCursor]:
        """End the fact at the cursor: its fact id, and a root cursor that will not produce it again."""
        if not self.can_end(cursor):
            raise KeyError(f"no remaining fact ends at node {cursor.node}")
        fact = self._row(cursor.node).own(cursor.node)[2]
        return fact, FactCursor(0, cursor.used + (cursor.node,))

    def stats(self) -> dict[str, int]:
        return {"round_trips": self.round_trips, "cache_hits": self.cache_hits, "cached_rows": len(self._rows)}
