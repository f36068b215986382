"""The fact index: an immutable prefix tree of tokenized facts and a tiny per-sequence cursor."""
from .base import FactTree
from .cursor import FactCursor
from .disk import DiskFactIndex
from .disk_writer import build_disk_index
from .storage import load_index, read_header, save_index
from .trie import FactIndex
from .union import GrowingFactIndex, UnionCursor

__all__ = ["DiskFactIndex", "FactCursor", "FactIndex", "FactTree", "GrowingFactIndex", "UnionCursor", "build_disk_index", "load_index",
           "read_header", "save_index"]
