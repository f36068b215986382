"""KAMEL conversations (``factweave eval kamel-chat``): follow-up questions and two-hop chains,
built deterministically from a KAMEL folder.

Two kinds of item, each its own stratum:

- ``follow-up``: a subject with one fact in each of two relations. Turn 1 asks the first
  relation's template question naming the subject; its answer is *given*, not generated: the
  history holds that question and the gold reply ``Fact: <S> <P> <O> .\\nAnswer: O``, so the
  follow-up is measured in isolation. Turn 2 asks the second relation with a pronoun or an
  elliptical wording instead of the name ("Where did they die?", "What about its original
  language?"): persons are "they", things "it". Each follow-up item is also asked as its
  ``standalone`` twin, the second relation's template question with the name and no history,
  so the report gives the follow-up score as a share of the standalone score.
- ``two-hop``: a chain of two facts, subject -r1-> bridge -r2-> answer (a person's country of
  citizenship -> its official language, a film's country of origin -> its official language,
  a product's manufacturer -> its headquarters, ...), asked in one question that names only the
  subject ("What is the official language of the country Edith Frank-Holländer is a citizen
  of?"); the gold answers are the bridge's r2 objects (labels and aliases).

Every fact comes from the folder's rows, all splits (the KB the ``refactx`` tree holds). Only
subjects with one row in a relation (a label on two rows may be two entities) and, for chains, a
subject with exactly one r1 object (so the bridge is not ambiguous) are used. The web the run
uses holds the dev split's triples only, so each question records ``meta["in_web"]``: whether
every fact it needs (the follow-up's second fact; both hops) is on a dev row.

Selection (seeded by ``seed``): candidates grouped by kind and by relation pair, each group
shuffled with ``random.Random(seed)``, pairs taken round-robin within a kind and the kinds
alternated, so ``limit`` items spread over as many pairs as they can. Items whose facts are all
in the web come first (on the demo KB: 70 follow-ups and 96 chains of about 580 and 4,200), so
web-RAG and the agent's retrieval can reach what the first items ask; the rest follow. ``limit`` counts items: a
follow-up item is two questions (follow-up and standalone).

Example::

    >>> from agent.knowledge.kamel import demo_kamel_root
    >>> questions = kamel_chat_questions(demo_kamel_root(), limit=4, seed=0)
    >>> [(q.meta["stratum"], q.text) for q in questions]
    [('follow-up', 'What about their occupation?'), ('standalone', 'What is the occupation of Shi Changxu?'),
     ('two-hop', 'What is the official language of the country Banff National Park Pavilion is located in?'),
     ('follow-up', 'What is their field of work?'), ('standalone', 'What are the fields of work of Conrad Bursian?'),
     ('two-hop', 'What is the official language of the place where Nirmala Rajasekar was born?')]
"""
from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..knowledge.facts import Fact
from ..knowledge.kamel import (DEFAULT_SPLITS, property_labels, question_templates, relation_ids,
                               relation_rows)
from .halves import half_of
from .questions import EvalQuestion, natural_key

KINDS = ("follow-up", "two-hop")
WEB_SPLIT = "dev"

# What the subject of each relation can be. A follow-up pairs two relations whose subjects can
# be the same kind of thing (one label on a person and a place is two entities: "Unity" the
# state has a country, "Unity" the game engine a programming language); people and bands are
# "they", the rest "it".
_PERSON = ("P19", "P20", "P27", "P101", "P102", "P103", "P106", "P140", "P172", "P241", "P412", "P413", "P641",
           "P1303", "P1412", "P1532", "P6886")
_SUBJECT_KINDS: dict[str, frozenset[str]] = {
    **{r: frozenset({"person"}) for r in _PERSON},
    "P136": frozenset({"person", "band", "work"}), "P264": frozenset({"person", "band"}),
    "P740": frozenset({"band", "organization"}), "P17": frozenset({"place", "organization"}),
    "P37": frozenset({"place"}), "P59": frozenset({"star"}), "P159": frozenset({"organization"}),
    "P176": frozenset({"product"}), "P277": frozenset({"software"}),
    "P364": frozenset({"work"}), "P407": frozenset({"work"}), "P449": frozenset({"work"}),
    "P495": frozenset({"work", "band"}),
}

