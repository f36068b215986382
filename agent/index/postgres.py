"""A fact index stored in PostgreSQL, read through the same cursor API as :class:`FactIndex`.

The rows and tables are described in :mod:`.pg_rows`; a build is :mod:`.pg_build`'s.

The rows partition the node ids into contiguous ranges, keyed by their first id ``lo``; the row
of node ``n`` is the last one with ``lo <= n``. Opening reads the top of the tree (the upper
nodes whose subtrees exceed ``prefetch_nodes``; a few hundred rows at 1M facts) in one query.
Below it, the row of an upper node brings every row of its subtree in the same query (one range
scan), and a block is a whole small subtree: a fact whose rows are not cached costs one round
trip. Rows are decoded when first used, and kept in an LRU shared by all sequences and threads.

Usage::

    with PostgresFactIndex.open(dsn, "kb", tokenizer=tokenizer) as index:
        cur = index.step(index.root(), token_id)
"""
from __future__ import annotations

import bisect
import json
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import FactweaveError, IndexMismatchError
from ..extras import require
from ..knowledge.facts import Fact
from .cursor import FactCursor
from .table import COLUMNS
from .pg_rows import (DEFAULT_PREFETCH_NODES, FORMAT, FORMAT_VERSION, REGISTRY, BlockRow, RawRow, UpperRow,
                      check_name)
from .tokens import refuse_other_tokenizer

_START_HINT = ("start it (Debian: `pg_ctlcluster 15 main start` or `sudo systemctl start postgresql`) "
               "or point FACTWEAVE_PG_DSN at a running server")


class PostgresUnavailableError(FactweaveError):
    """The PostgreSQL server cannot be reached (or refused the login)."""


def psycopg_module():
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


def unreachable(dsn: str, exc: Exception) -> PostgresUnavailableError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    reason = first.rsplit("failed: ", 1)[-1].strip()
    return PostgresUnavailableError(f"PostgreSQL at {describe_dsn(dsn)} is not reachable ({reason}); {_START_HINT}")


def connect(dsn: str, **kwargs: Any):
    """A psycopg connection, or :class:`PostgresUnavailableError` in one line."""
    psycopg = psycopg_module()
    try:
        return psycopg.connect(dsn, connect_timeout=kwargs.pop("connect_timeout", 5), **kwargs)
    except psycopg.OperationalError as exc:
        raise unreachable(dsn, exc) from None


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

    Example (not run: needs a PostgreSQL server and a model)::

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
        self.token_dtype = np.dtype(info["token_dtype"])
        self.prefetch_nodes = prefetch_nodes
        self.cache_rows = max(16, cache_rows)
        self._rows: OrderedDict[int, RawRow | UpperRow | BlockRow] = OrderedDict()
        self._starts: list[int] = []
        self._lock = threading.Lock()
        self.round_trips = 0
        self.cache_hits = 0
        s = sql.Identifier(schema)
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS)
        # The row holding the node, and when it is an upper node with a small subtree, every row
        # of that subtree too: one round trip prefetches all a fact's path below it.
        sql_row = sql.SQL(
            "WITH r AS (SELECT lo, hi, subtree_end, leaf_count, fact_id, data FROM {s}.tree "
            "WHERE lo <= %(n)s ORDER BY lo DESC LIMIT 1) "
            "SELECT lo, hi, subtree_end, leaf_count, fact_id, data FROM r UNION ALL "
            "SELECT t.lo, t.hi, t.subtree_end, t.leaf_count, t.fact_id, t.data FROM {s}.tree t, r "
            "WHERE r.subtree_end > r.hi AND r.subtree_end - r.lo <= %(p)s AND t.lo > r.lo AND t.lo < r.subtree_end"
        ).format(s=s)
        sql_top = sql.SQL(
            "SELECT lo, hi, subtree_end, leaf_count, fact_id, data FROM {s}.tree "
            "WHERE subtree_end > hi AND subtree_end - lo > %(p)s ORDER BY subtree_end - lo DESC LIMIT %(k)s"
        ).format(s=s)
        sql_fact = sql.SQL("SELECT {c} FROM {s}.facts WHERE id = %s").format(c=cols, s=s)
        sql_facts = sql.SQL("SELECT {c} FROM {s}.facts WHERE id >= %s AND id < %s ORDER BY id").format(c=cols, s=s)
        self._pool = ConnectionPool(dsn, min_size=1, max_size=max(1, pool_size), open=True, timeout=10,
                                    kwargs={"autocommit": True, "prepare_threshold": 0},
                                    name=f"factweave-{name}")
        try:
            with self._pool.connection() as conn:  # render the statements once, not per query
                self._sql_row, self._sql_top, self._sql_fact, self._sql_facts = (
                    q.as_string(conn) for q in (sql_row, sql_top, sql_fact, sql_facts))
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
        psycopg_module()
        from psycopg import sql

        import psycopg

        check_name(name)
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
            raise unreachable(dsn, exc) from None

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
                raise unreachable(self.dsn, exc) from None
            except PoolTimeout as exc:
                raise unreachable(self.dsn, exc) from None
        raise AssertionError("unreachable")

    def _decode(self, raw: RawRow) -> UpperRow | BlockRow:
        lo, hi, end, leaf, fact, data = raw
        if end > hi:
            return UpperRow.decode(lo, end, leaf, fact, data)
        return BlockRow.decode(lo, hi, leaf, data, self.token_dtype)

    def _preload_top(self) -> None:
        """Read every upper node whose subtree is too big to prefetch whole (the top of the tree,
        shared by all facts; at most half the cache) in one query: from then on, a fact whose
        rows are not cached costs one round trip."""
        rows = self._query(self._sql_top, {"p": self.prefetch_nodes, "k": self.cache_rows // 2})
        with self._lock:
            for row in reversed(rows):  # the biggest subtrees last: the most recently used
                self._remember(RawRow._make((*row[:5], bytes(row[5]))))

    def _remember(self, row: RawRow | UpperRow | BlockRow) -> None:
        if row.lo not in self._rows:
            bisect.insort(self._starts, row.lo)
        self._rows[row.lo] = row
        self._rows.move_to_end(row.lo)

    def _fetch(self, node: int) -> UpperRow | BlockRow:
        # Rows come back raw and are decoded when first used: a prefetched subtree costs its
        # transfer, not the decoding of branches this fact will not take.
        raws = [RawRow._make((*row[:5], bytes(row[5])))
                for row in self._query(self._sql_row, {"n": node, "p": self.prefetch_nodes})]
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

    def _row(self, node: int) -> UpperRow | BlockRow:
        if not 0 <= node < self.node_count:
            raise KeyError(f"node {node} out of range (0..{self.node_count - 1})")
        with self._lock:
            i = bisect.bisect_right(self._starts, node) - 1
            if i >= 0:
                row = self._rows[self._starts[i]]
                if node < row.hi:
                    self._rows.move_to_end(row.lo)
                    self.cache_hits += 1
                    if isinstance(row, RawRow):
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
