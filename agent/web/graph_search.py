"""Graph search: personalized PageRank over the web's keyword-fact graph, seeded by the question.

HippoRAG 2's recipe (a graph over passages and phrases, searched with personalized PageRank
seeded by the query's matched phrases and nearest passages) on the knowledge web's fact-centric
graph:

1. **Seeds.** The stored keywords nearest the question's keywords (the paper's route, weighted by
   similarity), and the ``dense_k`` facts nearest the question itself (weighted by cosine, their
   total ``dense_weight`` x the keywords' total). A question none of whose keywords is near a
   stored one gets no facts, as with the paper's route.
2. **A bounded subgraph**, fetched in three parameterized queries: the facts of the seed
   keywords; the keywords of those facts and of the dense seeds; the facts of the ``bridges``
   keywords among those that a first walk over this subgraph reaches most.
   A keyword linked to more than ``expand_cap`` facts ("film", "born") is not expanded: each of
   its facts would get under 1/``expand_cap`` of its share anyway, and a common keyword in a large
   web would otherwise fetch everything.
3. **PageRank** with restart to the seeds (``damping`` 0.5 as HippoRAG 2): a fact two steps from
   the question (a bridge entity's fact) gets weight through the keyword it shares with a seed.
4. **Score** of a candidate fact = cos(question, fact) + ``ppr_weight`` x its PageRank (divided by
   the best one's) + ``passage_weight`` x cos(question, the fact's passage: its chunk embedded as
   a whole at build time; a triple is its own passage) + ``lexical_weight`` x the fact's BM25
   match of the question's words among the candidates (``rank_bm25``'s Okapi BM25, divided by
   the best one's): names and numbers an embedding blurs ("Who was born first, X or Y?").

Chosen by measurement on MuSiQue, HotpotQA and 2WikiMultiHopQA (``benchmarks/web_retrieval.py``,
100 questions each, candidates re-scored offline over a grid: PageRank weight 0.4-0.8, passage
weight 0-1, lexical weight 0-0.4). Against the previous score (the passage as the mean cosine of
its candidate facts, no lexical part), the passage embedding raised recall@5 on MuSiQue (0.598 ->
0.622) and HotpotQA (0.785 -> 0.795) and left 2Wiki unchanged; BM25 then raised 2Wiki (0.668 ->
0.688) and HotpotQA (-> 0.810). The weights sit on a plateau (most grid points within 1.5 points).
Chosen on half the questions, the best weights were checked on the other half, both ways: they
gained over the previous score on MuSiQue in both halves (+3.2 and +1.9 points), on HotpotQA and
2Wiki in one (+4.0 / +1.0) and tied in the other. BM25 statistics taken over the candidates alone
scored like statistics over all the questions' candidates together (most of the web), so no
lexical index is kept: the score costs one pass over the 150-200 candidate texts.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import sparse

from ..knowledge.keywords import STOP_WORDS
from .retrieval import FactHit, provenance_of

if TYPE_CHECKING:
    from .web import KnowledgeWeb


@dataclass(frozen=True)
class GraphSearchSettings:
    """The graph search's knobs (defaults: the measured best, see the module's docstring)."""

    dense_k: int = 50
    dense_weight: float = 0.5
    ppr_weight: float = 0.4
    passage_weight: float = 0.5
    lexical_weight: float = 0.4
    damping: float = 0.5
    iterations: int = 30
    expand_cap: int = 100
    bridges: int = 40
    candidates: int = 150


def personalized_pagerank(fact_keywords: Mapping[str, Sequence[str]], keyword_facts: Mapping[str, Sequence[str]],
                          seeds: dict[tuple[str, str], float], damping: float,
                          iterations: int, kind: str = "f") -> dict[str, float]:
    """PageRank with restart to ``seeds`` over a bipartite fact-keyword subgraph.

    ``fact_keywords`` holds the facts whose keywords are known (every keyword of each),
    ``keyword_facts`` the keywords whose facts are known (every fact of each). A walk leaves a
    fact to one of its keywords and a keyword to one of its facts, uniformly; from a node whose
    edges were not fetched it stops (its share is lost, as it would be spread thin). Nodes are
    ``("f", id)`` and ``("k", id)``; returns the score of every node of ``kind`` (``"f"``: facts,
    ``"k"``: keywords) reached, seeds included.
    """
    nodes: dict[tuple[str, str], int] = {}

    def index(node: tuple[str, str]) -> int:
        return nodes.setdefault(node, len(nodes))

    rows, cols, vals = [], [], []
    for source, side, other in ((fact_keywords, "f", "k"), (keyword_facts, "k", "f")):
        for node in sorted(source):
            linked = sorted(set(source[node]))
            if not linked:
                continue
            i = index((side, node))
            for target in linked:
                rows.append(index((other, target)))
                cols.append(i)
                vals.append(1.0 / len(linked))
    for seed in sorted(seeds):
        index(seed)
    size = len(nodes)
    if not size:
        return {}
    walk = sparse.csr_matrix((vals, (rows, cols)), shape=(size, size))  # column-stochastic where known
    restart = np.zeros(size)
    for seed, weight in seeds.items():
        restart[nodes[seed]] += max(weight, 0.0)
    if restart.sum() <= 0:
        return {}
    restart /= restart.sum()
    rank = restart.copy()
    for _ in range(iterations):
        rank = (1 - damping) * restart + damping * (walk @ rank)
    return {node: float(rank[i]) for (which, node), i in nodes.items() if which == kind}


def graph_hits(web: KnowledgeWeb, q_vec: np.ndarray, seed_keywords: dict[str, float],
               names: dict[str, str], settings: GraphSearchSettings, query: str) -> list[FactHit]:
    """Candidate facts for a question, scored as the module docstring says (unsorted).

    ``seed_keywords`` maps the stored keywords the question matched to their similarity; ``names``
    their names (each hit lists the matched keywords it is linked to, and its degree counts them).
    """
    if not seed_keywords:
        # No stored keyword is near the question's: the web holds nothing about what it names
        # ("Who is Qwxvbrt Plimsoll?"); its nearest facts would be unrelated (cosine ~0.4 there,
        # as close as a relevant one can be), so nothing is returned, as by the keyword route.
        return []
    dense = {h.id: h.score for h in web.fact_vectors.query(q_vec, settings.dense_k)} if settings.dense_k else {}
    keyword_facts = web.graph.expand_keywords(sorted(seed_keywords), settings.expand_cap)
    ring = sorted({f for facts in keyword_facts.values() for f in facts} | set(dense))
    fact_keywords = web.graph.keywords_of_facts(ring)
    seeds: dict[tuple[str, str], float] = {("k", kid): sim for kid, sim in seed_keywords.items()}
    positive = {fid: max(score, 0.0) for fid, score in dense.items()}
    total = sum(positive.values())
    if total > 0:
        share = settings.dense_weight * (sum(seed_keywords.values()) or 1.0) / total
        for fid, score in positive.items():
            seeds[("f", fid)] = seeds.get(("f", fid), 0.0) + share * score
    # The bridges: keywords of the facts found so far, not expanded yet; the ones the walk
    # reaches most are expanded (a query per keyword list costs time in proportion to it).
    reach = personalized_pagerank(fact_keywords, keyword_facts, seeds, settings.damping, settings.iterations,
                                  kind="k")
    bridges = sorted((kid for kid in reach if kid not in keyword_facts and kid not in seed_keywords),
                     key=lambda kid: (-reach[kid], kid))[: settings.bridges]
    keyword_facts.update(web.graph.expand_keywords(bridges, settings.expand_cap))
    ppr = personalized_pagerank(fact_keywords, keyword_facts, seeds, settings.damping, settings.iterations)
    if not ppr:
        return []
    best = max(ppr.values()) or 1.0
    chosen = sorted(ppr, key=lambda fid: (-ppr[fid], fid))[: settings.candidates]
    chosen = sorted(set(chosen) | set(dense))
    missing = [fid for fid in chosen if fid not in dense]
    vectors = web.fact_vectors.fetch(missing) if missing else {}
    cosine = {fid: dense[fid] if fid in dense else (float(np.dot(q_vec, vectors[fid])) if fid in vectors else 0.0)
              for fid in chosen}
    rows = web.graph.facts_by_ids(chosen)
    chunks = web.chunk_vectors.fetch(sorted({str(row["chunk_id"]) for row in rows if row.get("chunk_id")}))
    passage = {cid: float(np.dot(q_vec, vec)) for cid, vec in chunks.items()}
    lexical = lexical_scores(query, [row["text"] for row in rows])
    hits = []
    for row, words in zip(rows, lexical):
        fid = row["id"]
        # A fact without a passage vector (a triple) is its own passage.
        context = passage.get(str(row.get("chunk_id") or ""), cosine[fid])
        linked = [kid for kid in fact_keywords.get(fid, ()) if kid in seed_keywords]
        rank = ppr.get(fid, 0.0) / best
        score = (cosine[fid] + settings.ppr_weight * rank + settings.passage_weight * context
                 + settings.lexical_weight * words)
        provenance = provenance_of(row)
        hits.append(FactHit(fid, row["text"], row.get("kind", "document"), round(score, 6), round(cosine[fid], 6),
                            len(linked), sorted(names[kid] for kid in linked), provenance, query,
                            ppr=round(rank, 6), passage=round(context, 6), lexical=round(words, 6)))
    return hits


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.casefold()) if w not in STOP_WORDS]


def lexical_scores(query: str, texts: Sequence[str]) -> list[float]:
    """Okapi BM25 of ``query``'s words in each of ``texts`` (statistics over ``texts`` themselves),
    divided by the best score: 1.0 for the best match, 0.0 for none."""
    from rank_bm25 import BM25Okapi

    words = list(dict.fromkeys(_words(query)))
    if not texts or not words:
        return [0.0] * len(texts)
    scores = BM25Okapi([_words(t) or [""] for t in texts]).get_scores(words)
    best = float(scores.max())
    return [max(float(x), 0.0) / best if best > 0 else 0.0 for x in scores]