# Follow-up wordings of each relation, by the pronoun the subject takes.
FOLLOW_UPS: dict[str, dict[str, tuple[str, ...]]] = {
    "P19": {"they": ("Where were they born?", "And where were they born?", "What about their place of birth?")},
    "P20": {"they": ("Where did they die?", "And where did they die?", "What about their place of death?")},
    "P27": {"they": ("And what is their country of citizenship?", "Which country are they a citizen of?",
                     "What about their citizenship?")},
    "P101": {"they": ("What is their field of work?", "And what field do they work in?")},
    "P102": {"they": ("Which party were they a member of?", "And what about their political party?")},
    "P103": {"they": ("And what is their native language?", "What is their mother tongue?",
                      "What about their native language?")},
    "P106": {"they": ("And what is their occupation?", "What do they do for a living?",
                      "What about their occupation?")},
    "P140": {"they": ("What is their religion?", "And what about their religion?")},
    "P172": {"they": ("Which ethnic group do they belong to?", "And what is their ethnic group?")},
    "P241": {"they": ("Which military branch did they serve in?", "And what about their military branch?")},
    "P412": {"they": ("And what is their voice type?", "What about their voice type?")},
    "P413": {"they": ("What position do they play?", "And which positions have they played?")},
    "P641": {"they": ("Which sport do they play?", "And what sport did they play?")},
    "P1303": {"they": ("Which instrument do they play?", "And what instruments do they play?")},
    "P1412": {"they": ("Which languages do they speak?", "And what languages do they speak?",
                       "What about the languages they speak?")},
    "P1532": {"they": ("Which country have they played for?", "And what country do they play for?")},
    "P6886": {"they": ("Which languages do they write in?", "And what about their writing language?")},
    "P136": {"they": ("And what is their genre?", "What genre do they play?"),
             "it": ("And what is its genre?", "What genre is it?")},
    "P264": {"they": ("Which record label are they signed to?", "And what is their record label?")},
    "P740": {"they": ("Where were they formed?", "And where were they formed?"),
             "it": ("Where was it formed?", "And where was it founded?")},
    "P17": {"it": ("Which country is it in?", "And what country is it located in?")},
    "P37": {"it": ("And what is its official language?", "Which language is official in it?")},
    "P59": {"it": ("Which constellation is it part of?", "And what constellation is it in?")},
    "P159": {"it": ("Where is its headquarters?", "And where is it headquartered?")},
    "P176": {"it": ("Who makes it?", "And who is its manufacturer?")},
    "P277": {"it": ("Which programming language is it written in?", "And what is it programmed in?")},
    "P364": {"it": ("What about its original language?", "And what is its original language?")},
    "P407": {"it": ("What language is it in?", "And what is its language?")},
    "P449": {"it": ("Who originally broadcast it?", "And what was its original broadcaster?")},
    "P495": {"it": ("What about its country of origin?", "And which country does it come from?")},
}

# Two-hop chains: the first hop as a noun phrase for the bridge ({s}: the subject), the second
# as a question about it ({x}: that noun phrase); a chain is offered when both are written and
# the second relation's subject can be what the first names.
_BRIDGES: dict[str, str] = {
    "P27": "the country {s} is a citizen of", "P17": "the country {s} is located in",
    "P1532": "the country {s} played for", "P495": "the country of origin of {s}",
    "P19": "the place where {s} was born", "P20": "the place where {s} died",
    "P740": "the place where {s} was formed", "P159": "the place where {s} has its headquarters",
    "P641": "the sport {s} played", "P176": "the manufacturer of {s}", "P264": "the record label of {s}",
}
_SECOND_HOPS: dict[str, tuple[str, frozenset[str]]] = {
    "P37": ("What is the official language of {x}?",
            frozenset({"P27", "P17", "P1532", "P495", "P19", "P20", "P740", "P159"})),
    "P17": ("In which country is {x}?", frozenset({"P19", "P20", "P159", "P740"})),
    "P495": ("What is the country of origin of {x}?", frozenset({"P641"})),
    "P159": ("Where is the headquarters of {x}?", frozenset({"P176", "P264"})),
    "P740": ("Where was {x} formed?", frozenset({"P176", "P264"})),
}
CHAINS: tuple[tuple[str, str], ...] = tuple((r1, r2) for r2, (_, firsts) in _SECOND_HOPS.items() for r1 in sorted(firsts))


