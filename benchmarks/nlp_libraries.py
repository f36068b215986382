"""factweave's hand-written text pieces against well-kept libraries, on the shipped and shared data.

Four pieces, each against the libraries that do the same job:

- **sentences** (:func:`agent.web.documents.sentence_spans`) against pysbd, spaCy's rule-based
  ``sentencizer``, syntok and sentencex: boundary precision / recall / F1 and passages split
  exactly right on ``benchmarks/data/tricky_sentences.json`` (43 passages of the MuSiQue, HotpotQA
  and 2Wiki corpora holding abbreviations, initials, "U.S.", decimals, titles with "?" and quotes,
  split by hand), boundary F1 against HotpotQA's own sentence lists (its 994 paragraphs), boundary
  agreement with factweave on the MuSiQue, 2Wiki and demo corpora, and characters per second.
- **chunks** (:func:`agent.web.documents.chunk_document`) against langchain-text-splitters'
  ``RecursiveCharacterTextSplitter`` (its default separators, and with ". " added): on the HotpotQA
  paragraphs, how many of HotpotQA's sentences a chunk boundary cuts, how many words it cuts, chunks
  over the size, whether every chunk maps back to its offsets; at the web's size (800) and at 300.
- **N-Triples** (:mod:`agent.knowledge.ntriples`) against rdflib's N-Triples parser and pyoxigraph:
  agreement of the labels on ``tests/data/facts.nt`` and a generated file of KAMEL triples with
  escapes, language tags, datatypes, blank nodes and comments; how many of 16 malformed lines each
  rejects; triples per second; whether each triple keeps its line (factweave's provenance).
- **answer normalization** (:func:`agent.knowledge.normalize.normalize_answer`) against the SQuAD v1.1
  script's ``normalize_answer`` (the same function is in Hugging Face ``evaluate``'s squad metric):
  the gold answers of the shared QA sets whose normalized form differs, and the recorded
  (prediction, gold) pairs of ``benchmarks/results/eval`` whose exact-match verdict differs.

Each library's installed size with everything it pulls in (MB, and MB new to factweave's own
dependencies) comes from :mod:`converters`. The candidates need not be in the project's
environment: ``--site DIR`` adds a folder made with ``pip install --target DIR ...`` at the end of
the import path (the project's own packages win)::

    pip install --target /tmp/nlpbench pysbd spacy syntok sentencex langchain-text-splitters \\
        rdflib pyoxigraph
    pip install --target /tmp/nlpbench-eval evaluate          # only weighed, see below
    PYTHONPATH=. .venv/bin/python benchmarks/nlp_libraries.py --site /tmp/nlpbench --site /tmp/nlpbench-eval

``evaluate.load("squad")`` fetches the metric's script from the Hugging Face Hub when it runs, so
it cannot run offline; its normalization is the SQuAD script's, copied below. Prints one table per
piece and writes ``benchmarks/results/nlp_libraries.json`` (with the machine and its load). Speeds
are per CPU second of the benchmark's process (``time.process_time``), not wall time.
"""
from __future__ import annotations

import argparse
import functools
import glob
import io
import json
import logging
import os
import platform
import random
import re
import string
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from converters import base_dependencies, closure, megabytes

from agent.web.documents import trim_spans

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"
RESULTS = REPO / "benchmarks" / "results"
TRICKY = REPO / "benchmarks" / "data" / "tricky_sentences.json"

Spans = list[tuple[int, int]]


# --- corpora ----------------------------------------------------------------------------------

def corpus_texts(shared: Path) -> dict[str, list[str]]:
    """Passage texts per corpus: MuSiQue, 2Wiki, the demo web's corpus (HotpotQA separately)."""
    musique = [p["text"] for p in json.loads((shared / "musique/musique_train100_corpus.json").read_text())]
    wiki = [p["text"] for p in json.loads((shared / "2wikimultihopqa/2wiki_corpus.json").read_text())]
    demo = [p["text"] for p in json.loads((REPO / "agent/data/demo/web/corpus.json").read_text())]
    return {"musique": musique, "2wiki": wiki, "demo": demo}


