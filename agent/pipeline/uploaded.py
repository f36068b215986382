"""The facts uploaded into a knowledge web, stated by an agent opened on it as they are at each
answer: whichever door uploads or removes them (the UI, ``factweave web add`` / ``web remove``,
another process), the agent's next answer follows, without a restart.

The generator's KB index is the base of a :class:`~agent.index.union.GrowingFactIndex` overlay
holding the stated uploads (:func:`agent.web.workspace.stated_uploads`). Before each answer,
:meth:`UploadedOverlay.generator` asks its :class:`~agent.web.workspace.UploadsFollower` whether
the uploads changed (two ``stat`` calls when they did not):

- an **upload** grows the overlay in place: readers never lock, and an answer under way may state
  the new facts from its next ``Fact:`` line on (fact ids never move);
- a **removal** gives a new overlay on the same base and a new generator
  (:meth:`FactGenerator.with_index`): answers under way keep the one they started with (a fact id
  they state means a fact of their index), every answer started after gets the new one.

Answers run at once (``serve``, MCP): one of them brings the overlay in step, the others wait for
it, then all read the same generator.

Example (not run: needs a model and a knowledge web)::

    overlay = UploadedOverlay(generator, "my-web")
    agent = FactAgent(overlay.generator(), web, latest=overlay.generator)
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..index.union import GrowingFactIndex
from ..knowledge.facts import Fact
from ..web.workspace import MAX_UPLOADED_FACTS, UploadsFollower

if TYPE_CHECKING:
    from ..decoding.generate import FactGenerator


class UploadedOverlay:
    """``generator``'s KB index plus the facts uploaded into the web in ``web_folder`` (at most
    ``max_facts``), followed as they change (see the module docstring); an
    :class:`~agent.web.workspace.Overlay`."""

    def __init__(self, generator: FactGenerator, web_folder: str | Path, *,
                 max_facts: int = MAX_UPLOADED_FACTS) -> None:
        if generator.index is None:
            raise ValueError("uploaded facts are an overlay on the generator's KB index; it has none")
        self._base, self._tokenizer, self._max_facts = generator.index, generator.tokenizer, max_facts
        self._generator = generator.with_index(self._new_index())
        self.follower = UploadsFollower(Path(web_folder), self)

    def _new_index(self) -> GrowingFactIndex:
        return GrowingFactIndex(self._base, self._tokenizer, max_facts=self._max_facts)

    def _grown(self) -> GrowingFactIndex:
        """The generator's index: always one :meth:`_new_index` made."""
        return cast(GrowingFactIndex, self._generator.index)

    def generator(self) -> FactGenerator:
        """The generator over the KB and the uploads as they are now."""
        self.follower.follow()
        return self._generator

    # --- the Overlay protocol (called by the follower, under its lock) ---------------------------

    @property
    def added(self) -> int:
        return self._grown().added

    def held(self) -> frozenset[str]:
        return self._grown().added_texts

    def grow(self, facts: list[Fact]) -> int:
        return len(self._grown().grow(facts))

    def replace(self, facts: list[Fact]) -> int:
        index = self._new_index()
        index.grow(facts)
        self._generator = self._generator.with_index(index)  # one assignment: the next answer gets it
        return index.added
