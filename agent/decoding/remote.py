"""The remote engine: the agent's replies written by a shared vLLM server under ReFactX's rule.

``--engine remote --engine-url URL`` (``FACTWEAVE_ENGINE=remote``, ``FACTWEAVE_ENGINE_URL``)
sends every constrained reply of the agent to a server started with ``factweave serve --engine
vllm`` (:mod:`agent.serve.vllm_server`), where vLLM batches the requests of every worker
(continuous batching, prefix caching) and :class:`~agent.decoding.vllm_processor.FactRuleProcessor`
masks each one. The agent's loop does not change: it still writes a reply in one
:class:`~agent.decoding.greedy.DecodeSession` (facts, answer, rewinds, the lines it constrains to
a few facts), and :class:`RemoteSession` is that session for a server:

- **feeding** text into the reply (a lead fact, ``Answer:``) and **rewinding** it are local: the
  session keeps its tokens, and the next request sends them all as the prompt (token ids, so the
  server reads exactly what the session holds); the server's prefix cache makes re-reading the
  shared start cheap;
- **generating** is one streamed ``/v1/completions`` request (greedy, ``return_token_ids``) under
  the session's tree: the request's own facts (``refactx_facts``: the per-question tree, and the
  small trees of :meth:`~DecodeSession.state_one`) or the server's tree (the whole-KB attempt:
  the server's ``--index`` must hold the same KB, built for the same tokenizer), with the facts
  uploaded to the worker's web since it was built added to it for that request (``refactx_kb``). The reply so far
  travels as the prompt's end (``refactx_reply``: the rule walks it again, so facts already
  stated stay spent, as the local rule keeps them); a line the agent opened at the tree's root
  after an opening the rule does not fire on (``Answer:`` constrained to values) is
  ``refactx_open``;
- each token streamed back moves the session's own tracker, which reports completed facts to
  ``on_fact`` exactly as the local engines do; the stream is closed (vLLM aborts the request) as
  soon as the session would stop: the ``Answer:`` line done, the chain guard's cut, Stop, the
  budget;
- **chaining hops**: when ``on_fact`` grows the session's tree (the agent searched its knowledge
  web for the entity a fact named), the stream is closed right after that fact and a new request
  goes on from there with the grown facts, so the next ``Fact:`` line may state them, as in
  process. Greedy decoding makes the tokens up to the fact the same; the tokens the server wrote
  past it on the old tree are dropped. One request more per hop.
- **choosing** among continuations (:meth:`DecodeSession.choose`, the comparison step) reads
  their log-probabilities from the server (``prompt_logprobs``), one request per candidate, the
  rule off.

The worker keeps the model's tokenizer (to render prompts and find the facts in the tokens) and
the local model for what is not generation: the reading of the question (its plan, kinds, the
check of a stated statement); those run beside the retrieval on the worker. What differs from
the in-process engines: a request waits in vLLM's queue with the others; the token callbacks run
as the tokens arrive, a few tokens behind the server; the uploads of a whole-KB attempt are
capped as a request's facts are (512), past which it is refused in one line.

Example (not run: needs a vLLM server)::

    engine = RemoteEngine.open("http://127.0.0.1:8001/v1")
    generator = FactGenerator(model, tokenizer, kb_index, steps=engine)
    generator.answer("Where was Laurie Graff born?").answer
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from .greedy import FACTS_FREE_TIMES, DecodeSession
from .rule_args import FACTS_KEY, KB_KEY, MAX_FACTS, MAX_FACTS_CHARS, OPEN_KEY, REPLY_KEY, RULE_KEY
from ..errors import FactweaveError

if TYPE_CHECKING:
    from .vocab import TokenVocab
    from ..index.base import FactTree

#: How a worker names the server when one is down.
START_IT = "start it with `factweave serve --engine vllm --model MODEL --index KB.fidx` (README, Deploy)"


def api_root(url: str) -> str:
    """The server's OpenAI root (``.../v1``) from what a user gives (``http://host:8001`` or ``.../v1``).

    >>> api_root("http://127.0.0.1:8001")
    'http://127.0.0.1:8001/v1'
    >>> api_root("http://gpu-1:8001/v1/")
    'http://gpu-1:8001/v1'
    """
    url = url.strip().rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


class RemoteEngine:
    """A vLLM server under ReFactX's rule, as the engine of :class:`~agent.decoding.generate.FactGenerator`:
    its sessions are :class:`RemoteSession`. Thread-safe (one HTTP client, requests in parallel).

    ``server_tree``: the tree the server holds (``--index``): a session on it sends no facts."""

    engine = "remote"

    def __init__(self, url: str, model: str, *, api_key: str | None = None, max_model_len: int | None = None,
                 timeout: float = 600.0) -> None:
        self.url, self.model, self.max_model_len = api_root(url), model, max_model_len
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout, connect=10.0))
        self.server_tree: FactTree | None = None

    @classmethod
    def open(cls, url: str, *, model: str | None = None, api_key: str | None = None) -> RemoteEngine:
        """The engine at ``url``, checked: the server answers and serves ``model`` (default: the
        one it serves). A server that is down or refuses is one line naming it."""
        root = api_root(url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        try:
            response = httpx.get(f"{root}/models", headers=headers, timeout=10.0)
        except httpx.HTTPError as exc:
            raise _unreachable(root, exc) from exc
        if response.status_code in (401, 403):
            raise FactweaveError(f"the remote engine at {root} refused the key (HTTP {response.status_code}): give "
                                 "its key in FACTWEAVE_ENGINE_KEY")
        if response.status_code != 200:
            raise FactweaveError(f"the remote engine at {root} answered HTTP {response.status_code} to /models: {START_IT}")
        served = {m.get("id"): m for m in response.json().get("data", [])}
        if not served:
            raise FactweaveError(f"the remote engine at {root} serves no model: {START_IT}")
        name = model if model in served else next(iter(served)) if model is None else None
        if name is None:
            raise FactweaveError(f"the remote engine at {root} serves {', '.join(map(str, served))}, not {model}")
        return cls(root, name, api_key=api_key, max_model_len=served[name].get("max_model_len"))

    def holds(self, index: FactTree) -> bool:
        """Whether ``index`` is the server's tree or an overlay on it (the uploads of the worker's
        web: sent with each request, ``refactx_kb``)."""
        tree: Any = index
        while tree is not None:
            if tree is self.server_tree:
                return True
            tree = getattr(tree, "base", None)
        return False

    def check_tokens(self, tokenizer: Any, samples: Sequence[str]) -> None:
        """Refuse a server whose tokenizer reads ``samples`` otherwise than ``tokenizer`` (the
        worker's): token ids must mean the same on both sides."""
        root = self.url.removesuffix("/v1")
        for text in samples:
            try:
                response = self.client.post(f"{root}/tokenize", json={"model": self.model, "prompt": text,
                                                                      "add_special_tokens": False})
            except httpx.HTTPError as exc:
                raise _unreachable(self.url, exc) from exc
            _raise_for(response, self.url)
            theirs = response.json().get("tokens")
            mine = tokenizer(text, add_special_tokens=False)["input_ids"]
            if theirs != mine:
                raise FactweaveError(f"the remote engine at {self.url} serves {self.model}, whose tokenizer is not "
                                     "this model's: run the worker with the server's model (--model)")

    def open_session(self, ids: Sequence[int], vocab: TokenVocab, **options: Any) -> RemoteSession:
        """A session that has read the prompt ``ids`` (sent with its first request)."""
        session = RemoteSession(self, vocab, vocab.eos_ids, **options)
        session.feed(list(ids))
        return session

    # --- requests ----------------------------------------------------------------------------

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self.client.post(f"{self.url}/completions", json={"model": self.model, **body})
        except httpx.HTTPError as exc:
            raise _unreachable(self.url, exc) from exc
        _raise_for(response, self.url)
        return response.json()

    def stream(self, prompt: Sequence[int], max_tokens: int, extra: dict[str, Any], temperature: float = 0.0,
               stop: list[str] | None = None) -> Generator[tuple[list[int], str | None], None, None]:
        """The tokens the server writes after ``prompt``, as they come: ``(token ids, finish
        reason)`` per chunk (the reason on the last). Closing the generator closes the stream:
        vLLM aborts the request."""
        body = {"model": self.model, "prompt": list(prompt), "max_tokens": max_tokens, "temperature": temperature,
                "stream": True, "return_token_ids": True, "skip_special_tokens": False, "vllm_xargs": extra}
        if stop:
            body["stop"] = list(stop)
        try:
            with self.client.stream("POST", f"{self.url}/completions", json=body) as response:
                if response.status_code != 200:
                    response.read()
                    _raise_for(response, self.url)
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    chunk = json.loads(data)
                    if "error" in chunk:
                        raise FactweaveError(f"the remote engine at {self.url}: {_message(chunk)}")
                    for choice in chunk.get("choices", []):
                        yield [int(t) for t in choice.get("token_ids") or []], choice.get("finish_reason")
        except httpx.HTTPError as exc:
            raise _unreachable(self.url, exc) from exc

    def complete(self, prompt: Sequence[int], max_tokens: int, temperature: float, stop: list[str] | None,
                 cancel: threading.Event | None) -> tuple[list[int], bool]:
        """Free text after ``prompt`` (the rule off): its token ids and whether it ended (an end
        token or a stop string) rather than ran out of ``max_tokens``."""
        out: list[int] = []
        ended = False
        chunks = self.stream(prompt, max_tokens, {RULE_KEY: False}, temperature, stop)
        try:
            for tokens, finish in chunks:
                out.extend(tokens)
                ended = finish == "stop"
                if cancel is not None and cancel.is_set():
                    break
        finally:
            chunks.close()
        return out, ended

    def logprob_means(self, prompt: Sequence[int], candidates: Sequence[Sequence[int]]) -> list[float]:
        """The mean log-probability of each candidate's tokens after ``prompt`` (the rule off)."""
        scores = []
        for tokens in candidates:
            tokens = list(tokens)
            if not tokens:
                scores.append(float("-inf"))
                continue
            reply = self._post({"prompt": [*prompt, *tokens], "max_tokens": 1, "temperature": 0.0,
                                "prompt_logprobs": 0, "vllm_xargs": {RULE_KEY: False}})
            rows = reply["choices"][0].get("prompt_logprobs") or []
            got = [float(rows[len(prompt) + i][str(t)]["logprob"]) for i, t in enumerate(tokens)]
            scores.append(sum(got) / len(got))
        return scores

    def close(self) -> None:
        self.client.close()


def _unreachable(url: str, exc: Exception) -> FactweaveError:
    """The one line for a server that is down (or dropped the connection), with how to start it."""
    return FactweaveError(f"the remote engine at {url} does not answer ({type(exc).__name__}): {START_IT}")


def _message(body: dict[str, Any]) -> str:
    error = body.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error or body.get("message") or body)


