"""Decomposing chunks of text into atomic, self-contained facts.

Two decomposers share one interface (``decompose(title, document_text, chunk) -> list[AtomicFact]``):

- :class:`LLMDecomposer` asks a chat model (the local model, or any OpenAI-compatible endpoint)
  with the prompts in ``prompts/web/decompose/`` to rewrite the chunk as one short sentence per fact, with
  references resolved. This is the method of the knowledge-web paper, and the default.
- :class:`SentenceDecomposer` takes each sentence as a fact and replaces a leading pronoun by the
  document's title. No model, hundreds of times faster; the facts are longer and less
  self-contained. For large corpora on a CPU, and for tests of everything around decomposition.

Every fact keeps offsets into the document text: the sentence it came from (for model-written
facts, the sentence sharing the most words with it), so a fact can always be traced to its words.

:class:`DecompositionCache` records each chunk's facts in an append-only JSON Lines file, keyed by
the decomposer's fingerprint and the chunk's text. A build that was interrupted does not ask the
model again for the chunks it had already decomposed, and the bundled demo ships its cache so the
demo starts without hours of CPU decoding.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Protocol

from ..knowledge.keywords import STOP_WORDS
from ..llm.client import OpenAIChat
from ..prompts import read_prompt
from .documents import Chunk, sentence_spans, stable_id

if TYPE_CHECKING:
    from ..llm.client import ChatClient


@dataclass(frozen=True)
class AtomicFact:
    """A fact's text and the ``[start, end)`` characters of the document it was taken from."""

    text: str
    start: int
    end: int


class Decomposer(Protocol):
    """``decompose`` may be called from several threads at once when ``concurrency`` (optional,
    default 1) is above 1: that many chunks are decomposed at a time."""

    fingerprint: str

    def decompose(self, title: str, text: str, chunk: Chunk) -> list[AtomicFact]: ...


_LEADING_REFERENCE = re.compile(r"^(He|She|It|They|His|Her|Its|Their)\b")
_POSSESSIVE = {"His", "Her", "Its", "Their"}


class SentenceDecomposer:
    """One fact per sentence; a leading pronoun becomes the document title ("She was" -> "Ada
    Lovelace was", "Its" -> "Ada Lovelace's")."""

    # v2: initials and abbreviations do not end sentences; v3: a blank line ends one, headings are not facts
    fingerprint = "sentences-v3"

    def __init__(self, min_chars: int = 12) -> None:
        self.min_chars = min_chars

    def decompose(self, title: str, text: str, chunk: Chunk) -> list[AtomicFact]:
        facts = []
        for start, end in sentence_spans(text, chunk.start, chunk.end):
            sentence = " ".join(text[start:end].split())
            if len(sentence) < self.min_chars or _HEADING.match(sentence):
                continue
            facts.append(AtomicFact(resolve_leading_pronoun(sentence, title), start, end))
        return facts


def resolve_leading_pronoun(sentence: str, title: str) -> str:
    """``sentence`` with a leading "He/She/It/They" (or "His/Her/Its/Their") replaced by
    ``title`` (or ``title's``): the commonest reference that makes a sentence depend on its
    document."""
    match = _LEADING_REFERENCE.match(sentence)
    if not match or not title:
        return sentence
    name = f"{title}'s" if match.group(1) in _POSSESSIVE else title
    return name + sentence[match.end():]


_HEADING = re.compile(r"#{1,6}\s")  # a Markdown heading line
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def parse_fact_lines(reply: str, limit: int = 40) -> list[str]:
    """The facts of a model's reply: bulleted or numbered lines, deduplicated, in order.

    Lines that are not list items (a preamble, an echo of the title) are dropped, and so is a
    list item without a verb-sized body (fewer than three words).
    """
    facts: list[str] = []
    seen: set[str] = set()
    for line in reply.splitlines():
        match = _BULLET.match(line)
        if not match:
            continue
        fact = " ".join(match.group(1).split())
        if len(fact.split()) < 3:
            continue
        if fact[-1] not in ".!?\"')":
            fact += "."
        key = fact.casefold()
        if key not in seen:
            seen.add(key)
            facts.append(fact)
        if len(facts) >= limit:
            break
    return facts


def _content_words(text: str) -> set[str]:
    return {w for w in (m.casefold() for m in _WORD.findall(text)) if w not in STOP_WORDS}


def best_sentence(fact: str, sentences: list[tuple[int, int]], text: str) -> tuple[int, int]:
    """The sentence span of ``text`` sharing the most content words with ``fact``."""
    words = _content_words(fact)
    best, best_overlap = sentences[0], -1.0
    for span in sentences:
        other = _content_words(text[span[0]:span[1]])
        overlap = len(words & other) / (len(words | other) or 1)
        if overlap > best_overlap:
            best, best_overlap = span, overlap
    return best


#: Requests the LLM decomposer keeps in flight to an OpenAI-compatible endpoint.
DEFAULT_CONCURRENCY = 4