def hotpot_paragraphs(shared: Path) -> list[tuple[str, Spans]]:
    """HotpotQA's paragraphs with the spans of its own sentences (leading spaces trimmed)."""
    out = []
    for sentences in json.loads((shared / "hotpotqa/hotpotqa_train100_corpus.json").read_text()).values():
        text, spans = "", []
        for sentence in sentences:
            start = len(text) + len(sentence) - len(sentence.lstrip())
            text += sentence
            if sentence.strip():
                spans.append((start, len(text.rstrip())))
        lead = len(text) - len(text.lstrip())
        out.append((text.strip(), [(a - lead, b - lead) for a, b in spans]))
    return out


# --- sentence splitters: each returns trimmed (start, end) spans -----------------------------

def _locate(text: str, pieces: Iterable[str]) -> Spans:
    """Spans of ``pieces`` found in order in ``text`` (for libraries that return strings)."""
    spans, cursor = [], 0
    for piece in pieces:
        piece = piece.strip()
        if not piece:
            continue
        at = text.find(piece, cursor)
        if at < 0:  # a library that changed the text: give up on this piece
            continue
        spans.append((at, at + len(piece)))
        cursor = at + len(piece)
    return spans


def factweave_sentences() -> Callable[[str], Spans]:
    from agent.web.documents import sentence_spans

    return sentence_spans


def pysbd_sentences() -> Callable[[str], Spans]:
    import pysbd

    segmenter = pysbd.Segmenter(language="en", clean=False)
    return lambda text: _locate(text, segmenter.segment(text))


def spacy_sentences() -> Callable[[str], Spans]:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return lambda text: trim_spans(text, ((s.start_char, s.end_char) for s in nlp(text).sents))


def syntok_sentences() -> Callable[[str], Spans]:
    from syntok import segmenter

    def split(text: str) -> Spans:
        spans = []
        for paragraph in segmenter.analyze(text):
            for sentence in paragraph:
                tokens = list(sentence)
                spans.append((tokens[0].offset, tokens[-1].offset + len(tokens[-1].value)))
        return trim_spans(text, spans)
    return split


def sentencex_sentences() -> Callable[[str], Spans]:
    import sentencex

    return lambda text: _locate(text, sentencex.segment("en", text))


SPLITTERS = [("factweave", factweave_sentences, []), ("pysbd", pysbd_sentences, ["pysbd"]),
             ("spacy sentencizer", spacy_sentences, ["spacy"]), ("syntok", syntok_sentences, ["syntok"]),
             ("sentencex", sentencex_sentences, ["sentencex"])]


def _boundaries(spans: Spans) -> set[int]:
    return {a for a, _ in spans[1:]}


def _prf(found: int, expected: int, right: int) -> dict:
    p = right / found if found else 1.0
    r = right / expected if expected else 1.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(2 * p * r / (p + r), 4) if p + r else 0.0}


def score_boundaries(split: Callable[[str], Spans], cases: list[tuple[str, Spans]]) -> dict:
    found = expected = right = exact = 0
    misses = []
    for text, gold in cases:
        ours, want = _boundaries(split(text)), _boundaries(gold)
        found, expected, right = found + len(ours), expected + len(want), right + len(ours & want)
        exact += ours == want
        if ours != want and len(misses) < 200:
            misses.append({"text": text[:160], "extra": sorted(ours - want), "missed": sorted(want - ours)})
    return {**_prf(found, expected, right), "exact": exact, "cases": len(cases), "wrong": misses}


def tricky_cases() -> list[tuple[str, Spans, str]]:
    cases = []
    for item in json.loads(TRICKY.read_text(encoding="utf-8")):
        text, spans = "", []
        for sentence in item["sentences"]:
            text += (" " if text else "")
            spans.append((len(text), len(text) + len(sentence)))
            text += sentence
        cases.append((text, spans, item["kind"]))
    return cases


def timed(work: Callable[[str], object], items: list[str]) -> float:
    """CPU seconds of this process to call ``work`` on every item: every candidate runs on one
    thread, and on a shared machine CPU time is not inflated by other processes' work."""
    started = time.process_time()
    for item in items:
        work(item)
    return time.process_time() - started


