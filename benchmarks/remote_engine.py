"""Benchmark: agent workers on a shared vLLM engine against a worker that generates in its own process.

Starts, each as its own process on loopback: the vLLM server under ReFactX's rule over the demo
KB (``factweave serve --engine vllm``, from the environment of ``--vllm-python``: vLLM has one
of its own), a worker on it (``factweave serve --engine remote``) and a worker on the in-process
engine (``--local-engine``: ``auto`` is what users get, llama.cpp for a preset on a CPU), both on
the demo web. Conversations are KAMEL follow-ups from the demo KB
(:func:`agent.eval.conversations.kamel_chat_questions`): turn 1 asks about a subject by name,
turn 2 asks about "them"/"it" with turn 1 and the agent's own reply in the request (the
conversation travels with the request; the workers keep nothing per user).

1. **Same answers**: every conversation alone, through each worker: each turn's answer and
   stated facts; the rows that differ are listed.
2. **Throughput**: at each ``--levels`` (1, 4, 8 conversations at once), that many client threads
   take the conversations from one queue (``--conversations`` in all) through each worker in
   turn; reported: conversations a minute, answer latency p50/p95, ``lost`` (an error, a refusal,
   a timeout) and ``wrong`` (a turn's answer not the one it got alone through that worker:
   a reply mixed up with another conversation's would be one).

Everything runs in one run on one machine (ratios mean something; on this 2-core CPU the vLLM
server, the workers and the clients share the cores, so absolute figures do not carry to a GPU).
Results: ``benchmarks/results/remote_engine-<model>.json`` with the machine's load.

Example::

    python benchmarks/remote_engine.py --vllm-python vllm-env/bin/python --model smollm2-135m --conversations 8
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
RESULTS = Path(__file__).resolve().parent / "results"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(command: list[str], env: dict[str, str], log: Path, port: int, timeout: float) -> subprocess.Popen:
    import httpx

    proc = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=REPO)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"{log} exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(2)
    proc.kill()
    raise SystemExit(f"{log} did not start in {timeout:.0f} s")


def _ask(port: int, messages: list[dict[str, str]]) -> dict[str, Any]:
    import httpx

    t = time.perf_counter()
    reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                       json={"model": "factweave", "messages": messages}, timeout=900)
    seconds = time.perf_counter() - t
    if reply.status_code != 200:
        return {"error": f"HTTP {reply.status_code}", "seconds": seconds}
    body = reply.json()
    return {"content": body["choices"][0]["message"]["content"], "answer": body["factweave"]["answer"],
            "facts": [f["text"] for f in body["factweave"]["facts"]], "seconds": seconds}


def _conversation(port: int, first: str, follow_up: str) -> list[dict[str, Any]]:
    one = _ask(port, [{"role": "user", "content": first}])
    if "error" in one:
        return [one]
    two = _ask(port, [{"role": "user", "content": first}, {"role": "assistant", "content": one["content"]},
                      {"role": "user", "content": follow_up}])
    return [one, two]


def _load(port: int, conversations: list[tuple[str, str]], level: int,
          reference: list[list[dict[str, Any]]]) -> dict[str, Any]:
    todo: queue.Queue = queue.Queue()
    for i in range(len(conversations)):
        todo.put(i)
    latencies: list[float] = []
    lost = wrong = answered = 0
    lock = threading.Lock()

    def client() -> None:
        nonlocal lost, wrong, answered
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                turns = _conversation(port, *conversations[i])
            except Exception:  # noqa: BLE001 - a timeout or a dropped connection: lost
                turns = [{"error": "exception", "seconds": 0.0}]
            with lock:
                for k, turn in enumerate(turns):
                    if "error" in turn:
                        lost += 1
                        continue
                    answered += 1
                    latencies.append(turn["seconds"])
                    ref = reference[i][k] if k < len(reference[i]) else None
                    if ref is None or (turn["answer"], turn["facts"]) != (ref["answer"], ref["facts"]):
                        wrong += 1
                lost += 2 - len(turns)  # a turn never asked (its first failed) is lost too

    t = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(level)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - t
    latencies.sort()
    return {"level": level, "conversations": len(conversations), "seconds": round(seconds, 1),
            "conversations_per_min": round(len(conversations) / seconds * 60, 2), "answers": answered,
            "lost": lost, "wrong": wrong,
            "p50_s": round(statistics.median(latencies), 2) if latencies else None,
            "p95_s": round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))], 2) if latencies else None}


def main() -> None:
    from agent.eval.conversations import kamel_chat_questions
    from agent.knowledge.kamel import demo_kamel_root
    from agent.models import load_model, resolve_engine

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm-python", required=True, help="A Python with vLLM and this package (--no-deps).")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--local-engine", default="auto", help="The in-process worker's engine.")
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--levels", default="1,4,8")
    parser.add_argument("--max-concurrency", type=int, default=8,
                        help="The remote worker's questions at once and the vLLM server's sequences (max-num-seqs).")
    parser.add_argument("--local-max-concurrency", type=int, default=2,
                        help="The in-process worker's generations at once (serve's default, 2: more share its "
                             "cores and were slower, measured).")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]

    items = [q for q in kamel_chat_questions(demo_kamel_root(), limit=4 * args.conversations, seed=0)
             if q.meta["stratum"] == "follow-up" and q.meta.get("in_web")][:args.conversations]
    conversations = [(q.history[0]["content"], q.text) for q in items]
    loaded = load_model(args.model, engine="transformers")
    folder = Path(tempfile.mkdtemp(prefix="remote-engine-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FACTWEAVE_", "OPENAI_"))}
    env = {**env, "PYTHONPATH": str(REPO), **({"FACTWEAVE_CACHE": os.environ["FACTWEAVE_CACHE"]}
                                              if "FACTWEAVE_CACHE" in os.environ else {})}
    index = folder / "kb.fidx"
    subprocess.run([sys.executable, "-m", "agent.cli", "index", "build", "--backend", "disk", "--model", args.model,
                    "--out", str(index)], check=True, env=env, cwd=REPO, capture_output=True)
    procs: list[subprocess.Popen] = []
    load_before = os.getloadavg()[0]
    try:
        vllm_port, remote_port, local_port = _port(), _port(), _port()
        procs.append(_start([args.vllm_python, "-m", "agent.cli", "serve", "--engine", "vllm", "--model",
                             str(loaded.model.name_or_path), "--index", str(index), "--port", str(vllm_port),
                             "--max-concurrency", str(args.max_concurrency), "--engine-arg=--dtype=float32",
                             "--engine-arg=--max-model-len=4096", "--engine-arg=--enforce-eager"],
                            {**env, "VLLM_CPU_KVCACHE_SPACE": "2"}, folder / "vllm.log", vllm_port, 900))
        common = ["--model", args.model, "--max-queue", "64"]
        procs.append(_start([sys.executable, "-m", "agent.cli", "serve", "--engine", "remote", "--engine-url",
                             f"http://127.0.0.1:{vllm_port}", *common, "--max-concurrency", str(args.max_concurrency),
                             "--port", str(remote_port)], env, folder / "remote.log", remote_port, 900))
        procs.append(_start([sys.executable, "-m", "agent.cli", "serve", "--engine", args.local_engine, *common,
                             "--max-concurrency", str(args.local_max_concurrency), "--port", str(local_port)], env,
                            folder / "local.log", local_port, 900))
        workers = {"remote": remote_port, "in-process": local_port}
        alone = {name: [_conversation(port, *c) for c in conversations] for name, port in workers.items()}
        differ = [{"conversation": list(c), "turn": k,
                   **{name: {"answer": alone[name][i][k].get("answer"), "facts": alone[name][i][k].get("facts")}
                      for name in workers}}
                  for i, c in enumerate(conversations) for k in range(2)
                  if any(k >= len(alone[n][i]) for n in workers)
                  or (alone["remote"][i][k].get("answer"), alone["remote"][i][k].get("facts"))
                  != (alone["in-process"][i][k].get("answer"), alone["in-process"][i][k].get("facts"))]
        runs = {name: [_load(port, conversations, level, alone[name]) for level in levels]
                for name, port in workers.items()}
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
    local_engine = resolve_engine(args.local_engine, args.model)
    result = {
        "model": args.model, "local_engine": local_engine, "max_concurrency": args.max_concurrency,
        "local_max_concurrency": args.local_max_concurrency,
        "conversations": len(conversations), "turns": 2 * len(conversations),
        "same_answers": 2 * len(conversations) - len(differ), "differ": differ,
        "runs": runs,
        "throughput_ratio_remote_over_local": {
            str(r["level"]): round(r["conversations_per_min"] / l["conversations_per_min"], 2)
            for r, l in zip(runs["remote"], runs["in-process"], strict=True)},
        "machine": {"cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
                    "loadavg_1m_before": round(load_before, 2), "loadavg_1m_after": round(os.getloadavg()[0], 2)},
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"remote_engine-{args.model}.json"
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"same answers: {result['same_answers']} of {result['turns']} turns")
    for name in workers:
        for r in runs[name]:
            print(f"{name:10} {r['level']} at once: {r['conversations_per_min']} conv/min, p50 {r['p50_s']} s, "
                  f"p95 {r['p95_s']} s, lost {r['lost']}, wrong {r['wrong']}")
    print(f"load {result['machine']['loadavg_1m_before']} -> {result['machine']['loadavg_1m_after']}; {path}")


if __name__ == "__main__":
    main()
