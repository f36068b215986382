"""The knowledge web as a LangChain retriever."""
from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from ..web.retrieval import FactHit
from ..web.web import KnowledgeWeb


class KnowledgeWebRetriever(BaseRetriever):
    """:meth:`KnowledgeWeb.search <agent.web.web.KnowledgeWeb.search>` as a LangChain
    ``BaseRetriever``: one ``Document`` per fact, best first.

    ``page_content`` is the fact; ``id`` and ``metadata["id"]`` the web's fact id; the metadata
    also holds the score parts (``score`` = ``cosine`` + weights x ``ppr`` and ``passage`` for the
    graph search, + weight x ``degree`` for the keyword route; see :mod:`agent.web.retrieval`), the matched
    ``keywords``, ``kind`` (``document`` or ``triple``), ``source`` (one line) and
    ``provenance`` (document, chunk and character offsets, or the source triple).

    Example (not run: needs a knowledge web)::

        from agent.web.web import KnowledgeWeb

        with KnowledgeWeb.open("my-web") as web:
            retriever = KnowledgeWebRetriever(web=web, k=5)
            for doc in retriever.invoke("Who founded Zorblax Station?"):
                print(round(doc.metadata["score"], 3), doc.page_content, doc.metadata["source"])

    ``search_kwargs`` go to ``KnowledgeWeb.search`` (``method``, ``keyword_k``, ``min_similarity``,
    ``degree_weight``, ``graph``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    web: KnowledgeWeb = Field(exclude=True)
    k: int = Field(default=10, ge=1)
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [fact_document(hit) for hit in self.web.search(query, self.k, **self.search_kwargs).hits]


def fact_document(hit: FactHit) -> Document:
    """A retrieved fact as a LangChain ``Document``."""
    metadata = {"id": hit.id, "score": hit.score, "cosine": hit.cosine, "ppr": hit.ppr, "passage": hit.passage,
                "lexical": hit.lexical, "degree": hit.degree,
                "keywords": list(hit.keywords), "kind": hit.kind, "source": hit.source,
                "provenance": dict(hit.provenance)}
    return Document(page_content=hit.text, id=hit.id, metadata=metadata)
