"""Synthetic knowledge bases shaped like Wikidata, at any size, deterministic by seed, streamed.

Rule: entity ``k`` (0, 1, 2, ...) has a type (person, place, organization, work, taxon) and a name
that are pure functions of ``(seed, k)``, so any fact can name any entity without a lookup table.
Entities are visited in order; each gets a Zipf-distributed number of facts (most have a few, a
few have hundreds, like Wikidata's fan-out), drawn from its type's relations. Objects are other
entities (popular ones far more often: Zipf over ids), dates, years, quantities with units, or
identifiers. Memory stays constant whatever ``count`` is.

Example::

    >>> from agent.knowledge.synthetic import synthetic_facts
    >>> facts = synthetic_facts(1_000_000, seed=7)
    >>> next(facts)
    Fact(subject='Deju Group', predicate='inception', object='8 June 1912', source='synthetic:7:0', statement='')

The same ``(count, seed)`` always yields the same facts in the same order (with ``entities`` fixed,
a smaller ``count`` yields a prefix of a larger one); duplicates occur (two
entities can share a name) as they do in real data, so the number of distinct facts is slightly
below ``count``.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .facts import Fact

_ONSETS = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
           "br", "ch", "dr", "gr", "kr", "pr", "sh", "st", "th", "tr", "", "")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ia", "ei", "ou", "y")
_CODAS = ("", "", "", "n", "r", "s", "l", "m", "t", "nd", "rk", "x")
_PLACE_SUFFIX = ("", "", " City", "ville", "burg", " Springs", "ton", " Valley", "stad", " Island")
_ORG_SUFFIX = (" Inc.", " Ltd", " GmbH", " Group", " University", " Institute", " Records", " FC",
               " Foundation", " Airlines")
_WORK_HEAD = ("The", "A", "Return of the", "Songs of", "Beyond the", "Night of the", "Letters to", "")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")

# Object kinds: an entity of a type, a full date, a year, a quantity (low, high, unit, decimals), an id.
PERSON, PLACE, ORG, WORK, TAXON = range(5)
_TYPE_SHARE = np.array([0.42, 0.16, 0.10, 0.22, 0.10])
_TYPE_NAMES = ("human", "place", "organization", "creative work", "taxon")

RELATIONS: dict[int, tuple[tuple[str, tuple, float], ...]] = {
    # (predicate, object kind, weight); multi-valued relations simply get drawn several times.
    PERSON: (
        ("instance of", ("const", "human"), 1.0), ("sex or gender", ("choice", ("male", "female")), 0.9),
        ("date of birth", ("date", 1700, 2005), 0.9), ("date of death", ("date", 1750, 2024), 0.4),
        ("place of birth", ("entity", PLACE), 0.7), ("place of death", ("entity", PLACE), 0.3),
        ("country of citizenship", ("entity", PLACE), 0.7), ("occupation", ("choice", (
            "politician", "actor", "writer", "painter", "footballer", "physicist", "singer", "lawyer",
            "journalist", "composer", "architect", "chemist", "engineer", "historian", "film director")), 1.2),
        ("educated at", ("entity", ORG), 0.4), ("employer", ("entity", ORG), 0.3),
        ("spouse", ("entity", PERSON), 0.3), ("child", ("entity", PERSON), 0.4),
        ("sibling", ("entity", PERSON), 0.2), ("father", ("entity", PERSON), 0.2),
        ("mother", ("entity", PERSON), 0.2), ("award received", ("entity", WORK), 0.3),
        ("height", ("quantity", 150, 210, "centimetre", 0), 0.2),
        ("native language", ("choice", ("English", "French", "German", "Spanish", "Japanese",
                                        "Italian", "Portuguese", "Russian", "Dutch", "Polish")), 0.3),
        ("member of sports team", ("entity", ORG), 0.2), ("notable work", ("entity", WORK), 0.3),
        ("given name", ("given", None), 0.5), ("family name", ("family", None), 0.5),
    ),
    PLACE: (
        ("instance of", ("choice", ("city", "village", "town", "commune", "municipality", "river",
                                    "mountain", "lake", "island", "county")), 1.0),
        ("country", ("entity", PLACE), 0.9), ("population", ("quantity", 50, 9_000_000, "", 0), 0.7),
        ("area", ("quantity", 1, 20_000, "square kilometre", 2), 0.5),
        ("elevation above sea level", ("quantity", -30, 4_500, "metre", 0), 0.4),
        ("located in the administrative territorial entity", ("entity", PLACE), 0.8),
        ("inception", ("year", 800, 2020), 0.3), ("postal code", ("code", "#####"), 0.3),
        ("twinned administrative body", ("entity", PLACE), 0.3), ("head of government", ("entity", PERSON), 0.3),
        ("time zone", ("choice", tuple(f"UTC{h:+d}:00" for h in range(-11, 13))), 0.3),
        ("shares border with", ("entity", PLACE), 0.5),
    ),
    ORG: (
        ("instance of", ("choice", ("business", "university", "record label", "football club",
                                    "nonprofit organization", "airline", "research institute")), 1.0),
        ("founded by", ("entity", PERSON), 0.5), ("inception", ("date", 1800, 2023), 0.6),
        ("headquarters location", ("entity", PLACE), 0.7), ("country", ("entity", PLACE), 0.7),
        ("number of employees", ("quantity", 3, 400_000, "", 0), 0.4),
        ("industry", ("choice", ("banking", "software", "mining", "retail", "aviation", "music",
                                 "education", "biotechnology", "sport")), 0.5),
        ("chief executive officer", ("entity", PERSON), 0.3), ("official website", ("url", None), 0.3),
        ("owned by", ("entity", ORG), 0.2),
    ),
    WORK: (
        ("instance of", ("choice", ("film", "novel", "album", "painting", "video game", "song",
                                    "television series", "scholarly article")), 1.0),
        ("author", ("entity", PERSON), 0.5), ("director", ("entity", PERSON), 0.3),
        ("publication date", ("date", 1850, 2024), 0.8), ("genre", ("choice", (
            "drama", "comedy", "science fiction", "jazz", "rock music", "documentary", "fantasy",
            "thriller", "portrait", "role-playing video game")), 0.6),
        ("original language of film or TV show", ("choice", ("English", "French", "Hindi", "Tamil",
                                                              "Japanese", "Korean", "Spanish")), 0.4),
        ("cast member", ("entity", PERSON), 0.9), ("duration", ("quantity", 2, 240, "minute", 0), 0.4),
        ("country of origin", ("entity", PLACE), 0.5), ("followed by", ("entity", WORK), 0.2),
        ("publisher", ("entity", ORG), 0.3), ("ISBN-13", ("code", "978-#-####-####-#"), 0.2),
        ("cites work", ("entity", WORK), 0.6),
    ),
    TAXON: (
        ("instance of", ("const", "taxon"), 1.0), ("parent taxon", ("entity", TAXON), 0.9),
        ("taxon rank", ("choice", ("species", "genus", "family", "subspecies", "order")), 0.9),
        ("IUCN conservation status", ("choice", ("Least Concern", "Vulnerable", "Endangered",
                                                 "Near Threatened", "Data Deficient")), 0.4),
        ("mass", ("quantity", 0, 5000, "kilogram", 3), 0.3), ("endemic to", ("entity", PLACE), 0.3),
        ("taxon common name", ("given", None), 0.3),
    ),
}

_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64: a fast, well-spread integer hash (names and types are functions of it)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _word(h: int, syllables: int) -> str:
    out = []
    for _ in range(syllables):
        out.append(_ONSETS[h % 30] + _VOWELS[(h >> 5) % 12] + _CODAS[(h >> 9) % 12])
        h >>= 13
    return "".join(out).capitalize() or "Ao"


class SyntheticKB:
    """The entity universe of one seed: ``entity_type(k)``, ``name(k)``, and :meth:`facts`.

    ``entities`` bounds entity ids (objects refer to ids below it); by default it scales with the
    number of facts asked for, about one entity per 8 facts as in Wikidata (800M facts, ~100M items).
    """

    def __init__(self, seed: int = 0, entities: int = 1_000_000) -> None:
        self.seed = int(seed)
        self.entities = max(16, int(entities))
        weights = {t: np.array([w for _, _, w in rels]) for t, rels in RELATIONS.items()}
        self._rel_p = {t: w / w.sum() for t, w in weights.items()}
        self._type_cdf = np.cumsum(_TYPE_SHARE)

    def entity_type(self, k: int) -> int:
        u = (_mix(self.seed * 1_000_003 + k) >> 11) / float(1 << 53)
        return int(np.searchsorted(self._type_cdf, u, side="right"))

    def name(self, k: int) -> str:
        h = _mix((self.seed << 40) ^ (k * 0x2545F4914F6CDD1D & _MASK))
        t = self.entity_type(k)
        if t == PERSON:
            return f"{_word(h, 1 + h % 2)} {_word(h >> 20, 2 + (h >> 19) % 2)}"
        if t == PLACE:
            return _word(h, 2 + h % 2) + _PLACE_SUFFIX[(h >> 40) % len(_PLACE_SUFFIX)]
        if t == ORG:
            return _word(h, 2) + _ORG_SUFFIX[(h >> 40) % len(_ORG_SUFFIX)]
        if t == WORK:
            head = _WORK_HEAD[(h >> 44) % len(_WORK_HEAD)]
            return f"{head} {_word(h, 2)} {_word(h >> 26, 1 + (h >> 50) % 2)}".strip()
        return f"{_word(h, 2)} {_word(h >> 26, 2).lower()}"  # a binomial name

    def _entity_of_type(self, want: int, z: int, popular: int) -> int:
        # Popularity: references follow a Zipf law over ids, so a few entities (countries, big
        # cities) are the object of very many facts, as in Wikidata. The first id of the wanted
        # type at or after the drawn one is taken (types are spread evenly over ids).
        k = (z * 7919 + popular) % self.entities
        for _ in range(256):
            if self.entity_type(k) == want:
                return k
            k = (k + 1) % self.entities
        return k

    def _object(self, kind: tuple, u: np.ndarray, z: int, popular: int) -> str:
        """The object for ``kind`` from four uniform draws ``u`` and a Zipf draw ``z``."""
        tag = kind[0]
        if tag == "entity":
            return self.name(self._entity_of_type(kind[1], z, popular))
        if tag == "date":
            year = kind[1] + int(u[2] * (kind[2] - kind[1]))
            return f"{1 + int(u[0] * 28)} {_MONTHS[int(u[1] * 12)]} {year}"
        if tag == "year":
            return str(kind[1] + int(u[0] * (kind[2] - kind[1])))
        if tag == "quantity":
            lo, hi, unit, decimals = kind[1:]
            if hi > 1000:  # spread over orders of magnitude (populations, employees)
                value = float(np.exp(np.log(max(lo, 1)) + u[0] * (np.log(hi) - np.log(max(lo, 1)))))
            else:
                value = lo + u[0] * (hi - lo)
            text = f"{value:,.{decimals}f}"
            return f"{text} {unit}" if unit else text
        if tag == "choice":
            return kind[1][int(u[0] * len(kind[1]))]
        if tag == "const":
            return kind[1]
        h = int(u[3] * (1 << 52)) ^ (z << 20)
        if tag == "code":
            digits = iter(f"{_mix(h):020d}")
            return "".join(next(digits) if c == "#" else c for c in kind[1])
        if tag == "url":
            return f"https://www.{_word(h, 2).lower()}.{('com', 'org', 'net', 'de', 'fr')[int(u[0] * 5)]}"
        if tag == "given":
            return _word(_mix(h), 2)
        return _word(_mix(h), 3)  # "family"

    def facts(self, count: int, *, with_source: bool = True) -> Iterator[Fact]:
        """``count`` distinct-per-entity facts, entity by entity (an entity's facts are
        consecutive, as in a dump). An entity never repeats one of its own facts."""
        rng = np.random.Generator(np.random.PCG64(self.seed))
        made = 0
        k = 0
        while made < count:
            t = self.entity_type(k)
            subject = self.name(k)
            # Fan-out: Zipf (a=1.9), so the mean is ~8 but some entities have hundreds of facts.
            n = min(int(rng.zipf(1.9)) + 3, 600)
            rels = RELATIONS[t]
            picks = rng.choice(len(rels), size=n, p=self._rel_p[t])
            uniform = rng.random((n, 4))
            zipf = rng.zipf(1.3, size=n)
            popular = int(rng.integers(self.entities))
            seen: set[tuple[int, str]] = set()
            for i, r in enumerate(picks.tolist()):
                predicate, kind, _ = rels[r]
                obj = self._object(kind, uniform[i], int(zipf[i] % (1 << 40)), popular)
                if (r, obj) in seen:
                    continue
                if made == count:
                    return
                seen.add((r, obj))
                yield Fact(subject, predicate, obj, f"synthetic:{self.seed}:{made}" if with_source else "")
                made += 1
            k += 1


def synthetic_facts(count: int, seed: int = 0, *, entities: int | None = None,
                    with_source: bool = True) -> Iterator[Fact]:
    """Stream ``count`` synthetic facts for ``seed`` (see the module docstring)."""
    kb = SyntheticKB(seed, entities if entities is not None else max(16, count // 8))
    return kb.facts(count, with_source=with_source)
