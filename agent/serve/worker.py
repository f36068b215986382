"""A generation in a thread of its own, its pieces handed to the event loop as they come.

The thread first waits for a slot of the :class:`~agent.serve.limits.RequestGate`, runs
the model, and frees the slot when the model is done, so the gate counts generations, not
requests. The reader (a request handler) sets :attr:`Generation.stop` when its client goes
away; the model stops generating and the thread ends.

Example (not run: needs a model)::

    generation = Generation(lambda stop: model.reply(request, stop), gate.admit_or_refuse())
    while (piece := await generation.next()) is not None:
        ...
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from .limits import Ticket

log = logging.getLogger(__name__)

_END = object()


class Generation:
    """Run ``work(stop)`` (an iterable) in a daemon thread once ``ticket`` gets a slot.

    Example (not run: needs a model)::

        generation = Generation(lambda stop: model.reply(request, stop), ticket)
        first = await generation.next()
        generation.cancel()          # the client left: the model stops, the slot is freed
    """

    def __init__(self, work: Callable[[threading.Event], Iterable[Any]], ticket: Ticket,
                 name: str = "factweave-generation") -> None:
        self.stop = threading.Event()
        self.name = name
        self._cancelled_at: float | None = None
        self._loop = asyncio.get_running_loop()
        self._pieces: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._thread = threading.Thread(target=self._run, args=(work, ticket), name=name, daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[threading.Event], Iterable[Any]], ticket: Ticket) -> None:
        try:
            if ticket.wait(self.stop):
                for piece in work(self.stop):
                    self._hand(("piece", piece))
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, raised there
            self._hand(("error", exc))
        finally:
            ticket.release()
            self._hand(("end", _END))
            if self._cancelled_at is not None:
                log.info("%s stopped %.2f s after its reader left", self.name, time.monotonic() - self._cancelled_at)

    def cancel(self) -> None:
        """Stop the work early: its reader is gone (e.g. the client disconnected)."""
        if not self.stop.is_set():
            self._cancelled_at = time.monotonic()
            self.stop.set()

    def _hand(self, item: tuple[str, Any]) -> None:
        try:
            self._loop.call_soon_threadsafe(self._pieces.put_nowait, item)
        except RuntimeError:  # the event loop is closed: the server stopped, nobody reads
            pass

    async def next(self) -> Any:
        """The next piece; None when the work is done; raises what the work raised."""
        kind, value = await self._pieces.get()
        if kind == "error":
            raise value
        return None if value is _END else value
