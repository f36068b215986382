"""Building a PostgreSQL fact index (rows: :mod:`.pg_rows`): a fresh schema loaded with ``COPY``
and pointed at by the registry in the same transaction, the old schema dropped: a failed build
leaves the old index untouched, and a reader that opened the old one gets a clear error instead of
a mix of both.

Usage::

    report = load_fact_index(dsn, FactIndex.build(facts, tokenizer), name="kb")
"""
from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FactweaveError
from .table import COLUMNS
from .pg_rows import (DEFAULT_BLOCK_NODES, FORMAT, FORMAT_VERSION, REGISTRY, check_name, encode_block, encode_upper,
                      token_dtype_for)
from .postgres import connect, describe_dsn, psycopg_module, unreachable
from .trie import FactIndex

# ---- rows to tables--------------------------------------------------------------------------

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
                   encode_upper(index.edge_tokens[a:b], ends[kids], leaves[kids]))
        else:
            data, t = encode_block(lo, hi, ends, token_in, index.terminal_fact, token_dtype)
            yield lo, hi, hi, t, None, data


def load_fact_index(dsn: str, index: FactIndex, *, name: str = "kb", meta: dict[str, Any] | None = None,
                    block_nodes: int = DEFAULT_BLOCK_NODES) -> PgBuildReport:
    """Store ``index`` in PostgreSQL under ``name``, replacing any index of that name atomically
    (a failure rolls everything back and leaves the old one in place)."""
    psycopg = psycopg_module()
    from psycopg import sql

    check_name(name)
    start = time.perf_counter()
    schema = f"fwi_{name}_{secrets.token_hex(4)}"
    max_token = int(index.edge_tokens.max()) if len(index.edge_tokens) else 0
    token_dtype = token_dtype_for(max_token)
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
            raise unreachable(dsn, exc) from None
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
    psycopg_module()
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