def bench_sentences(shared: Path, names: list[str]) -> list[dict]:
    tricky = tricky_cases()
    hotpot = hotpot_paragraphs(shared)
    corpora = corpus_texts(shared)
    ours = functools.cache(factweave_sentences())  # each text is split once per library
    speed_texts = corpora["musique"]
    rows = []
    for name, make, requirements in SPLITTERS:
        if name not in names:
            continue
        row = {"library": name, **weight(requirements)}
        try:
            uncached = make()
        except ImportError as exc:
            rows.append({**row, "error": f"not installed ({exc.name})"})
            continue
        split = functools.cache(uncached)
        scored = score_boundaries(split, [(t, s) for t, s, _ in tricky])
        row["tricky"] = scored
        row["tricky_wrong_by_kind"] = {}
        for text, spans, kind in tricky:
            if _boundaries(split(text)) != _boundaries(spans):
                row["tricky_wrong_by_kind"][kind] = row["tricky_wrong_by_kind"].get(kind, 0) + 1
        row["hotpotqa"] = {k: v for k, v in score_boundaries(split, hotpot).items() if k != "wrong"}
        # Where this library and factweave place a boundary differently, which one HotpotQA agrees with.
        ours_right = theirs_right = 0
        for text, gold in hotpot:
            want, mine, theirs = _boundaries(gold), _boundaries(ours(text)), _boundaries(split(text))
            for b in mine ^ theirs:
                ours_right += (b in mine) == (b in want)
                theirs_right += (b in theirs) == (b in want)
        row["hotpotqa_disagreements"] = {"factweave_right": ours_right, "library_right": theirs_right}
        row["agreement_with_factweave"] = {
            corpus: score_boundaries(split, [(t, ours(t)) for t in texts])["f1"]
            for corpus, texts in corpora.items()}
        every = [t for texts in corpora.values() for t in texts] + [t for t, _ in hotpot]
        lengths = [b - a for t in every for a, b in split(t)]
        row["sentences_over_500_chars"] = sum(n > 500 for n in lengths)
        row["longest_sentence_chars"] = max(lengths)
        uncached(speed_texts[0])
        seconds = timed(uncached, speed_texts)
        row["chars_per_s"] = round(sum(map(len, speed_texts)) / seconds)
        rows.append(row)
    return rows


# --- chunkers: each returns (start, end) spans into the document text -------------------------

def factweave_chunks(size: int) -> Callable[[str], Spans]:
    from agent.web.documents import Document, chunk_document

    return lambda text: [(c.start, c.end) for c in chunk_document(Document("t", text, "t"), size)]


def recursive_chunks(size: int, separators: list[str] | None = None) -> Callable[[str], Spans]:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    options = {"separators": separators, "keep_separator": "end"} if separators else {}
    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=0, add_start_index=True, **options)

    def split(text: str) -> Spans:
        return [(d.metadata["start_index"], d.metadata["start_index"] + len(d.page_content))
                for d in splitter.create_documents([text])]
    return split


CHUNKERS = [("factweave", lambda size: factweave_chunks(size), []),
            ("langchain recursive (default separators)", lambda size: recursive_chunks(size), ["langchain-text-splitters"]),
            ("langchain recursive (+ '. ')", lambda size: recursive_chunks(size, ["\n\n", "\n", ". ", " ", ""]),
             ["langchain-text-splitters"])]


def bench_chunks(shared: Path, sizes: list[int]) -> list[dict]:
    paragraphs = hotpot_paragraphs(shared)
    rows = []
    for name, make, requirements in CHUNKERS:
        for size in sizes:
            row = {"library": name, "size": size, **weight(requirements)}
            try:
                chunk = make(size)
            except ImportError as exc:
                rows.append({**row, "error": f"not installed ({exc.name})"})
                continue
            chunks = cut_sentences = cut_words = over = mismatched = 0
            sentences = 0
            for text, gold in paragraphs:
                spans = chunk(text)
                chunks += len(spans)
                over += sum(b - a > size for a, b in spans)
                mismatched += any(not (0 <= a < b <= len(text)) for a, b in spans)
                inner = {b for _, b in spans[:-1]} | {a for a, _ in spans[1:]}
                sentences += len(gold)
                cut_sentences += sum(any(a < cut < b for cut in inner) for a, b in gold)
                cut_words += sum(0 < cut < len(text) and text[cut - 1].isalnum() and text[cut].isalnum()
                                 for cut in inner)
            seconds = timed(chunk, [t for t, _ in paragraphs])
            row.update({"documents": len(paragraphs), "chunks": chunks, "sentences": sentences,
                        "sentences_cut": cut_sentences, "words_cut": cut_words, "chunks_over_size": over,
                        "documents_with_bad_offsets": mismatched,
                        "chars_per_s": round(sum(len(t) for t, _ in paragraphs) / seconds)})
            rows.append(row)
    return rows


