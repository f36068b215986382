"""The demo knowledge web: the bundled MuSiQue paragraphs and the demo KB's ``dev`` triples.

The demo questions are the demo KB's ``dev`` questions, so their facts are in the web (found by
retrieval, answered from a per-question tree); questions about the other splits are answered
from the whole KB when the agent's tree is ``both``. Built on first use (about two minutes on
two CPU cores, almost all of it embedding), resumable like any web build.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import write_json
from ..knowledge.kamel import demo_kamel_root
from ..knowledge.loaders import load_facts
from .decompose import SentenceDecomposer
from .documents import read_documents

if TYPE_CHECKING:
    from .web import KnowledgeWeb

DEMO_CORPUS = Path(__file__).resolve().parent.parent / "data" / "demo" / "web" / "corpus.json"
DEMO_SPLITS = ("dev",)
_DONE = "demo-web.json"


def demo_web_ready(folder: Path) -> bool:
    """Whether ``folder`` holds a completely built demo web (one built before chunks were embedded
    is not: building it again embeds them and redoes nothing else)."""
    import json

    try:
        return bool(json.loads((Path(folder) / _DONE).read_text(encoding="utf-8")).get("chunk_vectors"))
    except (OSError, ValueError, AttributeError):
        return False


def build_demo_web(web: KnowledgeWeb, *, progress: bool = True) -> dict[str, Any]:
    """Add the demo corpus and the demo KB's dev triples to ``web`` (what is there is skipped)."""
    reports = {
        "documents": web.add_documents(read_documents([DEMO_CORPUS]), SentenceDecomposer(),
                                       progress=progress).as_dict(),
        "triples": web.add_triples(load_facts(demo_kamel_root(), splits=DEMO_SPLITS),
                                   source="demo KB", progress=progress).as_dict(),
    }
    done = web.folder / _DONE
    write_json(done, {"corpus": DEMO_CORPUS.name, "kb_splits": list(DEMO_SPLITS), "chunk_vectors": True}, indent=None)
    return reports
