"""Answer normalization: one folded form of an answer, for matching it against facts, questions
and gold answers (the agent's grounding and checks, and the evaluation's metrics).

:func:`normalize_answer` extends the SQuAD v1.1 script's normalization (lowercase, ASCII
punctuation removed, articles ``a an the`` dropped, whitespace folded), and is kept after a
comparison (``benchmarks/nlp_libraries.py``). Where they differ: casefold and NFKC ("Gießen" ->
"giessen"); every Unicode punctuation mark removed, not only ASCII's (SQuAD keeps an en dash,
"’" and "«"); dashes and slashes become spaces where SQuAD glues the words ("Port-of-Spain" ->
"portofspain", which "Port of Spain" does not match); symbols and ``#`` kept (SQuAD drops "+",
"#" and "$": "C++" equals "C" there, and "$1.18 trillion" equals "1.18 trillion", which it does
not here). On the shared data, 2,343 of 57,481 gold answers (KAMEL, PopQA, MuSiQue, HotpotQA,
2Wiki) normalize differently, 2,243 of them for a dash or slash; of the 1,285 distinct
(prediction, gold) pairs recorded in ``benchmarks/results/eval`` the verdict differs once
("Monster a Go- Go!" for "Monster a Go-Go": a match here, not in SQuAD). Hugging Face
``evaluate``'s squad metric, the maintained package holding SQuAD's function, is 196 MB and 12
packages new, and fetches the metric's script from the Hub when it runs.
"""
from __future__ import annotations

import unicodedata

_ARTICLES = frozenset({"a", "an", "the"})
# Punctuation by Unicode category, except "#", which names things ("C#" is not "C").
_KEPT_PUNCTUATION = frozenset("#")
def _is_word_breaking(char: str) -> bool:
    # Dashes and slashes join words ("Guinea-Bissau", "AC/DC") and become spaces; other
    # punctuation (apostrophes, dots in "U.S.") is deleted so "don't" reads "dont".
    return unicodedata.category(char) == "Pd" or char == "/"


def normalize_answer(text: str) -> str:
    """Fold an answer for comparison: NFKC, casefold, dashes and slashes to spaces, other
    punctuation (Unicode category P*, except ``#``) removed, articles ``a an the`` dropped,
    whitespace folded.

    Symbols and ``#`` are kept, so ``C++`` and ``C#`` stay distinct from ``C``:
    ``normalize_answer("The  Beatles!") == "beatles"``.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = []
    for char in folded:
        if unicodedata.category(char).startswith("P") and char not in _KEPT_PUNCTUATION:
            kept.append(" " if _is_word_breaking(char) else "")
        else:
            kept.append(char)
    words = "".join(kept).split()
    return " ".join(word for word in words if word not in _ARTICLES)
