"""The decoding baselines the evaluation compares the agent with: retrieval-constrained decoding
(:mod:`.rcd`, the RCD paper) and knowledge-guided decoding (:mod:`.kgd`). Only ``agent.eval``
imports them; the product never does."""
