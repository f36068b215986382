"""The knowledge web: documents, atomic facts, keywords, the graph and the vector index."""
