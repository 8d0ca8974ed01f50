"""elmo-app under load: N visitors press "Compare" in the similarity view at the same moment.

    python -m benchmarks.bench_app --model outputs/demo/model [--requests 20] [--rounds 3]
    python -m benchmarks.bench_app --url http://127.0.0.1:7860/ ...   # a server started otherwise (an older commit)

starts the real `elmo-app` on a free 127.0.0.1 port (unless --url is given), warms it up with two requests, then
sends N requests at once, each with other sentences (held-out sentences of the demo's sense corpus: "bank" in four
sentences, two of each sense), the way the page sends them (Gradio's queue: POST /gradio_api/queue/join, then the
answers as server-sent events), and prints the seconds from sending to the answer (median, max, mean), the
requests that failed, and the machine's load average before and after each round (the page shares the cores with
whatever else runs). Results: benchmarks/results_app.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx

from elmo_hf.train.sense_corpus import generate_probes

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the tests' helper that starts elmo-app

from app_browser import running_app  # noqa: E402  (after the path)


def served(model: str, threads: int | None, timeout: float = 300):
    """`elmo-app --model MODEL` on a free port (the tests' `running_app`, with OMP_NUM_THREADS=threads where given):
    a context that yields (url, process)."""
    env = dict(os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {}))
    return running_app(model, env=env, timeout=timeout)


def similarity_event(url: str) -> tuple[int, int]:
    """(fn_index, trigger id) of the page's "Compare" click: what the browser sends (found by the button, so that
    a server of an older commit, whose event has no API name, is measured the same way)."""
    config = httpx.get(f"{url}config", timeout=30).json()
    button = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "sim-run")
    for index, dependency in enumerate(config["dependencies"]):
        if [button, "click"] in [list(t) for t in dependency["targets"]]:
            return dependency.get("id", index), button
    raise SystemExit(f"{url} has no click event on #sim-run")


def inputs(count: int, seed: int) -> list[list[str]]:
    """`count` distinct requests: four held-out sentences with "bank", two of each sense."""
    probes = [(sense, sentence) for word, sense, sentence in generate_probes(4 * count, seed=seed) if word == "bank"]
    by_sense = {sense: [s for k, s in probes if k == sense] for sense in dict.fromkeys(k for k, _ in probes)}
    river, finance = by_sense.values()
    rng = random.Random(seed)
    requests = []
    for i in range(count):
        lines = [river[2 * i], finance[2 * i], river[2 * i + 1], finance[2 * i + 1]]
        rng.shuffle(lines)
        requests.append(["\n".join(lines), "bank", "punctuation"])
    return requests


def ask(url: str, fn_index: int, trigger: int, data: list) -> tuple[float, str | None]:
    """One request as the page makes it: (seconds to the answer, None or what failed)."""
    session = uuid.uuid4().hex[:11]
    start = time.perf_counter()
    try:
        with httpx.Client(timeout=300) as client:
            joined = client.post(f"{url}gradio_api/queue/join", json={
                "data": data, "event_data": None, "fn_index": fn_index, "trigger_id": trigger,
                "session_hash": session})
            joined.raise_for_status()
            with client.stream("GET", f"{url}gradio_api/queue/data", params={"session_hash": session}) as events:
                for line in events.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    message = json.loads(line[5:])
                    if message.get("msg") == "process_completed":
                        seconds = time.perf_counter() - start
                        output = message.get("output") or {}
                        if not message.get("success", False) or "error" in output:
                            return seconds, f"failed: {output.get('error')}"
                        answer = output.get("data") or [""]
                        if str(answer[0]).startswith("❌"):
                            return seconds, f"refused: {answer[0][:200]}"
                        return seconds, None
        return time.perf_counter() - start, "the stream ended without an answer"
    except httpx.HTTPError as error:
        return time.perf_counter() - start, f"{type(error).__name__}: {error}"


def burst(url: str, requests: list[list]) -> tuple[list[float], list[str]]:
    """All `requests` at once (one thread each, released together): their times and failures."""
    fn_index, trigger = similarity_event(url)
    results: list = [None] * len(requests)
    ready = threading.Barrier(len(requests))

    def visitor(i: int) -> None:
        ready.wait()
        results[i] = ask(url, fn_index, trigger, requests[i])

    threads = [threading.Thread(target=visitor, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [seconds for seconds, _ in results], [error for _, error in results if error]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="outputs/demo/model", help="what elmo-app serves (default: the demo's)")
    parser.add_argument("--url", default=None, help="benchmark this running server instead of starting one")
    parser.add_argument("--requests", type=int, default=20, help="requests sent at once (default 20)")
    parser.add_argument("--rounds", type=int, default=3, help="bursts, each with other sentences (default 3)")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of the server it starts")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(served(args.model, args.threads))[0]
        fn_index, trigger = similarity_event(url)
        for data in inputs(2, seed=10_000):  # warm-up: the first forward pass and figure of the process
            seconds, error = ask(url, fn_index, trigger, data)
            if error:
                raise SystemExit(f"the warm-up request {error}")
        print(f"{args.requests} concurrent similarity requests to {url}; {os.cpu_count()} CPUs")
        for round_ in range(args.rounds):
            load = os.getloadavg()[0]
            times, errors = burst(url, inputs(args.requests, seed=round_))
            print(f"round {round_ + 1}: median {statistics.median(times):.2f} s, max {max(times):.2f} s, "
                  f"mean {statistics.mean(times):.2f} s, {len(errors)} errors; load average {load:.1f} before, "
                  f"{os.getloadavg()[0]:.1f} after" + "".join(f"\n  {e}" for e in sorted(set(errors))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
