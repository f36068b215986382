"""The fact index: an immutable prefix tree of tokenized facts and a tiny per-sequence cursor."""
from .cursor import FactCursor
from .storage import load_index, read_header, save_index
from .trie import FactIndex

__all__ = ["FactCursor", "FactIndex", "load_index", "read_header", "save_index"]
