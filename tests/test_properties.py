"""Property tests (Hypothesis) for what comes in from outside: any body sent to the
OpenAI-compatible server, any bytes in a knowledge file. Each must end in an answer or in one
readable line, never a crash, a 500 or a traceback."""
from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.errors import FactweaveError, InputError
from agent.knowledge.loaders import load_facts
from agent.serve import ReplyEnd

json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(max_size=12)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


class Echo:
    """A served model that answers at once with the last user message (the model is not what these
    properties test: the server's handling of what a client sends is)."""

    id = "echo"

    def reply(self, request, stop):
        yield f"you said: {request.question()[:40]}"
        yield ReplyEnd(prompt_tokens=1, completion_tokens=1)


message = st.fixed_dictionaries({}, optional={"role": st.sampled_from(["user", "assistant", "system", "tool", "x"])
                                              | json_values,
                                              "content": st.text(max_size=40) | json_values})
bodies = st.fixed_dictionaries({}, optional={
    "model": st.sampled_from(["echo", "gpt-4o", ""]) | json_values,
    "messages": st.lists(message, max_size=3) | json_values,
    "max_tokens": st.integers(-3, 4) | json_values,
    "temperature": st.floats(-1, 3, allow_nan=False) | json_values,
    "stream": st.booleans() | json_values,
    "stop": st.text(max_size=4) | st.lists(st.text(max_size=4), max_size=2) | json_values,
    "n": st.integers(-1, 3) | json_values,
}) | json_values


@pytest.fixture(scope="module")
def echo_server():
    from agent.serve import serve_in_thread

    base_url, stop = serve_in_thread([Echo()])
    yield base_url
    stop()


def _check(response: httpx.Response) -> None:
    assert response.status_code in (200, 400, 404, 413, 415), (response.status_code, response.text)
    if response.status_code != 200:
        error = response.json()["error"]
        assert error["message"] and "\n" not in error["message"] and "Traceback" not in error["message"]
    elif response.headers["content-type"].startswith("text/event-stream"):
        assert response.text.rstrip().endswith("data: [DONE]")
    else:
        assert response.json()["choices"][0]["message"]["content"].startswith("you said:")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_any_json_body_is_answered_or_refused_in_one_line(echo_server, body):
    _check(httpx.post(f"{echo_server}/chat/completions", json=body, timeout=30))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=80))
def test_any_bytes_are_answered_or_refused_in_one_line(echo_server, raw):
    r = httpx.post(f"{echo_server}/chat/completions", content=raw, headers={"Content-Type": "application/json"},
                   timeout=30)
    _check(r)


def test_a_valid_request_still_gets_its_answer(echo_server):
    """The properties above would pass on a server that refused everything: this one is answered."""
    r = httpx.post(f"{echo_server}/chat/completions", json={"model": "echo", "messages": [
        {"role": "user", "content": "hello"}]}, timeout=30)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "you said: hello"


tsv_rows = st.lists(st.lists(st.text(alphabet=st.characters(blacklist_characters="\t\n\r"), max_size=8),
                             min_size=0, max_size=5).map("\t".join), max_size=6).map("\n".join)
jsonl_rows = st.lists(st.one_of(bodies.map(json.dumps), st.fixed_dictionaries(
    {"subject": json_values, "predicate": json_values, "object": json_values}).map(json.dumps),
    st.text(max_size=20)), max_size=6).map("\n".join)
nt_rows = st.lists(st.one_of(
    st.tuples(st.text(max_size=10), st.text(max_size=10), st.text(max_size=10)).map(
        lambda t: f"<http://x/{t[0]}> <http://x/{t[1]}> \"{t[2]}\" ."),
    st.text(max_size=30)), max_size=6).map("\n".join)


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(["tsv", "jsonl", "nt"]), data=st.data())
def test_any_knowledge_file_gives_facts_or_names_its_bad_line(tmp_path_factory, kind, data):
    text = data.draw({"tsv": tsv_rows, "jsonl": jsonl_rows, "nt": nt_rows}[kind] | st.text(max_size=60))
    path = tmp_path_factory.mktemp("kb") / f"facts.{kind}"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))  # lone surrogates: bytes that are not UTF-8
    try:
        facts = list(load_facts(path))
    except InputError as error:
        assert error.path == str(path) and (error.line is None or 1 <= error.line <= text.count("\n") + 1)
        assert "\n" not in str(error) and str(error).startswith(f"{path}:{error.line}" if error.line else str(path))
        return
    except FactweaveError as error:  # a file-level problem (e.g. no fact at all): still one line
        assert "\n" not in str(error)
        return
    for fact in facts:
        assert all(isinstance(part, str) and part.strip() for part in (fact.subject, fact.predicate, fact.object))
        assert isinstance(fact.source, str) and fact.source


def test_a_good_file_of_each_kind_loads(tmp_path):
    """The loader property would pass if every file were refused: a good one of each kind loads."""
    (tmp_path / "a.tsv").write_text("Paris\tcapital of\tFrance\n")
    (tmp_path / "a.jsonl").write_text(json.dumps({"subject": "Paris", "predicate": "capital of", "object": "France"}))
    (tmp_path / "a.nt").write_text('<http://x/Paris> <http://x/capital_of> "France" .\n')
    for name in ("a.tsv", "a.jsonl", "a.nt"):
        (fact,) = list(load_facts(tmp_path / name))
        assert (fact.subject, fact.object) == ("Paris", "France")
