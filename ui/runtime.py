"""What every browser session shares: one loaded model, the knowledge web, the KB fact index and
the chat model, opened once; each question gets a light :class:`FactAgent` over them with the
session's own options (tree mode, beams, k, re-ranking).

Uploads and removals go through the web's :class:`~agent.web.workspace.Workspace` (crash-safe,
journalled under ``<web>/uploads/``), whose fact-index overlay is the loaded model's: the KB index
plus one small tree per upload, queried as one (:class:`~agent.index.union.GrowingFactIndex`).

Example (not run: needs a model and a knowledge web)::

    with UIRuntime(load_settings(model="smollm2-135m")) as rt:
        for event in rt.stream("What instrument did he play?", AskOptions(tree="both"),
                               history=[{"role": "user", "content": "Where did Buck Owens die?"},
                                        {"role": "assistant", "content": "Fact: ...\nAnswer: Bakersfield"}]):
            ...
        rt.add_files([Path("facts.tsv")])
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import FactweaveError
from agent.events import AgentEvent
from agent.index.union import GrowingFactIndex
from agent.knowledge.facts import Fact
from agent.models import PRESETS, preset_installed
from agent.rerank import Reranker
from agent.web.uploads import DEFAULT_MAX_BYTES
from agent.web.workspace import MAX_UPLOADED_FACTS, UploadsFollower, Workspace

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from agent.pipeline import FactAgent
    from agent.settings import Settings

Progress = Callable[[float, str], None]


@dataclass
class AskOptions:
    """A session's choices for its questions (the settings panel): ``tree`` and ``k`` override the
    settings' :class:`~agent.pipeline.AgentOptions`; ``beams`` the generator's; ``rerank`` whether the
    re-ranker runs."""

    tree: str = "both"
    beams: int = 1
    k: int = 10
    rerank: bool | None = None  # None: the settings' choice (Settings.effective_rerank)


def _no_progress(fraction: float, message: str) -> None:
    pass


class UIRuntime:
    """The shared parts behind the UI. Thread-safe: answers run at once (as many as the UI's
    ``--concurrency``; generations on one model overlap correctly, ``benchmarks/concurrency.py``);
    uploads, removals and model switches take the write lock, so they happen one at a time (one
    that cannot have it within :attr:`write_wait_s` says so in one line), while questions go on:
    an answer starts with the model and knowledge of its moment, and a replaced model is closed
    only once the answers still using it have ended."""

    #: How long a change waits for another change to end before it gives up with one line.
    write_wait_s: float = 30.0

    def __init__(self, settings: Settings, *, progress: bool = True, loaded: Any = None, web: Any = None,
                 max_upload_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """``loaded``: a model already loaded (must be ``settings.model``); ``web``: a knowledge
        web already open (its owner closes it), else the one ``settings`` name is opened here."""
        # lazy: agent.runtime pulls torch (the CLI imports this module at start)
        from agent.runtime import open_web

        self.settings = settings
        self._started_with = settings.model
        # A plain lock, not an RLock: a streamed answer may be resumed, and closed, by another thread.
        # Held briefly: to pick the generator an answer runs on, and to swap it.
        self._lock = threading.Lock()
        # Held for a whole change (an upload, a removal, a model switch): changes take turns, and
        # questions go on meanwhile, answered on the state before the change.
        self._write_lock = threading.Lock()
        self._answers_done = threading.Condition(self._lock)
        # Answers in progress per base index (by id): what closing a replaced model releases. A
        # removal gives the generator a new overlay on the same base (``_rebuild_index``).
        self._answering: dict[int, int] = {}
        # One agent per choice of options for the model loaded (its graph compiled once, its
        # listed-facts reader built once), not one per question.
        self._agents: dict[tuple[Any, ...], FactAgent] = {}
        self._progress = progress
        # What the knowledge panel shows (counts and sources), kept until the next change here or
        # for ``knowledge_ttl_s``: every page load shows it, and counting the whole graph on each
        # load let any visitor keep the database busy. ``_changes`` counts the changes made here.
        self._view_lock = threading.Lock()
        self._view: tuple[float, int, dict[str, Any], list[dict[str, Any]]] | None = None
        self._changes = 0
        self._owns_web = web is None
        # (recovered below, by the workspace with this runtime's overlay and upload limit)
        self.web = web if web is not None else open_web(settings, progress=progress, recover=False)
        overlay = _ModelOverlay(self)
        self.workspace = Workspace(self.web, overlay=overlay, decomposer=self._decomposer,
                                   max_upload_bytes=max_upload_bytes)
        # Uploads and removals made through another door (`web add`, `web remove`, ...) reach the
        # overlay before the next answer (see :meth:`stream`).
        self._follower = UploadsFollower(self.web.folder, overlay)
        self._follow_lock = threading.Lock()
        try:
            self._open_model(settings.model, loaded=loaded)
        except BaseException:
            self.close()
            raise

    # --- opening -------------------------------------------------------------------------------

    def _open_model(self, name: str, *, loaded: Any = None) -> None:
        # lazy: agent.runtime pulls torch (the CLI imports this module at start)
        from agent.runtime import load_settings_model, open_chat, open_generator

        settings = self.settings.model_copy(update={"model": name})
        loaded = loaded or load_settings_model(settings)
        generator = open_generator(name, settings.kb, index=settings.index, inverse=settings.inverse,
                                   beams=settings.beams, max_new_tokens=settings.max_tokens,
                                   cache_dir=settings.cache_dir(), progress=self._progress, loaded=loaded,
                                   pg_dsn=settings.pg_dsn.get_secret_value() if settings.pg_dsn else None,
                                   pg_index=settings.pg_index)
        # Uploads are an overlay: the KB index as it is (in memory, on disk or in PostgreSQL) plus
        # one small tree per upload, queried as one; an upload costs what it adds, not the KB.
        assert generator.index is not None, "open_generator builds the KB index from settings.kb"
        generator.index = GrowingFactIndex(generator.index, generator.tokenizer, max_facts=MAX_UPLOADED_FACTS)
        chat = open_chat(settings, loaded)
        with self._lock:
            self.loaded, self.generator = loaded, generator
            self._agents = {}
            self.chat = chat
            self.reranker = Reranker(self.chat)
            self.model_name = name
            self.settings = settings
        self.workspace.recover()  # a removal or an upload cut short by a failure or a kill: complete it

    @property
    def max_upload_bytes(self) -> int:
        return self.workspace.max_upload_bytes

    @property
    def uploads_dir(self) -> Path:
        return self.workspace.folder

    def uploaded_facts(self) -> list[Fact]:
        """Every fact uploaded into this web so far."""
        return self.workspace.uploaded_facts()

    def _decomposer(self) -> Any:
        """An upload's documents become facts as every door makes them (:func:`agent.runtime.upload_decomposer`)."""
        from agent.runtime import upload_decomposer  # lazy: agent.runtime pulls torch

        return upload_decomposer(self.settings, self.chat)

    def overlay_index(self) -> GrowingFactIndex:
        """The loaded generator's index: the KB's with the uploads over it (:meth:`_open_model`)."""
        index = self.generator.index
        assert isinstance(index, GrowingFactIndex), "_open_model gives every generator the uploads' overlay"
        return index

    def _rebuild_index(self, facts: list[Fact]) -> int:
        """Replace the overlay by one over ``facts`` (the uploaded facts left after a removal); how
        many it holds. A new generator gets it: answers under way keep the one they started with."""
        old = self.overlay_index()
        index = GrowingFactIndex(old.base, self.generator.tokenizer, max_facts=old.max_facts)
        index.grow(facts)
        generator = self.generator.with_index(index)
        with self._lock:
            self.generator = generator
            self._agents = {}
        return index.added

    def close(self) -> None:
        generator = getattr(self, "generator", None)
        if generator is not None:
            generator.close()
        if self._owns_web:
            self.web.close()

    def __enter__(self) -> UIRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- answering -----------------------------------------------------------------------------

    def agent(self, options: AskOptions) -> FactAgent:
        # lazy: FactAgent pulls torch (the CLI imports this module at start)
        from agent.pipeline import FactAgent

        rerank = self.settings.effective_rerank() if options.rerank is None else options.rerank
        key = (id(self.generator), rerank, options.tree, options.k)
        agent = self._agents.get(key)
        if agent is None:
            agent = self._agents[key] = FactAgent(self.generator, self.web, self.reranker if rerank else None,
                                                  options=self.settings.agent_options(tree=options.tree, k=options.k),
                                                  chat=self.chat)
        return agent

    def stream(self, question: str, options: AskOptions, stop: threading.Event | None = None, *,
               history: list[dict[str, str]] | None = None) -> _Answer:
        """The agent's events for ``question`` (see ``FactAgent.stream``); ``history``: the
        session's earlier turns, oldest first, passed on as they are (the agent bounds them, see
        :meth:`history`); setting ``stop`` or closing the iterator stops generation. The agent's
        checks of the question run in this call: a bad one raises :class:`FactweaveError` here,
        before any event. The answer counts as under way (its model is not closed) from this call
        until the iterator ends or is closed: close it. What another door uploaded or removed is
        brought in first."""
        self._follow_other_doors()
        with self._lock:
            key, agent = _base_key(self.generator), self.agent(options)
            events = agent.stream(question, history=history, beams=options.beams, stop=stop)
            self._answering[key] = self._answering.get(key, 0) + 1
        return _Answer(events, lambda: self._answer_done(key))

    def _answer_done(self, key: int) -> None:
        with self._lock:
            self._answering[key] -= 1
            self._answers_done.notify_all()

    def history(self, options: AskOptions, turns: list[dict[str, str]]) -> list[dict[str, str]]:
        """The newest of ``turns`` that the agent answering with ``options`` reads a follow-up with
        (:meth:`FactAgent.bounded_history <agent.pipeline.FactAgent.bounded_history>`): what a
        session keeps of its conversation."""
        with self._lock:
            agent = self.agent(options)
        return agent.bounded_history(turns)

    def _follow_other_doors(self) -> None:
        """Bring the overlay in step with uploads changed through another door (two ``stat``
        calls when none changed). Not while a change runs here (it brings the overlay in step
        itself, and a model switch replaces it): the next answer follows then. Answers that
        start meanwhile wait for the one bringing it in step."""
        with self._follow_lock:
            if self._write_lock.acquire(blocking=False):
                try:
                    self._follower.follow()
                finally:
                    self._write_lock.release()

    # --- knowledge -----------------------------------------------------------------------------

    def add_files(self, paths: list[Path], progress: Progress = _no_progress) -> dict[str, Any]:
        """Check ``paths`` completely, then add them to the web and the KB index
        (:meth:`Workspace.add_files`). A bad file raises a one-line :class:`FactweaveError` and
        changes nothing."""
        progress(0.0, "reading the files")
        batch = self.workspace.read(paths)  # before the lock: other changes need not wait for it
        with self._writing("the upload"):
            return self.workspace.add_files(paths, progress, batch=batch)

    def sources(self) -> list[dict[str, Any]]:
        """The web's sources with their counts, and whether they were uploaded
        (:meth:`Workspace.sources`)."""
        return self.workspace.sources()

    def remove_sources(self, sources: list[str], progress: Progress = _no_progress) -> dict[str, Any]:
        """Remove ``sources`` from the web, the uploaded facts and the fact index overlay
        (:meth:`Workspace.remove_sources`): no answer can state their facts any more."""
        with self._writing("the removal"):
            return self.workspace.remove_sources(sources, progress)

    def offered_models(self) -> list[str]:
        """What a visitor may switch to: the installed presets and the model the UI was started
        with. Not any folder or Hub id: loading one is the operator's choice (``--model``), not a
        visitor's (it would read the disk or download gigabytes for everyone)."""
        names = [name for name, preset in PRESETS.items() if preset_installed(preset)]
        return names if self._started_with in names else [self._started_with, *names]

    def switch_model(self, name: str, progress: Progress = _no_progress) -> None:
        """Load model ``name`` (one of :meth:`offered_models`) and rebuild the index for it; the
        current model stays if that fails."""
        if name == self.model_name:
            return
        if name not in self.offered_models():
            raise FactweaveError(f"{name!r} is not offered here; choose one of {', '.join(self.offered_models())} "
                                 "(the operator starts the UI with `factweave ui --model ...` for another)")
        with self._writing("the model switch"):
            previous = (self.loaded, self.generator, self.chat, self.reranker, self.model_name, self.settings)
            progress(0.1, f"loading {name}")
            try:
                self._open_model(name)  # questions go on with the current model while it loads
            except BaseException:
                with self._lock:
                    (self.loaded, self.generator, self.chat, self.reranker, self.model_name, self.settings) = previous
                    self._agents = {}
                raise
            old = previous[1]
            with self._lock:
                self._answers_done.wait_for(lambda: not self._answering.get(_base_key(old)))  # (releases the lock)
                self._answering.pop(_base_key(old), None)
            old.close()
            steps = getattr(previous[0], "steps", None)  # the replaced model's engine (llama.cpp's contexts)
            if steps is not None and steps is not getattr(self.loaded, "steps", None):
                steps.close()
            progress(1.0, f"{name} loaded")

    @contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """The write lock for one change; one line when another change holds it longer than
        :attr:`write_wait_s`."""
        if not self._write_lock.acquire(timeout=self.write_wait_s):
            raise FactweaveError(f"another change (an upload, a removal or a model switch) is still running after "
                                 f"{self.write_wait_s:g} s; {what} did not start: try again when it is done")
        try:
            yield
        finally:
            self._changes += 1  # the knowledge panel counts again (whatever the change did)
            self._write_lock.release()

    # How long the knowledge panel's counts are shown before they are counted again (changes made
    # by another process on the same web, e.g. `factweave web build`, show after at most this).
    knowledge_ttl_s = 30.0

    def knowledge(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """:meth:`counts` and :meth:`sources` as the knowledge panel shows them: counted once
        per change made here, or once per :attr:`knowledge_ttl_s`, however many pages load."""
        with self._view_lock:
            view = self._view
            if view is None or view[1] != self._changes or time.monotonic() - view[0] > self.knowledge_ttl_s:
                changes = self._changes
                view = self._view = (time.monotonic(), changes, self.counts(), self.sources())
            return dict(view[2]), [dict(row) for row in view[3]]

    def counts(self) -> dict[str, Any]:
        """What the knowledge holds now (for the knowledge panel)."""
        stats = self.web.stats()
        return {"web": str(self.web.folder), "documents": stats.get("documents", 0), "facts": stats.get("facts", 0),
                "keywords": stats.get("keywords", 0), "index_facts": len(self.overlay_index().facts),
                "uploaded_facts": len(self.uploaded_facts()), "model": self.model_name,
                "engine": getattr(self.loaded, "engine", "transformers")}


class _ModelOverlay:
    """The workspace's overlay: the loaded generator's :class:`GrowingFactIndex`; replacing it
    gives the runtime a new generator (:meth:`UIRuntime._rebuild_index`)."""

    def __init__(self, runtime: UIRuntime) -> None:
        self.runtime = runtime

    @property
    def added(self) -> int:
        return self.runtime.overlay_index().added

    def grow(self, facts: list[Fact]) -> int:
        return len(self.runtime.overlay_index().grow(facts))

    def replace(self, facts: list[Fact]) -> int:
        return self.runtime._rebuild_index(facts)

    def held(self) -> frozenset[str]:
        return self.runtime.overlay_index().added_texts


def _base_key(generator: Any) -> int:
    """The base fact index a generator's overlay is on (by id): shared by the generators a
    removal makes (:meth:`UIRuntime._rebuild_index`), released when the model is replaced."""
    return id(getattr(generator.index, "base", generator.index))


class _Answer:
    """One answer's events (an iterator, see :meth:`UIRuntime.stream`); ``done`` runs once, when
    they end or are closed, whether they were read or not."""

    def __init__(self, events: Generator[AgentEvent, None, None], done: Callable[[], None]) -> None:
        self._events: Generator[AgentEvent, None, None] | None = events
        self._done = done

    def __iter__(self) -> _Answer:
        return self

    def __next__(self) -> AgentEvent:
        if self._events is None:
            raise StopIteration
        try:
            return next(self._events)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        events, self._events = self._events, None
        if events is not None:
            try:
                events.close()
            finally:
                self._done()
