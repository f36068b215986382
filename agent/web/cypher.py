"""The knowledge web's Cypher: the labels and relationship types (the only names that ever
appear in Cypher text) and every statement :class:`~agent.web.graph.GraphStore` runs, as
constant strings with ``$parameters``: nothing from a document or a question is ever spliced
into them.

Portability: the statements keep to the subset that Neo4j 5 and ArcadeDB's Bolt plugin (the
embedded default; ArcadeDB 26.10) both run, checked against ArcadeDB here: ``MERGE`` with
``ON CREATE SET``, ``SET n += $map``, ``UNWIND`` over lists of maps, ``WITH count(*)`` to
join two ``UNWIND`` stages, ``IN $list``, ``collect(DISTINCT ...)``, ``properties(n)``,
``ORDER BY`` + ``LIMIT $n``, ``DETACH DELETE`` and
``CREATE CONSTRAINT name IF NOT EXISTS FOR (n:L) REQUIRE n.id IS UNIQUE``. The one statement
that differs by backend is the schema: Neo4j 4.x (and servers where a plain index already
covers ``id``) reject that constraint, so :meth:`GraphStore.ensure_schema` falls back to
``CREATE INDEX name IF NOT EXISTS FOR (n:L) ON (n.id)``. Not used, because ArcadeDB's Bolt
plugin lacks them: ``CREATE DATABASE`` (ArcadeDB answers "only CREATE CONSTRAINT, CREATE
INDEX and CREATE USER"), APOC and vector-index procedures.
"""
from __future__ import annotations

DOCUMENT = "Document"
CHUNK = "Chunk"
FACT = "Fact"
KEYWORD = "Keyword"
HAS_CHUNK = "HAS_CHUNK"
HAS_FACT = "HAS_FACT"
MENTIONS = "MENTIONS"
LABELS = (DOCUMENT, CHUNK, FACT, KEYWORD)

SCHEMA = tuple(
    (
        (
            f"CREATE CONSTRAINT factweave_{label.lower()}_id IF NOT EXISTS "
            f"FOR (n:{label}) REQUIRE n.id IS UNIQUE"
        ),
        f"CREATE INDEX factweave_{label.lower()}_id_index IF NOT EXISTS FOR (n:{label}) ON (n.id)",
    )
    for label in LABELS
)

# Links are written after the facts in the same statement. `WITH count(*)` collapses the
# fact rows to exactly one row (also when there were no facts), so the second UNWIND runs
# once and an empty fact list cannot swallow the links or the chunk.
LINK_KEYWORDS = f"""
WITH count(*) AS facts_written
UNWIND $links AS link
MATCH (f:{FACT} {{id: link.fact_id}})
MERGE (k:{KEYWORD} {{id: link.keyword_id}})
  ON CREATE SET k.name = link.name
MERGE (f)-[:{MENTIONS}]->(k)
RETURN count(*) AS links_written
"""

# The chunk's `done` flag is in $chunk, so it commits with its facts or not at all.
WRITE_CHUNK = f"""
MERGE (d:{DOCUMENT} {{id: $doc.id}})
SET d += $doc
MERGE (c:{CHUNK} {{id: $chunk.id}})
SET c += $chunk
MERGE (d)-[:{HAS_CHUNK}]->(c)
WITH c
UNWIND $facts AS row
MERGE (f:{FACT} {{id: row.id}})
SET f += row
MERGE (c)-[:{HAS_FACT}]->(f)
{LINK_KEYWORDS}"""

WRITE_FACTS = f"""
UNWIND $facts AS row
MERGE (f:{FACT} {{id: row.id}})
SET f += row
{LINK_KEYWORDS}"""

DONE_CHUNKS = f"MATCH (c:{CHUNK}) WHERE c.id IN $ids AND c.done = true RETURN c.id AS id"

CHUNKS_WITH_FACTS = f"MATCH (c:{CHUNK})-[:{HAS_FACT}]->(:{FACT}) WHERE c.id IN $ids RETURN DISTINCT c.id AS id"
CHUNKS_OF_DOCUMENTS = f"MATCH (c:{CHUNK}) WHERE c.doc_id IN $ids RETURN c.id AS id ORDER BY id"

FACTS_FOR_KEYWORDS = f"""
MATCH (k:{KEYWORD})<-[:{MENTIONS}]-(f:{FACT})
WHERE k.id IN $ids
WITH f, collect(DISTINCT k.id) AS matched
RETURN properties(f) AS fact, matched
ORDER BY size(matched) DESC, f.id
"""
FACTS_FOR_KEYWORDS_LIMIT = FACTS_FOR_KEYWORDS + "LIMIT $limit"