@dataclass(frozen=True)
class _Entry:
    """A subject's one row in a relation: where it is and its objects (label, then aliases)."""

    split: str
    line: int
    objects: tuple[tuple[str, ...], ...]

    @property
    def where(self) -> str:
        return f"{self.split}/{self.line}"


def _entries(root: Path, relations: Sequence[str]) -> dict[str, dict[str, _Entry]]:
    """relation -> subject -> its row, for subjects on exactly one row of the relation (all splits)."""
    out: dict[str, dict[str, _Entry]] = {}
    for relation in relations:
        rows: dict[str, list[_Entry]] = defaultdict(list)
        for split in DEFAULT_SPLITS:
            for line, subject, objects in relation_rows(root, relation, split):
                rows[subject.strip()].append(_Entry(split, line, objects))
        out[relation] = {s: found[0] for s, found in rows.items() if len(found) == 1}
    return out


def _pronoun(r1: str, r2: str) -> str | None:
    """"they" or "it" for a subject of both relations; None when no kind of subject has both."""
    common = _SUBJECT_KINDS.get(r1, frozenset()) & _SUBJECT_KINDS.get(r2, frozenset())
    if not common:
        return None
    return "they" if common & {"person", "band"} else "it"


def _answers(objects: Sequence[Sequence[str]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for names in objects for name in names))


def _follow_up_items(entries: dict[str, dict[str, _Entry]], rng: random.Random) -> Iterator[tuple[str, dict]]:
    by_subject: dict[str, list[str]] = defaultdict(list)
    for relation, subjects in entries.items():
        if relation in FOLLOW_UPS:
            for subject in subjects:
                by_subject[subject].append(relation)
    for subject in sorted(by_subject):
        relations = sorted(by_subject[subject], key=natural_key)
        if len(relations) < 2:
            continue
        r1, r2 = rng.sample(relations, 2)
        pronoun = _pronoun(r1, r2)
        if pronoun is None or pronoun not in FOLLOW_UPS[r2]:
            continue
        yield f"{r1}+{r2}", {"subject": subject, "r1": r1, "r2": r2, "pronoun": pronoun,
                             "wording": rng.choice(FOLLOW_UPS[r2][pronoun]),
                             "in_web": entries[r2][subject].split == WEB_SPLIT}


def _two_hop_items(entries: dict[str, dict[str, _Entry]]) -> Iterator[tuple[str, dict]]:
    for r1, r2 in CHAINS:
        if r1 not in entries or r2 not in entries:
            continue
        for subject, first in sorted(entries[r1].items()):
            if len(first.objects) != 1:
                continue
            bridge = first.objects[0][0].strip()
            second = entries[r2].get(bridge)
            if second is None or bridge == subject:
                continue
            golds = _answers(second.objects)
            if bridge in golds:
                continue  # "Germany -> country -> Germany" asks nothing
            yield f"{r1}+{r2}", {"subject": subject, "r1": r1, "r2": r2, "bridge": bridge,
                                 "in_web": first.split == WEB_SPLIT and second.split == WEB_SPLIT}


def _interleave(groups: dict[str, list[dict]], rng: random.Random) -> list[dict]:
    ordered = [groups[key] for key in sorted(groups, key=natural_key)]
    for group in ordered:
        rng.shuffle(group)
    return [g[depth] for depth in range(max((len(g) for g in ordered), default=0)) for g in ordered if depth < len(g)]


