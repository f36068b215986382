"""The baselines the evaluation compares the agent with: the decoding baselines, retrieval-constrained
decoding (:mod:`.rcd`, the RCD paper) and knowledge-guided decoding (:mod:`.kgd`), and web-RAG's
reader of listed facts (:mod:`.web_rag`). Only ``agent.eval`` imports them; the product never does."""
