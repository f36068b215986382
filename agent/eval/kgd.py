"""Knowledge-guided decoding (``agent.baselines.kgd``) and its baselines as evaluation methods.

Every variant answers with the same short-answer prompt (``prompts/kgd-answer/``) on the same
model; they differ in where the retrieved chunks go and in how the answer is decoded:

| method | chunks in the prompt | decoding |
|---|---|---|
| ``kgd`` | yes | greedy, nudged towards the chunks by similarity (w=2, top-m=4) |
| ``kgd-nli`` | yes | greedy, NLI entailment rewards (+5 / -10): a cross-encoder by id, else the local model |
| ``kgd-guide`` | no | greedy, nudged by similarity: the chunks guide decoding only |
| ``chunks-greedy`` / ``chunks-beam`` | yes | greedy / beam search (4 beams), no guidance |
| ``greedy`` / ``beam`` | no (no chunks at all) | greedy / beam search (4 beams) |

The chunks of a question (:class:`QuestionChunks`): its own passages (PopQA, MuSiQue, HotpotQA
carry them) cut into 500-character chunks with 100 of overlap, the top ``n`` by dense similarity
to the question; a question without passages (KAMEL) reads its top ``k`` facts from the run's
knowledge web as one passage. Contrastive search, the paper's third baseline, cannot run offline
with transformers 5 (it is fetched from the Hub), so it is not offered.

Best-of-n (the KGD paper's metric): with ``samples > 1`` the greedy variants sample ``samples``
answers per question (temperature 0.7, seeded per question so a resumed run draws the same), the
first is the prediction and all are kept in ``extra["samples"]``, which the runner scores as
best-of-n (one of them matches). Beam variants stay deterministic and ignore ``samples``.

Example (not run: needs a model and an embedding model)::

    chunks = QuestionChunks(CachedEncoder(Embedder()))
    method = KGDMethod(loaded, VARIANTS["kgd"], chunks, SimilarityScorer(chunks.encoder), max_new_tokens=24)
    method.answer_batch(questions)[0].prediction
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from string import Template
from typing import TYPE_CHECKING, Any

from ..prompts import FewShotPrompt, read_prompt, render_prompt
from .methods import MethodAnswer
from .questions import EvalQuestion

if TYPE_CHECKING:
    from ..baselines.kgd import CachedEncoder, RelevanceScorer
    from ..models import LoadedModel
    from ..web.web import KnowledgeWeb

PROMPT = "kgd-answer"
TEMPERATURE = 0.7


@dataclass(frozen=True)
class KGDVariant:
    """One row of the table above: ``scorer`` is ``similarity``, ``entailment`` or None (no
    guidance); ``in_prompt``: the chunks are listed in the prompt; ``chunks``: chunks are
    retrieved at all; ``beams``: 1 is greedy (or sampling with best-of-n)."""

    name: str
    scorer: str | None
    in_prompt: bool
    beams: int = 1

    @property
    def chunks(self) -> bool:
        return self.in_prompt or self.scorer is not None


VARIANTS: dict[str, KGDVariant] = {v.name: v for v in (
    KGDVariant("kgd", "similarity", True),
    KGDVariant("kgd-nli", "entailment", True),
    KGDVariant("kgd-guide", "similarity", False),
    KGDVariant("chunks-greedy", None, True),
    KGDVariant("chunks-beam", None, True, beams=4),
    KGDVariant("greedy", None, False),
    KGDVariant("beam", None, False, beams=4),
)}


class QuestionChunks:
    """The top ``n`` chunks for a question: from its own passages (``meta["passages"]``), else
    from its top ``k`` facts in ``web`` (one per line, as one passage). Cached per question id."""

    def __init__(self, encoder: CachedEncoder, web: KnowledgeWeb | None = None, *, n: int = 3, k: int = 10,
                 size: int = 500, overlap: int = 100) -> None:
        self.encoder, self.web, self.n, self.k = encoder, web, n, k
        self.size, self.overlap = size, overlap
        self._cache: dict[str, list[str]] = {}

    def passages(self, question: EvalQuestion) -> list[str]:
        own = [p for p in question.meta.get("passages") or [] if p.strip()]
        if own:
            return own
        if self.web is None:
            return []
        facts = [hit.text for hit in self.web.search(question.text, self.k).hits]
        return ["\n".join(facts)] if facts else []

    def top(self, question: EvalQuestion) -> list[str]:
        if question.id not in self._cache:
            # lazy: pulls torch (the CLI imports this module at start)
            from ..baselines.kgd import ChunkRetriever, chunk_passages

            chunks = chunk_passages(self.passages(question), self.size, self.overlap)
            self._cache[question.id] = ChunkRetriever(self.encoder, chunks).top(question.text, self.n) if chunks else []
        return self._cache[question.id]


def parse_short_answer(text: str) -> str:
    """The answer line of a reply opened with ``Answer:``: its first line, a repeated
    ``Answer:`` dropped."""
    line = text.strip().split("\n", 1)[0].strip()
    if line.lower().startswith("answer:"):
        line = line[len("answer:"):].strip()
    return line


def question_seed(seed: int, question_id: str) -> int:
    """A per-question seed: the same question draws the same samples in any batch or resumed run."""
    return int.from_bytes(hashlib.sha256(f"{seed}\0{question_id}".encode()).digest()[:4], "little")


class KGDMethod:
    """One :class:`KGDVariant` over a loaded model (see the module's table)."""

    def __init__(self, loaded: LoadedModel, variant: KGDVariant, chunks: QuestionChunks | None,
                 scorer: RelevanceScorer | None, *, max_new_tokens: int = 32, samples: int = 1, seed: int = 0,
                 top_m: int = 4, weight: float = 2.0) -> None:
        if variant.chunks and chunks is None:
            raise ValueError(f"{variant.name} needs chunks")
        if variant.scorer is not None and scorer is None:
            raise ValueError(f"{variant.name} needs a {variant.scorer} scorer")
        self.loaded, self.variant, self.chunks, self.scorer = loaded, variant, chunks, scorer
        self.name = variant.name
        self.max_new_tokens, self.seed, self.top_m, self.weight = max_new_tokens, seed, top_m, weight
        self.samples = samples if variant.beams == 1 else 1
        self.batched = self.samples == 1
        self.prompt = FewShotPrompt.load(PROMPT)
        self.passages_template = Template(read_prompt(f"{PROMPT}/passages.txt"))

    def render(self, question: str, chunks: Sequence[str]) -> str:
        """The prompt text: system, examples, the chunks when listed, the question, ``Answer:``."""
        turns: list[dict[str, str]] = []
        if self.variant.in_prompt:
            listed = "\n".join(f"[{i}] {' '.join(c.split())}" for i, c in enumerate(chunks, 1)) or "(none)"
            turns.append({"role": "system", "content": self.passages_template.safe_substitute(passages=listed)})
        turns.append({"role": "user", "content": question})
        return render_prompt(self.loaded.tokenizer, self.prompt, turns) + "Answer:"

    def _generate(self, prompts: list[str], chunk_lists: list[list[str]], **kwargs: Any) -> list[str]:
        # lazy: pulls torch (the CLI imports this module at start)
        from ..baselines.kgd import kgd_generate

        return kgd_generate(self.loaded, prompts, chunk_lists, self.scorer if self.variant.scorer else None,
                            max_new_tokens=self.max_new_tokens, num_beams=self.variant.beams, top_m=self.top_m,
                            weight=self.weight, stop_strings=["\n"], tokenizer=self.loaded.tokenizer, **kwargs)

    def _tokens(self, text: str) -> int:
        return len(self.loaded.tokenizer(text, add_special_tokens=False).input_ids)

    def answer_batch(self, questions: Sequence[EvalQuestion]) -> list[MethodAnswer]:
        chunk_lists = [self.chunks.top(q) if self.variant.chunks and self.chunks else [] for q in questions]
        prompts = [self.render(q.text, c) for q, c in zip(questions, chunk_lists)]
        if self.samples == 1:
            outputs = [[text] for text in self._generate(prompts, chunk_lists)]
        else:
            import torch

            outputs = []
            for question, prompt, chunks in zip(questions, prompts, chunk_lists):
                torch.manual_seed(question_seed(self.seed, question.id))
                outputs.append(self._generate([prompt] * self.samples, [chunks] * self.samples,
                                              do_sample=True, temperature=TEMPERATURE, top_k=0, top_p=1.0))
        answers = []
        for prompt, chunks, texts in zip(prompts, chunk_lists, outputs):
            text = texts[0]
            # Finished: the answer line ended (newline) or the model stopped before the limit.
            finished = "\n" in text or self._tokens(text) < self.max_new_tokens
            extra: dict[str, Any] = {"chunks": chunks}
            if self.samples > 1:
                extra["samples"] = [parse_short_answer(t) for t in texts]
            answers.append(MethodAnswer(parse_short_answer(text), finished, text, [], self._tokens(text),
                                        self._tokens(prompt), extra))
        return answers
