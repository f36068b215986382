"""Keywords of a fact or a question: the handles by which facts are found.

Rules, not a model, so that a fact and a question that name the same thing get the same keyword
and a build is fast and deterministic: runs of capitalized words are one name ("Journal of
Psychotherapy Integration", with lowercase joiners such as "of" or "de" inside; a question's first
word, when a small one like "Are" or "Did", starts none), numbers and years are kept, and the
remaining content words (no stop words, at least three letters) are keywords on their own. Keywords
are compared by their normalized form (:func:`normalize_keyword`; the knowledge web's keyword node
id is made from it, :func:`agent.web.documents.keyword_id`), so "Paris" and "paris" are one keyword
node.

Here, beside the facts, because every layer reads names this way: the web links facts to keywords,
the agent's steps read a question's names, and the hop rule (in-process and inside vLLM) searches
the entities a stated fact brings in (:func:`bridge_entities`).
"""
from __future__ import annotations

import re
import unicodedata

from .facts import parse_triple
from .normalize import normalize_answer

STOP_WORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "many", "much", "old", "one", "ones", "did", "first", "last", "year", "years", "known", "called", "named", "became", "become", "later", "however", "whose", "whether", "which's"]
)
_ARTICLES = frozenset({"the", "a", "an"})
# Lowercase words that may sit inside a capitalized name: "University of Oslo", "Leonardo da Vinci",
# "Muhammad bin Musafir" (two names sharing "Muhammad" are not one person).
JOINERS = frozenset({"of", "de", "da", "del", "der", "di", "du", "la", "le", "van", "von", "the", "and", "for", "y",
                     "bin", "ibn", "bint", "al", "el"})

_TOKEN = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*", re.UNICODE)


def normalize_keyword(keyword: str) -> str:
    """Case-folded, accent-kept, whitespace-folded form used to identify a keyword."""
    text = unicodedata.normalize("NFKC", keyword).casefold()
    return " ".join(text.replace("’", "'").split())


def _is_capitalized(token: str) -> bool:
    return token[0].isupper() or token[0].isdigit()


def extract_keywords(text: str, limit: int = 12) -> list[str]:
    """The keywords of ``text`` in order of appearance, without duplicates (by normalized form).

    >>> extract_keywords("Marie Curie was born in Warsaw in 1867.")
    ['Marie Curie', 'born', 'Warsaw', '1867']
    """
    tokens = _TOKEN.findall(text)
    found: list[str] = []
    seen: set[str] = set()
    # A question's first word, when a small word ("Are", "Did", "Both", "In"), asks: it starts
    # no name ("Are Christopher Nolan and ..." names Christopher Nolan); an article still does
    # ("The Hague").
    asking = text.rstrip().endswith("?") and bool(tokens) and tokens[0].lower() not in _ARTICLES

    def add(words: list[str]) -> None:
        while words and words[-1].lower() in JOINERS:
            words = words[:-1]
        if not words:
            return
        phrase = " ".join(words)
        key = normalize_keyword(phrase)
        if key not in seen and (len(words) > 1 or key not in STOP_WORDS):
            seen.add(key)
            found.append(phrase)

    i = 0
    while i < len(tokens):
        token = tokens[i]
        if _is_capitalized(token) and not (token.lower() in STOP_WORDS and not token[0].isdigit()
                                           and (not _continues_name(tokens, i) or i == 0 and asking)):
            words = [token]
            j = i + 1
            while j < len(tokens):
                nxt = tokens[j]
                if _is_capitalized(nxt) and not nxt[0].isdigit() or nxt.lower() in JOINERS and j + 1 < len(tokens) and _is_capitalized(tokens[j + 1]) \
                        and not tokens[j + 1][0].isdigit():
                    words.append(nxt)
                else:
                    break
                j += 1
            if token[0].isdigit():
                words = [token]
                j = i + 1
            add(words)
            i = j
            continue
        low = token.lower()
        if low not in STOP_WORDS and len(low) >= 3 and not low.isdigit():
            add([token])
        i += 1
    return found[:limit]


def _continues_name(tokens: list[str], i: int) -> bool:
    """A capitalized stop word starts a name only when a capitalized word follows ("The Hague")."""
    return i + 1 < len(tokens) and tokens[i + 1][:1].isupper()


def triple_keywords(subject: str, obj: str) -> list[str]:
    """A triple's keywords are its subject and its object (the issue's rule), deduplicated."""
    out: list[str] = []
    for label in (subject, obj):
        if label.strip() and normalize_keyword(label) not in {normalize_keyword(k) for k in out}:
            out.append(label.strip())
    return out


# Joiners that continue a name past another name's end ("Science News for Students"); "and",
# "of" and "the" do not ("Ada Varga and Ines Varro", "Mark King of Level 42").
_CONTINUING = JOINERS - {"and", "of", "the", "y"}


def only_in_longer_names(text: str, name: str) -> bool:
    """Whether every place ``text`` names ``name`` starts a longer name: "Science News for
    Students was started in 2003" names Science News only so, as "The Savoy Hotel is in London"
    names Savoy; "Science News (magazine)", "Science News, a magazine" and "Mark King of Level
    42" name it alone. Case aside; False when ``name`` is not written in ``text`` at all."""
    words = _TOKEN.findall(name)
    if not words:
        return False
    pattern = r"(?<![^\W_])" + r"\W+".join(re.escape(w) for w in words) + r"(?![^\W_])"
    found = False
    for match in re.finditer(pattern, text, flags=re.IGNORECASE):
        found = True
        after = _TOKEN.findall(text[match.end():match.end() + 80])
        gap = text[match.end():].lstrip(" ")[:1]
        if not after or gap in ",.;:()[]\"'’!?–—-":
            return False
        nxt = after[0]
        if nxt[0].isupper() and not nxt[0].isdigit():
            continue  # "Savoy Hotel"
        if nxt.lower() in _CONTINUING and len(after) > 1 and after[1][0].isupper():
            continue  # "Science News for Students"
        return False
    return found


def bridge_entities(fact: str, question: str, limit: int = 2) -> list[str]:
    """The entities ``fact`` adds to ``question``: for a triple its subject and object not named
    in the question (object first: the chain goes on from what the fact found); for a statement
    its names (capitalized keywords, a comma ending one) not in the question.

    >>> bridge_entities("<Edith Frank-Holländer> <country of citizenship> <Germany> .",
    ...                 "What is the official language of the country Edith Frank-Holländer is a citizen of?")
    ['Germany']
    """
    asked = f" {normalize_answer(question)} "
    triple = parse_triple(fact)
    if triple:
        candidates = [triple[2], triple[0]]
    else:
        # A comma ends a name: "Ford County, Kansas, United States" is three places (one
        # keyword run across the commas would be searched as one).
        candidates = [k for part in re.split(r"[,;]\s+", fact) for k in extract_keywords(part, limit=20)
                      if any(c.isupper() for c in k)]
    out: list[str] = []
    for entity in candidates:
        norm = normalize_answer(entity)
        if norm and f" {norm} " not in asked and norm not in {normalize_answer(e) for e in out}:
            out.append(entity)
    return out[:limit]


def noun_form(word: str) -> str:
    """The lowercase singular of a word by its plural "s" ("languages" -> "language"; "class",
    "bus" and "gas" stay as they are)."""
    word = word.lower().replace("’", "'")
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
