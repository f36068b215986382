"""The local model reading which relations a question asks, among the knowledge's own labels.

Two readers share one way of running the model (a few examples whose key/value cache is kept,
then the question on it), and a third reads two short sentences:

- :class:`RelationReader` scores given labels as the one relation a question asks;
- :class:`PathReader` writes the chain of relations a question follows from the thing it names
  to what it asks ("Who is the father-in-law of X?" -> ``spouse > father``), decoding constrained
  to the knowledge's labels (a prefix tree of their tokens, ReFactX's own tool applied to the
  relations: every step it writes is a label, the steps joined by " > "). Compositions of kinship
  and roles follow from the relations the model knows, not from a list of words;
- :class:`KindReader` reads whether a role is a kind of the noun a question asks for ("What city
  is the capital of X?") or something that has one ("What nationality is the director of X?").

Sentence embeddings read a question's relation well where its words are the label's ("What is
the voice type of X?") and badly where a few words decide ("Where did X die?" embeds closer to
``date of death`` than to ``place of death``; "What country is X located in?" closer to
``located in/on physical feature`` than to ``country``). The model reads those: after a few
examples written for this project (``prompts/check/relation.txt``, other wordings than any
set's), each candidate label is scored by the mean log-probability of its tokens as the
relation the question asks; the best scored is the model's reading. It prefers general labels
(``languages spoken, written or signed`` over ``writing language``), so it is a second reader
beside the embeddings (:class:`~agent.pipeline.relations.RelationMatcher`), not a replacement.

The examples' part of the prompt is read once and its key/value cache kept; the question and the
candidates' own tokens in one batch on transformers (on llama.cpp, stepping one sequence, each
candidate read the examples again: 0.7 s a label, against well under 0.1 s here).

Example (not run: needs a model)::

    loaded = load_model("qwen2.5-coder-0.5b")
    reader = RelationReader(loaded.model, loaded.tokenizer)
    reader.best("Where did X die?", ["date of death", "place of death", "place of burial"])
    # "place of death"
    paths = PathReader(loaded.model, loaded.tokenizer, ["spouse", "father", "mother", "place of birth"])
    paths.read("Who is the father-in-law of X?")
    # ("spouse", "father")
"""
from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable, Sequence
from string import Template
from typing import Any, NamedTuple

import torch

from ..models import cache_keyword
from ..prompts import read_prompt
from .plan import masked_question

RELATION_PROMPT = "check/relation.txt"
PATH_PROMPT = "plan/path.txt"
KIND_PROMPT = "check/kind.txt"
PLACE_PROMPT = "check/place.txt"
# The longest chain a path may be (steps); a question naming more relations is read to this many.
MAX_STEPS = 3


def _causal_lm(model: Any) -> bool:
    """Whether ``model`` is a transformers causal LM (its decoder and output layer reachable)."""
    return hasattr(model, "get_decoder") and hasattr(model, "get_output_embeddings")


class _ExamplesReader:
    """A prompt of examples, then a question: the examples tokenized and run once (their
    key/value cache kept), the question read on a copy of it."""

    def __init__(self, model: Any, tokenizer: Any, prompt: str) -> None:
        self.model, self.tokenizer = model, tokenizer
        whole = Template(read_prompt(prompt)).substitute(question="\ue000")
        self._prefix, self._middle = whole.split("\ue000")
        self._lock = threading.Lock()  # one reading at a time (the kept cache)
        self._head_ids: list[int] | None = None
        self._cache: tuple[list[int], Any] | None = None  # the examples' tokens, their key/value cache
        self._key = cache_keyword(model)
        self._device = getattr(model, "device", torch.device("cpu"))

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _split(self, question: str) -> tuple[list[int], list[int]]:
        """The examples' tokens (tokenized once) and the question's after them."""
        if self._head_ids is None:
            self._head_ids = self._ids(self._prefix)
        head, whole = self._head_ids, self._ids(self._prefix + " ".join(question.split()) + self._middle)
        if whole[: len(head)] != head:  # the question's first word joined the examples' last token
            head = []
        return head, whole[len(head):]

    def _run(self, ids: list[int], cache: Any) -> tuple[torch.Tensor, Any]:
        """The last position's hidden state after ``ids`` on ``cache`` (None: from the start)."""
        out = self.model.get_decoder()(input_ids=torch.tensor([ids], device=self._device), use_cache=True,
                                       **({self._key: cache} if cache is not None else {}))
        return out.last_hidden_state[0, -1], getattr(out, "cache", None) or out.past_key_values

    def _read(self, head: list[int], asked: list[int]) -> tuple[torch.Tensor, Any]:
        """The question read on the examples' kept cache: its last hidden state and the cache."""
        if head and (self._cache is None or self._cache[0] != head):
            self._cache = (head, self._run(head, None)[1])
        return self._run(asked, copy.deepcopy(self._cache[1]) if head and self._cache is not None else None)

    def _next_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.get_output_embeddings()(hidden).float().cpu()

    @classmethod
    def of(cls, model: Any, tokenizer: Any, *args: Any) -> Any:
        """A reader on ``model`` when it is a transformers causal LM, else None."""
        return cls(model, tokenizer, *args) if _causal_lm(model) else None