def _raise_for(response: httpx.Response, url: str) -> None:
    if response.status_code == 200:
        return
    try:
        what = _message(response.json())
    except ValueError:
        what = response.text[:200]
    raise FactweaveError(f"the remote engine at {url} answered HTTP {response.status_code}: {what.splitlines()[0] if what else ''}")


def _capped(facts: list[str]) -> list[str]:
    """``facts``, or one line when they are over what a request may carry (:mod:`.rule_args`)."""
    if len(facts) > MAX_FACTS or sum(map(len, facts)) > MAX_FACTS_CHARS:
        raise FactweaveError(f"{len(facts):,} facts are over what a request to the remote engine carries ({MAX_FACTS} "
                             f"facts, {MAX_FACTS_CHARS:,} characters): give the server a tree that holds them (--index)")
    return facts


class RemoteSession(DecodeSession):
    """A :class:`DecodeSession` whose tokens the remote engine writes (module docstring): feeding and
    rewinding are local, generating is a streamed request from the session's tokens."""

    def __init__(self, engine: RemoteEngine, vocab: TokenVocab, eos_ids: set[int] | frozenset[int],
                 **options: Any) -> None:
        super().__init__(engine, vocab, eos_ids, **options)  # type: ignore[arg-type]  # steps: the engine, never fed
        self.engine = engine
        self._walked_from = 0  # where in ``out`` the tracker's walk began (a line of state_one: its trigger)

    def feed(self, tokens: Sequence[int], *, reply: bool = False) -> list[tuple[str, Any]]:
        events: list[tuple[str, Any]] = []
        if reply:
            for token in tokens:
                events.extend(self._take(int(token)))
        self.fed.extend(int(t) for t in tokens)
        return events

    def _crop(self, drop: int) -> None:
        self.fed = self.fed[:len(self.fed) - drop]

    def state_one(self, tracker: Any, trigger: Sequence[int], *, at_least: int = 0, opened: bool = False) -> int | None:
        walked, self._walked_from = self._walked_from, len(self.out)
        try:
            return super().state_one(tracker, trigger, at_least=at_least, opened=opened)
        finally:
            self._walked_from = walked

    def choose(self, candidates: Sequence[Sequence[int]]) -> tuple[int, list[float]]:
        if not self.fed:
            raise RuntimeError("feed the prompt before choosing")
        scores = self.engine.logprob_means(self.fed, candidates)
        best = max(range(len(scores)), key=scores.__getitem__) if scores else -1
        return best, scores

    def _rule(self) -> dict[str, Any]:
        """The request's ``vllm_xargs``: the rule and its tree, the reply so far, an open line."""
        if self.tracker is None or self.trace is None:
            return {RULE_KEY: False}
        index = self.tracker.index
        extra: dict[str, Any] = {RULE_KEY: True, REPLY_KEY: len(self.out) - self._walked_from}
        server = self.engine.server_tree
        if server is not None and self.engine.holds(index):
            added = [index.facts[i].text for i in range(len(server), len(index))]  # an overlay's own, after the base's
            if added:
                extra[FACTS_KEY], extra[KB_KEY] = _capped(added), True
        else:
            extra[FACTS_KEY] = _capped([index.facts[i].text for i in range(len(index))])
        if self.trace.active and self.trace.start == len(self.out):
            extra[OPEN_KEY] = True  # a line opened at the tree's root (the rule re-fires on "Fact:" itself)
        return extra

    def generate(self, max_new_tokens: int, answer_done: Callable[[list[int]], bool] | None = None,
                 line_done: bool = False, facts_free: bool = False) -> Generator[tuple[str, Any], None, None]:
        if not self.fed:
            raise RuntimeError("feed the prompt before generating")
        written = total = 0
        ceiling = max_new_tokens * FACTS_FREE_TIMES if facts_free else max_new_tokens

        def counts() -> int:
            return 0 if facts_free and self.trace is not None and self.trace.active else 1

        while written < max_new_tokens and total < ceiling:
            room = ceiling - total
            if self.engine.max_model_len:
                room = min(room, self.engine.max_model_len - len(self.fed))
            if room <= 0:
                return
            chunks: Iterator[tuple[list[int], str | None]] = self.engine.stream(self.fed, room, self._rule())
            grew = False
            finish: str | None = None
            try:
                for tokens, finish in chunks:
                    for token in tokens:
                        if token in self.eos_ids:
                            self.ended = True
                            return
                        size = len(self.tracker.index) if self.tracker is not None else 0
                        step = counts()
                        yield from self._take(token)
                        self.fed.append(token)
                        written += step
                        total += 1
                        if self._ends(token, answer_done, line_done) or written >= max_new_tokens or total >= ceiling:
                            return
                        if self.tracker is not None and len(self.tracker.index) > size:
                            grew = True  # on_fact grew the tree: go on from here with its new facts
                            break
                    if grew:
                        break
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
            if not grew:
                self.ended = finish == "stop"
                return


def remote_engine_from(url: str | None, model: str | None, api_key: str | None) -> RemoteEngine:
    """The remote engine the settings name (``engine_url``), or one line on what is missing."""
    if not url:
        raise FactweaveError("--engine remote needs the server's address: --engine-url URL or FACTWEAVE_ENGINE_URL "
                             f"(a server started with `factweave serve --engine vllm`)")
    return RemoteEngine.open(url, model=model, api_key=api_key)


__all__ = ["RemoteEngine", "RemoteSession", "api_root", "remote_engine_from"]
