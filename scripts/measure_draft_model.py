"""Measure draft-model speculative decoding against plain decoding and transformers' assisted
generation, side by side in one process on the same loaded weights (issue: qwen2.5-coder-0.5b
drafting for qwen2.5-coder-1.5b on HumanEval).

For each prompt and each mode (greedy; sampled at --temperature) the methods run back to back:
  plain        quickdraft, no drafter
  draft-model  quickdraft, the draft model (adaptive length unless --draft-length N)
  hf-plain     transformers generate()
  hf-assisted  transformers generate(assistant_model=draft), its default schedule, given the same int8
               draft model quickdraft drafts with
  hf-assisted-fp32  the same with the draft model in float32, as transformers users run it
Greedy outputs must be identical to quickdraft plain (checked, printed); sampled runs use the same
seed per prompt for every method, so only speed is comparable there.

Usage: .venv/bin/python scripts/measure_draft_model.py [--tasks 10] [--skip 0] [--max-new-tokens 128]
         [--modes greedy,sampled] [--temperature 0.7] [--skip-hf-plain] [--out runs.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

import quickdraft
from quickdraft.bench import workloads
from quickdraft.cpu import describe
from quickdraft.drafters.draft_model import DraftModelConfig


METHODS = ["plain", "draft-model", "hf-plain", "hf-assisted", "hf-assisted-fp32"]


CPU = describe()  # every row names the CPU and its flags: ratios differ between CPU kinds

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft-model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--skip", type=int, default=0, help="start after this many prompts (to re-run a part)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--modes", default="greedy,sampled")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--draft-length", default="auto")
    ap.add_argument("--methods", default="plain,draft-model,hf-plain,hf-assisted")
    ap.add_argument("--out", default="measure_draft_model.jsonl")
    ap.add_argument("--summarize", nargs="+", metavar="JSONL", help="only print the summary of earlier runs")
    args = ap.parse_args()
    if args.summarize:
        rows = [json.loads(line) for f in args.summarize for line in open(f) if line.strip()]
        summarize(rows, args.modes.split(","), sorted({r["method"] for r in rows}, key=METHODS.index))
        return

    gen = quickdraft.load(args.model, draft_model=args.draft_model)
    target, draft = gen.runner.model, gen.draft_runner.model
    draft_fp32 = None
    if "hf-assisted-fp32" in args.methods:
        from transformers import AutoModelForCausalLM

        from quickdraft.models import resolve
        draft_fp32 = AutoModelForCausalLM.from_pretrained(resolve(args.draft_model), dtype=torch.float32).eval()
    eos = sorted(gen.tokenizer.eos_token_ids)
    draft_cfg = DraftModelConfig() if args.draft_length == "auto" else DraftModelConfig(k=int(args.draft_length))
    gen.generate("warm up", drafter="draft-model", max_new_tokens=4)
    out = open(args.out, "a")
    rows: list[dict] = []

    def hf(ids, sampling, assistant):
        x = torch.tensor([ids])
        opts = dict(do_sample=True, temperature=sampling.temperature, top_k=0, top_p=1.0) if not sampling.greedy \
            else dict(do_sample=False)
        if not sampling.greedy:
            torch.manual_seed(sampling.seed)
        t0 = time.perf_counter()
        with torch.inference_mode():
            y = target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=args.max_new_tokens,
                                eos_token_id=eos, pad_token_id=eos[0], assistant_model=assistant, **opts)
        dt = time.perf_counter() - t0
        toks = y[0, len(ids):].tolist()
        while toks and toks[-1] in eos:
            toks.pop()
        return toks, dt, None

    def ours(messages, sampling, drafter):
        r = gen.generate(messages, drafter=drafter, max_new_tokens=args.max_new_tokens, sampling=sampling, draft=draft_cfg)
        return r.token_ids, r.stats.prefill_s + r.stats.decode_s, r.stats

    for task in list(workloads.humaneval(workloads.data_dir(), args.skip + args.tasks))[args.skip:]:
        ids = gen.encode_prompt(task.messages)
        for mode in args.modes.split(","):
            sampling = quickdraft.SamplingParams() if mode == "greedy" else \
                quickdraft.SamplingParams(temperature=args.temperature, seed=len(rows))
            plain = None
            for method in args.methods.split(","):
                if method in ("plain", "draft-model"):
                    toks, dt, s = ours(task.messages, sampling, "none" if method == "plain" else "draft-model")
                else:
                    assistant = {"hf-plain": None, "hf-assisted": draft, "hf-assisted-fp32": draft_fp32}[method]
                    toks, dt, s = hf(ids, sampling, assistant)
                plain = toks if method == "plain" else plain
                row = {"cpu": CPU, "task": task.id, "mode": mode, "method": method, "tokens": len(toks), "seconds": round(dt, 3),
                       "tok_s": round(len(toks) / dt, 3), "identical": toks == plain if mode == "greedy" else None,
                       "stats": s.as_dict() if s else None}
                rows.append(row)
                out.write(json.dumps(row) + "\n")
                out.flush()
                extra = (f" acc/pass {s.accepted_per_pass:.2f} tok/pass {s.tokens_per_pass:.2f} "
                         f"draft fwd/pass {s.draft_forwards / max(1, s.target_passes):.2f}") if s else ""
                print(f"{task.id:14} {mode:7} {method:12} {len(toks):4} tok {dt:7.2f} s {len(toks)/dt:6.2f} tok/s "
                      f"identical={row['identical']}{extra}", flush=True)

    summarize(rows, args.modes.split(","), args.methods.split(","))


def summarize(rows: list[dict], modes: list[str], methods: list[str]) -> None:
    print("\nsummary (end to end incl. prefill; speedup = tok/s over quickdraft plain on the same prompt and mode)")
    for mode in modes:
        for method in methods:
            rs = [r for r in rows if r["mode"] == mode and r["method"] == method]
            if not rs:
                continue
            base = {r["task"]: r["tok_s"] for r in rows if r["mode"] == mode and r["method"] == "plain"}
            speed = [r["tok_s"] / base[r["task"]] for r in rs if r["task"] in base]
            tok, sec = sum(r["tokens"] for r in rs), sum(r["seconds"] for r in rs)
            acc = [r["stats"]["accepted_per_pass"] for r in rs if r["stats"]]
            fwd = [r["stats"]["draft_forwards"] / max(1, r["stats"]["target_passes"]) for r in rs if r["stats"]]
            ident = [r["identical"] for r in rs if r["identical"] is not None]
            print(f"{mode:7} {method:16} {len(rs):2} prompts {tok / sec:6.2f} tok/s  speedup median "
                  f"{statistics.median(speed):.2f}x (min {min(speed):.2f}, max {max(speed):.2f})"
                  + (f"  accepted/pass {statistics.mean(acc):.2f}  draft fwd/pass {statistics.mean(fwd):.2f}"
                     if acc and any(fwd) else "")
                  + (f"  identical {sum(ident)}/{len(ident)}" if ident else ""))


if __name__ == "__main__":
    main()
