"""Chat clients: one ``complete(messages) -> str`` interface over an OpenAI-compatible endpoint
(GPT, vLLM, llama.cpp, ``factweave llm serve``, ...) or a local transformers model.

Example (not run: needs an OpenAI endpoint and a model)::

    chat = OpenAIChat("gpt-4o-mini")                          # key from OPENAI_API_KEY
    local = LocalChat("smollm2-135m")                         # packaged weights, CPU
    for client in (chat, local):
        print(client.complete([{"role": "user", "content": "2+2?"}], max_tokens=8))
"""
from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from agent.errors import FactweaveError
from agent.models import DEFAULT_MODEL, LoadedModel, load_model

log = logging.getLogger(__name__)

Message = dict[str, str]

# OpenAI's own endpoint, used when neither base_url nor OPENAI_BASE_URL names another server.
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
# The model asked of api.openai.com when none is named: a small, cheap chat model.
OPENAI_DEFAULT_MODEL = "gpt-4o-mini"
# Local OpenAI-compatible servers ignore the key, but the SDK refuses to start without one.
_PLACEHOLDER_KEY = "factweave-no-key"
# Anything that looks like an OpenAI-style secret, also in partial echoes such as "sk-ab***yz".
_SECRET_LIKE = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_*\-.]{4,}")
_MAX_MESSAGE_CHARS = 300


class ChatError(FactweaveError):
    """A chat call that failed: one line naming the endpoint and model, never the key."""


@runtime_checkable
class ChatClient(Protocol):
    """Anything that turns chat messages into a reply.

    ``name`` identifies the model (it is what ``/v1/models`` lists when served).
    Implementations raise :class:`ChatError` (a one-line ``FactweaveError``) on failure.

    Example::

        >>> def ask(client: ChatClient, text: str) -> str:
        ...     return client.complete([{"role": "user", "content": text}], max_tokens=32)
    """

    name: str

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> str: ...


def _one_line(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= _MAX_MESSAGE_CHARS else flat[:_MAX_MESSAGE_CHARS] + "..."


# --- OpenAI-compatible endpoints ----------------------------------------------------------


class OpenAIChat:
    """A chat model behind an OpenAI-compatible HTTP API, through the ``openai`` SDK.

    The key comes from ``api_key``, else ``OPENAI_API_KEY``; the endpoint from ``base_url``,
    else ``OPENAI_BASE_URL``, else api.openai.com. A custom endpoint without any key gets a
    placeholder key (local servers do not check it). ``timeout`` is seconds per attempt; the
    SDK retries connection errors, 408/409/429 and 5xx up to ``max_retries`` times with
    backoff. Failures raise :class:`ChatError` naming the endpoint and model; the key is
    scrubbed from every message and never logged.

    Example (not run: needs an OpenAI-compatible server)::

        chat = OpenAIChat("smollm2-135m", base_url="http://127.0.0.1:8000/v1")
        chat.complete([{"role": "user", "content": "Capital of France?"}], max_tokens=16)
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30,
        max_retries: int = 3,
    ) -> None:
        from openai import OpenAI

        url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if key is None:
            if url is None:
                raise ChatError(
                    f"chat model {model!r} at {OPENAI_DEFAULT_BASE_URL}: OPENAI_API_KEY is not "
                    "set; set it, or pass base_url for a local OpenAI-compatible server"
                )
            key = _PLACEHOLDER_KEY
        # Kept only to scrub it from error text; never part of repr, logs or messages.
        self._secret = key if key != _PLACEHOLDER_KEY else None
        self.model = model
        self.name = model
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self._client = OpenAI(
            base_url=url or OPENAI_DEFAULT_BASE_URL,
            api_key=key,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        self.base_url = str(self._client.base_url).rstrip("/")

    def __repr__(self) -> str:
        return f"OpenAIChat(model={self.model!r}, base_url={self.base_url!r})"

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> str:
        """The assistant's reply text to ``messages`` (empty string when it sent none)."""
        import openai

        extra: dict[str, Any] = {"stop": list(stop)} if stop else {}
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=max_tokens,
                temperature=temperature,
                **extra,
            )
        except openai.APITimeoutError:
            raise self._error(
                f"timed out after {self.timeout:g} s per attempt "
                f"({self.max_retries} retries)"
            ) from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise self._error(f"could not connect ({_one_line(str(cause))})") from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            # The body of a 401 echoes part of the key, so it is left out entirely.
            raise self._error(
                f"HTTP {exc.status_code}: the server refused the API key; check OPENAI_API_KEY"
            ) from None
        except openai.APIStatusError as exc:
            raise self._error(f"HTTP {exc.status_code}: {exc.message}") from None
        except openai.OpenAIError as exc:
            raise self._error(f"{type(exc).__name__}: {exc}") from None
        # `from None` above: the SDK's exception (and its request) must not ride along in
        # tracebacks, where a header or an echoed key could leak.
        if not response.choices:
            raise self._error("the reply had no choices")
        return response.choices[0].message.content or ""

    def _error(self, what: str) -> ChatError:
        return ChatError(f"chat model {self.model!r} at {self.base_url}: {self._scrub(what)}")

    def _scrub(self, text: str) -> str:
        text = _one_line(text)
        if self._secret:
            text = text.replace(self._secret, "***")
        return _SECRET_LIKE.sub("***", text)


