"""How facts become token ids, and the fingerprint that ties an index to a tokenizer.

A fact is tokenized the way the model will write it: right after ``Fact:``, with its leading
space. We tokenize ``"Fact: " + text`` and drop the tokens of ``"Fact:"`` so that tokenizers
whose pieces depend on the preceding text (SentencePiece's dummy prefix) still agree with what
generation produces. When the prefix does not split cleanly we fall back to ``" " + text``.
"""
from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Sequence
from typing import Any

from ..errors import IndexMismatchError

TRIGGER = "Fact:"
# Bump when the way facts are tokenized changes: old indexes then no longer match.
SCHEME = "fact-after-trigger/1"
_PROBE = "Fact: <Ærøskøbing> <population> <6,012> .\nAnswer: 東京 — naïve café 123"


def fact_token_ids(tokenizer: Any, texts: Sequence[str], batch_size: int = 4096) -> list[list[int]]:
    """Token ids of each fact text as generated after ``Fact:``."""
    prefix = tokenizer(TRIGGER, add_special_tokens=False)["input_ids"]
    out: list[list[int]] = []
    for i in range(0, len(texts), batch_size):
        chunk = texts[i : i + batch_size]
        full = tokenizer([f"{TRIGGER} {t}" for t in chunk], add_special_tokens=False)["input_ids"]
        for text, ids in zip(chunk, full):
            if ids[: len(prefix)] == prefix and len(ids) > len(prefix):
                out.append(list(ids[len(prefix) :]))
            else:
                out.append(list(tokenizer(" " + text, add_special_tokens=False)["input_ids"]))
    return out


_FINGERPRINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A hash of what decides fact token ids: the vocabulary, the special tokens, and how a
    probe text with unicode, digits and the trigger is split. Two tokenizers with the same
    fingerprint tokenize facts the same way.

    Hashing a 150k vocabulary takes ~0.2 s, which would dominate building a per-question tree of
    a few facts, so the result is remembered per tokenizer object (and recomputed if tokens were
    added to it since)."""
    try:
        size, known = _FINGERPRINTS[tokenizer]
        if size == len(tokenizer):
            return known
    except (KeyError, TypeError):
        pass
    fingerprint = _compute_fingerprint(tokenizer)
    try:
        _FINGERPRINTS[tokenizer] = (len(tokenizer), fingerprint)
    except TypeError:  # an object that cannot be weakly referenced: just do not remember it
        pass
    return fingerprint


def refuse_other_tokenizer(where: str, built_fingerprint: str, built_for: str, tokenizer: Any, rebuild: str) -> None:
    """Raise :class:`~agent.errors.IndexMismatchError` when ``tokenizer`` is not the one an index
    at ``where`` was built for (``built_for``: its model's name, when known); ``rebuild`` says how."""
    mine = tokenizer_fingerprint(tokenizer)
    if mine != built_fingerprint:
        raise IndexMismatchError(
            f"{where}: this index was built for {built_for or 'another tokenizer'} (tokenizer "
            f"{built_fingerprint[:12]}), not for the loaded model's tokenizer ({mine[:12]}); rebuild it with {rebuild}")


def _compute_fingerprint(tokenizer: Any) -> str:
    h = hashlib.sha256()
    h.update(SCHEME.encode())
    vocab = tokenizer.get_vocab()
    h.update(json.dumps(sorted(vocab.items(), key=lambda kv: kv[1]), ensure_ascii=False).encode())
    h.update(json.dumps(fact_token_ids(tokenizer, [_PROBE])).encode())
    h.update(json.dumps(tokenizer(_PROBE, add_special_tokens=False)["input_ids"]).encode())
    return h.hexdigest()