# --- N-Triples --------------------------------------------------------------------------------

MALFORMED = [  # each line is not N-Triples (W3C RDF 1.1 N-Triples grammar)
    '<http://ex.org/s> <http://ex.org/p> <http://ex.org/o>',                # no final dot
    '<http://ex.org/s> <http://ex.org/p> "a\\zb" .',                        # unknown escape
    '<http://ex.org/s a> <http://ex.org/p> "x" .',                          # space in an IRI
    '"lit" <http://ex.org/p> <http://ex.org/o> .',                          # literal subject
    '<http://ex.org/s> _:p <http://ex.org/o> .',                            # blank node predicate
    '<http://ex.org/s> <http://ex.org/p> "open .',                          # unterminated string
    '<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> <http://ex.org/g> .',  # a fourth term
    '<http://ex.org/s> <http://ex.org/p> "x"^^ .',                          # datatype missing
    '<http://ex.org/s> <http://ex.org/p> "x"@ .',                           # empty language tag
    '<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> . junk',         # text after the dot
    '_: <http://ex.org/p> <http://ex.org/o> .',                             # empty blank node label
    '<http://ex.org/s> <http://ex.org/p> "\\uD800" .',                      # lone surrogate escape
    '<s> <http://ex.org/p> <http://ex.org/o> .',                            # relative IRI
    '<http://ex.org/s> <http://ex.org/p> \'single\' .',                     # single-quoted literal
    '<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> ;',              # Turtle punctuation
    '@prefix ex: <http://ex.org/> .',                                       # a Turtle directive
]


