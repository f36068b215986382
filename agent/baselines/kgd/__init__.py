"""Knowledge-Guided Decoding (KGD, Burapacheep, CS224N): nudge each decoding step towards
continuations that the retrieved passages support.

Per question, passages are cut into overlapping character chunks (500 characters, 100 of overlap)
and the top-N chunks are retrieved by dense similarity to the question. At every decoding step,
for each row (batch item or beam), the ``top_m`` tokens by current score are taken, the row's
text generated so far (since the prompt) plus each candidate token is scored for relevance ``r``
against the row's chunks, and ``weight * r`` is added to that token's score; every other token is
left unchanged. Three relevance scores:

- :class:`SimilarityScorer`: ``r = max_c cos(emb(text + candidate), emb(c))`` over the chunks
  ``c``, with the packaged all-MiniLM-L6-v2 (:class:`agent.embeddings.Embedder`) by default.
- :class:`EntailmentScorer`: an NLI judge reads each chunk as premise and ``text + candidate`` as
  hypothesis: ``r = +alpha`` when some chunk entails it, else ``-beta`` when some chunk
  contradicts it, else 0 (paper: alpha=5, beta=10). The judge is a cross-encoder by Hugging Face
  id where one is available (:class:`CrossEncoderJudge`), else the local causal LM with the
  few-shot prompt ``prompts/kgd/nli.txt`` (:class:`LocalLMJudge`).
- :class:`CombinedScorer`: ``r = r_sim + gamma * r_nli`` (gamma=1.5).

Text that is blank after stripping (a first token that is only a space or newline) scores 0:
there is nothing to compare yet.

Baselines, through plain ``generate`` arguments (``kgd_generate(..., scorer=None)`` for none):

- greedy: ``do_sample=False, num_beams=1`` (the default here);
- beam search: ``num_beams=4``;
- contrastive search: ``penalty_alpha=0.6, top_k=4``. In the installed transformers 5.x it is no
  longer built in: ``generate`` fetches it from the Hub (``transformers-community/contrastive-
  search``, with ``trust_remote_code=True``), so offline it fails; :func:`kgd_generate` turns that
  failure into one :class:`~agent.errors.FactweaveError` line, so KGD with contrastive search
  could not be run here. (transformers 4.x's built-in contrastive search applied
  ``logits_processor`` before taking its ``top_k`` candidates; whether the Hub version does was
  not checked.)

Modules: ``retrieval`` (chunks, cached encoder, chunk retriever), ``judges`` (NLI judges),
``scorers`` (similarity, entailment, combined), ``processor`` (the logits processor, generation).

Example (not run: needs a model and an embedding model)::

    from agent.embeddings import Embedder
    from agent.models import load_model

    loaded, embedder = load_model("smollm2-135m"), Embedder()
    retriever = ChunkRetriever(embedder, chunk_passages(passages))
    chunks = retriever.top(question, 3)
    texts = kgd_generate(loaded, [prompt], [chunks], SimilarityScorer(embedder), max_new_tokens=32)
"""
from __future__ import annotations

from .judges import (
    CONTRADICTION,
    ENTAILMENT,
    NEUTRAL,
    NLI_LABELS,
    NLI_PROMPT,
    CrossEncoderJudge,
    LocalLMJudge,
    NLIJudge,
    load_judge,
)
from .processor import BASELINES, KnowledgeGuidedLogitsProcessor, kgd_generate
from .retrieval import (
    CachedEncoder,
    ChunkRetriever,
    as_cached,
    chunk_passages,
    chunk_spans,
)
from .scorers import CombinedScorer, EntailmentScorer, RelevanceScorer, SimilarityScorer

__all__ = [
    "BASELINES", "CONTRADICTION", "CachedEncoder", "ChunkRetriever", "CombinedScorer", "CrossEncoderJudge",
    "ENTAILMENT", "EntailmentScorer", "KnowledgeGuidedLogitsProcessor", "LocalLMJudge", "NEUTRAL", "NLIJudge",
    "NLI_LABELS", "NLI_PROMPT", "RelevanceScorer", "SimilarityScorer", "as_cached", "chunk_passages",
    "chunk_spans", "kgd_generate", "load_judge",
]
