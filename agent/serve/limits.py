"""What the server accepts: the largest request body, and how many generations run and wait.

Example::

    >>> gate = RequestGate(max_concurrency=1, max_queue=0)
    >>> ticket = gate.admit()            # None: too busy, answer 429
    >>> if ticket is not None and ticket.wait(threading.Event()):
    ...     try:
    ...         pass                     # generate
    ...     finally:
    ...         ticket.release()
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.settings import Settings

from ..http.errors import ApiError

if TYPE_CHECKING:
    from starlette.requests import Request

# How long a queued generation sleeps between looks at its stop event (a client that left).
_POLL_S = 0.1
# Retry-After bounds, in seconds: at least 1 (the header's unit), at most a minute.
_RETRY_MIN_S, _RETRY_MAX_S = 1, 60


def _setting_default(name: str) -> int:
    # One home for the defaults: the settings' own.
    return Settings.model_fields[name].default


@dataclass(frozen=True)
class ServerLimits:
    """The request-size and concurrency limits (defaults: the settings' defaults).

    Example::

        >>> ServerLimits(max_concurrency=1, max_queue=0)
        ServerLimits(max_request_bytes=65536, max_concurrency=1, max_queue=0, max_reply_tokens=2048)
        >>> ServerLimits.from_settings(load_settings())   # not run: reads the settings   # doctest: +SKIP
    """

    max_request_bytes: int = _setting_default("max_request_bytes")
    max_concurrency: int = _setting_default("max_concurrency")
    max_queue: int = _setting_default("max_queue")
    max_reply_tokens: int = _setting_default("max_reply_tokens")

    def __post_init__(self) -> None:
        if min(self.max_request_bytes, self.max_concurrency, self.max_reply_tokens) < 1 or self.max_queue < 0:
            raise ValueError("max_request_bytes, max_concurrency and max_reply_tokens must be >= 1, max_queue >= 0")

    def check_reply_tokens(self, asked: int | None, param: str) -> None:
        """Refuse (HTTP 400) a reply budget over ``max_reply_tokens``: one request must not hold
        a generation slot for as long as it likes."""
        if asked is not None and asked > self.max_reply_tokens:
            raise ApiError(400, f"{param}: {asked} is over this server's limit of {self.max_reply_tokens} tokens",
                           param=param)

    @classmethod
    def from_settings(cls, settings: Settings) -> ServerLimits:
        return cls(settings.max_request_bytes, settings.max_concurrency, settings.max_queue, settings.max_reply_tokens)


class Ticket:
    """One admitted request: wait for a generation slot, then release it (releasing twice
    releases once).

    Example::

        >>> gate, stop = RequestGate(max_concurrency=1, max_queue=0), threading.Event()
        >>> ticket = gate.admit_or_refuse()
        >>> if ticket.wait(stop):
        ...     pass                     # generate
        >>> ticket.release()
    """

    def __init__(self, gate: RequestGate) -> None:
        self._gate = gate
        self._running_since: float | None = None
        self._released = False

    def wait(self, stop: threading.Event) -> bool:
        """Block until a slot is free; False when ``stop`` was set first (the client left)."""
        while not stop.is_set():
            if self._gate._slots.acquire(timeout=_POLL_S):
                with self._gate._lock:
                    self._gate._running += 1
                self._running_since = time.monotonic()
                return True
        return False

    def release(self) -> None:
        gate = self._gate
        with gate._lock:
            if self._released:
                return
            self._released = True
            gate._admitted -= 1
            if self._running_since is not None:
                gate._running -= 1
                gate._note_duration(time.monotonic() - self._running_since)
        if self._running_since is not None:
            gate._slots.release()


class RequestGate:
    """At most ``max_concurrency`` generations at once and ``max_queue`` waiting for a slot.

    :meth:`admit` never blocks: it refuses (None) when every slot and queue place is taken,
    so the server can answer 429 at once instead of piling up work it cannot do.

    Example::

        >>> gate = RequestGate(max_concurrency=2, max_queue=8)
        >>> ticket = gate.admit()        # None when 2 run and 8 wait
        >>> gate.running, gate.waiting, gate.retry_after_s()
        (0, 1, 1)
    """

    def __init__(self, max_concurrency: int, max_queue: int) -> None:
        if max_concurrency < 1 or max_queue < 0:
            raise ValueError("max_concurrency must be >= 1 and max_queue >= 0")
        self.max_concurrency, self.max_queue = max_concurrency, max_queue
        self._slots = threading.Semaphore(max_concurrency)
        self._lock = threading.Lock()
        self._admitted = 0   # running + waiting
        self._running = 0
        self._mean_s: float | None = None

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        with self._lock:
            return self._admitted - self._running

    def admit(self) -> Ticket | None:
        with self._lock:
            if self._admitted >= self.max_concurrency + self.max_queue:
                return None
            self._admitted += 1
        return Ticket(self)

    def admit_or_refuse(self) -> Ticket:
        """:meth:`admit`, or the 429 error (with Retry-After) to answer."""
        ticket = self.admit()
        if ticket is None:
            retry = self.retry_after_s()
            raise ApiError(
                429, f"the server is busy: {self.running} generation(s) running and {self.waiting} waiting "
                     f"(max_concurrency={self.max_concurrency}, max_queue={self.max_queue}); "
                     f"retry after {retry} s", "rate_limit_error", code="rate_limit_exceeded",
                headers={"Retry-After": str(retry)})
        return ticket

    def retry_after_s(self) -> int:
        """A hint for Retry-After: the recent mean generation time, whole seconds."""
        with self._lock:
            mean = self._mean_s
        return _RETRY_MIN_S if mean is None else min(_RETRY_MAX_S, max(_RETRY_MIN_S, math.ceil(mean)))

    def _note_duration(self, seconds: float) -> None:
        # An exponential mean: recent generations matter most (caller holds the lock).
        self._mean_s = seconds if self._mean_s is None else 0.7 * self._mean_s + 0.3 * seconds


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"request body too large: more than {limit} bytes (max_request_bytes)",
                    code="request_too_large")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 past ``limit`` bytes before it is parsed.

    A declared Content-Length over the limit is refused without reading; a chunked body (no
    Content-Length) is counted as it arrives and refused as soon as it passes the limit.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise ApiError(400, f"invalid Content-Length {declared!r}") from None
        if size > limit:
            raise too_large(limit)
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            raise too_large(limit)
    return bytes(body)
