"""Fact readers: each format, gzip, errors that name file and line, KAMEL, inverses."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from agent.errors import FactweaveError, InputError
from agent.knowledge.facts import Fact
from agent.knowledge.loaders import (
    load_facts,
    read_jsonl,
    read_kamel,
    read_ntriples,
    read_tsv,
)
from agent.knowledge.ntriples import iri_label, parse_line

DATA = Path(__file__).resolve().parent / "data"
KAMEL = DATA / "kamel_mini"


def triples(facts):
    return [(f.subject, f.predicate, f.object) for f in facts]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def gzip_copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / (source.name + ".gz")
    with open(source, "rb") as raw, gzip.open(target, "wb") as packed:
        shutil.copyfileobj(raw, packed)
    return target


# --- TSV ---------------------------------------------------------------------------------------

def test_tsv_reads_rows_and_skips_comments_and_blanks():
    facts = list(read_tsv(DATA / "facts.tsv"))
    assert triples(facts) == [
        ("Paris", "country", "France"),
        ("Eiffel Tower", "located in", "Paris"),
        ("C++", "designed by", "Bjarne Stroustrup"),
        ("x <y> z", "less than", "a > b"),
    ]
    assert [f.source for f in facts] == ["facts.tsv:3", "facts.tsv:4", "facts.tsv:6", "facts.tsv:7"]


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("a\tb\tc\na\tb\n", 2, "expected 3 tab-separated fields (subject, predicate, object), got 2"),
        ("# c\na\tb\tc\td\n", 2, "expected 3 tab-separated fields (subject, predicate, object), got 4"),
        ("a\t\tc\n", 1, "field 2 (predicate) is empty"),
        ("a\tb\t  \n", 1, "field 3 (object) is empty"),
        ("a b c\n", 1, "expected 3 tab-separated fields (subject, predicate, object), got 1"),
    ],
)
def test_tsv_errors_name_file_and_line(tmp_path, text, line, reason):
    path = write(tmp_path, "bad.tsv", text)
    with pytest.raises(InputError) as caught:
        list(read_tsv(path))
    assert str(caught.value) == f"{path}:{line}: {reason}"
    assert (caught.value.line, caught.value.reason) == (line, reason)


def test_errors_come_while_iterating_after_the_good_rows(tmp_path):
    path = write(tmp_path, "bad.tsv", "a\tb\tc\nbroken\n")
    facts = read_tsv(path)
    assert next(facts).subject == "a"
    with pytest.raises(InputError, match=r"bad\.tsv:2: "):
        next(facts)


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes(b"a\tb\tc\nCaf\xe9\tb\tc\n")
    with pytest.raises(InputError, match=r"latin1\.tsv:2: not UTF-8"):
        list(read_tsv(path))


def test_byte_order_mark_and_crlf_are_tolerated(tmp_path):
    path = tmp_path / "bom.tsv"
    path.write_bytes("\ufeffa\tb\tc\r\nd\te\tf\r\n".encode("utf-8"))
    assert triples(read_tsv(path)) == [("a", "b", "c"), ("d", "e", "f")]


# --- JSON lines --------------------------------------------------------------------------------

def test_jsonl_reads_rows_with_optional_source():
    facts = list(read_jsonl(DATA / "facts.jsonl"))
    assert triples(facts) == [
        ("Paris", "country", "France"),
        ("Eiffel Tower", "located in", "Paris"),
        ("x <y> z", "less than", "a > b"),
    ]
    assert [f.source for f in facts] == ["facts.jsonl:1", "wikidata:Q243", "facts.jsonl:4"]


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ('{"subject": "a", "predicate": "b", "object": "c"}\n{"subject": "a",\n', 2, "invalid JSON: "),
        ('["a", "b", "c"]\n', 1, "expected a JSON object, got list"),
        ('\n{"subject": "a", "object": "c"}\n', 2, "missing key 'predicate'"),
        ('{"subject": "a", "predicate": "b", "object": 3}\n', 1, "key 'object' must be a string, got int"),
        ('{"subject": "a", "predicate": "b", "object": "c", "source": 1}\n', 1, "key 'source' must be a string"),
        ('{"subject": " ", "predicate": "b", "object": "c"}\n', 1, "empty subject label"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, text, line, reason):
    path = write(tmp_path, "bad.jsonl", text)
    with pytest.raises(InputError) as caught:
        list(read_jsonl(path))
    assert str(caught.value).startswith(f"{path}:{line}: {reason}")


# --- N-Triples ---------------------------------------------------------------------------------

def test_ntriples_labels_escapes_and_blank_nodes():
    facts = list(read_ntriples(DATA / "facts.nt"))
    assert triples(facts) == [
        ("Paris", "country", "France"),
        ("Café Müller", "label", "Café Müller"),
        ("Eiffel Tower", "height", "330"),
        ("_:b1", "says", 'She said "hi"\\ and left\nagain'),
        ("x", "less than", "a > b"),
        ("emoji", "is", "\U0001F600"),
        ("_:b2", "p", "_:b3"),
    ]
    assert facts[0].source == "facts.nt:2"
    assert facts[3].text == '<_:b1> <says> <She said "hi"\\ and left again> .'


def test_iri_labels():
    assert iri_label("http://www.wikidata.org/entity/Q90") == "Q90"
    assert iri_label("http://www.w3.org/2000/01/rdf-schema#label") == "label"
    assert iri_label("http://dbpedia.org/resource/New_York_City") == "New York City"
    assert iri_label("http://example.org/") == "example.org"


def test_ntriples_surrogate_pair_escapes_are_joined():
    assert parse_line(r'<s> <p> "\uD83D\uDE00" .') == ("s", "p", "\U0001F600")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('<http://a> <http://b> "c"', "expected '.' at the end of the triple"),
        ('"lit" <http://b> <http://c> .', "subject: expected an IRI <...> or a blank node _:name"),
        ('<http://a> _:b <http://c> .', "predicate: expected an IRI <...>"),
        ('<http://a> <http://b> "c\\q" .', "invalid escape \\q"),
        ('<http://a b> <http://b> <http://c> .', "subject: expected"),  # space inside an IRI
        ('<http://a> <http://b> "c" . <http://d>', "unexpected text after '.'"),
        ('<http://a> <http://b> "c"^^ .', "expected a datatype IRI"),
        ('<http://a> <http://b> "\\U00110000" .', "beyond the last Unicode code point"),
    ],
)
def test_ntriples_errors_name_file_and_line(tmp_path, line, reason):
    path = write(tmp_path, "bad.nt", f"# ok\n<http://a> <http://b> <http://c> .\n{line}\n")
    with pytest.raises(InputError) as caught:
        list(read_ntriples(path))
    assert str(caught.value).startswith(f"{path}:3: not N-Triples: ")
    assert reason in str(caught.value)


def test_empty_literal_is_an_error(tmp_path):
    path = write(tmp_path, "empty.nt", '<http://a> <http://b> "" .\n')
    with pytest.raises(InputError, match=r"empty\.nt:1: empty object label"):
        list(read_ntriples(path))


# --- gzip and dispatch -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["facts.tsv", "facts.jsonl", "facts.nt"])
def test_gzip_gives_the_same_facts(tmp_path, name):
    packed = gzip_copy(DATA / name, tmp_path)
    assert triples(load_facts(packed)) == triples(load_facts(DATA / name))


def test_damaged_gzip_is_an_input_error(tmp_path):
    path = tmp_path / "facts.tsv.gz"
    path.write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match=r"facts\.tsv\.gz:1: cannot read"):
        list(load_facts(path))


def test_truncated_gzip_is_an_input_error(tmp_path):
    packed = gzip_copy(DATA / "facts.tsv", tmp_path)
    packed.write_bytes(packed.read_bytes()[:-12])
    with pytest.raises(InputError, match=r"facts\.tsv\.gz:\d+: cannot read"):
        list(load_facts(packed))


def test_unknown_format_is_refused_before_iterating(tmp_path):
    path = write(tmp_path, "facts.csv", "a,b,c\n")
    with pytest.raises(FactweaveError, match=r"facts\.csv: unknown fact format; supported: \.tsv"):
        load_facts(path)


def test_missing_file_and_plain_folder_are_refused(tmp_path):
    with pytest.raises(FactweaveError, match="no such file"):
        load_facts(tmp_path / "absent.tsv")
    with pytest.raises(FactweaveError, match="KAMEL layout"):
        load_facts(tmp_path)


def test_inverse_facts_follow_each_fact():
    facts = list(load_facts(DATA / "facts.tsv", inverse=True))
    assert len(facts) == 8
    assert facts[0] == Fact("Paris", "country", "France", "facts.tsv:3")
    assert facts[1] == Fact("France", "country of", "Paris", "facts.tsv:3 (inverse)")
    assert facts[7].text == "<a › b> <less than of> <x ‹y› z> ."


# --- KAMEL -------------------------------------------------------------------------------------

def test_kamel_reads_every_object_with_property_labels():
    facts = list(read_kamel(KAMEL))
    # 3 relations x 7 copied rows, + a second object in a P106 test row, + the invented rows:
    # two objects in P106 train, one each in P19 and P364 test.
    assert len(facts) == 3 * 7 + 1 + 2 + 2
    assert [f.predicate for f in facts[:1]] == ["place of birth"]  # numeric order: P19 first
    assert {f.predicate for f in facts} == {"place of birth", "occupation", "original language of film or TV show"}
    first = facts[0]
    assert (first.subject, first.object, first.source) == ("Sébastien Fauqué", "Tarbes", "kamel:P19/train.jsonl:1")


def test_kamel_test_rows_use_chosen_else_rdf():
    facts = list(read_kamel(KAMEL, splits=["test"]))
    by_subject = {f.subject: f.object for f in facts}
    assert by_subject["Parandhu Sella Vaa"] == "Tamil"
    assert by_subject["Invented Person"] == "Tarbes"  # chosen is null
    assert by_subject["Invented Film"] == "Tamil"  # rdf is null
    # Aliases ("ta", "Tamil language") name the same object: they are not extra facts.
    assert [f.object for f in facts if f.subject == "Parandhu Sella Vaa"] == ["Tamil"]


def test_kamel_splits_and_relations_filter():
    facts = list(read_kamel(KAMEL, splits=("dev",), relations=["P364"]))
    assert triples(facts) == [
        ("Nee Unnai Arindhaal", "original language of film or TV show", "Tamil"),
        ("Kalakalappu 2", "original language of film or TV show", "Tamil"),
    ]
    assert facts[1].source == "kamel:P364/dev.jsonl:2"


def test_kamel_bracket_labels_are_kept_and_verbalized_like_other_formats():
    facts = [f for f in read_kamel(KAMEL, splits=["train"]) if f.subject == "The <Bracketed> Band"]
    assert [f.text for f in facts] == [
        "<The ‹Bracketed› Band> <occupation> <singer ‹lead›> .",
        "<The ‹Bracketed› Band> <occupation> <composer> .",
    ]
    tsv = [f for f in read_tsv(DATA / "facts.tsv") if "<" in f.subject]
    nt = [f for f in read_ntriples(DATA / "facts.nt") if f.predicate == "less than"]
    assert tsv[0].text.endswith("<a › b> .") and nt[0].text.endswith("<a › b> .")


def test_load_facts_dispatches_a_kamel_folder_with_inverses():
    facts = list(load_facts(KAMEL, inverse=True, splits=["dev"]))
    assert len(facts) == 2 * 6
    assert facts[1].subject == "New York" and facts[1].predicate == "place of birth of"
    assert facts[1].source == "kamel:P19/dev.jsonl:1 (inverse)"


def copy_kamel(tmp_path: Path) -> Path:
    root = tmp_path / "kamel"
    shutil.copytree(KAMEL, root)
    return root


def test_kamel_unknown_property_id_is_a_clear_error(tmp_path):
    root = copy_kamel(tmp_path)
    shutil.copytree(root / "relations" / "P19", root / "relations" / "P999999")
    with pytest.raises(InputError) as caught:
        list(read_kamel(root))
    assert str(caught.value) == f"{root / 'property-labels.tsv'}: no label for property P999999 (relations/P999999)"


def test_kamel_malformed_row_names_file_and_line(tmp_path):
    root = copy_kamel(tmp_path)
    dev = root / "relations" / "P364" / "dev.jsonl"
    with open(dev, "a", encoding="utf-8") as out:
        out.write('{"sub_label": "X", "obj_label": [42]}\n')
    with pytest.raises(InputError) as caught:
        list(read_kamel(root, relations=["P364"]))
    assert str(caught.value) == f"{dev}:3: 'obj_label' entries must be strings or objects, got int"


def test_kamel_missing_split_and_unknown_relation(tmp_path):
    root = copy_kamel(tmp_path)
    (root / "relations" / "P19" / "dev.jsonl").unlink()
    with pytest.raises(FactweaveError, match=r"P19/dev\.jsonl: no such file"):
        list(read_kamel(root))
    with pytest.raises(FactweaveError, match="no such relation folder"):
        list(read_kamel(root, relations=["P5"]))
    with pytest.raises(FactweaveError, match="not a Wikidata property id"):
        list(read_kamel(root, relations=["config.json"]))


def test_kamel_split_may_be_given_as_one_string():
    assert triples(read_kamel(KAMEL, splits="dev")) == triples(read_kamel(KAMEL, splits=["dev"]))
