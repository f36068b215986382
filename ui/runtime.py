"""What every browser session shares: one loaded model, the knowledge web, the KB fact index and
the chat model, opened once; each question gets a light :class:`FactAgent` over them with the
session's own options (tree mode, beams, k, re-ranking).

Uploaded knowledge goes into the web (documents decomposed into facts, triples verbalized) and
into the KB fact index, as an overlay of small trees on the base index. The uploaded facts are
kept in ``<web>/uploads/facts.jsonl`` (rewritten atomically; each row names the source it came
from, ``upload``) so that the overlay is rebuilt for another model, and after a restart.
Removing a source (:meth:`UIRuntime.remove_sources`) takes it out of the web, of facts.jsonl
and of the overlay (rebuilt from the remaining uploaded facts); so does uploading a changed
version of a file, whose old facts give way to the new ones.

Example::

    with UIRuntime(load_settings(model="smollm2-135m")) as rt:
        for event in rt.stream("What instrument did he play?", AskOptions(tree="both"),
                               history=[{"role": "user", "content": "Where did Buck Owens die?"},
                                        {"role": "assistant", "content": "Fact: ...\nAnswer: Bakersfield"}]):
            ...
        rt.add_files([Path("facts.tsv")])
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import FactweaveError
from agent.files import replacing, write_json
from agent.index.union import GrowingFactIndex
from agent.knowledge.facts import Fact
from agent.models import PRESETS, preset_installed
from agent.pipeline.conversation import check_question as agent_check_question
from agent.pipeline.conversation import trim_history
from agent.rerank import Reranker
from agent.web.decompose import LLMDecomposer, SentenceDecomposer
from agent.web.removal import source_name

from .uploads import DEFAULT_MAX_BYTES, read_uploads

#: The most facts all uploads may add to the constrained-decoding index (kept in memory beside the
#: KB's index, which may be on disk or in PostgreSQL). Past it, build a KB: `factweave index build`.
MAX_UPLOADED_FACTS = 200_000

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
        self.max_upload_bytes = max_upload_bytes
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
        self.web = web if web is not None else open_web(settings, progress=progress)
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
        generator.index = GrowingFactIndex(generator.index, generator.tokenizer, max_facts=MAX_UPLOADED_FACTS)
        chat = open_chat(settings, loaded)
        with self._lock:
            self.loaded, self.generator = loaded, generator
            self._agents = {}
            self.chat = chat
            self.reranker = Reranker(self.chat)
            self.model_name = name
            self.settings = settings
        try:
            self._finish_removing()  # a removal cut short by a failure or a kill: complete it
        except Exception as exc:  # noqa: BLE001 - the UI starts anyway; the next change tries again
            log.warning("a removal cut short could not be completed yet (%s); the next change tries again", exc)
        removing = self._removing_sources()  # still named when its completion failed: never stated again
        uploaded = [fact for name, fact in self._uploaded() if name not in removing]
        if uploaded:
            self._extend_index(uploaded)
        try:
            self._finish_pending()  # an upload cut short by a failure or a kill: complete it
        except Exception as exc:  # noqa: BLE001 - the UI starts anyway; the next upload tries again
            log.warning("an upload cut short could not be completed yet (%s); the next upload tries again", exc)

    @property
    def uploads_dir(self) -> Path:
        return self.web.folder / "uploads"

    def uploaded_facts(self) -> list[Fact]:
        """Every fact uploaded into this web through the UI so far."""
        return [fact for _, fact in self._uploaded()]

    def _uploaded(self) -> list[tuple[str, Fact]]:
        """The uploaded facts with the source each came from (a file's name, as the web's sources
        are named). A row written before rows named it: its ``source``'s file (a triple's)."""
        path = self.uploads_dir / "facts.jsonl"
        if not path.is_file():
            return []
        rows = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if row.get("statement"):
                    fact = Fact.from_statement(row["statement"], row.get("source", ""))
                else:
                    fact = Fact(row["subject"], row["predicate"], row["object"], row.get("source", ""))
                rows.append((row.get("upload") or source_name(fact.source), fact))
        return rows

    def _save_uploaded(self, rows: list[tuple[str, Fact]]) -> None:
        self.uploads_dir.mkdir(parents=True, exist_ok=True)
        path = self.uploads_dir / "facts.jsonl"
        with replacing(path) as f:
            for upload, fact in rows:
                row = ({"statement": fact.statement} if fact.statement else
                       {"subject": fact.subject, "predicate": fact.predicate, "object": fact.object})
                f.write(json.dumps({**row, "source": fact.source, "upload": upload}, ensure_ascii=False) + "\n")

    def _extend_index(self, facts: list[Fact]) -> int:
        """Add ``facts`` to the overlay (those it holds already are skipped); how many were added."""
        return len(self.generator.index.grow(facts))

    def _rebuild_index(self, facts: list[Fact]) -> int:
        """Replace the overlay by one over ``facts`` (the uploaded facts left after a removal); how
        many it holds. A new generator gets it: answers under way keep the one they started with."""
        old = self.generator.index
        index = GrowingFactIndex(old.base, self.generator.tokenizer, max_facts=old.max_facts)
        index.grow(facts)
        generator = self.generator.with_index(index)
        with self._lock:
            self.generator = generator
            self._agents = {}
        return index.added

    def _store_uploaded(self, rows: list[tuple[str, Fact]]) -> int:
        """Save ``rows`` as every uploaded fact, then bring the overlay to them: grown when it
        only gains facts, rebuilt when some are gone. Returns how many facts the overlay gained
        (fewer than none when it lost some)."""
        kept = {fact.text for _, fact in rows}
        gone = any(fact.text not in kept for fact in self.uploaded_facts())
        self._save_uploaded(rows)
        before = self.generator.index.added
        if gone:
            return self._rebuild_index([fact for _, fact in rows]) - before
        return self._extend_index([fact for _, fact in rows])

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
               history: list[dict[str, str]] | None = None) -> Iterator[dict[str, Any]]:
        """The agent's events for ``question`` (see ``FactAgent.stream``); ``history``: the
        session's earlier turns, oldest first (bounded here, see
        :mod:`agent.pipeline.conversation`); setting ``stop`` or closing the iterator stops
        generation."""
        with self._lock:
            key, agent = _base_key(self.generator), self.agent(options)
            self._answering[key] = self._answering.get(key, 0) + 1
        events = agent.stream(question, history=trim_history(history), beams=options.beams, stop=stop)
        try:
            yield from events
        finally:
            events.close()
            with self._lock:
                self._answering[key] -= 1
                self._answers_done.notify_all()

    # --- knowledge -----------------------------------------------------------------------------

    def add_files(self, paths: list[Path], progress: Progress = _no_progress) -> dict[str, Any]:
        """Check ``paths`` completely, then add them to the web and the KB index. A bad file
        raises a one-line :class:`FactweaveError` and changes nothing."""
        progress(0.0, "reading the files")
        paths = [Path(p) for p in paths]
        batch = read_uploads(paths, max_bytes=self.max_upload_bytes)
        with self._writing("the upload"):
            self._finish_earlier("nothing of this upload was added", progress)
            self._keep_pending(paths)
            try:
                report = self._apply(batch, progress)
            except Exception as exc:
                raise FactweaveError(f"the upload stopped ({_brief(exc)}); it is kept and completes with the next "
                                     "upload or when the UI starts again") from exc
            self._drop_pending()
        progress(1.0, "done")
        return report

    # An upload is all-or-nothing by completion: its files are kept in uploads/pending/ from before
    # the first write until the last (the web's graph and vectors, facts.jsonl, the index), and an
    # upload found there (a failure or a kill in between) is applied again, which adds only what is
    # missing: the web skips chunks and triples it holds, facts.jsonl and the index skip known facts.

    @property
    def _pending_dir(self) -> Path:
        return self.uploads_dir / "pending"

    def _keep_pending(self, paths: list[Path]) -> None:
        import shutil

        tmp = self.uploads_dir / "pending.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        for i, path in enumerate(paths):  # one folder per file: names stay the user's (provenance)
            (tmp / str(i)).mkdir(parents=True)
            shutil.copyfile(path, tmp / str(i) / path.name)
        os.replace(tmp, self._pending_dir)

    def _drop_pending(self) -> None:
        import shutil

        shutil.rmtree(self._pending_dir, ignore_errors=True)

    def _finish_pending(self, progress: Progress = _no_progress) -> dict[str, Any] | None:
        """Apply again an upload that was cut short (see above); its report, or None if none was.
        Recovery always makes progress: a pending upload that cannot be read again (emptied by a
        kill inside its removal, over a lowered size limit, a stray entry) never will be, so it is
        moved to ``uploads/quarantine/`` with one line saying so, and later changes go on."""
        folder = self._pending_dir
        if not folder.is_dir():
            return None
        try:
            paths = _pending_files(folder)
            batch = read_uploads(paths, max_bytes=self.max_upload_bytes) if paths else None
        except (FactweaveError, OSError, ValueError) as exc:
            where = self._quarantine(folder)
            log.warning("an upload cut short cannot be read again (%s): moved to %s; upload its files again",
                        _brief(exc), where)
            return {"quarantined": str(where), "why": _brief(exc)}
        if batch is None:  # nothing in it: a kill inside its removal
            self._drop_pending()
            return None
        report = self._apply(batch, progress)
        self._drop_pending()
        return report

    def _quarantine(self, folder: Path) -> Path:
        target = self.uploads_dir / "quarantine" / time.strftime("%Y%m%d-%H%M%S")
        while target.exists():
            target = target.with_name(target.name + "-1")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(folder, target)
        return target

    def _apply(self, batch: Any, progress: Progress) -> dict[str, Any]:
        started = time.perf_counter()
        new: list[tuple[str, Fact]] = []  # (the file it came from, the fact)
        report: dict[str, Any] = {"files": batch.describe()}
        if batch.documents:
            progress(0.1, f"decomposing {len(batch.documents)} document(s) into facts")
            remote = self.settings.openai_base_url or self.settings.openai_api_key
            decomposer = LLMDecomposer(self.chat) if remote else SentenceDecomposer()
            built = self.web.add_documents(batch.documents, decomposer, progress=False)  # a changed file: replaced
            report["documents"] = built.as_dict()
            by_file: dict[str, list[Any]] = {}
            for document in batch.documents:
                by_file.setdefault(source_name(document.source), []).append(document)
            new += [(name, fact) for name, documents in by_file.items() for fact in self.web.document_facts(documents)]
        for i, (name, facts) in enumerate(batch.triples.items()):
            progress(0.4 + 0.3 * i / len(batch.triples), f"adding {len(facts)} triples from {name}")
            report[f"triples:{name}"] = self.web.add_triples(facts, source=name, progress=False).as_dict()
            new += [(name, fact) for fact in facts]
        progress(0.75, "adding the facts to the fact index")
        files = set(batch.triples) | {source_name(document.source) for document in batch.documents}
        # A file uploaded again is its new version: its earlier rows give way to the new ones.
        rows = [(name, fact) for name, fact in self._uploaded() if name not in files]
        known = {fact.text for _, fact in rows}
        rows += [(name, fact) for name, fact in new if fact.text not in known and not known.add(fact.text)]
        report["index_added"] = self._store_uploaded(rows)
        report["new_facts"] = len(new)
        report["seconds"] = round(time.perf_counter() - started, 2)
        return report

    def _finish_earlier(self, outcome: str, progress: Progress = _no_progress) -> None:
        """Complete an upload or a removal cut short before (under the lock): changes apply in order."""
        try:
            self._finish_removing()
            self._finish_pending(progress)
        except Exception as exc:
            raise FactweaveError(f"an earlier upload or removal that was cut short could not be completed "
                                 f"({_brief(exc)}); {outcome}") from exc

    # --- removing -----------------------------------------------------------------------------

    def sources(self) -> list[dict[str, Any]]:
        """The web's sources (documents, triple files) with their counts, and whether the UI
        uploaded them: ``[{"source", "documents", "facts", "uploaded"}, ...]``."""
        uploaded = {name for name, _ in self._uploaded()}
        rows = self.web.sources()
        held = {row["source"] for row in rows}
        rows += [{"source": name, "documents": 0, "facts": 0} for name in sorted(uploaded - held)]
        return [{**row, "uploaded": row["source"] in uploaded} for row in rows]

    def remove_sources(self, sources: list[str], progress: Progress = _no_progress) -> dict[str, Any]:
        """Remove ``sources`` (named as :meth:`sources` lists them) from the web, from
        ``uploads/facts.jsonl`` and from the fact index overlay, so that no answer can state their
        facts any more. A name that is no source raises a one-line :class:`FactweaveError` and
        removes nothing.

        Crash-safe by order: ``uploads/removing.json`` names the sources before anything is
        deleted; then the web (resumable through its own journal), facts.jsonl (rewritten
        atomically), the overlay (memory); the file goes last. A start (or the next upload or
        removal) that finds the file does the removal again: each step is idempotent."""
        names = list(dict.fromkeys(" ".join(str(s).split()) for s in sources if str(s).strip()))
        if not names:
            raise FactweaveError("choose a source to remove")
        with self._writing("the removal"):
            self._finish_earlier("nothing was removed")
            listed = [row["source"] for row in self.sources()]
            unknown = [name for name in names if name not in listed]
            if unknown:
                shown = ", ".join(listed[:8]) + (" ..." if len(listed) > 8 else "")
                raise FactweaveError(f"no source named {', '.join(unknown)}; the sources are {shown or 'none'}")
            progress(0.1, f"removing {', '.join(names)}")
            self.uploads_dir.mkdir(parents=True, exist_ok=True)
            write_json(self._removing_path, {"sources": names})
            try:
                report = self._remove(names)
            except Exception as exc:
                raise FactweaveError(f"the removal stopped ({_brief(exc)}); it completes with the next upload or "
                                     "removal, or when the UI starts again") from exc
            self._removing_path.unlink()
        progress(1.0, "removed")
        return report

    @property
    def _removing_path(self) -> Path:
        return self.uploads_dir / "removing.json"

    def _remove(self, names: list[str]) -> dict[str, Any]:
        """Remove ``names`` from every store, idempotently (done again after a kill at any step):
        the uploaded facts and the overlay first (they stop being stated at once), then the web,
        whose own removal cut short is finished before what it still holds is asked."""
        rows = self._uploaded()
        kept = [(name, fact) for name, fact in rows if name not in names]
        if len(kept) < len(rows):
            self._store_uploaded(kept)
        self.web.finish_removal()
        held = {row["source"] for row in self.web.sources()}
        in_web = [name for name in names if name in held]
        report: dict[str, Any] = self.web.remove(in_web).as_dict() if in_web else {"sources": names}
        report["uploaded_removed"] = len(rows) - len(kept)
        return report

    def _removing_sources(self) -> set[str]:
        path = self._removing_path
        try:
            return set(json.loads(path.read_text(encoding="utf-8"))["sources"]) if path.is_file() else set()
        except (OSError, ValueError, KeyError, TypeError):
            return set()

    def _finish_removing(self) -> dict[str, Any] | None:
        """Do again a removal that was cut short (see :meth:`remove_sources`); its report, or None."""
        path = self._removing_path
        if not path.is_file():
            return None
        report = self._remove(json.loads(path.read_text(encoding="utf-8"))["sources"])
        path.unlink()
        return report

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
                "keywords": stats.get("keywords", 0), "index_facts": len(self.generator.index.facts),
                "uploaded_facts": len(self.uploaded_facts()), "model": self.model_name}


def _base_key(generator: Any) -> int:
    """The base fact index a generator's overlay is on (by id): shared by the generators a
    removal makes (:meth:`UIRuntime._rebuild_index`), released when the model is replaced."""
    return id(getattr(generator.index, "base", generator.index))


def _brief(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _pending_files(folder: Path) -> list[Path]:
    """The files of a pending upload, in upload order (one numbered folder per file); anything
    else in it is an error."""
    entries = sorted(folder.iterdir(), key=lambda p: (len(p.name), p.name))
    stray = [p.name for p in entries if not (p.is_dir() and p.name.isdigit())]
    if stray:
        raise ValueError(f"unexpected entries in {folder}: {', '.join(stray[:3])}")
    return [f for sub in entries for f in sorted(sub.iterdir())]


def check_question(question: str) -> str:
    """The agent's own bound (:func:`agent.pipeline.conversation.check_question`), with the UI's
    words for an empty box."""
    if not (question or "").strip():
        raise FactweaveError("type a question first")
    return agent_check_question(question)
