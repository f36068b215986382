"""factweave: answers built from facts that exist in a knowledge base, with proof."""

__version__ = "0.1.0"