def kamel_chat_questions(root: str | Path, *, limit: int | None = None, seed: int = 0,
                         kind: str | None = None, half: str | None = None) -> list[EvalQuestion]:
    """``limit`` items (all when None) of the KAMEL folder ``root`` as questions, seeded (see
    the module docstring): follow-up items give a ``follow-up`` and a ``standalone`` question,
    two-hop items a ``two-hop`` question. ``kind``: only that kind's items (``KINDS``); ``half``:
    only the items of that half (:mod:`agent.eval.halves`; a follow-up and its standalone twin
    share one)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    root = Path(root)
    relations = relation_ids(root)
    labels, templates = property_labels(root), question_templates(root)
    entries = _entries(root, [r for r in relations if r in templates and r in labels])
    rng = random.Random(seed)

    def item_id(built: str, item: dict) -> str:
        s, r1, r2 = item["subject"], item["r1"], item["r2"]
        second = entries[r2][s if built == "follow-up" else item["bridge"]]
        return f"kamel-chat/{built}/{r1}/{entries[r1][s].where}+{r2}/{second.where}"

    per_kind: dict[str, list[dict]] = {}
    for built, items in (("follow-up", _follow_up_items(entries, rng)), ("two-hop", _two_hop_items(entries))):
        tiers: tuple[dict[str, list[dict]], dict[str, list[dict]]] = (defaultdict(list), defaultdict(list))
        for pair, item in items:
            if half is not None and half_of(item_id(built, item)) != half:
                continue
            tiers[0 if item["in_web"] else 1][pair].append(item)
        per_kind[built] = _interleave(tiers[0], rng) + _interleave(tiers[1], rng)
    picked: list[tuple[str, dict]] = []
    for depth in range(max(len(v) for v in per_kind.values())):
        picked.extend((k, per_kind[k][depth]) for k in KINDS if depth < len(per_kind[k]) and kind in (None, k))
        if limit is not None and len(picked) >= limit:
            break
    if limit is not None:
        picked = picked[:limit]

    def fact(subject: str, relation: str, entry: _Entry) -> list[str]:
        return [Fact(subject, labels[relation], names[0]).text for names in entry.objects]

    questions: list[EvalQuestion] = []
    for kind, item in picked:
        s, r1, r2 = item["subject"], item["r1"], item["r2"]
        if kind == "follow-up":
            first, second = entries[r1][s], entries[r2][s]
            key = f"{r1}/{first.where}+{r2}/{second.where}"
            twin = item_id(kind, item)
            asked = templates[r1].replace("[S]", s)
            obj = first.objects[0][0]
            reply = f"Fact: {Fact(s, labels[r1], obj).text}\nAnswer: {obj}"
            meta = {"subject": s, "relations": [r1, r2], "relation": r2, "pronoun": item["pronoun"], "twin": twin,
                    "facts": fact(s, r2, second), "in_web": second.split == WEB_SPLIT}
            questions.append(EvalQuestion(f"kamel-chat/follow-up/{key}", item["wording"], _answers(second.objects),
                                          {**meta, "kind": "follow-up", "stratum": "follow-up"},
                                          ({"role": "user", "content": asked},
                                           {"role": "assistant", "content": reply})))
            questions.append(EvalQuestion(f"kamel-chat/standalone/{key}", templates[r2].replace("[S]", s),
                                          _answers(second.objects),
                                          {**meta, "kind": "standalone", "stratum": "standalone"}))
        else:
            first = entries[r1][s]
            bridge = item["bridge"]
            second = entries[r2][bridge]
            key = f"{r1}/{first.where}+{r2}/{second.where}"
            text = _SECOND_HOPS[r2][0].format(x=_BRIDGES[r1].format(s=s))
            questions.append(EvalQuestion(
                f"kamel-chat/two-hop/{key}", text[0].upper() + text[1:], _answers(second.objects),
                {"kind": "two-hop", "stratum": "two-hop", "subject": s, "bridge": bridge, "relations": [r1, r2],
                 "relation": r2, "facts": fact(s, r1, first) + fact(bridge, r2, second),
                 "in_web": first.split == WEB_SPLIT and second.split == WEB_SPLIT}))
    return questions