# --- local transformers models ------------------------------------------------------------


class _StopOnStrings:
    """Stops generation once the text generated so far contains any of ``stop``.

    Decodes only the new tokens (not the prompt), so a stop string inside the prompt never
    ends generation early.
    """

    def __init__(self, tokenizer: Any, prompt_len: int, stop: Sequence[str]) -> None:
        self.tokenizer, self.prompt_len, self.stop = tokenizer, prompt_len, tuple(stop)

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        text = self.tokenizer.decode(input_ids[0, self.prompt_len:], skip_special_tokens=True)
        done = any(s in text for s in self.stop)
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


class _OnEvent:
    """Stops generation once ``event`` is set (a client that went away)."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        return torch.full((input_ids.shape[0],), self.event.is_set(), dtype=torch.bool, device=input_ids.device)


@dataclass(frozen=True)
class LocalReply:
    """A local model's reply with what it cost: prompt and generated tokens, why it ended
    (``"stop"`` or ``"length"``) and whether it was cancelled."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    cancelled: bool


def _cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to (not including) the earliest stop string, as OpenAI servers do."""
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]


class LocalChat:
    """A local transformers model as a chat client: chat template, then ``generate``.

    ``model`` is a preset name, a folder, a Hub id, or an already :class:`LoadedModel`
    (default: ``agent.models.DEFAULT_MODEL``). ``temperature=0`` decodes greedily; a
    positive temperature samples. Calls may run at once, on this client or on others sharing
    the loaded model (the agent's generator, the server's plain model): generations on one set
    of weights overlap correctly (the same answers) and two at once answered 1.39x faster than
    one after the other on 2 cores (``benchmarks/concurrency.py``); the tokenizer is shared too: no
    call switches its state (:func:`agent.models.stateless_tokenizer`).
    How many run at once is the caller's bound (the server's ``max_concurrency``, the UI's
    ``--concurrency``).

    Example (not run: needs a model)::

        chat = LocalChat("smollm2-135m")
        chat.complete([{"role": "user", "content": "Name a colour."}], max_tokens=8, stop=["\\n"])
    """

    def __init__(
        self,
        model: str | LoadedModel | None = None,
        *,
        device: str | None = None,
        dtype: str | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        if model is None:
            model = DEFAULT_MODEL
        if not isinstance(model, LoadedModel):
            model = load_model(model, device=device, dtype=dtype, cache_dir=cache_dir)
        self.loaded = model
        self.name = model.name

    def __repr__(self) -> str:
        return f"LocalChat(model={self.name!r})"

    def render(self, messages: list[Message]) -> str:
        """The prompt text: the tokenizer's chat template, else plain ``role: content`` lines."""
        tokenizer = self.loaded.tokenizer
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        lines = [f"{m['role']}: {m['content']}" for m in messages]
        return "\n".join([*lines, "assistant:"])

    def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: list[str] | None = None,
    ) -> str:
        """The model's reply to ``messages``, cut before the first ``stop`` string."""
        return self.complete_counted(messages, max_tokens=max_tokens, temperature=temperature, stop=stop).text

    def complete_counted(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
    ) -> LocalReply:
        """:meth:`complete` with its token counts; ``cancel``: when set (e.g. the client went
        away), generation ends after the current token."""
        import torch
        from transformers import StoppingCriteriaList

        model, tokenizer = self.loaded.model, self.loaded.tokenizer
        prompt = self.render(messages)
        if self.loaded.steps is not None:
            return self._complete_on_engine(prompt, max_tokens, temperature, stop, cancel)
        sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": float(temperature)}
            if temperature > 0
            else {"do_sample": False}
        )
        try:
            enc = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
            enc = {k: v.to(model.device) for k, v in enc.items()}
            prompt_len = enc["input_ids"].shape[1]
            criteria = StoppingCriteriaList(
                ([_StopOnStrings(tokenizer, prompt_len, stop)] if stop else [])
                + ([_OnEvent(cancel)] if cancel is not None else [])
            )
            with torch.inference_mode():
                out = model.generate(
                    **enc,
                    max_new_tokens=max_tokens,
                    stopping_criteria=criteria,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                    **sampling,
                )
            new = out[0, prompt_len:]
            text = tokenizer.decode(new, skip_special_tokens=True)
        except (RuntimeError, ValueError, TypeError, IndexError) as exc:
            raise ChatError(f"local model {self.name!r}: {_one_line(str(exc))}") from exc
        ended = len(new) >= max_tokens and not (cancel is not None and cancel.is_set())
        return LocalReply(_cut_at_stop(text, stop) if stop else text, int(prompt_len), len(new),
                          "length" if ended else "stop", bool(cancel is not None and cancel.is_set()))


    def _complete_on_engine(self, prompt: str, max_tokens: int, temperature: float, stop: list[str] | None,
                            cancel: threading.Event | None) -> LocalReply:
        """:meth:`complete_counted` on the loaded model's engine (e.g. llama.cpp): one token at a
        time from its logits, greedy or sampled at ``temperature``, until an end token, a stop
        string, ``max_tokens`` or ``cancel``."""
        import torch

        tokenizer, steps = self.loaded.tokenizer, self.loaded.steps
        ends = _end_tokens(self.loaded)
        if hasattr(steps, "complete"):  # the remote engine writes it in one request
            ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            written, stopped = steps.complete(ids, max_tokens, temperature, stop, cancel)
            written = [t for t in written if t not in ends]
            text = tokenizer.decode(written, skip_special_tokens=True)
            cancelled = bool(cancel is not None and cancel.is_set())
            return LocalReply(_cut_at_stop(text, stop) if stop else text, len(ids), len(written),
                              "stop" if stopped or cancelled else "length", cancelled)
        try:
            ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            logits, state = steps.feed(ids, ())
            out: list[int] = []
            finish = "length"
            while len(out) < max_tokens and not (cancel is not None and cancel.is_set()):
                if temperature > 0:
                    probs = torch.softmax(logits.float() / float(temperature), dim=-1)
                    token = int(torch.multinomial(probs, 1))
                else:
                    token = int(torch.argmax(logits))
                if token in ends:
                    finish = "stop"
                    break
                out.append(token)
                if stop and any(s in tokenizer.decode(out, skip_special_tokens=True) for s in stop):
                    finish = "stop"
                    break
                logits, state = steps.feed([token], state)
            text = tokenizer.decode(out, skip_special_tokens=True)
        except (RuntimeError, ValueError, TypeError, IndexError) as exc:
            raise ChatError(f"local model {self.name!r}: {_one_line(str(exc))}") from exc
        cancelled = bool(cancel is not None and cancel.is_set())
        return LocalReply(_cut_at_stop(text, stop) if stop else text, len(ids), len(out),
                          "stop" if finish == "stop" or cancelled else "length", cancelled)


