"""Today's answer checks on the labelled cases (``benchmarks/data/check_cases.jsonl``), dev and
test halves side by side: the rule checks of ``agent/pipeline/asked.py`` (with ``relations.py`` and
``question_reading.py``) as they are now, the local model's verdict (a few-shot yes/no,
``prompts/check/verdict.txt``) with its threshold fitted on the dev half only, and the two together.

The rule checks run as the agent runs them: the answer grounded in a connected chain of the stated
facts first (``agent/pipeline/grounding.py``), a computed answer not checked, then the check on
that chain. Only look-ups count (a question over two options is answered by the comparison step).
The saved runs keep a follow-up as it was asked ("What about their occupation?"), not as the
agent rewrote it, so the checks see less than they do in a conversation. The rule check's relation matcher knows the
bundled Wikidata relations (the KAMEL sets' relations are Wikidata's), not each run's index.

Usage::

    python benchmarks/check_scores.py --verdict qwen2.5-coder-0.5b          # score, fit on dev, report
    python benchmarks/check_scores.py --verdict qwen2.5-coder-1.5b --test   # also the test half, to report
    python benchmarks/check_scores.py --path qwen2.5-coder-0.5b             # the model's path reading as the check
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tqdm import tqdm  # noqa: E402

CASES = REPO / "benchmarks" / "data" / "check_cases.jsonl"
SCORED = REPO / "benchmarks" / "results" / "check_scores.jsonl"


def key(case: dict) -> str:
    return json.dumps([case["id"], case["answer"], case["facts"]], ensure_ascii=False)


def lookups(cases: list[dict]) -> list[bool]:
    """Whether each case's question is a look-up as the agent reads it (:class:`PlanReader`):
    a question over two options is answered by the comparison step, in code, not by a stated
    fact the check would judge."""
    from agent.embeddings import Embedder
    from agent.pipeline.plan import PlanReader

    reader = PlanReader(Embedder())
    return [reader.plan(c["question"]).kind == "lookup" for c in tqdm(cases, desc="plans", unit="case")]


def swapped(cases: list[dict], triples: Sequence[tuple[str, str, str]] | None = None) -> list[dict]:
    """Cases the relation check must refuse, made from the right one-triple answers: the same
    question and subject with the relation and object of another triple. Two are another case's
    from the same half whose values are of the same kind as the right one (both dates or numbers,
    or both things); one is a relation whose values are of the other kind (numbers or things, the
    bundled value types), with one of its values in the knowledge ("What was X's occupation?"
    answered by a date of birth). What the agent states when it takes a fact of the right subject
    that says something else. ``triples``: the knowledge (default :func:`knowledge_triples`)."""
    from agent.knowledge.facts import parse_triple
    from agent.pipeline.relations import is_number
    from agent.pipeline.fact_agent import default_relations

    singles = [(c, parse_triple(c["facts"][0])) for c in cases
               if c["right"] and len(c["facts"]) == 1 and "/follow-up/" not in c["id"]]
    singles = [(c, t) for c, t in singles if t is not None]
    # One value of each relation of numbers and of things (bundled value types), from the knowledge.
    relations = default_relations(None)
    kinds: dict[bool, dict[str, str]] = {True: {}, False: {}}
    for _, relation, value in (knowledge_triples() if triples is None else triples):
        if (relation in relations.numeric and is_number(value)) or (relation in relations.items and not is_number(value)):
            kinds[relation in relations.numeric].setdefault(relation, value)
    out = []
    for case, (subject, predicate, obj) in singles:
        dated = any(ch.isdigit() for ch in obj)
        same = {(t[1], t[2]) for c, t in singles if c["half"] == case["half"] and t[1] != predicate
                and any(ch.isdigit() for ch in t[2]) == dated}
        other = {(r, v) for r, v in kinds[not dated].items() if r != predicate}
        for pairs, many, kind in ((same, 2, "swapped"), (other, 1, "swapped across kinds")):
            for relation, value in sorted(pairs, key=lambda p: hashlib.sha256(f"{case['id']}/{p}".encode()).hexdigest())[:many]:
                out.append({**case, "id": f"{case['id']}/swap/{relation}", "set": f"{case['set']} ({kind})",
                            "facts": [f"<{subject}> <{relation}> <{value}> ."], "answer": value, "right": False,
                            "passed": False})
    return out


def cut_short(cases: list[dict]) -> list[dict]:
    """Cases the check must refuse, made from the right answers of chains of triples: the chain's
    first fact alone, answered by its object, a step on the way ("What is the official language
    of the country X comes from?" answered by the country). What the agent states when it stops
    a hop early."""
    from agent.knowledge.facts import parse_triple

    out = []
    for case in cases:
        triples = [parse_triple(f) for f in case["facts"]]
        if not case["right"] or len(triples) < 2 or None in triples[:2] or triples[0][2] != triples[1][0]:
            continue
        out.append({**case, "id": f"{case['id']}/cut-short", "set": f"{case['set']} (cut short)",
                    "facts": case["facts"][:1], "answer": triples[0][2], "right": False, "passed": False})
    return out


def restated(cases: list[dict]) -> list[dict]:
    """Cases the check must refuse, made from the right answers held by a statement: the
    statement itself given as the answer. What the agent states when it copies a fact out."""
    from agent.knowledge.facts import parse_triple
    from agent.pipeline.grounding import holds_answer

    out = []
    for case in cases:
        held = [f for f in case["facts"] if parse_triple(f) is None and holds_answer(f, case["answer"])]
        if case["right"] and held:
            out.append({**case, "id": f"{case['id']}/restated", "set": f"{case['set']} (restated)",
                        "answer": held[0].strip().rstrip("."), "right": False, "passed": False})
    return out


def renamed(cases: list[dict]) -> list[dict]:
    """Cases the check must refuse, made from the right answers: the answer replaced by a name
    the stated facts hold and the answer is not, of the other kind where the right one is a date
    or a number ("When was X born?" answered "London" from the same facts), else the question's
    own name when the facts hold it ("Who directed X?" answered "X"). What the agent states when
    it takes the wrong name out of the right facts."""
    from agent.pipeline.question_reading import _question_names
    from agent.pipeline.grounding import holds_answer
    from agent.pipeline.values import parse_date, parse_number
    from agent.knowledge.keywords import extract_keywords

    out = []
    for case in cases:
        if not case["right"] or "/follow-up/" in case["id"]:
            continue
        answer, facts, question = case["answer"], case["facts"], case["question"]
        dated = any(c.isdigit() for c in answer) and (parse_date(answer) is not None or parse_number(answer) is not None)
        own = [n for n in _question_names(question) if any(holds_answer(f, n) for f in facts)
               and not holds_answer(answer, n) and not holds_answer(n, answer)]
        others = [k for f in facts for k in extract_keywords(f.replace("<", " ").replace(">", " "), limit=20)
                  if k[:1].isupper() and not any(c.isdigit() for c in k) and not holds_answer(question, k)
                  and not holds_answer(answer, k) and not holds_answer(k, answer)]
        name, kind = (others[0], "undated") if dated and others else (own[0], "named") if own else ("", "")
        if name:
            out.append({**case, "id": f"{case['id']}/{kind}", "set": f"{case['set']} ({kind})", "answer": name,
                        "right": False, "passed": False})
    return out


def _drop(name: str) -> Callable[[Any], None]:
    """A check's argument of :meth:`RelationMatcher.check` left empty."""
    def patch(stack: ExitStack) -> None:
        import inspect

        from agent.pipeline.relations import RelationMatcher

        whole = RelationMatcher.check
        signature = inspect.signature(whole)

        def without(self: Any, *args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(self, *args, **kwargs)
            bound.arguments[name] = ()
            return whole(*bound.args, **bound.kwargs)
        stack.enter_context(mock.patch.object(RelationMatcher, "check", without))
    return patch


def _neutral(attribute: str, value: Callable[..., Any], module: str = "asked") -> Callable[[Any], None]:
    """``agent.pipeline.<module>.<attribute>`` replaced by ``value`` (a check that never fires):
    ``module`` the one that looks the name up (``relations`` for the matchers and what they call)."""
    def patch(stack: ExitStack) -> None:
        import importlib

        target: Any = importlib.import_module(f"agent.pipeline.{module}")
        *owners, last = attribute.split(".")
        for owner in owners:
            target = getattr(target, owner)
        stack.enter_context(mock.patch.object(target, last, value))
    return patch


def _unchecked() -> Any:
    from agent.pipeline.relations import AskedCheck

    return AskedCheck(True, None, "", "", "none", 0.0, "not checked")


# Each hand check of agent/pipeline/asked.py (and relations.py) by name, with how it is turned off (--ablate): the
# rule checks run again without it, to measure what it brings on each half.
ABLATIONS: dict[str, tuple[str, Callable[[Any], None]]] = {
    "type": ("a when/how-many question takes a date/number (answer_type_fits)",
             _neutral("answer_type_fits", lambda question, answer: "")),
    "number": ("a question closest to a numeric relation takes a number (asks_number)",
               _neutral("RelationMatcher.asks_number", lambda self, question, names=(): "", "relations")),
    "name": ("an answer repeating a name of the question (repeats_a_name)",
             _neutral("repeats_a_name", lambda question, answer, stated=(): "")),
    "whole": ("an answer repeating the whole statement (repeats_the_statement)",
              _neutral("repeats_the_statement", lambda answer, fact: "")),
    "through": ("a question asked through a relative or role needs the chain to reach it (_through)",
                _neutral("_through", lambda question, fact, triple, kinds=None: None)),
    "past": ("past a role, the question asked again of whom the chain reached (ask_past)",
             _neutral("ask_past", lambda question, named, noun, holder: question)),
    "clause": ("what is asked: the question's last clause, past what it describes (asked_clause)",
               _neutral("asked_clause", lambda question: question)),
    "thing": ("a bare number does not answer a question that asks a thing (asks_a_thing)",
              _neutral("RelationMatcher.asks_a_thing", lambda self, ranked: "", "relations")),
    "other-type": ("only relations whose values are of the fact's type compete (other_type)",
                   _neutral("RelationLabels.other_type", lambda self, value: frozenset(), "relations")),
    "which": ("the noun a question's which/what asks, when a relation's label (asked_noun)",
              _neutral("asked_noun", lambda question: [], "relations")),
    "held": ("the closest of the relations the subject holds, within the wide margin (held)", _drop("held")),
    "spent": ("a relation spent earlier in the chain is not asked again (used)", _drop("used")),
    "onward": ("a relation the object holds and the subject not: a step on the way (onward)", _drop("onward")),
    "statement": ("a statement against what is asked (StatementMatcher; off: statements pass)",
                  _neutral("StatementMatcher.check", lambda self, question, statement, subject, answer:
                           _unchecked(), "relations")),
}


def rule_verdicts(cases: list[dict], reader: str | None = None, without: str | None = None,
                  kinds: str = "qwen2.5-coder-0.5b") -> list[bool]:
    """The rule checks' verdicts (``without``: one of :data:`ABLATIONS` turned off; ``kinds``: the
    model reading whether a role is a kind of the noun asked, as the agent's own, "none": off)."""
    with ExitStack() as stack:
        if without:
            ABLATIONS[without][1](stack)
        return _rule_verdicts(cases, reader, kinds)


def _held(subject: str, facts: list[str]) -> list[str]:
    """As the agent's ``held`` (attempts.py): the relations the knowledge holds for ``subject``
    and those of the stated triples about it."""
    from agent.knowledge.facts import parse_triple

    stated = [t[1] for t in map(parse_triple, facts) if t is not None and t[0] == subject]
    return list(dict.fromkeys([*sorted(held_relations().after(subject)(())), *stated]))


def _rule_verdicts(cases: list[dict], reader: str | None, kinds: str) -> list[bool]:
    from agent.embeddings import Embedder
    from agent.pipeline.asked import AskedChecker
    from agent.pipeline.relations import RelationMatcher
    from agent.pipeline.fact_agent import default_relations
    from agent.pipeline.grounding import clean_answer, ground

    read = None
    if reader:
        from agent.models import load_model
        from agent.pipeline.relation_reading import RelationReader

        loaded = load_model(reader)
        read = RelationReader(loaded.model, loaded.tokenizer)
    checker = AskedChecker(RelationMatcher(Embedder(), default_relations(None), reader=read), kind_reader(kinds))
    out = []
    for case in tqdm(cases, desc="rule checks", unit="case"):
        # As the agent does (attempts.py): grounded in a connected chain first; a computed answer
        # (a count, a date difference) is not checked; else the check on the grounding's chain.
        facts, question = case["facts"], case["question"]
        grounding = ground(question, case["answer"], facts)
        if not grounding.grounded or grounding.computed:
            out.append(bool(grounding.grounded))
            continue
        answer = grounding.short or clean_answer(case["answer"])
        out.append(bool(checker.check(question, answer, facts, grounding.facts,
                                      held=lambda subject, facts=facts: _held(subject, facts)).passed))
    return out


@functools.cache
def kind_reader(model: str) -> Any:
    """The :class:`KindReader` of ``model`` (loaded once), None for "none"."""
    if model == "none":
        return None
    from agent.models import load_model
    from agent.pipeline.relation_reading import KindReader

    loaded = load_model(model)
    return KindReader(loaded.model, loaded.tokenizer)


@functools.cache
def knowledge_triples() -> tuple[tuple[str, str, str], ...]:
    """The triples of the knowledge the runs used: the demo KB, the shared KAMEL's three splits
    and PopQA's triples where present (``../shared/data`` beside the checkout)."""
    from agent.eval.datasets import SHARED_DATA, data_path, popqa_triples
    from agent.knowledge.loaders import load_facts

    kamels = [data_path("kamel", None)] + [p for p in [SHARED_DATA / "kamel"] if p.is_dir()]
    popqa = SHARED_DATA / "popqa" / "popqa_500.json"  # where the shared data lies beside the checkout
    return tuple((f.subject, f.predicate, f.object) for f in
                 [*(f for root in kamels for f in load_facts(root)), *(popqa_triples(popqa) if popqa.is_file() else [])])


@functools.cache
def held_relations() -> Any:
    """The relations :func:`knowledge_triples` holds (:class:`HeldRelations`)."""
    from agent.pipeline.relation_reading import HeldRelations

    return HeldRelations(knowledge_triples())


def path_verdicts(cases: list[dict], model: str, rules: list[bool]) -> list[bool]:
    """The model's path reading as the check (:class:`PathReader`): where the grounding's chain is
    triples, it passes when the path the model reads from the chain's first subject, among the
    relations the knowledge holds along the way (the demo KB and the shared KAMEL's three splits, PopQA's triples) and the
    chain's own, is the chain's relations in order; elsewhere (statements) the rules' verdict."""
    from agent.knowledge.facts import parse_triple
    from agent.models import load_model
    from agent.pipeline.grounding import ground
    from agent.pipeline.relation_reading import PathReader

    held = held_relations()
    loaded = load_model(model)
    reader = PathReader(loaded.model, loaded.tokenizer, held.labels)
    out = []
    for case, rule in zip(tqdm(cases, desc="path checks", unit="case"), rules):
        grounding = ground(case["question"], case["answer"], case["facts"])
        triples = [parse_triple(case["facts"][i]) for i in sorted(grounding.facts)] if grounding.grounded and not grounding.computed else []
        if not triples or None in triples:
            out.append(rule)
            continue
        steps = [triples[0]]  # from the first subject, each next triple on the last one's object
        for triple in triples[1:]:
            if triple[0] == steps[-1][2]:
                steps.append(triple)
        chain = tuple(t[1] for t in steps)

        def after(path: tuple[str, ...], held_after=held.after(triples[0][0]), chain: tuple[str, ...] = chain) -> set[str]:
            labels = held_after(path)  # and the chain's own next relation
            if chain[: len(path)] == path and len(chain) > len(path):
                labels.add(chain[len(path)])
            return labels

        out.append(reader.read(case["question"], [triples[0][0]], after) == chain)
    return out


def model_scores(cases: list[dict], model: str) -> list[float]:
    """The model's verdict on each case: log P(" Yes") - log P(" No") after the few-shot prompt
    ``prompts/check/verdict.txt`` (invented names; triples and statements), on the model's
    engine (llama.cpp where built: the examples read once and kept, as the agent's prompts are)."""
    from string import Template

    import torch

    from agent.llm.next_token import NextTokenLogits
    from agent.models import load_model
    from agent.prompts import read_prompt

    loaded = load_model(model, engine="auto")
    scorer = NextTokenLogits(loaded)
    template, ids = Template(read_prompt("check/verdict.txt")), scorer.ids
    yes, no = ids(" Yes")[0], ids(" No")[0]

    def render(c: dict) -> str:
        return template.substitute(question=" ".join(c["question"].split()), answer=" ".join(c["answer"].split()),
                                   facts="\n".join(f"- {' '.join(f.split())}" for f in c["facts"]))

    out: list[float] = []
    for case in tqdm(cases, desc=f"verdicts ({model})", unit="case"):
        text = render(case)
        prefix = text[:text.rindex("Question: ")]
        if loaded.steps is not None:
            row, _ = loaded.steps.feed(ids(text[len(prefix):]), loaded.steps.pending(ids(prefix), None))
        else:
            row = scorer.logits([text])[0]
        logprobs = torch.log_softmax(row.reshape(-1).float(), dim=-1)
        out.append(float(logprobs[yes] - logprobs[no]))
    return out


def scores(cases: list[dict], passed: list[bool]) -> dict:
    hits = sum(p and c["right"] for c, p in zip(cases, passed))
    n_passed, n_right = sum(passed), sum(c["right"] for c in cases)
    return {"cases": len(cases), "right": n_right, "passed": n_passed,
            "precision": round(hits / n_passed, 3) if n_passed else None,
            "recall": round(hits / n_right, 3) if n_right else None,
            "passed_wrong": n_passed - hits, "withheld_right": n_right - hits}


def fit(cases: list[dict], values: list[float], floor: float = 0.9) -> float:
    """The threshold on the dev cases with the best F1 of "right" among those keeping at least
    ``floor`` of the recall the check would have passing everything (so it withholds few right ones)."""
    ranked = sorted(set(values))
    best, best_f = ranked[0], -1.0
    right = sum(c["right"] for c in cases)
    for t in ranked:
        passed = [v >= t for v in values]
        hits = sum(p and c["right"] for c, p in zip(cases, passed))
        if not passed or right == 0 or hits / right < floor:
            continue
        precision, recall = hits / max(1, sum(passed)), hits / right
        f = 2 * precision * recall / (precision + recall) if hits else 0.0
        if f > best_f:
            best, best_f = t, f
    return best


def auc(cases: list[dict], values: list[float]) -> float | None:
    pos = [v for c, v in zip(cases, values) if c["right"]]
    neg = [v for c, v in zip(cases, values) if not c["right"]]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return round(wins / (len(pos) * len(neg)), 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verdict", default=None, help="also the few-shot yes/no verdict of this model")
    parser.add_argument("--floor", type=float, default=0.9, help="recall kept at least, of passing everything (dev)")
    parser.add_argument("--reader", default=None, help="the rule checks with this model reading relations")
    parser.add_argument("--kinds", default="qwen2.5-coder-0.5b",
                        help="the model reading whether a role is a kind of the noun asked, as the agent's own ('none': off)")
    parser.add_argument("--path", default=None, help="also the path this model reads as the check, where chains are triples")
    parser.add_argument("--ablate", action="store_true",
                        help="also the rule checks with each hand check turned off in turn (ABLATIONS)")
    parser.add_argument("--rules-again", action="store_true", help="run the rule checks again (after a change)")
    parser.add_argument("--test", action="store_true",
                        help="also score the test half (only to report: build and fit on dev alone)")
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "check_scores.json")
    args = parser.parse_args()
    cases = [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    halves = ("dev", "test") if args.test else ("dev",)
    cases = [c for c in cases if c["half"] in halves]
    cases += [*swapped(cases), *cut_short(cases), *restated(cases), *renamed(cases)]
    saved = {}
    if SCORED.exists():
        saved = {row["key"]: row for row in map(json.loads, SCORED.read_text(encoding="utf-8").splitlines())}
    rules = f"rules/{args.reader}" if args.reader else "rules"
    todo = [c for c in cases if "lookup" not in saved.get(key(c), {})]
    if todo:
        for c, v in zip(todo, lookups(todo)):
            saved.setdefault(key(c), {"key": key(c)})["lookup"] = v
    for field_, reader in {"rules": None, rules: args.reader}.items():
        todo = [c for c in cases if args.rules_again or field_ not in saved.get(key(c), {})]
        if todo:
            for c, v in zip(todo, rule_verdicts(todo, reader, kinds=args.kinds)):
                saved.setdefault(key(c), {"key": key(c)})[field_] = v
    for name in ABLATIONS if args.ablate else ():
        todo = [c for c in cases if args.rules_again or f"without/{name}" not in saved.get(key(c), {})]
        if todo:
            print(f"without {name}: {ABLATIONS[name][0]}", file=sys.stderr)
            for c, v in zip(todo, rule_verdicts(todo, None, name, args.kinds)):
                saved.setdefault(key(c), {"key": key(c)})[f"without/{name}"] = v
    if args.path:
        todo = [c for c in cases if f"path/{args.path}" not in saved.get(key(c), {})]
        if todo:
            for c, v in zip(todo, path_verdicts(todo, args.path, [saved[key(c)]["rules"] for c in todo])):
                saved.setdefault(key(c), {"key": key(c)})[f"path/{args.path}"] = v
    field = f"score/{args.verdict}"
    todo = [c for c in cases if field not in saved.get(key(c), {})] if args.verdict else []
    if todo:
        start = time.perf_counter()
        for c, v in zip(todo, model_scores(todo, args.verdict)):
            saved.setdefault(key(c), {"key": key(c)})[field] = v
        print(f"{len(todo)} verdicts in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    SCORED.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in saved.values()), encoding="utf-8")
    every = len(cases)
    cases = [c for c in cases if saved[key(c)]["lookup"] and "/follow-up/" not in c["id"]]
    print(f"{len(cases)} of {every} cases: look-ups (the rest are answered by the comparison step) "
          "asked whole (a follow-up is checked as the agent rewrote it, which the runs do not keep)")
    rows = [saved[key(c)] for c in cases]
    checks = {
        "historic (the check at each run's commit)": [c["passed"] for c in cases],
        "rules (today's asked.py)": [r["rules"] for r in rows],
    }
    if args.reader:
        checks[f"rules, relations also read by {args.reader}"] = [r[rules] for r in rows]
    table: dict = {"cases": str(CASES.relative_to(REPO)), "checks": {}}
    for name in ABLATIONS if args.ablate else ():
        checks[f"rules without {name}"] = [r[f"without/{name}"] for r in rows]
    if args.path:
        checks[f"path read by {args.path} (triples; else rules)"] = [r[f"path/{args.path}"] for r in rows]
    if args.verdict:
        dev = [i for i, c in enumerate(cases) if c["half"] == "dev"]
        threshold = fit([cases[i] for i in dev], [rows[i][field] for i in dev], args.floor)
        checks[f"verdict ({args.verdict}, >= {threshold:+.2f} fitted on dev)"] = [r[field] >= threshold for r in rows]
        checks["rules and verdict"] = [r["rules"] and r[field] >= threshold for r in rows]
        table.update(verdict=args.verdict, threshold=threshold, floor=args.floor,
                     auc={half: auc([c for c in cases if c["half"] == half],
                                    [r[field] for c, r in zip(cases, rows) if c["half"] == half]) for half in halves})
    print("| check | set | half | cases | right | passed | precision | recall | passed wrong | withheld right |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, passed in checks.items():
        table["checks"][name] = {}
        for group in ["all", *sorted({c["set"] for c in cases})]:
            for half in halves:
                idx = [i for i, c in enumerate(cases) if c["half"] == half and (group == "all" or c["set"] == group)]
                s = scores([cases[i] for i in idx], [passed[i] for i in idx])
                table["checks"][name].setdefault(group, {})[half] = s
                if s["cases"] and (group == "all" or name != "historic (the check at each run's commit)"):
                    print(f"| {name} | {group} | {half} | {s['cases']} | {s['right']} | {s['passed']} | {s['precision']} | "
                          f"{s['recall']} | {s['passed_wrong']} | {s['withheld_right']} |")
    if args.verdict:
        print(f"\nverdict AUC (right vs wrong): {table['auc']}")
    if args.test:  # a dev-only run is a working one: the published figures have both halves
        args.json.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
