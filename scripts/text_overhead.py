"""What the streaming text costs per step as the output grows (issue 23: it used to decode the whole output
every step). A scripted runner emits a real file's tokens (no model runs), so the time measured is the
Generator's own: decoding text for the stream, stop strings and segments.

    .venv/bin/python scripts/text_overhead.py --tokens 2000

prints, for plain decoding (one token a step) with and without a stop string, the total seconds and the
milliseconds per step over the first and the last 200 steps.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from quickdraft import models
from quickdraft.api import Generator
from quickdraft.runners.scripted import ScriptedRunner
from quickdraft.tokenizer import HFTokenizer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "aider_refactor" / "refactor_tasks.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=models.DEFAULT_MODEL, help="whose tokenizer (default: %(default)s)")
    ap.add_argument("--tokens", type=int, default=2000, help="output length (default: %(default)s)")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    tok = HFTokenizer(AutoTokenizer.from_pretrained(models.resolve(args.model)), [])
    code = "\n".join(json.loads(line)["original_code"] for line in DATA.open())
    script = tok.encode(code, add_special_tokens=False)[: args.tokens]
    eos = max(tok.eos_token_ids, default=0)
    for stop in (None, "\n\n\n\n\n\n"):
        gen = Generator(ScriptedRunner(script, len(tok.tok), eos), tok)
        stamps = []
        t0 = time.perf_counter()
        stream = gen.stream("edit", max_new_tokens=len(script), stop=stop, drafter="none")
        for _ in stream:
            stamps.append(time.perf_counter())
        total = time.perf_counter() - t0
        assert stream.result.token_ids == script and stream.result.text == tok.decode(script)
        first = (stamps[200] - stamps[0]) / 200 * 1e3
        last = (stamps[-1] - stamps[-201]) / 200 * 1e3
        print(f"stop={stop!r}: {len(script)} tokens, {total:.2f} s; ms per step: first 200 {first:.3f}, "
              f"last 200 {last:.3f}")


if __name__ == "__main__":
    main()
