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


def test_a_reply_sent_back_as_the_prompt_keeps_its_facts_spent_and_its_line_open():
    """The remote engine (agent/decoding/remote.py) sends a reply written in parts back as the
    prompt's end: the rule walks those tokens again (``refactx_reply``), so a fact already stated
    is not offered again and a ``Fact:`` line cut between two requests goes on; ``refactx_open``
    opens the line at the tree's root after an opening the rule does not fire on (``Answer:``)."""
    from agent.decoding.tracker import FactTracker
    from agent.decoding.vocab import TokenVocab
    from agent.index import FactIndex
    from agent.knowledge.facts import Fact

    tokenizer = word_tokenizer(extra=("capital", "Answer"))
    facts = [Fact.from_statement("<France> <capital> <Paris> ."), Fact.from_statement("<Germany> <capital> <Berlin> .")]
    tracker = FactTracker(FactIndex.build(facts, tokenizer), TokenVocab.from_tokenizer(tokenizer))

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def offered(state) -> set[str]:
        return {tokenizer.decode([int(t)]) for t in tracker.allowed(state)}

    prompt = ids("Question: capital ?\n")
    reply = ids("Fact: <France> <capital> <Paris> .\nFact:")
    # Without the reply walked, the new line would offer France again (nothing spent).
    blind = RuleArgs.parse({"refactx": True}).start(tracker, prompt + reply)
    walked = RuleArgs.parse({"refactx": True, "refactx_reply": len(reply)}).start(tracker, prompt + reply)
    assert blind.active and walked.active
    assert offered(blind) >= {" "} and len(walked.spans) == 1
    first = ids(" <")
    after_blind, after_walked = blind, walked
    for token in first:
        after_blind, after_walked = tracker.advance(after_blind, token, 0), tracker.advance(after_walked, token, 0)
    assert offered(after_blind) == {"France", "Germany"} and offered(after_walked) == {"Germany"}
    # A line cut mid-fact goes on where it was.
    cut = ids("Fact: <Germany> <")
    mid = RuleArgs.parse({"refactx": True, "refactx_reply": len(cut)}).start(tracker, prompt + cut)
    assert mid.active and offered(mid) == {"capital"}
    # An "Answer:" line: free for the rule, unless opened.
    answer = ids("Fact: <France> <capital> <Paris> .\nAnswer:")
    free = RuleArgs.parse({"refactx": True, "refactx_reply": len(answer)}).start(tracker, prompt + answer)
    opened = RuleArgs.parse({"refactx": True, "refactx_reply": len(answer), "refactx_open": True}).start(
        tracker, prompt + answer)
    assert not free.active and opened.active and offered(opened) == {" "}
    with pytest.raises(ValueError, match="refactx_reply must be a whole number from 0 to 8192"):
        RuleArgs.parse({"refactx_reply": -1})
    with pytest.raises(ValueError, match="refactx_open must be true or false"):
        RuleArgs.parse({"refactx_open": "perhaps"})


def test_a_requests_facts_join_the_servers_tree_with_refactx_kb():
    """A worker's whole-KB attempt sends the facts uploaded to its web since the server's tree was
    built (``refactx_kb``): the request may state those and the tree's own; built once per content."""
    from agent.index import FactIndex
    from agent.knowledge.facts import Fact

    tokenizer = word_tokenizer(extra=("capital",))
    server = FactIndex.build([Fact.from_statement("<France> <capital> <Paris> .")], tokenizer)
    args = RuleArgs.parse({"refactx": True, "refactx_kb": True, "refactx_facts": ["<Germany> <capital> <Berlin> ."]})
    trees = TreeCache(tokenizer)
    joined = trees.joined(server, args.facts)
    assert {joined.facts[i].text for i in range(len(joined))} == {"<France> <capital> <Paris> .",
                                                                  "<Germany> <capital> <Berlin> ."}
    assert trees.joined(server, args.facts) is joined
    with pytest.raises(ValueError, match="refactx_hops grows a request's own tree"):
        RuleArgs.parse({"refactx_kb": True, "refactx_facts": [FACT], "refactx_hops": 1})
