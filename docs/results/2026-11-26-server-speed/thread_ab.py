"""Plain decoding of the README's edit, 128 tokens: on the main thread and on a fresh thread, alternating.

    .venv/bin/python docs/results/2026-11-26-server-speed/thread_ab.py [ROUNDS]
"""
import sys
import threading
import time
from pathlib import Path

import quickdraft
from quickdraft.prompts import edit_request

ROOT = Path(__file__).resolve().parents[3]
code = (ROOT / "examples/inventory.py").read_text()
msg, _ = edit_request("Rename the function parse_line to parse_record and update its caller.", code, "inventory.py")
gen = quickdraft.load("qwen2.5-coder-0.5b", progress=False)
msgs = [{"role": "user", "content": msg}]


def run():
    t = time.perf_counter()
    r = gen.generate(msgs, drafter="none", max_new_tokens=128)
    return time.perf_counter() - t, r


def in_thread():
    out = {}
    th = threading.Thread(target=lambda: out.update(v=run()))
    th.start()
    th.join()
    return out["v"]


run()
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
    for name, f in (("main", run), ("thread", in_thread)):
        dt, r = f()
        print(name, f"{dt:.2f} s", len(r.token_ids), flush=True)
