"""factweave's chat UI (Gradio): ``factweave ui`` or ``make demo``.

- ``runtime``: the model, web, fact index and chat model every session shares;
- ``render``: answers and traces as HTML (fact spans highlighted, provenance on hover);
- ``proof_graph``: an answer's proof as a picture (entities, stated facts as edges, the chain);
- ``uploads``: uploaded files checked before anything is written;
- ``app``: the Blocks app and its launch; ``cli``: the command.
"""
