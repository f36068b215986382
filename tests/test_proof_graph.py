"""The proof picture (ui/proof_graph.py) on hand-written traces: nodes, edges, the chain, where a
withheld answer's chain broke, escaping. The markup is read back as XML (it must be well formed:
every text escaped)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from ui.proof_graph import MAX_NODES, proof_graph_html

SVG = "{http://www.w3.org/2000/svg}"


def triple(s: str, p: str, o: str, i: int = 0) -> dict:
    text = f"<{s}> <{p}> <{o}> ."
    return {"start": i * 60, "end": i * 60 + len(text), "text": text, "tree": "question", "fact_id": f"t{i}",
            "source": f"kamel:P1303/dev.jsonl:{i}",
            "provenance": {"kind": "triple", "subject": s, "predicate": p, "object": o, "source": "kamel"}}


def statement(text: str, i: int = 0) -> dict:
    return {"start": i * 80, "end": i * 80 + len(text), "text": text, "tree": "question", "fact_id": f"s{i}",
            "source": "notes.md [0:50]",
            "provenance": {"kind": "document", "title": "Notes", "source": "notes.md", "start": 0, "end": 50}}


def read(html: str) -> ET.Element:
    return ET.fromstring(html)


def classes(el: ET.Element) -> set[str]:
    return set(el.get("class", "").split())


def nodes(root: ET.Element) -> dict[str, set[str]]:
    """The drawn entities (not a statement's end dot) and their classes."""
    return {g.get("data-entity"): classes(g) for g in root.iter(f"{SVG}g")
            if "fw-node" in classes(g) and "fw-node-statement" not in classes(g)}


def edges(root: ET.Element) -> dict[int, ET.Element]:
    return {int(g.get("data-fact-index")): g for g in root.iter(f"{SVG}g") if "fw-edge" in classes(g)}


def label(edge_index: int, root: ET.Element) -> str:
    return next(g.find(f"{SVG}text").text for g in root.iter(f"{SVG}g")
                if "fw-edge-label" in classes(g) and g.get("data-fact-index") == str(edge_index))


def caption(root: ET.Element) -> str:
    return " ".join("".join(p.itertext()) for p in root.iter("p"))


GROUNDED = {"question": "What is the official language of the country Edith Frank-Holländer is a citizen of?",
            "answer": "German", "grounded": True,
            "grounding": {"grounded": True, "how": "contained in fact 2 of a chain of 2 facts", "facts": [0, 1]},
            "facts": [triple("Edith Frank-Holländer", "country of citizenship", "Germany", 0),
                      triple("Germany", "official language", "German", 1)]}


def test_a_grounded_two_fact_chain_is_three_nodes_two_chain_edges_and_the_answer():
    root = read(proof_graph_html(GROUNDED))
    assert "fw-proof" in classes(root) and root.get("data-facts") == root.get("data-drawn") == "2"
    drawn = nodes(root)
    assert set(drawn) == {"Edith Frank-Holländer", "Germany", "German"}
    assert "fw-node-question" in drawn["Edith Frank-Holländer"]
    assert "fw-node-answer" in drawn["German"] and "fw-node-answer" not in drawn["Germany"]
    assert [n for n, c in drawn.items() if "fw-node-answer" in c] == ["German"]
    facts = edges(root)
    assert sorted(facts) == [0, 1] and all("fw-edge-chain" in classes(e) for e in facts.values())
    assert (facts[0].get("data-from"), facts[0].get("data-to")) == ("Edith Frank-Holländer", "Germany")
    assert (facts[1].get("data-from"), facts[1].get("data-to")) == ("Germany", "German")
    assert label(0, root) == "country of citizenship" and label(1, root) == "official language"
    # The whole fact is on hover.
    assert "<Germany> <official language> <German> ." in facts[1].find(f"{SVG}title").text
    assert "grounded: contained in fact 2 of a chain of 2 facts" in caption(root)
    # Columns run from the question's entity to the answer.
    x = {g.get("data-entity"): float(g.find(f"{SVG}rect").get("x")) for g in root.iter(f"{SVG}g")
         if "fw-node" in classes(g)}
    assert x["Edith Frank-Holländer"] < x["Germany"] < x["German"]


def test_a_statement_chain_is_drawn_between_the_names_it_states_labelled_by_what_it_says():
    trace = {"question": "Who founded Zorblax Station?", "standalone": "Who founded Zorblax Station?",
             "answer": "Mira Quell", "grounded": True,
             "grounding": {"grounded": True, "how": "contained in fact 1 of a chain of 2 facts", "facts": [0, 1]},
             "facts": [statement("Zorblax Station was founded in 1987 by Mira Quell.", 0),
                       statement("Mira Quell was an engineer from Norvik.", 1)]}
    root = read(proof_graph_html(trace))
    drawn = nodes(root)
    assert {"Zorblax Station", "Mira Quell", "Norvik"} <= set(drawn)
    assert "fw-node-question" in drawn["Zorblax Station"] and "fw-node-answer" in drawn["Mira Quell"]
    facts = edges(root)
    assert (facts[0].get("data-from"), facts[0].get("data-to")) == ("Zorblax Station", "Mira Quell")
    assert (facts[1].get("data-from"), facts[1].get("data-to")) == ("Mira Quell", "Norvik")
    assert label(0, root) == "was founded in 1987 by" and label(1, root) == "was an engineer from"
    assert "Zorblax Station was founded in 1987 by Mira Quell." in facts[0].find(f"{SVG}title").text
    # A statement naming one entity ends in a dot of its own (an edge per fact all the same); a
    # long one is shortened on its edge.
    trace["facts"].append(statement("Norvik is a cold and windy island far in the northern sea.", 2))
    root = read(proof_graph_html(trace))
    assert sorted(edges(root)) == [0, 1, 2] and edges(root)[2].get("data-from") == "Norvik"
    assert "fw-edge-aside" in classes(edges(root)[2]) and label(2, root).endswith("…")
    assert any("fw-node-statement" in classes(g) for g in root.iter(f"{SVG}g"))


WITHHELD = {"question": "What instrument did Buck Owens play?", "answer": "I don't know.", "grounded": False,
            "withheld": "country music", "withheld_because": "the fact does not say what was asked",
            "grounding": {"grounded": False, "how": "the fact does not say what was asked", "facts": [0, 1],
                          "check": {"passed": False, "fact": 1, "says": "genre", "asks": "instrument",
                                    "how": "its predicate is no word of what the question asks"}},
            "facts": [triple("Buck Owens", "place of death", "Bakersfield", 0),
                      triple("Buck Owens", "genre", "country music", 1)]}


def test_a_withheld_answer_shows_the_chain_and_the_fact_that_failed_the_check_broken():
    root = read(proof_graph_html(WITHHELD))
    assert root.get("data-state") == "withheld"
    facts = edges(root)
    assert "fw-edge-chain" in classes(facts[0]) and "fw-edge-broken" in classes(facts[1])
    drawn = nodes(root)
    assert "fw-node-withheld" in drawn["country music"]
    assert not any("fw-node-answer" in c for c in drawn.values())  # nothing is shown as the answer
    said = caption(root)
    assert "withheld “country music”" in said
    assert "the fact says “genre”; the question asks “instrument”" in said


def test_without_a_check_the_chain_breaks_at_broken_at_else_at_the_first_fact_outside_it():
    trace = {**WITHHELD, "facts": [*WITHHELD["facts"], triple("Merle Haggard", "instrument", "fiddle", 2)]}
    trace["grounding"] = {"grounded": False, "how": "the answer is in no fact of the chain", "facts": [0, 1],
                          "broken_at": 2}
    root = read(proof_graph_html(trace))
    assert "fw-edge-broken" in classes(edges(root)[2])
    assert "withheld “country music”: the fact does not say what was asked" in caption(root)
    del trace["grounding"]["broken_at"]
    assert "fw-edge-broken" in classes(edges(read(proof_graph_html(trace)))[2])
    # A check that passed breaks nothing by itself.
    trace["grounding"] = {**WITHHELD["grounding"], "facts": [0, 1, 2], "check": {**WITHHELD["grounding"]["check"],
                                                                                  "passed": True}}
    assert not any("fw-edge-broken" in classes(e) for e in edges(read(proof_graph_html(trace))).values())
    # A withheld answer no fact states gets its own node, a dashed "not stated" link to it.
    trace = {**WITHHELD, "withheld": "banjo", "grounding": {"grounded": False, "how": "not in a fact", "facts": [0]},
             "facts": WITHHELD["facts"][:1]}
    root = read(proof_graph_html(trace))
    assert "fw-node-withheld" in nodes(root)["banjo"]
    assert [g.get("data-to") for g in root.iter(f"{SVG}g") if "fw-link-missing" in classes(g)] == ["banjo"]


def test_a_computed_answer_marks_its_node_with_the_step():
    how = "comparison: <Bernhard Afinger> and <Melvin Kranzberg> share <country>"
    trace = {"question": "Are Bernhard Afinger and Melvin Kranzberg from the same country?", "answer": "yes",
             "grounded": True, "grounding": {"grounded": True, "computed": True, "facts": [0, 1], "how": how},
             "facts": [triple("Bernhard Afinger", "country", "Germany", 0),
                       triple("Melvin Kranzberg", "country", "Germany", 1)]}
    root = read(proof_graph_html(trace))
    answer = next(g for g in root.iter(f"{SVG}g") if "fw-node-answer" in classes(g))
    assert answer.get("data-entity") == "yes" and "fw-node-computed" in classes(answer)
    assert how in answer.find(f"{SVG}title").text
    assert sorted(edges(root)) == [0, 1]  # the step's links are no facts
    assert f"computed: {how}" in caption(root)


def test_every_text_is_escaped():
    evil = "<script>alert(1)</script>"
    trace = {**GROUNDED, "question": f"Who is {evil}?",
             "facts": [triple(f"Eve {evil}", "knows", 'Bob "&" Co', 0),
                       statement(f"Eve {evil} met Mallory in 1999.", 1)]}
    html = proof_graph_html(trace)
    assert "<script" not in html and "&lt;script&gt;" in html
    root = read(html)  # well formed: nothing in a fact became markup
    assert f"Eve {evil}" in nodes(root) and 'Bob "&" Co' in nodes(root)
    assert not list(root.iter("script")) and not list(root.iter(f"{SVG}script"))


def test_no_fact_is_one_line_and_no_picture():
    html = proof_graph_html({"question": "Where was X born?", "answer": "I don't know.", "grounded": False,
                             "withheld": "Oslo", "grounding": {"grounded": False, "how": "no fact was stated",
                                                               "facts": []}, "facts": []})
    assert "<svg" not in html and "No fact was stated" in html and html.count("<p") == 1
    assert "<svg" not in proof_graph_html(None) and "<svg" not in proof_graph_html({"partial": True})


def test_a_long_list_of_facts_is_cut_to_a_small_graph_and_says_so():
    facts = [triple("Cellulite Soul", "member", f"Member Number {i}", i) for i in range(20)]
    trace = {"question": "Who is in Cellulite Soul?", "answer": "Member Number 0", "grounded": True,
             "grounding": {"grounded": True, "how": "contained in fact 1", "facts": [0]}, "facts": facts}
    root = read(proof_graph_html(trace))
    assert len(nodes(root)) <= MAX_NODES + 1 and 0 in edges(root)
    drawn = int(root.get("data-drawn"))
    assert drawn == len(edges(root)) < 20 and f"{20 - drawn} more stated facts not drawn" in caption(root)