def generated_ntriples(shared: Path, count: int, seed: int = 7) -> str:
    """KAMEL triples as N-Triples with percent-encoded IRIs, escaped literals, language tags,
    datatypes, blank nodes, comments and blank lines, in a fixed random order."""
    rng = random.Random(seed)
    rows = []
    for path in sorted((shared / "kamel/relations").glob("P*/train.jsonl")):
        with path.open(encoding="utf-8") as stream:
            for line in stream:
                obj = json.loads(line)
                for label in obj["obj_label"]:
                    rows.append((obj["sub_label"], path.parent.name, label))
                if len(rows) > count * 2:
                    break
    rng.shuffle(rows)
    lines = []
    for i, (subject, relation, label) in enumerate(rows[:count]):
        iri = "<http://www.wikidata.org/wiki/" + "".join(
            c if c.isalnum() and c.isascii() or c in "-._~()" else "_" if c == " " else
            "".join(f"%{b:02X}" for b in c.encode()) for c in subject) + ">"
        kind = i % 6
        escaped = (label.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n"))
        if kind == 1:
            escaped = "".join(c if c.isascii() else f"\\u{ord(c):04X}" if ord(c) < 0x10000
                              else f"\\U{ord(c):08X}" for c in escaped)
        obj = {0: f'"{escaped}"', 1: f'"{escaped}"', 2: f'"{escaped}"@en', 3: f'"{escaped}"@en-GB',
               4: f'"{escaped}"^^<http://www.w3.org/2001/XMLSchema#string>', 5: f"_:b{i % 97}"}[kind]
        subject_term = f"_:s{i % 89}" if i % 11 == 0 else iri
        lines.append(f"{subject_term} <http://www.wikidata.org/prop/direct/{relation}> {obj} ."
                     + (" # from KAMEL" if i % 13 == 0 else ""))
        if i % 17 == 0:
            lines.append("# a comment line")
        if i % 19 == 0:
            lines.append("")
    return "\n".join(lines) + "\n"


def _label(term: object) -> str:
    """A library's term as factweave labels it (IRI local name, literal value, ``_:`` blank node)."""
    from agent.knowledge.ntriples import iri_label

    kind = type(term).__name__
    if kind in ("URIRef", "NamedNode"):
        return iri_label(str(term) if kind == "URIRef" else term.value)
    if kind in ("BNode", "BlankNode"):
        return "_:"  # renamed by rdflib; compared as "a blank node"
    return str(term) if isinstance(term, str) else term.value  # rdflib's Literal is a str


def factweave_triples(data: str) -> list[tuple[str, str, str]]:
    from agent.knowledge.ntriples import parse_line

    out = []
    for line in data.splitlines():
        triple = parse_line(line)
        if triple is not None:
            out.append(tuple("_:" if t.startswith("_:") else t for t in triple))
    return out


def rdflib_triples(data: str) -> list[tuple[str, str, str]]:
    from rdflib.plugins.parsers.ntriples import W3CNTriplesParser

    class Sink:
        def __init__(self) -> None:
            self.triples: list[tuple[str, str, str]] = []

        def triple(self, s: object, p: object, o: object) -> None:
            self.triples.append((_label(s), _label(p), _label(o)))

    sink = Sink()
    W3CNTriplesParser(sink).parse(io.BytesIO(data.encode("utf-8")))
    return sink.triples


def pyoxigraph_triples(data: str) -> list[tuple[str, str, str]]:
    import pyoxigraph

    return [(_label(q.subject), _label(q.predicate), _label(q.object))
            for q in pyoxigraph.parse(data.encode("utf-8"), pyoxigraph.RdfFormat.N_TRIPLES)]


def pyoxigraph_per_line(data: str) -> list[tuple[str, str, str]]:
    """pyoxigraph called once per line: how it would keep each triple's line number."""
    import pyoxigraph

    out = []
    for line in data.splitlines():
        for q in pyoxigraph.parse(line.encode("utf-8"), pyoxigraph.RdfFormat.N_TRIPLES):
            out.append((_label(q.subject), _label(q.predicate), _label(q.object)))
    return out


PARSERS = [("factweave", factweave_triples, [], True), ("rdflib", rdflib_triples, ["rdflib"], False),
           ("pyoxigraph", pyoxigraph_triples, ["pyoxigraph"], False),
           ("pyoxigraph, one call per line", pyoxigraph_per_line, ["pyoxigraph"], True)]


def rejects(parse: Callable[[str], object], line: str) -> bool:
    try:
        parse(line + "\n")
    except Exception:  # noqa: BLE001 - each library raises its own error type
        return True
    return False


def bench_ntriples(shared: Path, count: int) -> list[dict]:
    sample = (REPO / "tests/data/facts.nt").read_text(encoding="utf-8")
    generated = generated_ntriples(shared, count)
    expected = {"sample": factweave_triples(sample), "generated": factweave_triples(generated)}
    rows = []
    for name, parse, requirements, keeps_lines in PARSERS:
        row = {"library": name, "keeps_line_numbers": keeps_lines, **weight(requirements)}
        try:
            parse("")
        except ImportError as exc:
            rows.append({**row, "error": f"not installed ({exc.name})"})
            continue
        for key, data in (("sample", sample), ("generated", generated)):
            try:
                got = parse(data)
                row[f"{key}_triples"] = len(got)
                row[f"{key}_agree"] = sum(a == b for a, b in zip(got, expected[key]))
            except Exception as exc:  # noqa: BLE001 - a library's own error type is part of the result
                row[f"{key}_error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
        accepted = [line for line in MALFORMED if not rejects(parse, line)]
        row["malformed_rejected"] = len(MALFORMED) - len(accepted)
        row["malformed_accepted"] = accepted
        row["triples_per_s"] = round(len(expected["generated"]) / timed(parse, [generated]))
        rows.append(row)
    return rows


# --- answer normalization ---------------------------------------------------------------------

def squad_normalize(s: str) -> str:
    """The SQuAD v1.1 evaluation script's ``normalize_answer``, verbatim in behaviour."""
    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def gold_answers(shared: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in json.loads((shared / "musique/musique_train100_with_paragraphs.json").read_text()):
        out.setdefault("musique", []).extend([item["answer"], *item.get("answer_aliases", [])])
    for item in json.loads((shared / "hotpotqa/hotpotqa_train100_with_context.json").read_text()):
        out.setdefault("hotpotqa", []).append(item["answer"])
    for item in json.loads((shared / "2wikimultihopqa/2wiki_dev100_questions.json").read_text()):
        out.setdefault("2wiki", []).extend([item["answer"], *item.get("answer_aliases", [])])
    for item in json.loads((shared / "popqa/popqa_500.json").read_text()):
        answers = item["possible_answers"]
        out.setdefault("popqa", []).extend(json.loads(answers) if isinstance(answers, str) else answers)
    for path in sorted((shared / "kamel/relations").glob("P*/dev.jsonl")):
        with path.open(encoding="utf-8") as stream:
            for line in stream:
                out.setdefault("kamel", []).extend(json.loads(line)["obj_label"])
    return out


def recorded_pairs() -> list[tuple[str, list[str]]]:
    """Every distinct (prediction, golds) the evaluations in ``benchmarks/results/eval`` recorded."""
    seen = {}
    for path in glob.glob(str(RESULTS / "eval/**/*.json"), recursive=True):
        data = json.loads(Path(path).read_text())
        for question in data.get("questions", []) if isinstance(data, dict) else []:
            for method in question.get("methods", {}).values():
                prediction = method.get("prediction")
                if isinstance(prediction, str) and prediction.strip():
                    seen[(prediction, tuple(question["gold"]))] = None
    return [(p, list(g)) for p, g in seen]


def bench_normalization(shared: Path) -> list[dict]:
    from agent.knowledge.normalize import normalize_answer

    golds = gold_answers(shared)
    pairs = recorded_pairs()
    rows = []
    for name, normalize in (("factweave", normalize_answer), ("SQuAD v1.1 script", squad_normalize)):
        row = {"library": name}
        row["gold_answers"] = sum(len(v) for v in golds.values())
        row["exact_match_recorded"] = sum(
            bool(normalize(p)) and any(normalize(p) == normalize(g) for g in gs) for p, gs in pairs)
        every = [a for v in golds.values() for a in v]
        row["answers_per_s"] = round(len(every) / timed(normalize, every))
        rows.append(row)
    differ = {corpus: [a for a in answers if normalize_answer(a) != squad_normalize(a)]
              for corpus, answers in golds.items()}
    verdicts = []
    for prediction, gs in pairs:
        ours = any(normalize_answer(prediction) == normalize_answer(g) for g in gs) and bool(normalize_answer(prediction))
        squad = any(squad_normalize(prediction) == squad_normalize(g) for g in gs)
        if ours != squad:
            verdicts.append({"prediction": prediction, "gold": gs, "factweave": ours, "squad": squad})
    rows.append({"library": "differences", "pairs_recorded": len(pairs),
                 "verdicts_differ": len(verdicts), "verdict_examples": verdicts[:20],
                 "gold_forms_differ": {k: len(v) for k, v in differ.items()},
                 "gold_form_examples": {k: [[a, normalize_answer(a), squad_normalize(a)] for a in v[:8]]
                                        for k, v in differ.items()}})
    rows[1]["weight_evaluate"] = weight(["evaluate"])
    return rows


# --- weights and output -----------------------------------------------------------------------

_BASE: set[str] | None = None


def weight(requirements: list[str]) -> dict:
    global _BASE
    if _BASE is None:
        _BASE = base_dependencies()
    if not requirements:
        return {"mb_new": 0.0, "packages_new": 0}
    needed = closure(requirements)
    if not needed:
        return {"mb_new": None, "packages_new": None}
    return {"mb": megabytes(needed), "mb_new": megabytes(needed - _BASE), "packages": len(needed),
            "packages_new": len(needed - _BASE)}


def print_tables(result: dict) -> None:
    if "sentences" in result:
        print_sentences(result)
    if "chunks" in result:
        print_chunks(result)
    if "ntriples" in result:
        print_ntriples(result)
    if "normalization" in result:
        print_normalization(result)


def _measured(rows: list[dict], width: int) -> Iterable[dict]:
    """The rows that ran; a line for each library that was not installed."""
    for r in rows:
        if "error" in r:
            print(f"{r['library']:<{width}} {r['error']}")
        else:
            yield r


def print_sentences(result: dict) -> None:
    print("Sentences (boundaries: precision/recall/F1; tricky: 43 hand-split passages, 'exact' = all boundaries right;"
          "\n>500 ch: sentences over 500 characters in all four corpora)")
    print(f"{'library':<20} {'tricky P/R/F1':>20} {'exact':>6} {'HotpotQA P/R/F1':>20} "
          f"{'agree musique/2wiki/demo':>26} {'>500 ch':>7} {'kchar/s':>8} {'MB new':>7} {'pkgs new':>8}")
    for r in _measured(result["sentences"], 20):
        t, h, a = r["tricky"], r["hotpotqa"], r["agreement_with_factweave"]
        print(f"{r['library']:<20} {t['precision']:.3f}/{t['recall']:.3f}/{t['f1']:.3f} {t['exact']:>6} "
              f"{h['precision']:.3f}/{h['recall']:.3f}/{h['f1']:.3f} "
              f"{a['musique']:.3f}/{a['2wiki']:.3f}/{a['demo']:.3f}".ljust(84)
              + f" {r['sentences_over_500_chars']:>7} {r['chars_per_s'] / 1000:>8.0f} {r['mb_new'] or 0:>7.1f} {r['packages_new'] or 0:>8}")


def print_chunks(result: dict) -> None:
    print("\nChunks (HotpotQA paragraphs; cuts inside HotpotQA's sentences and inside words)")
    print(f"{'library':<42} {'size':>5} {'chunks':>7} {'sent. cut':>9} {'words cut':>9} {'over':>5} "
          f"{'kchar/s':>8} {'MB new':>7}")
    for r in _measured(result["chunks"], 42):
        print(f"{r['library']:<42} {r['size']:>5} {r['chunks']:>7} {r['sentences_cut']:>9} {r['words_cut']:>9} "
              f"{r['chunks_over_size']:>5} {r['chars_per_s'] / 1000:>8.0f} {r['mb_new'] or 0:>7.1f}")


def print_ntriples(result: dict) -> None:
    print("\nN-Triples (labels agreeing with factweave's; malformed lines rejected of 16)")
    print(f"{'library':<32} {'sample':>8} {'generated':>14} {'rejected':>8} {'triples/s':>10} {'lines':>6} {'MB new':>7}")
    for r in _measured(result["ntriples"], 32):
        sample = f"{r.get('sample_agree', 0)}/{r.get('sample_triples', 'err')}"
        generated = f"{r.get('generated_agree', 0)}/{r.get('generated_triples', 'err')}"
        print(f"{r['library']:<32} {sample:>8} {generated:>14} {r['malformed_rejected']:>8} {r['triples_per_s']:>10} "
              f"{'yes' if r['keeps_line_numbers'] else 'no':>6} {r['mb_new'] or 0:>7.1f}")


def print_normalization(result: dict) -> None:
    ours, squad, diff = result["normalization"]
    print("\nAnswer normalization")
    print(f"recorded (prediction, gold) pairs: {diff['pairs_recorded']}; exact matches factweave "
          f"{ours['exact_match_recorded']}, SQuAD {squad['exact_match_recorded']}; verdicts differ: "
          f"{diff['verdicts_differ']}")
    print(f"gold answers: {ours['gold_answers']}; normalized differently: {diff['gold_forms_differ']}")
    print(f"evaluate (squad metric's package): {squad['weight_evaluate']}")


def main() -> None:
    logging.getLogger("rdflib").setLevel(logging.ERROR)  # it warns about each odd IRI it accepts
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", action="append", default=[], help="extra folder of installed packages (last on the path)")
    parser.add_argument("--shared", type=Path, default=SHARED, help="the shared data folder")
    parser.add_argument("--pieces", default="sentences,chunks,ntriples,normalization")
    parser.add_argument("--splitters", default=",".join(n for n, _, _ in SPLITTERS))
    parser.add_argument("--chunk-sizes", default="800,300")
    parser.add_argument("--triples", type=int, default=60000, help="generated N-Triples lines")
    parser.add_argument("--json", type=Path, default=RESULTS / "nlp_libraries.json")
    args = parser.parse_args()
    sys.path.extend(args.site)
    pieces = args.pieces.split(",")
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    result: dict = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                "python": platform.python_version()}}
    if "sentences" in pieces:
        result["sentences"] = bench_sentences(args.shared, args.splitters.split(","))
    if "chunks" in pieces:
        result["chunks"] = bench_chunks(args.shared, [int(s) for s in args.chunk_sizes.split(",")])
    if "ntriples" in pieces:
        result["ntriples"] = bench_ntriples(args.shared, args.triples)
    if "normalization" in pieces:
        result["normalization"] = bench_normalization(args.shared)
    result["machine"].update({"loadavg_1m_before": round(load_before, 2),
                              "loadavg_1m_after": round(os.getloadavg()[0], 2),
                              "seconds": round(time.perf_counter() - started, 1)})
    print_tables(result)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"\nload {result['machine']['loadavg_1m_before']} -> {result['machine']['loadavg_1m_after']}; {args.json}")


if __name__ == "__main__":
    main()
