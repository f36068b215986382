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
    """One triple with where it came from (``source``: e.g. ``file.tsv:12``)."""

    subject: str
    predicate: str
    object: str
    source: str = ""

    @property
    def text(self) -> str:
        return verbalize(self.subject, self.predicate, self.object)

    def inverse(self, predicate: str | None = None) -> Fact:
        """The same knowledge read tail to head, for ``<object> <inverse> <subject> .``."""
        return replace(
            self,
            subject=self.object,
            predicate=predicate or inverse_predicate(self.predicate),
            object=self.subject,
        )
