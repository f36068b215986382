"""Benchmark: the OpenAI-compatible server under concurrent clients for minutes.

Starts ``factweave serve`` as its own process (loopback, a free port; ``--model``, ``--tree``,
``--max-concurrency``, ``--max-queue`` as given), asks each question once alone for its reference
answer, notes the server's memory (RSS, its child processes included) after that warm-up, then
runs ``--clients`` threads with the real ``openai`` SDK for ``--seconds``, each asking the
questions in turn (model ``factweave``, ``max_retries=0``). Each reply is one of:

- ``right``: the agent's answer equals the reference (greedy decoding: concurrency must not change it);
- ``wrong``: another answer;
- ``refused``: HTTP 429 with a ``Retry-After`` header (the client waits that long, then goes on);
- ``lost``: anything else (an error, a 429 without Retry-After, a timeout).

The bar: none wrong, none lost, and the RSS at the end within 10% of the RSS after warm-up.
Results (counts, latency p50/p95 of the answered, RSS, the machine's load) go to
``benchmarks/results/load-<model>.json``.

Example::

    python benchmarks/load.py --model smollm2-135m --clients 8 --seconds 120
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
QUESTIONS = REPO / "tests" / "data" / "golden_questions.txt"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` and its children (the embedded graph server is one), MiB."""
    import psutil

    root = psutil.Process(pid)
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return round(total / 2**20, 1)


def _wait_ready(base_url: str, server: subprocess.Popen, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode} before it was ready (its log: "
                             f"{server.args and ' '.join(server.args)})")
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit(f"the server was not ready after {timeout:.0f} s")


def _ask(client: Any, question: str) -> str:
    reply = client.chat.completions.create(model="factweave", messages=[{"role": "user", "content": question}])
    return reply.model_extra["factweave"]["answer"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tree", default="kb", help="the agent's fact tree (kb: no retrieval, the fastest)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--questions", type=int, default=8, help="how many golden questions the clients cycle through")
    parser.add_argument("--max-concurrency", type=int, default=2)
    parser.add_argument("--max-queue", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="default: benchmarks/results/load-<model>.json")
    args = parser.parse_args()

    import openai

    questions = [line.strip() for line in QUESTIONS.read_text(encoding="utf-8").splitlines()
                 if line.strip() and not line.startswith("#")][: args.questions]
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    command = [sys.executable, "-m", "agent.cli", "serve", "--model", args.model, "--tree", args.tree,
               "--port", str(port), "--max-concurrency", str(args.max_concurrency),
               "--max-queue", str(args.max_queue)]
    env = {k: v for k, v in os.environ.items() if k != "FACTWEAVE_API_KEY"}
    log = open(RESULTS / f".load-server-{port}.log", "w", encoding="utf-8")  # noqa: SIM115 - closed below
    server = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_ready(base_url, server, timeout=900)
        client = openai.OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=600)
        reference = {}
        for q in questions:
            reference[q] = _ask(client, q)
        rss_warm = _rss_mib(server.pid)
        load_before = os.getloadavg()[0]
        outcomes: list[dict[str, Any]] = []
        lock = threading.Lock()
        stop_at = time.monotonic() + args.seconds

        def work(k: int) -> None:
            i = k
            while time.monotonic() < stop_at:
                q = questions[i % len(questions)]
                i += 1
                started = time.monotonic()
                item: dict[str, Any] = {"client": k, "question": q}
                try:
                    answer = _ask(client, q)
                    item.update(outcome="right" if answer == reference[q] else "wrong", answer=answer)
                except openai.RateLimitError as exc:
                    retry = exc.response.headers.get("retry-after")
                    item.update(outcome="refused" if retry else "lost", retry_after=retry)
                    if retry:
                        time.sleep(min(float(retry), 60.0))
                except Exception as exc:  # noqa: BLE001 - every other failure counts as lost
                    item.update(outcome="lost", error=f"{type(exc).__name__}: {exc}"[:300])
                item["seconds"] = round(time.monotonic() - started, 3)
                with lock:
                    outcomes.append(item)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rss_end = _rss_mib(server.pid)
        load_after = os.getloadavg()[0]
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        Path(log.name).unlink(missing_ok=True)

    counts = {kind: sum(1 for o in outcomes if o["outcome"] == kind) for kind in ("right", "wrong", "refused", "lost")}
    answered = sorted(o["seconds"] for o in outcomes if o["outcome"] in ("right", "wrong"))
    growth = (rss_end - rss_warm) / rss_warm if rss_warm else 0.0
    result = {"model": args.model, "tree": args.tree, "clients": args.clients, "seconds": args.seconds,
              "questions": len(questions), "max_concurrency": args.max_concurrency, "max_queue": args.max_queue,
              "counts": counts,
              "answered_p50_s": round(statistics.median(answered), 2) if answered else None,
              "answered_p95_s": round(answered[int(0.95 * (len(answered) - 1))], 2) if answered else None,
              "rss_after_warmup_mib": rss_warm, "rss_end_mib": rss_end, "rss_growth": round(growth, 4),
              "passed": counts["wrong"] == 0 and counts["lost"] == 0 and abs(growth) <= 0.10 and counts["right"] > 0,
              "cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
              "loadavg_1m_before": round(load_before, 2), "loadavg_1m_after": round(load_after, 2),
              "reference": reference, "outcomes": outcomes}
    path = args.json or RESULTS / f"load-{args.model.replace('/', '_')}.json"
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print("| clients | seconds | right | wrong | refused (429) | lost | answered p50 / p95 s | RSS warm -> end MiB |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.clients} | {args.seconds:.0f} | {counts['right']} | {counts['wrong']} | {counts['refused']} | "
          f"{counts['lost']} | {result['answered_p50_s']} / {result['answered_p95_s']} | "
          f"{rss_warm} -> {rss_end} ({growth:+.1%}) |")
    print(f"{'passed' if result['passed'] else 'FAILED'}; load {result['loadavg_1m_before']} -> "
          f"{result['loadavg_1m_after']}; {path}")
    if not result["passed"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