class RelationReader(_ExamplesReader):
    """``scores(question, labels)``: the mean log-probability of each label's tokens as the
    relation ``question`` asks (its names put as "X"); ``best(...)``: the highest scored."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        super().__init__(model, tokenizer, RELATION_PROMPT)

    def scores(self, question: str, labels: Sequence[str]) -> list[float]:
        if not labels:
            return []
        head, asked = self._split(question)
        tails = [self._ids(" " + label) for label in labels]
        with self._lock:
            rows = self._logits(head, asked, tails)
        out = []
        for tail, logits in zip(tails, rows):
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            out.append(float(sum(logprobs[i, t] for i, t in enumerate(tail)) / len(tail)))
        return out

    def _logits(self, head: list[int], asked: list[int], tails: list[list[int]]) -> list[torch.Tensor]:
        """The logits before each tail token: the examples' key/value cache (kept), the question
        read once on it, then every candidate's tail in one right-padded batch."""
        model, device = self.model, self._device
        with torch.inference_mode():
            last, cache = self._read(head, asked)
            first = self._next_logits(last).reshape(1, -1)
            rests = [t[:-1] for t in tails]
            if not any(rests):
                return [first for _ in tails]
            start, width = len(head) + len(asked), max(len(r) for r in rests)
            cache.batch_repeat_interleave(len(tails))
            pad = self.tokenizer.pad_token_id or 0
            ids = torch.full((len(tails), width), pad, dtype=torch.long)
            mask = torch.zeros((len(tails), start + width), dtype=torch.long)
            mask[:, :start] = 1
            for row, rest in enumerate(rests):
                ids[row, : len(rest)] = torch.tensor(rest, dtype=torch.long)
                mask[row, start: start + len(rest)] = 1
            positions = start + torch.arange(width).expand(len(tails), -1)
            hidden = model.get_decoder()(input_ids=ids.to(device), attention_mask=mask.to(device),
                                         position_ids=positions.to(device), use_cache=True,
                                         **{self._key: cache}).last_hidden_state
            return [torch.cat([first, model.get_output_embeddings()(hidden[row, : len(rest)]).float().cpu()])
                    for row, rest in enumerate(rests)]

    def best(self, question: str, labels: Sequence[str]) -> str:
        scored = self.scores(question, labels)
        return labels[max(range(len(labels)), key=scored.__getitem__)] if labels else ""


