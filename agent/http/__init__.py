"""What the local HTTP servers share (the OpenAI-compatible server, vLLM's server under the rule,
the chat UI): who may drive them (:mod:`.origins`) and OpenAI's error body they refuse with
(:mod:`.errors`). Light on purpose: the standard library and :mod:`agent.errors` only, so every
server, the UI included, imports it without the agent or its model."""
