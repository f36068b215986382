"""Fast fact tokenization for big builds: each ``<label>`` is tokenized once and reused.

Rule: a triple's text is ``" <s>" + " <p>" + " <o>" + " ."``. With a byte-level BPE whose
pre-tokenizer always splits before the space of ``" <"`` (GPT-2, SmolLM2, Llama 3, Qwen), the
tokens of the whole are the tokens of those four units laid end to end. Labels repeat a lot
(subjects have many facts, predicates are few, popular objects recur), so a cache of unit tokens
replaces most tokenizer work: 10x the speed of tokenizing whole texts.

The rule is checked, not assumed: on probe facts with awkward edges (punctuation, digits,
unicode, spaces), then on every ``check_every``-th fact of the stream, the composed tokens are
compared with :func:`fact_token_ids` on the full text. A tokenizer that fails the probe is used
on whole texts (exact, slower); one that passes the probe but disagrees later raises, so a wrong
index is never written.

Example (not run: needs a tokenizer)::

    ft = FactTokenizer(tokenizer)
    seqs = ft.encode(facts)        # one tuple of token ids per fact, as generation writes it
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import FactweaveError
from ..knowledge.facts import Fact, clean_label
from .tokens import fact_token_ids

_PROBES = (
    Fact("Paris", "capital of", "France"),
    Fact("Smith Jr.", "date of birth", "(1954)"),
    Fact("\"Quoted\" name!", "a.k.a.", "‹odd› — 東京 café"),
    Fact("3,141.59 km", "area", "12 March 1954"),
    Fact("x", "y", "https://example.org/a?b=1&c=2"),
    Fact("Émile  Zola", "occupation", "writer; novelist"),
    Fact("-", "--", "..."),
    Fact("A", "B", "C'est la vie"),
)


class FactTokenizer:
    """Token ids of facts as generated after ``Fact:``, with a unit cache (see module docs).

    ``cache_size`` bounds the number of cached labels (the cache is emptied when full, which
    keeps memory bounded on any stream). ``exact=True`` always tokenizes whole texts."""

    def __init__(self, tokenizer: Any, *, cache_size: int = 500_000, check_every: int = 997,
                 exact: bool = False) -> None:
        self.tokenizer = tokenizer
        self.cache_size = cache_size
        self.check_every = check_every
        self._units: dict[str, tuple[int, ...]] = {}
        self._seen = 0
        self._end = self._encode_units([" ."])[0]
        self.composed = not exact and all(
            self._compose_one(f) == tuple(t) for f, t in zip(_PROBES, fact_token_ids(tokenizer, [f.text for f in _PROBES]))
        )

    def _encode_units(self, units: Sequence[str]) -> list[tuple[int, ...]]:
        backend = getattr(self.tokenizer, "_tokenizer", None) or getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None and hasattr(backend, "encode_batch"):
            # encode_batch_fast (tokenizers >= 0.21) skips character offsets: 25% faster.
            encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
            return [tuple(e.ids) for e in encode(list(units), add_special_tokens=False)]
        return [tuple(ids) for ids in self.tokenizer(list(units), add_special_tokens=False)["input_ids"]]

    def _compose_one(self, fact: Fact) -> tuple[int, ...]:
        units = [f" <{clean_label(x)}>" for x in (fact.subject, fact.predicate, fact.object)]
        a, b, c = self._encode_units(units)
        return a + b + c + self._end

    def encode(self, facts: Sequence[Fact]) -> list[tuple[int, ...]]:
        """One token-id tuple per fact (same ids as :func:`fact_token_ids` on ``fact.text``)."""
        if not self.composed:
            return [tuple(t) for t in fact_token_ids(self.tokenizer, [f.text for f in facts])]
        units = self._units
        if len(units) > self.cache_size:
            units.clear()
        missing: dict[str, None] = {}
        for f in facts:
            if f.statement:
                continue
            for label in (f.subject, f.predicate, f.object):
                if label not in units:
                    missing[label] = None
        if missing:
            labels = list(missing)
            for label, ids in zip(labels, self._encode_units([f" <{clean_label(x)}>" for x in labels])):
                units[label] = ids
        end = self._end
        out: list[tuple[int, ...]] = []
        statements: list[int] = []
        for i, f in enumerate(facts):
            if f.statement:
                statements.append(i)
                out.append(())
            else:
                out.append(units[f.subject] + units[f.predicate] + units[f.object] + end)
        if statements:
            for i, token_ids in zip(statements, fact_token_ids(self.tokenizer, [facts[i].text for i in statements])):
                out[i] = tuple(token_ids)
        self._check(facts, out)
        return out

    def _check(self, facts: Sequence[Fact], out: list[tuple[int, ...]]) -> None:
        # Every check_every-th fact of the stream is tokenized whole and compared.
        first = (-self._seen) % self.check_every
        picks = list(range(first, len(facts), self.check_every))
        self._seen += len(facts)
        if not picks:
            return
        exact = fact_token_ids(self.tokenizer, [facts[i].text for i in picks])
        for i, ids in zip(picks, exact):
            if tuple(ids) != out[i]:
                raise FactweaveError(
                    f"label-by-label tokenization disagrees with whole-text tokenization on {facts[i].text!r}; "
                    "build with exact tokenization (--exact-tokens)"
                )