# A keyword's facts, only for keywords linked to at most $cap facts (the graph search's bound).
# Each keyword reads at most $probe = $cap + 1 of its links (a LIMIT inside a CALL subquery), so
# a hub keyword linked to most of a large web is never scanned whole: on ArcadeDB, a keyword of
# 60,000 facts took 0.21-0.55 s when every link was collected before the size filter, 0.007-0.04 s
# read this way. (The importing `WITH` form is the one Neo4j 4.x, 5.x and ArcadeDB all accept.)
EXPAND_KEYWORDS = f"""
UNWIND $ids AS id
MATCH (k:{KEYWORD} {{id: id}})
CALL {{
  WITH k
  MATCH (k)<-[:{MENTIONS}]-(f:{FACT})
  RETURN f.id AS fact LIMIT $probe
}}
WITH k, collect(fact) AS facts
WHERE size(facts) <= $cap
RETURN k.id AS keyword, facts
"""

FACTS_BY_IDS = f"MATCH (f:{FACT}) WHERE f.id IN $ids RETURN properties(f) AS fact"

# Keyset pagination (ids are unique and indexed): each page starts after the last id seen, so
# a page costs the same however deep into the graph it is, unlike SKIP.
FACTS_PAGE = f"""
MATCH (f:{FACT})
WHERE f.id > $after
RETURN properties(f) AS fact
ORDER BY f.id
LIMIT $limit
"""

FACTS_OF_DOCUMENTS = f"MATCH (f:{FACT}) WHERE f.doc_id IN $ids RETURN properties(f) AS fact ORDER BY f.id"

KEYWORDS_OF_FACTS = f"""
MATCH (f:{FACT})-[:{MENTIONS}]->(k:{KEYWORD})
WHERE f.id IN $ids
RETURN f.id AS fact, collect(DISTINCT k.id) AS keywords
"""

# Removing a source (agent/web/removal.py): what it holds, then deletions by id, in slices.
DOCUMENTS = f"MATCH (d:{DOCUMENT}) RETURN d.id AS id, d.source AS source, d.title AS title ORDER BY d.id"
FACT_SOURCES_PAGE = f"""
MATCH (f:{FACT})
WHERE f.id > $after
RETURN f.id AS id, f.source AS source, f.doc_id AS doc_id
ORDER BY f.id
LIMIT $limit
"""
FACT_SOURCE_COUNTS = f"MATCH (f:{FACT}) RETURN f.source AS source, count(*) AS n"
LINKED_KEYWORDS = f"""
MATCH (k:{KEYWORD})<-[:{MENTIONS}]-(f:{FACT})
WHERE k.id IN $ids
RETURN DISTINCT k.id AS id
"""
DELETE_BY_ID = {
    label: f"MATCH (n:{label}) WHERE n.id IN $ids DETACH DELETE n RETURN count(*) AS deleted"
    for label in LABELS
}
DELETE_CHUNKS_OF_DOCUMENTS = f"""
MATCH (d:{DOCUMENT})-[:{HAS_CHUNK}]->(c:{CHUNK})
WHERE d.id IN $ids
DETACH DELETE c
RETURN count(*) AS deleted
"""

COUNTS = {
    "documents": f"MATCH (n:{DOCUMENT}) RETURN count(n) AS n",
    "chunks": f"MATCH (n:{CHUNK}) RETURN count(n) AS n",
    "chunks_done": f"MATCH (n:{CHUNK}) WHERE n.done = true RETURN count(n) AS n",
    "facts": f"MATCH (n:{FACT}) RETURN count(n) AS n",
    "keywords": f"MATCH (n:{KEYWORD}) RETURN count(n) AS n",
    "has_chunk": f"MATCH (:{DOCUMENT})-[r:{HAS_CHUNK}]->(:{CHUNK}) RETURN count(r) AS n",
    "has_fact": f"MATCH (:{CHUNK})-[r:{HAS_FACT}]->(:{FACT}) RETURN count(r) AS n",
    "mentions": f"MATCH (:{FACT})-[r:{MENTIONS}]->(:{KEYWORD}) RETURN count(r) AS n",
}

# Deleting in slices keeps each transaction small on a large graph.
CLEAR_SLICE = 10_000
CLEAR = {
    label: f"MATCH (n:{label}) WITH n LIMIT $limit DETACH DELETE n RETURN count(*) AS deleted"
    for label in LABELS
}
