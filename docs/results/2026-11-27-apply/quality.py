"""How often the model's merged file equals the intended edited file, and the speedups, from a bench folder.

    .venv/bin/python docs/results/2026-11-27-apply/quality.py /tmp/apply-bench [...]

Merged = the first code block of the plain answer; compared with the case's edited file line by line,
trailing whitespace and blank lines at the ends ignored. Speedup: plain's seconds over the method's, per task.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from transformers import AutoTokenizer

from quickdraft.bench import apply, harness, scoring, workloads


def norm(code: str) -> list[str]:
    return [line.rstrip() for line in code.strip("\n").splitlines()]


def main() -> None:
    tok = AutoTokenizer.from_pretrained(Path.home() / ".cache/quickdraft/qwen2.5-coder-0.5b/hf")
    data = workloads.data_dir()
    cases = {c.id: c for c in (*apply.edit_eval_cases(data), *apply.refactor_cases(data))}
    for folder in sys.argv[1:]:
        rows = harness.read_runs(Path(folder))
        plain = {(r["workload"], r["task"]): r for r in rows if r["method"] == "plain"}
        for w in sorted({r["workload"] for r in rows}):
            ps = [r for (wl, _), r in plain.items() if wl == w]
            merged = [norm(scoring.extract_code(tok.decode(r["output_tokens"][0]))) == norm(cases[r["task"]].edited)
                      for r in ps]
            cut = sum(r["finish_reason"][0] == "length" for r in ps)
            print(f"{w}: {len(ps)} tasks, merged file equals the intended one: {sum(merged)}/{len(ps)}"
                  f" ({cut} stopped at the token limit); plain {statistics.median(r['seconds'] for r in ps):.1f} s median")
            for m in sorted({r["method"] for r in rows if r["workload"] == w} - {"plain"}):
                mr = [r for r in rows if r["workload"] == w and r["method"] == m]
                sp = sorted(plain[(w, r["task"])]["seconds"] / r["seconds"] for r in mr)
                ident = sum(r["identical"] is True for r in mr)
                acc, rej = sum(r["accepted"] for r in mr), sum(r["rejected"] for r in mr)
                print(f"  {m}: speedup median {statistics.median(sp):.2f}x [{sp[0]:.2f}-{sp[-1]:.2f}], identical "
                      f"{ident}/{len(mr)}, accepted {acc}, rejected {rej}, accepted/pass "
                      f"{statistics.median(r['accepted_per_pass'] for r in mr):.1f}")


if __name__ == "__main__":
    main()