class LLMDecomposer:
    """Atomic facts written by a chat model from the prompts in ``prompts/web/decompose/``.

    The worked example is sent as an earlier user/assistant turn rather than inside the
    instructions: small models copy an example that sits in the same message. Facts whose content
    words are mostly absent from the chunk are dropped (a model echoing its example, or adding
    what it knows), and a leading pronoun left by the model is resolved like
    :class:`SentenceDecomposer` does.

    ``concurrency``: how many chunks are sent at a time. An endpoint serves requests in parallel
    (an API, vLLM), so the default is :data:`DEFAULT_CONCURRENCY` for an OpenAI-compatible
    client; a local model shares this machine's cores with everything else, so 1 there.
    """

    prompt_folder = "web/decompose"

    def __init__(self, client: ChatClient, max_tokens: int = 320, min_support: float = 0.6,
                 concurrency: int | None = None) -> None:
        if concurrency is None:
            concurrency = DEFAULT_CONCURRENCY if isinstance(client, OpenAIChat) else 1
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be a positive integer, got {concurrency!r}")
        self.concurrency = concurrency
        self.client = client
        self.max_tokens = max_tokens
        self.min_support = min_support
        parts = [read_prompt(f"{self.prompt_folder}/{name}.txt")
                 for name in ("system", "example-passage", "example-facts", "user")]
        self.system, self.example_passage, self.example_facts = parts[:3]
        self.user = Template(parts[3])
        self.fingerprint = f"llm-v1:{client.name}:{stable_id('prompt', *parts)}"

    def messages(self, title: str, passage: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.example_passage},
            {"role": "assistant", "content": self.example_facts},
            {"role": "user", "content": self.user.safe_substitute(title=title, text=passage)},
        ]

    def decompose(self, title: str, text: str, chunk: Chunk) -> list[AtomicFact]:
        passage = " ".join(chunk.text.split())
        reply = self.client.complete(self.messages(title, passage), max_tokens=self.max_tokens)
        sentences = sentence_spans(text, chunk.start, chunk.end) or [(chunk.start, chunk.end)]
        chunk_words = _content_words(passage) | _content_words(title)
        facts = []
        for fact in parse_fact_lines(reply):
            words = _content_words(fact)
            if not words or len(words & chunk_words) / len(words) < self.min_support:
                continue
            facts.append(AtomicFact(resolve_leading_pronoun(fact, title), *best_sentence(fact, sentences, text)))
        return facts


class DecompositionCache:
    """Append-only record of decomposed chunks: ``{"key", "facts": [[text, start, end], ...]}``.

    Each entry is written with one ``write`` of a whole line and flushed, so a crash leaves at
    most one truncated last line, which is ignored when the file is read back.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, list[AtomicFact]] = {}
        if path.exists():
            with path.open(encoding="utf-8") as stream:
                for line in stream:
                    try:
                        entry = json.loads(line)
                        facts = [AtomicFact(t, int(s), int(e)) for t, s, e in entry["facts"]]
                    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                        continue  # a line cut short by an interrupted build
                    self._entries[entry["key"]] = facts

    @staticmethod
    def key(decomposer: Decomposer, chunk: Chunk) -> str:
        # The chunk id pins the document and offsets the cached facts point into.
        return stable_id("decomposition", decomposer.fingerprint, chunk.id, chunk.text)

    def get(self, key: str) -> list[AtomicFact] | None:
        return self._entries.get(key)

    def put(self, key: str, facts: list[AtomicFact]) -> None:
        line = json.dumps({"key": key, "facts": [[f.text, f.start, f.end] for f in facts]},
                          ensure_ascii=False)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as stream:
            if stream.tell() and not self._ends_with_newline():
                stream.write("\n")  # after a truncated line, start a fresh one
            stream.write(line + "\n")
            stream.flush()
            os.fsync(stream.fileno())
        self._entries[key] = facts

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as stream:
            stream.seek(-1, os.SEEK_END)
            return stream.read(1) == b"\n"

    def __len__(self) -> int:
        return len(self._entries)


def decompose_cached(decomposer: Decomposer, cache: DecompositionCache | None, title: str, text: str,
                     chunk: Chunk) -> list[AtomicFact]:
    """``decomposer``'s facts for ``chunk``, from ``cache`` when it has them."""
    if cache is None:
        return decomposer.decompose(title, text, chunk)
    key = DecompositionCache.key(decomposer, chunk)
    facts = cache.get(key)
    if facts is None:
        facts = decomposer.decompose(title, text, chunk)
        cache.put(key, facts)
    return facts


def decompose_many(decomposer: Decomposer, cache: DecompositionCache | None,
                   work: Sequence[tuple[str, str, Chunk]]) -> list[list[AtomicFact]]:
    """:func:`decompose_cached` for each ``(title, document text, chunk)`` of ``work``, in order.

    Chunks not in the cache go to ``decomposer`` up to its ``concurrency`` at a time; each is
    cached as soon as its facts are in, so when one fails the others already answered are kept
    and a resumed build asks only for what is missing. The first failure is raised once the
    requests in flight have ended (those not yet sent are not sent).
    """
    keys = [DecompositionCache.key(decomposer, chunk) if cache is not None else "" for _, _, chunk in work]
    found = [cache.get(key) if cache is not None else None for key in keys]
    missing = [i for i, facts in enumerate(found) if facts is None]
    workers = min(int(getattr(decomposer, "concurrency", 1) or 1), len(missing))
    if workers <= 1:
        for i in missing:
            found[i] = decompose_cached(decomposer, cache, *work[i])
        return found  # type: ignore[return-value]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="decompose") as pool:
        futures = {pool.submit(decomposer.decompose, *work[i]): i for i in missing}
        pending = set(futures)
        error: BaseException | None = None
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for future in done:
                if future.cancelled():
                    continue
                if future.exception() is not None:
                    error = error or future.exception()
                    continue
                i = futures[future]
                facts = future.result()
                found[i] = facts
                if cache is not None:
                    cache.put(keys[i], facts)
            if error is not None:
                for future in pending:
                    future.cancel()
        if error is not None:
            raise error
    return found  # type: ignore[return-value]
