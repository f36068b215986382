"""A knowledge web with what was uploaded into it, changed crash-safely: add files, replace a
changed file, remove sources. Used by the UI (:mod:`ui.runtime`), by ``factweave web add`` and
``factweave web remove``, and read by every agent opened on the web (:func:`agent.runtime.open_agent`:
``ask``, ``serve``, MCP, LangChain), so each states what the others uploaded.

Uploaded knowledge goes into the web (documents decomposed into facts, triples verbalized) and
into the constrained-decoding fact index of a loaded model, as an :class:`Overlay` of small trees
on the KB's index. The uploaded facts are kept in ``<web>/uploads/facts.jsonl`` (rewritten
atomically; each row names the file it came from, ``upload``), so that the overlay is rebuilt for
another model, after a restart, and by another process on the same web.

Crash-safe by completion, each change journalled before its first write:

- an **upload** keeps its files in ``uploads/pending/`` from before the first write (the web's
  graph and vectors, facts.jsonl, the overlay) until after the last; an upload found there (a
  failure or a kill in between) is applied again, which adds only what is missing: the web skips
  chunks and triples it holds, facts.jsonl and the overlay skip known facts. One that cannot be read
  again is moved to ``uploads/quarantine/`` with a line saying so: recovery never blocks later changes.
- a **removal** names its sources in ``uploads/removing.json`` before anything is deleted; then
  facts.jsonl and the overlay (they stop being stated at once), the web (resumable through its own
  journal); the file goes last. Each step is idempotent, so the next start or change does it again.
  Until it is done its sources are out of every answer: not stated (:func:`stated_uploads`) and
  not found by the web's search (:class:`agent.web.removal.Withdrawn`).

Every door finishes what was cut short when it opens the web (:func:`agent.runtime.open_web`,
:meth:`recover`): the UI, ``ask``, ``serve``, MCP and the ``web`` commands alike.

A removal is always possible. An upload that reads fine but cannot be applied (the document
decomposer's endpoint is down) stays pending and is tried again by each change and start; while
it fails, a later upload stops with one line naming it and how to clear it (fix the cause, or
remove its files), and a removal goes on without it. Removing a pending upload's files drops
them from it (nothing of them is applied later); the rest of it stays pending. Quarantining it
at its first failure would have lost an upload to a passing outage; keeping it blocked would
have made a dead endpoint block every removal.

A workspace's changes take turns across processes and handles (``uploads/change.lock``: a
``flock``, dropped with its process): a change waits for another one (at most
:attr:`Workspace.lock_wait_s`), and recovery at a start leaves a change under way to its process
(found pending then, it is not cut short). Within a process its owner runs one change at a time
(the UI's write lock); the web's own writes take turns too (``<web>/write.lock``).

An agent opened on the web follows changes made through any door: :class:`UploadsFollower`
compares a stamp of facts.jsonl and removing.json (two ``stat`` calls, :func:`uploads_stamp`)
before each answer and brings its overlay in step when they changed: grown for an upload,
replaced for a removal (see :mod:`agent.pipeline.uploaded` for what answers under way keep).

A file uploaded again is its new version: its old facts give way to the new ones.

Example (not run: needs a knowledge web)::

    from agent.web.workspace import Workspace

    with KnowledgeWeb.open("my-web") as web:
        space = Workspace(web)
        space.add_files([Path("facts.tsv"), Path("notes.pdf")])
        space.remove_sources(["notes.pdf"])
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePath
from typing import Any, Protocol

from ..errors import FactweaveError
from ..files import file_stamp, locked, replacing, write_json
from ..knowledge.facts import Fact
from .decompose import SentenceDecomposer
from .removal import source_name
from .uploads import DEFAULT_MAX_BYTES, UploadBatch, read_uploads

log = logging.getLogger(__name__)

Progress = Callable[[float, str], None]

#: The most facts all uploads may add to the constrained-decoding index (kept in memory beside the
#: KB's index, which may be on disk or in PostgreSQL). Past it, build a KB: `factweave index build`.
MAX_UPLOADED_FACTS = 200_000


def _no_progress(fraction: float, message: str) -> None:
    pass


class Overlay(Protocol):
    """The fact-index overlay a workspace keeps in step with its uploads: a loaded model's
    (:class:`agent.index.union.GrowingFactIndex` on its generator, see :mod:`ui.runtime`)."""

    @property
    def added(self) -> int:
        """How many uploaded facts the overlay holds."""
        ...

    def grow(self, facts: list[Fact]) -> int:
        """Add ``facts`` (those held already are skipped); how many were added."""
        ...

    def replace(self, facts: list[Fact]) -> int:
        """Hold exactly ``facts`` (the uploaded facts left after a removal); how many it holds."""
        ...

    def held(self) -> frozenset[str]:
        """The texts of the uploaded facts it holds (:attr:`GrowingFactIndex.added_texts`)."""
        ...


class Workspace:
    """``web`` with its uploads (``<web>/uploads/``); ``overlay``: a loaded model's fact-index
    overlay kept in step (none for a command that loads no model: the next agent opened on the web
    reads facts.jsonl); ``decomposer``: makes the decomposer for an upload's documents (called
    per upload: the UI's chat model may have changed)."""

    def __init__(self, web: Any, *, overlay: Overlay | None = None, decomposer: Callable[[], Any] | None = None,
                 max_upload_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.web = web
        self.overlay = overlay
        self.decomposer = decomposer or SentenceDecomposer
        self.max_upload_bytes = max_upload_bytes

    @property
    def folder(self) -> Path:
        return Path(self.web.folder) / "uploads"

    # --- what was uploaded ---------------------------------------------------------------------

    def uploaded(self) -> list[tuple[str, Fact]]:
        """The uploaded facts with the file each came from (named as the web's sources are). A
        row written before rows named it: its ``source``'s file (a triple's)."""
        return _read_uploaded(self.folder)

    def uploaded_facts(self) -> list[Fact]:
        """Every fact uploaded into this web so far."""
        return [fact for _, fact in self.uploaded()]

    def stated_facts(self) -> list[Fact]:
        """The uploaded facts an agent may state: those of a removal cut short are not, even when
        completing it failed."""
        return stated_uploads(self.web.folder)

    def sources(self) -> list[dict[str, Any]]:
        """The web's sources (documents, triple files) with their counts, and whether they were
        uploaded: ``[{"source", "documents", "facts", "uploaded"}, ...]``."""
        uploaded = {name for name, _ in self.uploaded()}
        pending = set(self.pending_files())
        rows = self.web.sources()
        held = {row["source"] for row in rows}
        rows += [{"source": name, "documents": 0, "facts": 0} for name in sorted((uploaded | pending) - held)]
        return [{**row, "uploaded": row["source"] in uploaded | pending, "pending": row["source"] in pending}
                for row in rows]

    def pending_files(self) -> list[str]:
        """The files of an upload cut short and not completed yet (see the module docstring)."""
        try:
            return [path.name for path in _pending_files(self._pending_dir)] if self._pending_dir.is_dir() else []
        except (OSError, ValueError):  # unreadable: quarantined by the next change or start
            return []

    def _save_uploaded(self, rows: list[tuple[str, Fact]]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with replacing(self.folder / "facts.jsonl") as f:
            for upload, fact in rows:
                row = ({"statement": fact.statement} if fact.statement else
                       {"subject": fact.subject, "predicate": fact.predicate, "object": fact.object})
                f.write(json.dumps({**row, "source": fact.source, "upload": upload}, ensure_ascii=False) + "\n")

    def _extend_index(self, facts: list[Fact]) -> int:
        return self.overlay.grow(facts) if self.overlay is not None else 0

    def _store_uploaded(self, rows: list[tuple[str, Fact]]) -> int:
        """Save ``rows`` as every uploaded fact, then bring the overlay to them: grown when it
        only gains facts, replaced when some are gone. How many facts the overlay gained (fewer
        than none when it lost some)."""
        kept = {fact.text for _, fact in rows}
        gone = any(fact.text not in kept for fact in self.uploaded_facts())
        self._save_uploaded(rows)
        if self.overlay is None:
            return 0
        if gone:
            before = self.overlay.added
            return self.overlay.replace([fact for _, fact in rows]) - before
        return self._extend_index([fact for _, fact in rows])

    # --- recovery ------------------------------------------------------------------------------

    #: How long a change waits for another process's change to these uploads to end.
    lock_wait_s: float = 60.0

    @contextmanager
    def _changing(self, what: str) -> Iterator[None]:
        """This workspace's turn to change (``uploads/change.lock``, across processes); one line
        when another change holds it longer than :attr:`lock_wait_s`."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with locked(self.folder / "change.lock", self.lock_wait_s) as had:
            if not had:
                raise FactweaveError(f"another process (the UI, `factweave web add` or `web remove`, ...) has been "
                                     f"changing the uploads of {self.web.folder} for more than {self.lock_wait_s:g} "
                                     f"s; {what} did not start: try again when it is done")
            yield

    def recover(self) -> None:
        """Complete a removal, then an upload, cut short before (a failure or a kill); log a line
        when one cannot be completed yet (the next change tries again). For a start: it goes on.
        A change under way in another process is not cut short: it is left to that process."""
        if pending_work(self.web.folder):
            with locked(self.folder / "change.lock", 0) as had:
                if not had:
                    log.info("the uploads of %s are being changed by another process; it completes the change",
                             self.web.folder)
                else:
                    self._recover()
        if self.overlay is not None:
            self._extend_index(self.stated_facts())

    def _recover(self) -> None:
        try:
            self._finish_removing()
        except Exception as exc:  # noqa: BLE001 - the owner starts anyway; the next change tries again
            log.warning("a removal cut short could not be completed yet (%s); the next change tries again", exc)
        try:
            self._finish_pending()
        except Exception as exc:  # noqa: BLE001 - the owner starts anyway; the next upload tries again
            log.warning("%s", self._blocked(exc, "the start goes on without it"))

    def finish_earlier(self, outcome: str, progress: Progress = _no_progress) -> None:
        """Complete a removal, then an upload, cut short before: changes apply in order. One line
        ending with ``outcome`` when that fails (for an upload: which one, and how to clear it)."""
        try:
            self._finish_removing()
        except Exception as exc:
            raise FactweaveError(f"an earlier removal that was cut short could not be completed "
                                 f"({brief(exc)}); {outcome}") from exc
        try:
            self._finish_pending(progress)
        except Exception as exc:
            raise FactweaveError(self._blocked(exc, outcome)) from exc

    def _blocked(self, exc: BaseException, outcome: str) -> str:
        """One line: the pending upload cannot be completed (``exc``), ``outcome``, how to clear it."""
        files = ", ".join(self.pending_files()) or "its files"
        return (f"an earlier upload ({files}) was cut short and cannot be completed yet ({brief(exc)}); {outcome}. "
                f"It completes with the next upload or start once the cause is fixed; to give it up, remove "
                f"{files} (`factweave web remove`, or Remove in the UI)")

    # --- adding --------------------------------------------------------------------------------

    def read(self, paths: list[Path]) -> UploadBatch:
        """``paths`` checked completely and parsed, nothing written (a bad file: one line)."""
        return read_uploads([Path(p) for p in paths], max_bytes=self.max_upload_bytes)

    def add_files(self, paths: list[Path], progress: Progress = _no_progress, *,
                  batch: UploadBatch | None = None) -> dict[str, Any]:
        """Check ``paths`` completely, then add them to the web, facts.jsonl and the overlay. A bad
        file raises a one-line :class:`FactweaveError` and changes nothing; a failure while writing
        keeps the upload, completed by the next change or start. ``batch``: what :meth:`read` made
        of ``paths`` already (the UI reads before it takes its write lock)."""
        progress(0.0, "reading the files")
        paths = [Path(p) for p in paths]
        batch = batch if batch is not None else self.read(paths)
        with self._changing("the upload"):
            self.finish_earlier("nothing of this upload was added", progress)
            self._keep_pending(paths)
            try:
                report = self._apply(batch, progress)
            except Exception as exc:
                names = ", ".join(path.name for path in paths)
                raise FactweaveError(f"the upload stopped ({brief(exc)}); it is kept and completes with the next "
                                     f"upload or start, or remove {names} to give it up") from exc
            self._drop_pending()
        progress(1.0, "done")
        return report

    @property
    def _pending_dir(self) -> Path:
        return self.folder / "pending"

    def _keep_pending(self, paths: list[Path]) -> None:
        tmp = self.folder / "pending.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        for i, path in enumerate(paths):  # one folder per file: names stay the user's (provenance)
            (tmp / str(i)).mkdir(parents=True)
            shutil.copyfile(path, tmp / str(i) / path.name)
        os.replace(tmp, self._pending_dir)

    def _drop_pending(self) -> None:
        shutil.rmtree(self._pending_dir, ignore_errors=True)

    def _finish_pending(self, progress: Progress = _no_progress) -> dict[str, Any] | None:
        """Apply again an upload that was cut short; its report, or None if none was. A pending
        upload that cannot be read again (emptied by a kill inside its removal, over a lowered size
        limit, a stray entry) never will be: it is moved to ``uploads/quarantine/``."""
        folder = self._pending_dir
        if not folder.is_dir():
            return None
        try:
            paths = _pending_files(folder)
            batch = read_uploads(paths, max_bytes=self.max_upload_bytes) if paths else None
        except (FactweaveError, OSError, ValueError) as exc:
            where = self._quarantine(folder)
            log.warning("an upload cut short cannot be read again (%s): moved to %s; upload its files again",
                        brief(exc), where)
            return {"quarantined": str(where), "why": brief(exc)}
        if batch is None:  # nothing in it: a kill inside its removal
            self._drop_pending()
            return None
        report = self._apply(batch, progress)
        self._drop_pending()
        return report

    def _quarantine(self, folder: Path) -> Path:
        target = self.folder / "quarantine" / time.strftime("%Y%m%d-%H%M%S")
        while target.exists():
            target = target.with_name(target.name + "-1")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(folder, target)
        return target

    def _apply(self, batch: UploadBatch, progress: Progress) -> dict[str, Any]:
        started = time.perf_counter()
        new: list[tuple[str, Fact]] = []  # (the file it came from, the fact)
        report: dict[str, Any] = {"files": batch.describe()}
        if batch.documents:
            progress(0.1, f"decomposing {len(batch.documents)} document(s) into facts")
            built = self.web.add_documents(batch.documents, self.decomposer(), progress=False)  # a changed file: replaced
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
        rows = [(name, fact) for name, fact in self.uploaded() if name not in files]
        known = {fact.text for _, fact in rows}
        for name, fact in new:
            if fact.text not in known:
                known.add(fact.text)
                rows.append((name, fact))
        report["index_added"] = self._store_uploaded(rows)
        report["new_facts"] = len(new)
        report["seconds"] = round(time.perf_counter() - started, 2)
        return report

    # --- removing ------------------------------------------------------------------------------

    def remove_sources(self, sources: list[str], progress: Progress = _no_progress) -> dict[str, Any]:
        """Remove ``sources`` (named as :meth:`sources` lists them) from the web, from facts.jsonl
        and from the overlay, so that no answer can state their facts any more. A name that is no
        source raises a one-line :class:`FactweaveError` and removes nothing."""
        names = list(dict.fromkeys(" ".join(str(s).split()) for s in sources if str(s).strip()))
        if not names:
            raise FactweaveError("choose a source to remove")
        with self._changing("the removal"):
            return self._remove_sources(names, progress)

    def _remove_sources(self, names: list[str], progress: Progress) -> dict[str, Any]:
        try:
            self._finish_removing()
        except Exception as exc:
            raise FactweaveError(f"an earlier removal that was cut short could not be completed ({brief(exc)}); "
                                 "nothing was removed") from exc
        blocked = None
        try:  # changes apply in order; one that cannot be applied (yet) does not stop a removal
            self._finish_pending()
        except Exception as exc:  # noqa: BLE001 - said in the report and the log; kept pending
            blocked = self._blocked(exc, "the removal went on without it")
            log.warning("%s", blocked)
        listed = [row["source"] for row in self.sources()]
        # A file given by its path names the file (the web stores sources under the file's name).
        names = list(dict.fromkeys(name if name in listed or PurePath(name).name not in listed
                                   else PurePath(name).name for name in names))
        unknown = [name for name in names if name not in listed]
        if unknown:
            shown = ", ".join(listed[:8]) + (" ..." if len(listed) > 8 else "")
            raise FactweaveError(f"no source named {', '.join(unknown)}; the sources are {shown or 'none'}")
        progress(0.1, f"removing {', '.join(names)}")
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json(self._removing_path, {"sources": names})
        try:
            report = self._remove(names)
        except Exception as exc:
            raise FactweaveError(f"the removal stopped ({brief(exc)}); it completes with the next upload or "
                                 "removal, or the next start") from exc
        self._removing_path.unlink()
        if blocked is not None and self._pending_dir.is_dir():
            report["pending"] = blocked
        progress(1.0, "removed")
        return report

    @property
    def _removing_path(self) -> Path:
        return upload_removal_journal(self.web.folder)

    def _remove(self, names: list[str]) -> dict[str, Any]:
        """Remove ``names`` from every store, idempotently (done again after a kill at any step):
        the pending upload's files of those names (never applied now), the uploaded facts and the
        overlay (they stop being stated at once), then the web, whose own removal cut short is
        finished before what it still holds is asked."""
        dropped = self._drop_from_pending(names)
        rows = self.uploaded()
        kept = [(name, fact) for name, fact in rows if name not in names]
        if len(kept) < len(rows):
            self._store_uploaded(kept)
        self.web.finish_removal()
        held = {row["source"] for row in self.web.sources()}
        in_web = [name for name in names if name in held]
        report: dict[str, Any] = self.web.remove(in_web).as_dict() if in_web else {"sources": names}
        report["uploaded_removed"] = len(rows) - len(kept)
        report["pending_dropped"] = dropped
        return report

    def _drop_from_pending(self, names: list[str]) -> list[str]:
        """Drop the files named ``names`` from the pending upload (the whole upload when none is
        left); the names dropped."""
        folder = self._pending_dir
        if not folder.is_dir():
            return []
        dropped = []
        for sub in sorted(folder.iterdir()):
            files = [f.name for f in sub.iterdir()] if sub.is_dir() else []
            if files and all(name in names for name in files):
                shutil.rmtree(sub)
                dropped += files
        if not any(folder.iterdir()):
            self._drop_pending()
        return dropped

    def _finish_removing(self) -> dict[str, Any] | None:
        """Do again a removal that was cut short; its report, or None."""
        path = self._removing_path
        if not path.is_file():
            return None
        report = self._remove(json.loads(path.read_text(encoding="utf-8"))["sources"])
        path.unlink()
        return report


def stated_uploads(web_folder: Path) -> list[Fact]:
    """The facts uploaded into the web in ``web_folder`` that an agent may state: those of a
    removal cut short are not, even when completing it failed. Read only: for an agent opened on
    the web beside the process that changes it."""
    removing = set(removing_sources(web_folder))
    return [fact for name, fact in _read_uploaded(Path(web_folder) / "uploads") if name not in removing]


def uploads_stamp(web_folder: Path) -> tuple[Any, ...]:
    """A cheap stamp of what :func:`stated_uploads` reads (facts.jsonl and removing.json): it
    changes with every upload and removal, through any door (:func:`agent.files.file_stamp`)."""
    return file_stamp(Path(web_folder) / "uploads" / "facts.jsonl"), file_stamp(upload_removal_journal(web_folder))


def pending_work(web_folder: Path) -> bool:
    """Whether an upload or a removal of the web in ``web_folder`` is under way or was cut short."""
    folder = Path(web_folder) / "uploads"
    return (folder / "pending").exists() or upload_removal_journal(web_folder).exists()


def upload_removal_journal(web_folder: Path) -> Path:
    """Where a removal names its sources before anything is deleted (see the module docstring)."""
    return Path(web_folder) / "uploads" / "removing.json"


def removing_sources(web_folder: Path) -> list[str]:
    """The sources a removal under way or cut short names (:func:`upload_removal_journal`), or
    none."""
    path = upload_removal_journal(web_folder)
    try:
        return [str(name) for name in json.loads(path.read_text(encoding="utf-8"))["sources"]]
    except (OSError, ValueError, KeyError, TypeError):  # none, or unreadable: the next removal says so
        return []


class UploadsFollower:
    """Keeps an :class:`Overlay` in step with the uploads of the web in ``web_folder`` as any door
    changes them (this process or another: the UI, ``web add``, ``web remove``). Thread-safe:
    answers call :meth:`follow` at once; one brings the overlay in step, the others wait for it."""

    def __init__(self, web_folder: Path, overlay: Overlay) -> None:
        self.web_folder = Path(web_folder)
        self.overlay = overlay
        self._seen: tuple[Any, ...] | None = None  # the stamp the overlay was brought in step with
        self._lock = threading.Lock()

    def follow(self) -> None:
        """Bring the overlay in step when the uploads changed since the last call (two ``stat``
        calls when not): grown by the facts uploaded since, replaced when some were removed."""
        if uploads_stamp(self.web_folder) == self._seen:
            return
        with self._lock:
            stamp = uploads_stamp(self.web_folder)  # before reading: a change meanwhile is followed next time
            if stamp == self._seen:
                return
            stated = stated_uploads(self.web_folder)
            held = self.overlay.held()
            if held <= {fact.text for fact in stated}:
                self.overlay.grow([fact for fact in stated if fact.text not in held])
            else:
                self.overlay.replace(stated)
            self._seen = stamp


def _read_uploaded(folder: Path) -> list[tuple[str, Fact]]:
    path = folder / "facts.jsonl"
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


def brief(exc: BaseException) -> str:
    """An exception as one short line."""
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _pending_files(folder: Path) -> list[Path]:
    """The files of a pending upload, in upload order (one numbered folder per file); anything
    else in it is an error."""
    entries = sorted(folder.iterdir(), key=lambda p: (len(p.name), p.name))
    stray = [p.name for p in entries if not (p.is_dir() and p.name.isdigit())]
    if stray:
        raise ValueError(f"unexpected entries in {folder}: {', '.join(stray[:3])}")
    return [f for sub in entries for f in sorted(sub.iterdir())]