class KindReader:
    """``kind_of(role, noun)``: whether the local model reads a role as a kind of the noun a question
    asks for ("capital", "city": "What city is the capital of X?" asks for the capital) rather than
    a thing that has one ("director", "nationality": "What nationality is the director of X?" asks
    the director's nationality). The model compares two sentences of ``prompts/check/kind.txt``,
    "Every capital is a city." against "Every capital has a city.": the first more probable (the
    sum of its tokens' log-probabilities) is a kind. A role whose last word is the noun ("official
    language", "language") is a kind without asking. Readings are kept per pair.

    Measured by ``benchmarks/kind_reading.py`` (0.5B): 35 of 39 pairs written for this project,
    on which the two sentences were chosen among four (``benchmarks/data/kinds.tsv``: nationality,
    religion, gender, ... of a director, a father, a band; city, film, company, ... as a capital, a
    sequel, a publisher); 28 of 34 written after that choice (``kinds-test.tsv``), where 3 kinds
    were read as had (distributor / company, manufacturer / company, venue / stadium: a right
    answer withheld) and 3 the other way (today's reading kept).

    ``is_place(role)``: whether a role after "where" is the place asked ("Where is the
    headquarters of X located?") rather than a person or an organization that has one; measured
    by the same benchmark: 50 of 54 roles on which its sentences were chosen, 50 of 51 written
    before any reading (``kinds-place*.tsv``), every miss a place read as not one.
    """

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer
        self._is, self._has = (Template(line) for line in read_prompt(KIND_PROMPT).splitlines() if line.strip())
        self._place = [Template(line) for line in read_prompt(PLACE_PROMPT).splitlines() if line.strip()]
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], bool] = {}
        self._places: dict[str, bool] = {}
        self._device = getattr(model, "device", torch.device("cpu"))

    @classmethod
    def of(cls, model: Any, tokenizer: Any) -> KindReader | None:
        """A reader on ``model`` when it is a transformers causal LM, else None."""
        return cls(model, tokenizer) if _causal_lm(model) else None

    def __call__(self, role: str, noun: str) -> bool:
        role, noun = " ".join(role.lower().split()), " ".join(noun.lower().split())
        if not role or not noun or role.split()[-1] in (noun, noun + "s"):
            return True
        key = (role, noun)
        with self._lock:
            if key not in self._known:
                article = "an" if noun[0] in "aeiou" else "a"
                is_a, has = self._logprobs([self._is.substitute(role=role, noun=f"{article} {noun}"),
                                            self._has.substitute(role=role, noun=f"{article} {noun}")])
                self._known[key] = is_a > has
            return self._known[key]

    def is_place(self, role: str) -> bool:
        """Whether the model reads ``role`` as a place rather than a person or an organization
        (``prompts/check/place.txt``: "A headquarters is a place." against "... a person." and
        "... an organization."): the place "where" asks for ("Where is the headquarters of X
        located?"), not someone who has one ("Where was the director of X born?")."""
        role = " ".join(role.lower().split())
        if not role:
            return False
        with self._lock:
            if role not in self._places:
                article = "An" if role[0] in "aeiou" else "A"
                place, *others = self._logprobs([t.substitute(article=article, role=role) for t in self._place])
                self._places[role] = place > max(others)
            return self._places[role]

    def _logprobs(self, texts: Sequence[str]) -> list[float]:
        """The sum of each text's token log-probabilities after its first token."""
        rows = [self.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=self._device)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=self._device)
        with torch.inference_mode():
            hidden = self.model.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state
            logprobs = torch.log_softmax(self.model.get_output_embeddings()(hidden).float(), dim=-1)
        return [float(sum(logprobs[k, i - 1, row[i]] for i in range(1, len(row)))) for k, row in enumerate(rows)]


class _Node:
    """A node of the labels' prefix tree: the tokens that may follow, and the label ending here."""

    __slots__ = ("next", "label")

    def __init__(self) -> None:
        self.next: dict[int, _Node] = {}
        self.label: str | None = None


