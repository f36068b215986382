"""The fact: a (subject, predicate, object) triple and its one verbalization.

A fact is written ``<subject> <predicate> <object> .``. The angle brackets delimit labels, so a
label must not contain them: ``<`` and ``>`` inside a label are replaced by the single
guillemets ``‹`` and ``›`` (one consistent rule, applied by :func:`clean_label`), and the original
label stays available on the :class:`Fact` for provenance.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

_BRACKETS = str.maketrans({"<": "‹", ">": "›"})
_SPACE = re.compile(r"\s+")
# A fact text that is a triple (spaces and the dot loose, as a model may write them).
_TRIPLE_TEXT = re.compile(r"^\s*<([^<>]*)>\s*<([^<>]*)>\s*<([^<>]*)>\s*\.?\s*$")


def parse_triple(text: str) -> tuple[str, str, str] | None:
    """The subject, predicate and object of a fact text written ``<s> <p> <o> .`` (spaces and the
    dot loose, as a model may write them), each stripped; None for a statement."""
    m = _TRIPLE_TEXT.match(text)
    return tuple(part.strip() for part in m.groups()) if m else None  # type: ignore[return-value]


def clean_label(label: str) -> str:
    """Return ``label`` as it appears inside ``<...>``: brackets swapped, whitespace folded."""
    return _SPACE.sub(" ", label.translate(_BRACKETS)).strip()


def verbalize(subject: str, predicate: str, obj: str) -> str:
    """``verbalize("Paris", "country", "France") == "<Paris> <country> <France> ."``"""
    return f"<{clean_label(subject)}> <{clean_label(predicate)}> <{clean_label(obj)}> ."


def inverse_predicate(predicate: str) -> str:
    """The label used for the inverse direction: ``capital of`` -> ``has capital``,
    ``place of birth`` -> ``place of birth of``."""
    p = predicate.strip()
    if p.endswith(" of"):
        return "has " + p[: -len(" of")]
    return p + " of"


@dataclass(frozen=True)
class Fact:
    """One triple with where it came from (``source``: e.g. ``file.tsv:12``).

    A fact may instead be a free-text ``statement`` (an atomic fact of the knowledge web, e.g.
    "Ada Lovelace was an English mathematician."): its text is then the statement itself, and
    subject, predicate and object are empty. See :meth:`from_statement`.
    """

    subject: str
    predicate: str
    object: str
    source: str = ""
    statement: str = ""

    @classmethod
    def from_statement(cls, statement: str, source: str = "") -> Fact:
        """A fact whose text is ``statement`` (whitespace folded), not a verbalized triple."""
        text = _SPACE.sub(" ", statement).strip()
        if not text:
            raise ValueError("a fact statement must not be empty")
        return cls("", "", "", source, text)

    @property
    def text(self) -> str:
        return self.statement or verbalize(self.subject, self.predicate, self.object)

    def inverse(self, predicate: str | None = None) -> Fact:
        """The same knowledge read tail to head, for ``<object> <inverse> <subject> .``."""
        return replace(
            self,
            subject=self.object,
            predicate=predicate or inverse_predicate(self.predicate),
            object=self.subject,
        )
