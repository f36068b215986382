"""A request's arguments for ReFactX's rule inside vLLM, and the trees of its own facts
(``agent/decoding/rule_args.py``): what vLLM's processor checks when a request arrives and builds
in its engine step, tested without vLLM (tests/test_vllm.py runs them inside it)."""
from __future__ import annotations

import time

import pytest
from conftest import word_tokenizer

from agent.decoding.rule_args import (MAX_FACT_CHARS, MAX_FACTS, MAX_FACTS_CHARS, MAX_QUESTION_CHARS, RuleArgs,
                                      TreeCache)

FACT = "<Buck Owens> <instrument> <guitar> ."


def test_facts_beyond_the_caps_are_refused_in_one_line_and_the_agents_trees_pass():
    """The review's finding: a request's facts had no cap, and their tree is built inside vLLM's
    engine step, where the whole batch waits (64 kB of facts: 0.26 s). Too many facts, too long a
    fact, too many characters in all, too long a question: each is refused when the request
    arrives, naming the limit; a tree the size the agent asks for passes."""
    agents = [f"<Person {i}> <place of birth> <A town with a rather long name, number {i}> ." for i in range(300)]
    assert RuleArgs.parse({"refactx": True, "refactx_facts": agents}).facts == tuple(agents)  # ~70 characters each
    refused = {
        "facts, over this server's limit of 512": {"refactx_facts": [FACT] * (MAX_FACTS + 1)},
        "a fact of 1001 characters, over this server's limit of 1000":
            {"refactx_facts": [FACT, "x" * (MAX_FACT_CHARS + 1)]},
        "characters in all, over this server's limit of 32768":
            {"refactx_facts": ["y" * MAX_FACT_CHARS] * (MAX_FACTS_CHARS // MAX_FACT_CHARS + 1)},
        "refactx_question has 4001 characters": {"refactx_facts": [FACT], "refactx_hops": 1,
                                                 "refactx_question": "z" * (MAX_QUESTION_CHARS + 1)},
        # the checks that were there before the caps
        "refactx must be true or false": {"refactx": "maybe"},
        "refactx_facts must be a list of fact texts": {"refactx_facts": FACT},
        "refactx_hops must be a whole number from 0 to 8": {"refactx_facts": [FACT], "refactx_hops": 9},
        "give its facts in refactx_facts": {"refactx_hops": 1},
    }
    for said, extra in refused.items():
        with pytest.raises(ValueError) as error:
            RuleArgs.parse(extra)
        assert said in str(error.value) and "\n" not in str(error.value) and len(str(error.value)) < 200, \
            (said, str(error.value))
    # The OpenAI server's vllm_xargs may carry flags and numbers as text.
    sent = RuleArgs.parse({"refactx": "true", "refactx_facts": [FACT], "refactx_hops": "2"})
    assert sent.wants_rule() and sent.hops == 2
    assert RuleArgs.parse(None).wants_rule(default=True) and not RuleArgs.parse({"refactx": 0}).wants_rule(True)


def test_the_same_facts_build_one_tree():
    """A request's own tree was built anew for every request; now the same facts (in another list)
    get the tree built the first time, at a small fraction of its cost; other facts get their own,
    and only the trees used last are kept."""
    names = [f"e{i}" for i in range(300)]
    tokenizer = word_tokenizer(extra=(*names, "born", "in", "town"))
    facts = [f"<{n}> <born in> <town {n}> ." for n in names]
    trees = TreeCache(tokenizer, max_trees=2)
    started = time.perf_counter()
    first = trees.tree(RuleArgs.parse({"refactx_facts": list(facts)}).facts)
    built = time.perf_counter() - started
    started = time.perf_counter()
    again = trees.tree(RuleArgs.parse({"refactx_facts": list(facts)}).facts)  # another request, the same facts
    looked_up = time.perf_counter() - started
    assert again is first and len(first.facts) == 300
    assert looked_up < built / 20, (looked_up, built)
    other = trees.tree(tuple(facts[:-1]))
    assert other is not first and len(other.facts) == 299
    trees.tree(tuple(facts[:2]))  # a third content: the least recently used (the first) goes
    assert trees.tree(tuple(facts)) is not first