class PathReader(_ExamplesReader):
    """``read(question, names, after)``: the relations ``question`` follows from the thing it
    names to what it asks, in order, each one of ``labels`` (at most :data:`MAX_STEPS`): the
    most probable of the paths a beam of ``width`` readings finds, each scored by the
    log-probability of its tokens among those allowed at each point, the end included (a greedy
    reading wrote "spouse > spouse" for "Who was X married to?": the step after a label was
    likelier than the line's end, the second label not; scored among the whole vocabulary, long
    labels lost to short ones). ``after``: see :class:`HeldRelations`."""

    def __init__(self, model: Any, tokenizer: Any, labels: Sequence[str], width: int = 4) -> None:
        super().__init__(model, tokenizer, PATH_PROMPT)
        self.width = width
        self.labels = tuple(dict.fromkeys(label for label in labels if label.strip()))
        self._tokens = {label: self._ids(" " + label) for label in self.labels}
        self._root = self._tree(self.labels)
        self._step = self._ids(" >")
        self._ends = {self._ids(text)[0] for text in ("\n", "\n\n")}

    def _tree(self, labels: Iterable[str]) -> _Node:
        root = _Node()
        for label in labels:
            tokens = self._tokens.get(label)
            if tokens is None:
                continue
            node = root
            for token in tokens:
                node = node.next.setdefault(token, _Node())
            node.label = label
        return root

    def read(self, question: str, names: Sequence[str] = (),
             after: Callable[[tuple[str, ...]], Iterable[str]] | None = None) -> tuple[str, ...]:
        """``after(path)``: the labels that may follow ``path`` (for example the relations the
        knowledge holds from where it leads); None: any of ``labels``."""
        if not self.labels:
            return ()
        trees: dict[tuple[str, ...], _Node] = {}

        def tree(path: tuple[str, ...]) -> _Node:
            if after is None:
                return self._root
            if path not in trees:
                trees[path] = self._tree(after(path))
            return trees[path]

        head, asked = self._split(masked_question(question, names))
        with self._lock, torch.inference_mode():
            hidden, cache = self._read(head, asked)
            beam = [_Reading(0.0, (), tree(()), hidden, cache)]
            done: list[_Reading] = []
            while beam:
                grown = []
                for reading in beam:
                    node = reading.node
                    allowed = list(node.next)
                    if node.label is not None:
                        allowed += sorted(self._ends)
                        if len(reading.path) + 1 < MAX_STEPS and tree(reading.path + (node.label,)).next:
                            allowed.append(self._step[0])
                    # The probability among the tokens allowed here: a label's tokens past the
                    # point where it is the only one left cost nothing (long labels not penalized).
                    logprobs = torch.log_softmax(self._next_logits(reading.hidden)[allowed], dim=-1)
                    grown += [(reading.score + float(lp), token, reading) for token, lp in zip(allowed, logprobs)]
                grown.sort(key=lambda g: g[0], reverse=True)
                beam = []
                for score, token, reading in grown[: self.width]:
                    if done and score < max(d.score for d in done):
                        break  # every reading only loses probability from here
                    node = reading.node
                    if token in node.next:
                        beam.append(reading.fed(score, reading.path, node.next[token], [token], self))
                    elif token in self._ends:
                        assert node.label is not None  # an end is allowed only after a whole label
                        done.append(_Reading(score, reading.path + (node.label,), node, reading.hidden, None))
                    else:
                        assert node.label is not None  # so is the step to the next label
                        path = reading.path + (node.label,)
                        beam.append(reading.fed(score, path, tree(path), self._step, self))
        return max(done, key=lambda d: d.score).path if done else ()


class _Reading(NamedTuple):
    """A path being read: its log-probability so far, the labels written, where it is in the
    labels' tree, and the model's state after it."""

    score: float
    path: tuple[str, ...]
    node: _Node
    hidden: torch.Tensor
    cache: Any

    def fed(self, score: float, path: tuple[str, ...], node: _Node, ids: list[int], reader: PathReader) -> _Reading:
        hidden, cache = reader._run(ids, copy.deepcopy(self.cache))
        return _Reading(score, path, node, hidden, cache)


class HeldRelations:
    """The relations the knowledge holds along a path, for :meth:`PathReader.read`'s ``after``:
    ``after(subject)(path)`` is the relations of what ``path`` leads to from ``subject``.

    Example::

        >>> held = HeldRelations([("Ada", "spouse", "Ines"), ("Ines", "father", "Tomas")])
        >>> held.after("Ada")(("spouse",))
        {'father'}
    """

    def __init__(self, triples: Iterable[tuple[str, str, str]]) -> None:
        self._held: dict[str, dict[str, set[str]]] = {}
        for subject, relation, value in triples:
            self._held.setdefault(subject, {}).setdefault(relation, set()).add(value)

    @property
    def labels(self) -> list[str]:
        return sorted({r for relations in self._held.values() for r in relations})

    def after(self, subject: str) -> Callable[[tuple[str, ...]], set[str]]:
        def steps(path: tuple[str, ...]) -> set[str]:
            here = {subject}
            for label in path:
                here = {o for s in here for o in self._held.get(s, {}).get(label, ())}
            return {r for s in here for r in self._held.get(s, {})}
        return steps