def _end_tokens(loaded: LoadedModel) -> frozenset[int]:
    """The token ids that end a reply: the tokenizer's and the model's generation config's."""
    ends = {loaded.tokenizer.eos_token_id}
    configured = getattr(getattr(loaded.model, "generation_config", None), "eos_token_id", None)
    ends.update(configured if isinstance(configured, (list, tuple)) else [configured])
    return frozenset(int(t) for t in ends if t is not None)


# --- choosing one from the environment ----------------------------------------------------


def chat_client_from_env(
    model: str | None = None,
    base_url: str | None = None,
    local_model: str | LoadedModel | None = None,
    *,
    api_key: str | None = None,
    timeout: float = 30,
    max_retries: int = 3,
) -> ChatClient:
    """The chat client the environment asks for.

    Precedence, first match wins:

    1. ``base_url`` argument, else ``OPENAI_BASE_URL``: :class:`OpenAIChat` against that
       server (key from ``OPENAI_API_KEY`` or a placeholder). The model is ``model``, else
       ``FACTWEAVE_LLM_MODEL``, else the first one the server lists at ``/v1/models``.
    2. ``api_key`` or ``OPENAI_API_KEY`` set: :class:`OpenAIChat` against api.openai.com with ``model``,
       else ``FACTWEAVE_LLM_MODEL``, else ``gpt-4o-mini``.
    3. Otherwise :class:`LocalChat` over ``local_model`` (a preset, folder, Hub id or
       :class:`LoadedModel`; default ``DEFAULT_MODEL``).

    Example (not run: needs a model or an OpenAI endpoint)::

        chat = chat_client_from_env()                    # local model when nothing is set
        chat = chat_client_from_env(base_url="http://127.0.0.1:8000/v1")
    """
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    name = model or os.environ.get("FACTWEAVE_LLM_MODEL") or None
    key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if url is not None:
        return OpenAIChat(
            name or _first_served_model(url, timeout, key), base_url=url, api_key=key, timeout=timeout,
            max_retries=max_retries,
        )
    if key:
        return OpenAIChat(name or OPENAI_DEFAULT_MODEL, api_key=key, timeout=timeout, max_retries=max_retries)
    return LocalChat(local_model)


def _first_served_model(base_url: str, timeout: float, api_key: str | None = None) -> str:
    """The first model id a server lists: local servers usually serve exactly one."""
    import openai

    probe = OpenAIChat("?", base_url=base_url, api_key=api_key, timeout=timeout, max_retries=1)
    try:
        models = list(probe._client.models.list())
    except openai.OpenAIError as exc:
        raise probe._error(
            f"could not list the served models ({type(exc).__name__}); name one with "
            "model= or FACTWEAVE_LLM_MODEL"
        ) from None
    if not models:
        raise ChatError(f"{probe.base_url}/models lists no model; name one with FACTWEAVE_LLM_MODEL")
    return models[0].id
