"""The optional parts of factweave and the pip extra that brings each (``pyproject.toml``).

A bare ``pip install factweave`` answers questions from the command line, from Python and as a
LangChain chat model, retriever, Runnable or tool; each other interface asks for its extra. An
entry point that needs one calls :func:`require` first, so a missing extra is one line naming the
``pip install`` that brings it, not an ImportError deep in a traceback.

Example (not run: raises only where the extra is not installed)::

    require("ui", "factweave ui")
    # FactweaveError: factweave ui needs the [ui] extra (gradio is not installed):
    #   pip install 'factweave[ui]'
"""
from __future__ import annotations

from importlib.util import find_spec

from .errors import FactweaveError

# extra -> the top-level modules it installs that the code imports
EXTRAS: dict[str, tuple[str, ...]] = {
    "ui": ("gradio", "networkx"),
    "serve": ("fastapi", "uvicorn"),
    "mcp": ("mcp",),
    "pinecone": ("pinecone",),
    "eval": ("matplotlib",),
    "langchain": ("langchain",),
    "postgres": ("psycopg", "psycopg_pool"),
    "llama": ("llama_cpp",),
}


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here."""
    return [name for name in EXTRAS[extra] if find_spec(name) is None]


def require(extra: str, what: str) -> None:
    """Raise one readable line when ``extra`` is not installed (``what`` needs it)."""
    absent = missing(extra)
    if absent:
        verb = "is" if len(absent) == 1 else "are"
        raise FactweaveError(f"{what} needs the [{extra}] extra ({', '.join(absent)} {verb} not installed): "
                             f"pip install 'factweave[{extra}]'")
