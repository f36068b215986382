"""The knowledge one evaluation run gives every method: a knowledge web and a KB fact tree.

- ``kamel``: the web holds the evaluated split's triples (for the bundled demo KB: the demo web,
  which already does); the KB tree is the KAMEL folder's facts (every split), the index
  ``open_generator`` caches.
- ``popqa``: the web holds every question's paragraphs (sentence decomposer) and every gold
  triple; the KB tree is every fact of that web, statements and triples alike.
- ``musique`` / ``hotpotqa``: the web holds the corpus; the KB tree is every fact of the web.

So the constrained-only method (KB tree), web-RAG (web facts in the prompt) and the agent (both)
draw on the same knowledge. A dataset's web is built once into
``<cache>/webs/eval-<dataset>-<key>`` (``key``: a hash of the data files' bytes and the
decomposer), resumably like any web build, and marked complete only at the end; its KB tree is
saved beside it, one file per tokenizer. Eval webs always use the embedded graph server and
local vectors, so two datasets never share one graph database.
"""
from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import write_json
from ..knowledge.kamel import demo_kamel_root
from ..knowledge.loaders import load_facts
from ..web.decompose import SentenceDecomposer
from .datasets import KAMEL_DATASETS, dataset_documents, knowledge_files, popqa_triples

if TYPE_CHECKING:
    from ..index import FactTree
    from ..settings import Settings
    from ..web.web import KnowledgeWeb

_DONE = "eval-web.json"


@dataclass
class EvalKnowledge:
    """A run's knowledge web and KB fact tree; ``close()`` stops the web's graph server.

    Example (not run: needs the data sets, a tokenizer and a graph server)::

        with open_knowledge("popqa", data_path("popqa"), load_settings(), tokenizer) as knowledge:
            knowledge.web.search("What is George Rankin's occupation?").hits
            len(knowledge.kb)            # facts in the KB tree
    """

    web: KnowledgeWeb
    kb: FactTree
    web_folder: Path
    kb_source: str

    def close(self) -> None:
        self.web.close()

    def __enter__(self) -> EvalKnowledge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> dict[str, Any]:
        return {"web": str(self.web_folder), "kb": self.kb_source, "kb_facts": len(self.kb)}


def open_knowledge(dataset: str, path: Path, settings: Settings, tokenizer: Any, *, split: str = "dev",
                   model_name: str = "", progress: bool = True) -> EvalKnowledge:
    """Open (building on first use) the web and KB tree of ``dataset`` read from ``path``."""
    # lazy: agent.index pulls numpy and tqdm (the CLI imports this module at start)
    from ..index.files import open_index

    if dataset == "kamel":
        if Path(path).resolve() == demo_kamel_root().resolve() and split == "dev":
            # lazy: agent.runtime pulls torch (the CLI imports this module at start)
            from ..runtime import open_web

            web = open_web(settings.model_copy(update={"web": None}), progress=progress)
        else:
            web = dataset_web(dataset, path, settings, split=split, progress=progress)
        kb: FactTree
        try:
            kb = open_index(path, tokenizer, settings.cache_dir(), model_name=model_name, progress=progress)
        except BaseException:
            web.close()
            raise
        return EvalKnowledge(web, kb, web.folder, f"KAMEL facts of {path}")
    web = dataset_web(dataset, path, settings, progress=progress)
    try:
        kb = web_fact_index(web, tokenizer, model_name=model_name, progress=progress)
    except BaseException:
        web.close()
        raise
    return EvalKnowledge(web, kb, web.folder, f"every fact of the web {web.folder}")


def web_key(dataset: str, path: Path, split: str = "dev") -> str:
    """A hash of what a dataset's web is built from: the data files' bytes and the decomposer."""
    # lazy: agent.web.web pulls numpy and scipy (the CLI imports this module at start)
    from ..web.web import FORMAT

    digest = hashlib.sha256(json.dumps([dataset, split, SentenceDecomposer.fingerprint, FORMAT]).encode())
    for file in knowledge_files(dataset, Path(path), split):
        # A KAMEL folder's files by their place in it (a relation is its folder's name); a corpus
        # file by its bytes alone, so the same corpus under another name is the same web.
        if dataset in KAMEL_DATASETS:
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        digest.update(str(file.stat().st_size).encode() + b"\0")
        with open(file, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:12]


def dataset_web(dataset: str, path: Path, settings: Settings, *, split: str = "dev",
                progress: bool = True) -> KnowledgeWeb:
    """The knowledge web of ``dataset``: opened from the cache, built (or resumed) when not complete."""
    # lazy: agent.web.web pulls numpy and scipy (the CLI imports this module at start)
    from ..web.web import KnowledgeWeb

    folder = settings.cache_dir() / "webs" / f"eval-{dataset}-{web_key(dataset, path, split)}"
    web = KnowledgeWeb.open(folder, embedder=settings.embedder)
    if _complete(folder / _DONE):
        return web
    try:
        if progress:
            print(f"Building the {dataset} knowledge web in {folder} (first use; resumable)...", file=sys.stderr)
        reports: dict[str, Any] = {}
        if dataset == "kamel":
            reports["triples"] = web.add_triples(load_facts(path, splits=(split,)), source=f"kamel {split}",
                                                 progress=progress).as_dict()
        else:
            documents = dataset_documents(dataset, path)
            reports["documents"] = web.add_documents(documents, SentenceDecomposer(), progress=progress).as_dict()
            if dataset == "popqa":
                reports["triples"] = web.add_triples(popqa_triples(path), source="popqa gold triples",
                                                     progress=progress).as_dict()
        write_json(folder / _DONE, {"dataset": dataset, "data": str(path), "split": split,
                                             "reports": reports, "stats": web.stats()})
    except BaseException:
        web.close()
        raise
    return web


def _complete(done: Path) -> bool:
    """Whether the web's build finished, with its chunks embedded (a web built before chunk
    vectors is built again: that embeds them and redoes nothing else)."""
    try:
        return "chunk_vectors" in json.loads(done.read_text(encoding="utf-8"))["stats"]
    except (OSError, ValueError, KeyError, TypeError):
        return False


def web_fact_index(web: KnowledgeWeb, tokenizer: Any, *, model_name: str = "", progress: bool = True) -> FactTree:
    """The fact tree of every fact of ``web`` for ``tokenizer``, saved beside the web on first use."""
    # lazy: agent.index pulls numpy and tqdm (the CLI imports this module at start)
    from ..index import FactIndex
    from ..index.storage import load_index, save_index
    from ..index.tokens import tokenizer_fingerprint

    path = web.folder / f"kb-{tokenizer_fingerprint(tokenizer)[:12]}.fwi"
    if path.is_file():
        return load_index(path, tokenizer)
    index = FactIndex.build(web.facts(), tokenizer, progress=progress)
    save_index(index, path, meta={"model": model_name, "web": str(web.folder)})
    return index
