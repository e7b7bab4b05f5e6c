"""The same request through the library and through `quickdraft serve`, alternating, in one sitting.

Each round times, end to end with prefill (prefix reuse off, so every run prefills its prompt):
    library        Generator.generate on the main thread (as `quickdraft generate` runs)
    library-thread the same on a fresh thread (where the server's worker ran before it moved to the main thread)
    server         a chat completion from `quickdraft serve` on loopback (a process of its own), not streamed
and checks that every run wrote the same text.

    .venv/bin/python docs/results/2026-11-26-server-speed/server_vs_library.py --rounds 3 --drafters none,prediction
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

import quickdraft
from quickdraft.prompts import edit_request

ROOT = Path(__file__).resolve().parents[3]
INSTRUCTION = "Rename the function parse_line to parse_record and update its caller."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="qwen2.5-coder-0.5b")
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--drafters", default="none,prediction")
    args = p.parse_args()
    message, fenced = edit_request(INSTRUCTION, (ROOT / "examples/inventory.py").read_text(), "inventory.py")
    messages = [{"role": "user", "content": message}]
    port = free_port()
    log = open("/tmp/server_vs_library.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "quickdraft", "serve", "--model", args.model, "--port", str(port),
                               "--no-playground", "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT)
    gen = quickdraft.load(args.model, progress=False)
    url = f"http://127.0.0.1:{port}"
    try:
        while not _up(url):
            assert server.poll() is None, "the server exited; see /tmp/server_vs_library.log"
            time.sleep(1)
        rows = []
        for drafter in args.drafters.split(","):
            prediction = fenced if drafter == "prediction" else None

            def library() -> str:
                return gen.generate(messages, drafter=drafter, max_new_tokens=args.tokens, prefix_reuse=False,
                                    prediction=prediction).text

            def library_thread() -> str:
                out = {}
                t = threading.Thread(target=lambda: out.update(text=library()))
                t.start()
                t.join()
                return out["text"]

            def served() -> str:
                body = {"model": args.model, "messages": messages, "max_tokens": args.tokens, "temperature": 0,
                        "quickdraft": {"drafter": drafter, "prefix_reuse": False}}
                if prediction is not None:
                    body["prediction"] = {"type": "content", "content": prediction}
                r = httpx.post(url + "/v1/chat/completions", json=body, timeout=600)
                r.raise_for_status()
                return r.json()["choices"][0]["message"]["content"]

            runs = {"library": library, "library-thread": library_thread, "server": served}
            library(), served()  # warm-up
            times = {name: [] for name in runs}
            texts = set()
            for _ in range(args.rounds):
                for name, run in runs.items():
                    t0 = time.perf_counter()
                    texts.add(run())
                    times[name].append(time.perf_counter() - t0)
            row = {"drafter": drafter, "same_text": len(texts) == 1,
                   **{name: [round(t, 2) for t in ts] for name, ts in times.items()}}
            base = statistics.median(times["library"])
            row["median_ratio_to_library"] = {n: round(statistics.median(ts) / base, 3) for n, ts in times.items()}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        server.terminate()
        server.wait(30)


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


if __name__ == "__main__":
    main()
