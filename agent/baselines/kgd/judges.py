"""NLI judges for KGD's entailment score: a cross-encoder by Hugging Face id, else the local causal LM
with a few-shot prompt."""
from __future__ import annotations

from collections.abc import Sequence
from string import Template
from typing import Any, Protocol

import numpy as np
import torch

from ...errors import FactweaveError, ModelError
from ...llm.next_token import NextTokenLogits
from ...models import LoadedModel
from ...prompts import read_prompt

ENTAILMENT, CONTRADICTION, NEUTRAL = "entailment", "contradiction", "neutral"
NLI_LABELS = (ENTAILMENT, CONTRADICTION, NEUTRAL)
NLI_PROMPT = "kgd/nli.txt"


class NLIJudge(Protocol):
    """Labels (premise, hypothesis) pairs with one of :data:`NLI_LABELS`."""

    def judge(self, pairs: Sequence[tuple[str, str]]) -> list[str]: ...


class LocalLMJudge:
    """The local causal LM as NLI judge: the few-shot prompt ``prompts/kgd/nli.txt`` (placeholders
    ``$premise``, ``$hypothesis``; it ends with ``Label:``) is scored in one forward pass, and the
    label whose first token (after a space) is most likely to come next wins. The three first
    tokens must differ, which holds for the SmolLM2 and Qwen2.5 tokenizers.

    The prompt's fixed opening (instructions and worked examples, about two thirds of its
    tokens) is run once; its key/value cache is reused for every pair, so a pair costs only its
    own passage and statement.

    Quality depends on the model, and the packaged ones are weak judges. On 12 hand-made pairs
    (5 entailed, 4 contradicted, 3 neutral; ``tests/test_kgd.py`` has some), SmolLM2-135M
    labels 4 right: it answers "contradiction" to every pair, whatever the order of the worked
    examples or a chat template. Qwen2.5-Coder-0.5B labels 7 right and never says "neutral".
    Where a real NLI model is available, use :class:`CrossEncoderJudge`.

    Example (not run: needs a model)::

        judge = LocalLMJudge(load_model("qwen2.5-coder-0.5b"))
        judge.judge([("Zorblax Station was founded by Mira Quell.", "Mira Quell founded it.")])
    """

    def __init__(self, loaded: LoadedModel, *, prompt: str = NLI_PROMPT, batch_size: int = 8,
                 reuse_prefix: bool = True) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise FactweaveError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        self.template = Template(read_prompt(prompt))
        self.batch_size = batch_size
        self.next_token = NextTokenLogits(loaded, batch_size=batch_size)
        self.label_ids = self._label_ids()
        self.prefix = self._shared_prefix() if reuse_prefix else ""

    def _label_ids(self) -> list[int]:
        ids = [self.tokenizer(" " + label, add_special_tokens=False)["input_ids"][0] for label in NLI_LABELS]
        if len(set(ids)) < len(ids):
            raise ModelError("this tokenizer starts two NLI labels with the same token; use a cross-encoder judge")
        return ids

    def render(self, premise: str, hypothesis: str) -> str:
        """The prompt that asks for the label of one pair."""
        return self.template.substitute(premise=" ".join(premise.split()), hypothesis=" ".join(hypothesis.split()))

    def _shared_prefix(self) -> str:
        """The prompt up to the line of its first placeholder (without the whitespace before that
        line, which tokenizers merge with what follows), when it tokenizes the same alone as
        inside a whole prompt, so that its cache can stand in for it; else ``""``."""
        probe = self.render("\ue000", "\ue001")
        line = probe.rfind("\n", 0, min(probe.index("\ue000"), probe.index("\ue001"))) + 1
        prefix = probe[: len(probe[:line].rstrip())]
        return prefix if self.next_token.prefix_fits(prefix, self.render("A passage.", "A statement.")) else ""

    def label_logprobs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """``(len(pairs), 3)`` log-probabilities of the labels' first tokens, in
        :data:`NLI_LABELS` order."""
        if not pairs:
            return np.zeros((0, len(NLI_LABELS)), dtype=np.float32)
        logits = self.next_token.logits([self.render(p, h) for p, h in pairs], self.prefix)
        return torch.log_softmax(logits, dim=-1)[:, self.label_ids].cpu().numpy()

    def judge(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        if not pairs:
            return []
        return [NLI_LABELS[i] for i in self.label_logprobs(pairs).argmax(axis=1)]


class CrossEncoderJudge:
    """A sentence-transformers NLI cross-encoder (e.g. ``cross-encoder/nli-deberta-v3-small``),
    by Hugging Face id or local folder; its labels are read from the model's ``id2label``.
    Nothing ships one offline: an id loads from the local Hugging Face cache, and the hub is
    asked only when ``HF_HUB_OFFLINE`` is not set.

    Example (not run: needs a cross-encoder model)::

        judge = CrossEncoderJudge("cross-encoder/nli-deberta-v3-small")
        judge.judge([("A man eats.", "Someone eats.")])   # ["entailment"]
    """

    def __init__(self, model: str, *, device: str | None = None, batch_size: int = 32) -> None:
        import os

        from sentence_transformers import CrossEncoder

        if not isinstance(model, str) or not model.strip():
            raise FactweaveError(f"cross-encoder must be a Hugging Face id or folder, got {model!r}")
        self.batch_size = batch_size
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        try:
            self.model = CrossEncoder(model, device=device, local_files_only=offline)
        except Exception as error:  # noqa: BLE001 - any failure becomes one readable line
            text = " ".join(str(error).split())[:200] or type(error).__name__
            raise ModelError(f"cannot load cross-encoder {model!r} ({text})") from None
        self.columns = _label_columns(self.model.config.id2label, model)

    def judge(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        if not pairs:
            return []
        logits = np.asarray(self.model.predict([tuple(p) for p in pairs], batch_size=self.batch_size,
                                               show_progress_bar=False, convert_to_numpy=True))
        return [NLI_LABELS[i] for i in logits[:, self.columns].argmax(axis=1)]


def _label_columns(id2label: dict[Any, str], name: str) -> list[int]:
    """The model's output column of each of :data:`NLI_LABELS` (names matched by prefix)."""
    columns = {}
    for column, label in id2label.items():
        for ours in NLI_LABELS:
            if str(label).strip().lower().startswith(ours[:6]):
                columns[ours] = int(column)
    missing = [label for label in NLI_LABELS if label not in columns]
    if missing:
        raise ModelError(f"cross-encoder {name!r} has no {'/'.join(missing)} label (labels: {dict(id2label)})")
    return [columns[label] for label in NLI_LABELS]


def load_judge(cross_encoder: str | None, loaded: LoadedModel | None = None) -> NLIJudge:
    """A :class:`CrossEncoderJudge` when a model id or folder is given, else the local LM's
    :class:`LocalLMJudge`."""
    if cross_encoder:
        return CrossEncoderJudge(cross_encoder)
    if loaded is None:
        raise FactweaveError("an NLI judge needs a cross-encoder id or the local model")
    return LocalLMJudge(loaded)
