"""The prepared device check: quickdraft on a GPU against transformers' own generate on the same card, in one call.

When to run: in a session that has a lent GPU (docs/gpu.md), first thing; with --device cpu anywhere, as its dry run.

    # here, with the real model (CPU): the requests, the real model's plain output, its config and tokenizer
    .venv/bin/python -m quickdraft.bench.device_check record --out .device
    # on the device machine (carry .device), one call:
    PYTHONPATH=src python3 -m quickdraft.bench.device_check run .device --device cuda --out $OUT

`run` does, in order, and writes device_check.md and device_check.json under --out (after each step):
1. the device tests (tests/test_device.py: the runner on the device, row invariance, every drafter and rule);
2. a model of the real one's shapes with random weights (the real weights do not travel: 1 GB in bf16), loaded as
   `quickdraft.load` loads a target there, with the load's invariance check run on it, on the device;
3. each job once on 16 tokens, untimed (warm-up);
4. plain decoding per token, quickdraft (with padded rows and without, where the load kept them) against
   transformers' generate, taking turns, nothing scripted, and the kernels one step launches (per_token); on the
   longest prompt, attention's values summed in blocks, in one product or in one batched product: invariance and time
   (value_blocks); where Linears run in row blocks, a product per block or one batched product: invariance and pass
   costs (block_forms);
   a one-token step eager and replayed from a CUDA graph: the launch-free ceiling (graph_ceiling); whether torch's
   softmax and the runner's give a row the same bits at a one-token and a verify pass's width (softmax_widths);
5. exactness at the real shapes with nothing scripted: each tool's drafted output against its own plain greedy
   output on the random weights (unscripted);
(the experiments of step 4 start only in the first half of --deadline-s)
6. each recorded request replayed, until --deadline-s: every pass runs on that model, so it costs what the real
   model's passes cost there, and returns the real model's recorded logits (ShadowScriptedRunner), so the drafters
   and the sizer draft, verify and accept what they would with the real model: quickdraft plain, prediction and
   lookup; and transformers' generate on the same weights and card: plain greedy unhooked, held to the
   recording's number of passes (what it costs does not depend on the tokens it writes), and prompt lookup with its
   logits replaced by the recording's the same way (a forward hook). Every replayed output is compared with the
   recording;
7. plain decoding per token once more, after the replays: whether the device still runs as fast as in step 4.

Real weights travel in parts over calls of one warm machine: `split`, `stash` and `real` (bench/real_weights.py).

The call that fits one lease (figures of the last one: docs/results/2026-11-27-gpu-h200/):

    set -o pipefail; PYTHONUNBUFFERED=1 PYTHONPATH=src python3 -m quickdraft.bench.device_check run .device \
        --device cuda --out $OUT --deadline-s 240 2>&1 | grep --line-buffered -v "model shards" | tee $OUT/log
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import torch

from .. import trees
from ..runners.scripted import ScriptedRunner

ROOT = Path(__file__).resolve().parents[3]
README_EDIT = "Rename the function parse_line to parse_record and update its caller."  # the README's example
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja")
QUICKDRAFT_JOBS = {"plain": {"drafter": "none"}, "prediction": {}, "lookup": {"drafter": "lookup"}}
HF_JOBS = {"hf plain": {}, "hf prompt lookup": {"prompt_lookup_num_tokens": 10}}


class ShadowScriptedRunner(ScriptedRunner):
    """A ScriptedRunner whose every call also runs on `model` (a runner of the same vocabulary): the logits are the
    script's, the time is the model's. The engine reads the model's declared capabilities."""

    def __init__(self, model, script: Sequence[int], eos: int):
        super().__init__(script, model.vocab_size, eos, model.max_context)
        self.model = model
        model.reuse_prefix = False  # every run prefills its whole prompt, as one command's first request does
        self.supports_trees, self.row_block, self.row_invariant = model.supports_trees, model.row_block, model.row_invariant
        self.model_s = 0.0  # seconds inside the model's decoding passes (the rest of a decode is the engine's)

    def reset(self) -> None:
        self.model.reset()
        super().reset()

    def prefill(self, tokens: Sequence[int]) -> None:
        self.model.prefill(tokens)
        super().prefill(tokens)

    def forward(self, tokens: Sequence[int]) -> torch.Tensor:
        t = time.perf_counter()
        self.model.forward(tokens)  # the linear pass, as the engine runs it on the model
        self.model_s += time.perf_counter() - t
        return super().forward_tree(tokens, trees.chain(len(tokens) - 1))

    def forward_tree(self, tokens: Sequence[int], parents: Sequence[int]) -> torch.Tensor:
        t = time.perf_counter()
        self.model.forward_tree(tokens, parents)
        self.model_s += time.perf_counter() - t
        return super().forward_tree(tokens, parents)

    def rollback(self, length: int) -> None:
        self.model.rollback(length)
        super().rollback(length)

    def keep(self, start: int, rows: Sequence[int]) -> None:
        self.model.keep(start, rows)
        super().rollback(start + len(rows))


class ScriptedLogits:
    """A forward hook on a transformers model whose logits become the recording's: the position after prompt + output
    token i chooses output token i + 1 (past the output: eos), whatever the weights computed. transformers' generate
    then drafts, verifies and stops as it would with the real model, at the cost of these weights' passes."""

    def __init__(self, model, prompt: Sequence[int], output: Sequence[int], eos: int):
        self.sequence, self.first, self.eos, self.past = list(prompt) + list(output), len(prompt), eos, 0
        self.handles = [model.register_forward_pre_hook(self.before, with_kwargs=True),
                        model.register_forward_hook(self.after)]

    def before(self, module, args, kwargs):
        cache = kwargs.get("past_key_values", kwargs.get("cache"))
        self.past = cache.get_seq_length() if cache is not None else 0
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.n = ids.shape[1]

    def after(self, module, args, output):
        logits = output.logits  # [1, k, V]: the last k positions of the pass
        k = logits.shape[1]
        fixed = torch.full_like(logits, -1e4)
        for row, position in enumerate(range(self.past + self.n - k, self.past + self.n)):
            following = position + 1
            token = self.sequence[following] if self.first <= following < len(self.sequence) else self.eos
            fixed[0, row, token] = 0.0
        output.logits = fixed
        return output

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def requests(data: Path) -> list[dict]:
    """The README's edit, two refactors from the held-out half of the Aider set and one Spec-Bench summary."""
    from ..prompts import edit_request

    source = (ROOT / "examples" / "inventory.py").read_text()
    edit, fenced = edit_request(README_EDIT, source, "inventory.py")
    out = [{"name": "readme edit", "messages": [{"role": "user", "content": edit}], "prediction": fenced,
            "max_new_tokens": 1024}]
    rows = [json.loads(line) for line in (data / "aider_refactor" / "refactor_tasks.jsonl").read_text().splitlines()]
    for r in sorted(rows, key=lambda r: r["original_chars"])[20:22]:
        message, prediction = edit_request(r["instruction"], r["original_code"], r["filename"])
        out.append({"name": f"refactor {r['task_id']}", "messages": [{"role": "user", "content": message}],
                    "prediction": prediction, "max_new_tokens": 512})
    summary = next(json.loads(line) for line in (data / "spec_bench" / "question.jsonl").read_text().splitlines()
                   if json.loads(line)["category"] == "summarization")
    out.append({"name": "spec-bench summary", "messages": [{"role": "user", "content": summary["turns"][0]}],
                "prediction": None, "max_new_tokens": 256})
    return out


def record(out: Path, model: str, data: Path) -> None:
    """The real model's plain greedy output of each request, with its config and tokenizer files (no weights)."""
    import quickdraft
    from .. import models

    g = quickdraft.load(model, progress=True)
    folder = models.resolve(model, progress=False)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(folder / "config.json", out / "config.json")
    for name in TOKENIZER_FILES:
        if (folder / name).is_file():
            data_ = (folder / name).read_bytes()
            (out / (name + ".xz" if name == "tokenizer.json" else name)).write_bytes(
                lzma.compress(data_) if name == "tokenizer.json" else data_)
    recorded = []
    for r in requests(data):
        res = g.generate(r["messages"], max_new_tokens=r["max_new_tokens"], drafter="none", prefix_reuse=False)
        recorded.append({**r, "prompt_ids": g.encode_prompt(r["messages"]), "output_ids": res.token_ids,
                         "eos": min(g.tokenizer.eos_token_ids)})
        print(f"{r['name']}: {len(recorded[-1]['prompt_ids'])} prompt tokens, {len(res.token_ids)} output tokens",
              file=sys.stderr)
    (out / "requests.json").write_text(json.dumps({"model": model, "dtype": g.runner.dtype, "requests": recorded}))


QK_SCALE = 3.0  # random q and k projections scaled so that attention scores spread as a trained model's (std ~3)


def random_weights(files: Path, folder: Path, device: str) -> Path:
    """A folder with the recorded model's config and tokenizer and random weights (bf16, seed 0). The query and key
    projections are scaled by QK_SCALE: at transformers' initialisation the scores have a std of about 0.36, so every
    softmax row is nearly flat and a difference in how its sum is ordered would not show in the weights."""
    from transformers import AutoConfig, AutoModelForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(files), dtype=torch.bfloat16)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                parameter.mul_(QK_SCALE)
    model.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (files / name).is_file():
            shutil.copyfile(files / name, folder / name)
        elif (files / f"{name}.xz").is_file():
            (folder / name).write_bytes(lzma.decompress((files / f"{name}.xz").read_bytes()))
    return folder


def timed_quickdraft(g, r: dict, job: str, rounds: int) -> dict:
    from ..api import Generator

    runs = []
    shadow = ShadowScriptedRunner(g.runner, r["output_ids"], r["eos"])
    for _ in range(rounds):
        fresh = Generator(shadow, g.tokenizer, name=g.name)  # one command's Generator: no pass costs yet
        extra = dict(QUICKDRAFT_JOBS[job], **({"prediction": r["prediction"]} if job == "prediction" else {}))
        res = fresh.generate(r["messages"], max_new_tokens=r["max_new_tokens"], prefix_reuse=False, **extra)
        runs.append(res)
    s = runs[0].stats
    return {"decode_s": statistics.median(x.stats.decode_s for x in runs),
            "prefill_s": statistics.median(x.stats.prefill_s for x in runs),
            "total_s": statistics.median(x.stats.prefill_s + x.stats.decode_s for x in runs),
            "tokens": s.completion_tokens, "passes": s.target_passes, "accepted": s.accepted_prediction_tokens,
            "same": all(x.token_ids == r["output_ids"] for x in runs)}


def timed_transformers(model, r: dict, job: str, rounds: int) -> dict:
    """transformers' generate on the recording's request. Plain greedy decoding costs the same whatever tokens it
    writes, so "hf plain" runs unhooked, held to the recording's number of passes (min_new_tokens; same: None, as
    nothing is compared); a job whose passes depend on the tokens (prompt lookup) gets the recording's logits from a
    forward hook (ScriptedLogits)."""
    from transformers import GenerationConfig

    device = model.device
    x = torch.tensor([r["prompt_ids"]], device=device)
    hooked = bool(HF_JOBS[job])
    passes = min(len(r["output_ids"]) + 1, r["max_new_tokens"])  # the recording's tokens, and its eos if it wrote one
    length = {"max_new_tokens": r["max_new_tokens"]} if hooked else {"max_new_tokens": passes, "min_new_tokens": passes}
    config = GenerationConfig(do_sample=False, num_beams=1, eos_token_id=r["eos"], pad_token_id=r["eos"], **length,
                              **HF_JOBS[job])
    hook = ScriptedLogits(model, r["prompt_ids"], r["output_ids"], r["eos"]) if hooked else None
    times, outputs = [], []
    try:
        for _ in range(rounds):
            t = time.perf_counter()
            with torch.inference_mode():
                y = model.generate(x, attention_mask=torch.ones_like(x), generation_config=config)
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
            out = y[0, x.shape[1]:].tolist()
            outputs.append(out[:-1] if out and out[-1] == r["eos"] else out)
    finally:
        if hook is not None:
            hook.remove()
    first = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=1, eos_token_id=r["eos"], pad_token_id=r["eos"])
    t = time.perf_counter()
    with torch.inference_mode():  # the prompt's pass and one token: what generate spends before decoding
        model.generate(x, attention_mask=torch.ones_like(x), generation_config=first)
    if device.type == "cuda":
        torch.cuda.synchronize()
    prefill = time.perf_counter() - t
    total = statistics.median(times)
    return {"total_s": total, "prefill_s": prefill, "decode_s": total - prefill, "tokens": len(outputs[0]),
            "same": all(o == r["output_ids"] for o in outputs) if hooked else None}


def row(name: str, job: str, m: dict, passes, accepted) -> str:
    same = "-" if m["same"] is None else m["same"]  # None: nothing compared
    return (f"| {name} | {job} | {m['total_s']:.3f} | {m['prefill_s']:.3f} | {m['decode_s']:.3f} | "
            f"{1000 * m['decode_s'] / max(m['tokens'], 1):.1f} | {m['tokens']} | {passes} | {accepted} | {same} |")


def warm_up(g, hf, r: dict) -> None:
    """Each job once on the first 16 tokens of a recording, untimed: CUDA's context, cuBLAS's handles and kernel
    selection, transformers' generate setup, out of the figures."""
    short = dict(r, max_new_tokens=16, output_ids=r["output_ids"][:16])
    for job in QUICKDRAFT_JOBS:
        if job != "prediction" or r["prediction"] is not None:
            timed_quickdraft(g, short, job, 1)
    for job in HF_JOBS:
        timed_transformers(hf, short, job, 1)


def unscripted(g, hf, folder: Path, r: dict, dtype: str, device: str, tokens: int) -> list[str]:
    """Exactness at the real shapes, nothing scripted: the random weights decide every token (their logits nearly
    tie, so a verify pass that differs from one-token decoding in any bit shows). Each tool's drafted output is
    compared with its own plain greedy output: quickdraft's prediction, lookup and draft model (the same weights as
    the draft: every draft the target's own choice, the verify passes longest), transformers' prompt lookup and
    assisted generation (the same model as the assistant)."""
    import quickdraft
    from transformers import GenerationConfig

    lines = [f"## Unscripted: {tokens} tokens of the random weights' own greedy output, prompt of {r['name']!r}", "",
             "| tool | job | tokens | seconds | same as its plain |", "|---|---|---|---|---|"]
    base = None
    gd = quickdraft.load(str(folder), dtype=dtype, device=device, draft_model=str(folder),
                         draft_precision="bf16" if dtype == "bf16" else "fp32", progress=False)
    for job, extra in (("plain", {"drafter": "none"}), ("prediction", {"prediction": r["prediction"]}),
                       ("lookup", {"drafter": "lookup"}), ("draft model", {"drafter": "draft-model"})):
        t = time.perf_counter()
        res = (gd if job == "draft model" else g).generate(r["messages"], max_new_tokens=tokens, prefix_reuse=False,
                                                           **extra)
        base = res.token_ids if base is None else base
        lines.append(f"| quickdraft | {job} | {len(res.token_ids)} | {time.perf_counter() - t:.2f} | "
                     f"{res.token_ids == base} |")
        print(lines[-1], flush=True)
    del gd
    x = torch.tensor([r["prompt_ids"]], device=hf.device)
    base = None
    for job, extra, assistant in (("plain", {}, None), ("prompt lookup", {"prompt_lookup_num_tokens": 10}, None),
                                  ("assisted (itself as assistant)", {}, hf)):
        config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=tokens, min_new_tokens=tokens,
                                  eos_token_id=r["eos"], pad_token_id=r["eos"], **extra)
        t = time.perf_counter()
        with torch.inference_mode():
            y = hf.generate(x, attention_mask=torch.ones_like(x), generation_config=config,
                            assistant_model=assistant)[0, x.shape[1]:]
        out = y.tolist()
        base = out if base is None else base
        lines.append(f"| transformers | {job} | {len(out)} | {time.perf_counter() - t:.2f} | {out == base} |")
        print(lines[-1], flush=True)
    return lines + [""]


def per_token(g, hf, r: dict, tokens: int, rounds: int, title: str = "", kernels: bool = True) -> list[str]:
    """Plain greedy decoding per token, quickdraft against transformers' generate, nothing scripted, taking
    turns `rounds` times on the same prompt (the medians are compared): the cost of a one-token step, each tool's own
    loop included. Where the load kept padded rows (lean.LeanPass.pad_rows) quickdraft also runs without them, each
    Linear padding its own rows, in the same turns; and the device kernels one step launches are counted for each.
    transformers also runs with the replays' hook (ScriptedLogits), which shows what the hook itself costs a token."""
    from transformers import GenerationConfig

    x = torch.tensor([r["prompt_ids"]], device=hf.device)

    def hf_seconds(n: int, hooked: bool = False) -> float:
        config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=n, min_new_tokens=n,
                                  eos_token_id=r["eos"], pad_token_id=r["eos"])
        hook = ScriptedLogits(hf, r["prompt_ids"], r["output_ids"], r["eos"]) if hooked else None
        t = time.perf_counter()
        try:
            with torch.inference_mode():
                hf.generate(x, attention_mask=torch.ones_like(x), generation_config=config)
            if hf.device.type == "cuda":
                torch.cuda.synchronize()
        finally:
            if hook is not None:
                hook.remove()
        return time.perf_counter() - t

    lean = g.runner.lean
    rows = lean.pad_rows if lean is not None else None
    forms = {"quickdraft": rows} if not rows else {"quickdraft, padded rows": rows, "quickdraft, rows padded per Linear": None}
    with_hook = "transformers generate, the replays' hook"
    ms = {name: [] for name in [*forms, "transformers generate", with_hook]}
    for _ in range(rounds):
        for name, form in forms.items():
            if lean is not None:
                lean.pad_rows = form
            res = g.generate(r["messages"], max_new_tokens=tokens, drafter="none", prefix_reuse=False)
            ms[name].append(1000 * res.stats.decode_s / max(res.stats.target_passes, 1))  # one pass a token
        ms["transformers generate"].append(1000 * (hf_seconds(tokens) - hf_seconds(1)) / (tokens - 1))
        ms[with_hook].append(1000 * (hf_seconds(tokens, True) - hf_seconds(1, True)) / (tokens - 1))
    if lean is not None:
        lean.pad_rows = rows
    theirs = statistics.median(ms["transformers generate"])
    lines = [f"## Plain decoding per token{title}, unscripted, {tokens} tokens, taking turns, {rounds} rounds", "",
             "| tool | ms a token (median) | runs | over transformers' | device kernels a step |", "|---|---|---|---|---|"]
    counted = step_kernels(g, hf, r, forms) if kernels else {}
    for name, values in ms.items():
        median = statistics.median(values)
        lines.append(f"| {name} | {median:.1f} | {', '.join(f'{v:.1f}' for v in values)} | {median / theirs:.2f}x | "
                     f"{counted.get(name, '-')} |")
    return lines + [""]


def attention_sweep(device: str, lengths: Sequence[int], sizes: Sequence[int] = (2, 33, 129),
                    G: int = 7, Hkv: int = 2, D: int = 64) -> list[tuple[int, int]]:
    """attention.attend as the lean pass calls it (padded keys, grouped heads, bf16), with whatever VALUE_BLOCK is set:
    the (L, m) where row 0 of an m-token pass from position L - 1 differs from the one-token pass there, bit for bit."""
    from ..runners import attention

    torch.manual_seed(0)
    top = max(lengths) + max(sizes) + 64
    k, v = (torch.randn(1, Hkv, top, D, device=device).to(torch.bfloat16) for _ in range(2))
    q = torch.randn(1, Hkv, G, max(sizes), D, device=device).to(torch.bfloat16)

    def padded(t: torch.Tensor, used: int) -> torch.Tensor:  # KeyBuffers' layout: whole 64-key blocks, zeros after
        b = t[:, :, : used + (-used) % attention.SOFTMAX_BLOCK].clone()
        b[:, :, used:] = 0
        return b

    differ = []
    for L in lengths:
        one = attention.attend(q[:, :, :, 0], padded(k, L).transpose(2, 3), padded(v, L), None, 0.125, groups=G, count=L)
        for m in sizes:
            total = L - 1 + m
            hidden = torch.arange(total, device=device) >= L + torch.arange(m, device=device)[:, None]  # [m, total]
            mask = torch.zeros(m, total, dtype=torch.bfloat16, device=device).masked_fill(
                hidden, torch.finfo(torch.bfloat16).min)[None, None, None]  # [1, 1, 1, m, total]: causal
            out = attention.attend(q[:, :, :, :m].reshape(1, Hkv, G * m, D), padded(k, total).transpose(2, 3),
                                   padded(v, total), mask, 0.125, groups=G, count=total)
            if not torch.equal(out.view(1, Hkv, G, m, D)[:, :, :, 0], one):
                differ.append((L, m))
    return differ


def batched_values(weights: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """attention.weighted_values with its VALUE_BLOCK-key blocks in one batched product: weights and values padded
    with zeros to whole blocks, each block's product in one launch, the blocks added in float32 (a pass with one more
    block adds exact zeros). About six kernels in a layer however many blocks, where weighted_values launches two a
    block. Invariant only if the batched kernel gives each block the bits of a lone block's product, whatever the
    number of blocks and rows: what value_blocks asks."""
    from ..runners import attention

    B, (b, Hkv, R, W), D = attention.VALUE_BLOCK, weights.shape, value.shape[-1]
    if W <= B:
        return torch.matmul(weights, value)
    n = -(-W // B)
    w = torch.nn.functional.pad(weights, (0, n * B - W)).view(b, Hkv, R, n, B).transpose(2, 3)  # [b, Hkv, n, R, B]
    v = torch.nn.functional.pad(value, (0, 0, 0, n * B - W)).view(b, Hkv, n, B, D)  # [b, Hkv, n, B, D]
    return torch.matmul(w, v).float().sum(2).to(value.dtype)  # [b, Hkv, R, D]


def value_blocks(g, r: dict, tokens: int, rounds: int) -> list[str]:
    """The next step's question: attention sums weights times values in blocks of attention.VALUE_BLOCK keys
    (on the CPU where it was chosen, oneDNN sums past 1,024 keys another way than up to it), two kernels a block in
    every layer. With the values summed in one product instead, or the blocks in one batched product
    (batched_values): do passes stay row-invariant at every cache length (attention_sweep, 1-9,000 keys) and on the
    model after this long prompt, and how much less does a token take?"""
    from ..runners import attention
    from ..runners.invariance import row_invariance
    from ..runners.load import CHECK_SIZES

    kept, summed = attention.VALUE_BLOCK, attention.weighted_values
    forms = {f"blocks of {kept} keys": (kept, summed), "one product": (1 << 30, summed),
             "blocks in one batched product": (kept, batched_values)}
    lengths = [*range(1, 1200, 3), *range(1200, 9000, 17)]
    swept, worst, ms = {}, {}, {name: [] for name in forms}
    try:
        for name, (block, values) in forms.items():
            attention.VALUE_BLOCK, attention.weighted_values = block, values
            swept[name] = attention_sweep(g.runner.device, lengths)
            worst[name] = row_invariance(g.runner, r["prompt_ids"] + r["output_ids"][: max(CHECK_SIZES)], CHECK_SIZES)
        for _ in range(rounds):
            for name, (block, values) in forms.items():
                attention.VALUE_BLOCK, attention.weighted_values = block, values
                res = g.generate(r["messages"], max_new_tokens=tokens, drafter="none", prefix_reuse=False)
                ms[name].append(1000 * res.stats.decode_s / max(res.stats.target_passes, 1))
    finally:
        attention.VALUE_BLOCK, attention.weighted_values = kept, summed
    lines = [f"## Values summed in blocks or in one product: plain decoding of {tokens} tokens after {r['name']!r} "
             f"({len(r['prompt_ids'])} prompt tokens), {rounds} turns", "",
             f"| form | attention, (L, m) that differ of {len(lengths)} lengths x 3 pass sizes | model after the prompt, "
             "largest logit difference | ms a token (median) | runs |", "|---|---|---|---|---|"]
    for name in forms:
        lines.append(f"| {name} | {len(swept[name])} {swept[name][:8]} | {worst[name]:g} | "
                     f"{statistics.median(ms[name]):.1f} | {', '.join(f'{v:.1f}' for v in ms[name])} |")
    return lines + [""]


def batched_forward(self, x: torch.Tensor) -> torch.Tensor:
    """kernels.FixedRows.forward with a pass's blocks in one batched product (torch.bmm, the weight broadcast over
    the blocks) instead of one product per block and a concatenation: a pass of b blocks launches one product where
    it launched b and a cat. The same numbers only if the batched kernel gives each block the bits a one-block pass
    gets: what block_forms asks. Torch's Linear only (a GPU's)."""
    if not self.in_blocks:
        return self.linear(x)
    rows, width = x.shape[:-1].numel(), x.shape[-1]
    blocks = -(-rows // self.rows)
    padded = x.reshape(rows, width)
    if rows % self.rows:
        padded = x.new_zeros(blocks * self.rows, width)
        padded[:rows] = x.reshape(rows, width)
    w = self.linear.weight.t().expand(blocks, width, -1)  # [blocks, in, out], no copy
    xb = padded.view(blocks, self.rows, width)  # [blocks, rows, in]
    bias = self.linear.bias
    out = torch.bmm(xb, w) if bias is None else torch.baddbmm(bias.expand(blocks, self.rows, -1), xb, w)
    return out.view(blocks * self.rows, -1)[:rows].reshape(*x.shape[:-1], -1)  # [..., rows, out]


def block_forms(g, r: dict, sizes: Sequence[int] = (1, 8, 32, 33, 65, 129), repeats: int = 5) -> list[str]:
    """The next step's other question: a verify pass of b 32-row blocks launches b products and a cat in every
    Linear (kernels.FixedRows). In one batched product instead (batched_forward): do passes stay row-invariant (the
    load's check: its pass sizes after 7 and 1,000 cached tokens), and what does a pass of each size cost? Passes
    after the request's prompt, medians of `repeats`, both forms taking turns."""
    from ..runners.kernels import FixedRows
    from ..runners.load import check_row_invariance

    runner, kept = g.runner, FixedRows.forward
    forms = {"a product per block": kept, "one batched product": batched_forward}
    worst, ms = {}, {name: {n: [] for n in sizes} for name in forms}
    prompt, rest = r["prompt_ids"], r["output_ids"] + r["prompt_ids"]  # any tokens after the prompt
    try:
        for name, forward in forms.items():
            FixedRows.forward = forward
            worst[name] = check_row_invariance(runner)
        runner.reset()
        runner.prefill(prompt)
        for _ in range(repeats):
            for n in sizes:
                for name, forward in forms.items():
                    FixedRows.forward = forward
                    t = time.perf_counter()
                    runner.forward(rest[:n])  # logits on the CPU: the pass is done
                    ms[name][n].append(1000 * (time.perf_counter() - t))
                    runner.rollback(len(prompt))
    finally:
        FixedRows.forward = kept
        runner.reset()
    lines = [f"## Row blocks: a product each or one batched product; passes after {r['name']!r} "
             f"({len(prompt)} tokens), ms, medians of {repeats}", "",
             "| form | load's check, largest logit difference | " + " | ".join(f"{n} rows" for n in sizes) + " |",
             "|---|---|" + "---|" * len(sizes)]
    for name in forms:
        lines.append(f"| {name} | {worst[name]:g} | " +
                     " | ".join(f"{statistics.median(ms[name][n]):.1f}" for n in sizes) + " |")
    return lines + [""]


def softmax_widths(device: str) -> list[str]:
    """Whether torch's own softmax, and the runner's (attention.softmax_rows), give a row the same bits at two widths
    of masked keys past it: a one-token step's and a verify pass's, around the lengths where torch's CUDA softmax
    changes kernel. Rows that differ, of 896 (2 KV heads x 7 query heads x 64 rows of a pass), in bf16."""
    from ..runners import attention

    g = torch.Generator().manual_seed(0)
    lines = [f"## Softmax: rows whose weights change with the masked keys after them (896 rows; runner's: "
             f"{attention.softmax_in_use(torch.device(device))})", "",
             "| keys | widths | torch's softmax | the runner's |", "|---|---|---|---|"]
    for keys, a, b in ((1000, 1024, 1088), (1990, 2048, 2112), (9150, 9216, 9280), (24400, 24448, 24576)):
        scores = (torch.randn(896, keys, generator=g) * 3).to(torch.bfloat16).to(device)  # peaked, as trained attention
        at = [torch.nn.functional.pad(scores, (0, w - keys), value=float("-inf")) for w in (a, b)]
        torch_rows = int((torch.softmax(at[0], -1)[:, :keys] != torch.softmax(at[1], -1)[:, :keys]).any(-1).sum())
        ours = [attention.softmax_rows(x, torch.bfloat16)[:, :keys] for x in at]
        lines.append(f"| {keys} | {a} / {b} | {torch_rows} | {int((ours[0] != ours[1]).any(-1).sum())} |")
    return lines + [""]


def graph_ceiling(g, r: dict, replays: int = 50) -> list[str]:
    """How fast a one-token step could be without its launches: the lean pass of one token at a fixed position after
    the request's prompt, run eagerly and captured once in a CUDA graph and replayed (each replay writes the same
    cache row and reads the same keys: not decoding, only its time). The ceiling that static passes captured in
    graphs would aim at: a step here is launch-bound."""
    runner, lean = g.runner, g.runner.lean
    if runner.device.type != "cuda" or lean is None:
        return []
    runner.reset()
    runner.prefill(r["prompt_ids"][:-1])
    past = runner.length
    ids = torch.tensor([r["prompt_ids"][-1:]], device=runner.device)  # [1, 1]

    def step() -> torch.Tensor:  # [1, 1, V]
        runner.rollback(past)  # a crop: views of the same buffers
        return lean(ids, runner.cache)

    def ms(run) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(replays):
            run()
        torch.cuda.synchronize()
        return 1000 * (time.perf_counter() - t) / replays

    try:
        with torch.inference_mode():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the capture's stream, as torch's docs ask
                for _ in range(3):
                    eager_logits = step()
            torch.cuda.current_stream().wait_stream(side)
            eager = ms(step)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = step()
            graph.replay()
            same = torch.equal(captured, eager_logits)
            replayed = ms(graph.replay)
    finally:
        runner.reset()  # also drops the key buffers, which the capture may have made live in its pool
    return [f"## A one-token step captured in a CUDA graph ({past} cached tokens, {replays} runs each)", "",
            f"eager {eager:.2f} ms, graph replay {replayed:.2f} ms ({eager / replayed:.1f}x); replayed logits equal "
            f"the eager step's: {same}", ""]


def step_kernels(g, hf, r: dict, forms: dict) -> dict:
    """Device kernels launched by one one-token step after the prompt (torch's profiler), for each of quickdraft's
    forms and for transformers' forward as generate calls it; {} where the profiler cannot count them."""
    from torch.profiler import ProfilerActivity, profile

    if hf.device.type != "cuda":
        return {}
    counts, prompt = {}, r["prompt_ids"]
    try:
        runner, lean = g.runner, g.runner.lean
        rows = lean.pad_rows if lean is not None else None
        for name, form in forms.items():
            if lean is not None:
                lean.pad_rows = form
            runner.reset()
            runner.prefill(prompt[:-1])
            runner.forward(prompt[-1:])
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                runner.forward([prompt[-1]])
                torch.cuda.synchronize()
            counts[name] = sum(1 for e in p.events() if e.device_type.name == "CUDA")
        if lean is not None:
            lean.pad_rows = rows
        runner.reset()
        from transformers import DynamicCache

        cache = DynamicCache(config=hf.config)
        with torch.inference_mode():
            hf(input_ids=torch.tensor([prompt], device=hf.device), past_key_values=cache, use_cache=True)
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                hf(input_ids=torch.tensor([prompt[-1:]], device=hf.device), past_key_values=cache, use_cache=True)
                torch.cuda.synchronize()
        counts["transformers generate"] = sum(1 for e in p.events() if e.device_type.name == "CUDA")
    except Exception as error:  # the profiler is a detail: the times stand without it
        print(f"kernel count failed: {type(error).__name__}: {error}", flush=True)
    return counts


def run(files: Path, device: str, out: Path, rounds: int, skip_tests: bool, deadline_s: float | None = None,
        check_tokens: int = 128) -> int:
    import quickdraft
    import transformers
    from transformers import AutoModelForCausalLM

    from ..errors import UnsupportedModelError
    from ..runners import attention

    began = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    recorded = json.loads((files / "requests.json").read_text())
    where = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    report = {"device": where, "torch": torch.__version__, "cuda": torch.version.cuda,
              "transformers": transformers.__version__, "model shapes": recorded["model"], "tests": None}
    lines = [f"# device check: {where}, torch {torch.__version__} (CUDA {torch.version.cuda}), transformers "
             f"{transformers.__version__}", ""]

    def save() -> None:
        (out / "device_check.md").write_text("\n".join(lines) + "\n")
        (out / "device_check.json").write_text(json.dumps(report, indent=1))

    if not skip_tests:
        t = time.perf_counter()
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                                str(ROOT / "tests" / "test_device.py")], capture_output=True, text=True, cwd=ROOT)
        report["tests"] = {"rc": tests.returncode, "tail": tests.stdout[-3000:]}
        lines += [f"tests/test_device.py: rc {tests.returncode} ({time.perf_counter() - t:.0f} s)", "```",
                  tests.stdout[-1500:], "```", ""]
        print("\n".join(lines[-5:]), flush=True)
        save()
    folder = random_weights(files, Path("/tmp/quickdraft-device-check-weights"), device)
    dtype = "bf16"
    t = time.perf_counter()
    try:
        g = quickdraft.load(str(folder), dtype=dtype, device=device, progress=True)
    except UnsupportedModelError as refused:  # the finding itself; the timings then run in float32
        report["bf16 refused"] = str(refused)
        lines += [f"bf16 REFUSED at load: {refused}", ""]
        print(lines[-2], flush=True)
        dtype = "fp32"
        g = quickdraft.load(str(folder), dtype=dtype, device=device, progress=True)
    report["load"] = {"dtype": dtype, "seconds": time.perf_counter() - t, "row_invariant": g.runner.row_invariant,
                      "row_block": g.runner.row_block, "attention": g.runner.model.config._attn_implementation,
                      "lean": g.runner.lean is not None,
                      "padded rows": g.runner.lean.pad_rows if g.runner.lean is not None else None,
                      "attention softmax": attention.softmax_in_use(g.runner.device)}
    lines += [f"load with its check: {report['load']}", ""]
    print(lines[-2], flush=True)
    save()
    hf = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.bfloat16 if dtype == "bf16" else torch.float32).to(device).eval()
    t = time.perf_counter()
    warm_up(g, hf, recorded["requests"][0])
    lines += [f"warm-up (each job once, 16 tokens, untimed): {time.perf_counter() - t:.1f} s", ""]
    same = True
    try:  # first: short, and each answers a target on its own
        t = per_token(g, hf, recorded["requests"][0], check_tokens, 3)
        lines += t
        print("\n".join(t), flush=True)
        u = unscripted(g, hf, folder, recorded["requests"][0], dtype, device, check_tokens)
        report["unscripted"] = u
        lines += u
        same = "False |" not in "".join(line for line in u if line.startswith("| quickdraft"))
    except Exception as error:  # reported, not fatal: the replays below still run
        lines += [f"unscripted checks failed: {type(error).__name__}: {error}", ""]
        print(lines[-2], flush=True)
        same = False
    save()
    # the next changes' questions: each reported, none fatal
    longest = max(recorded["requests"], key=lambda r: len(r["prompt_ids"]))
    experiments = [("softmax widths", lambda: softmax_widths(device)),
                   ("graph capture", lambda: graph_ceiling(g, recorded["requests"][0]))]
    if g.runner.row_block:
        experiments.append(("row blocks", lambda: block_forms(g, recorded["requests"][0])))
    if len(longest["prompt_ids"]) > 2 * attention.VALUE_BLOCK:
        experiments.append(("value blocks", lambda: value_blocks(g, longest, 64, 2)))
    for name, experiment in experiments:  # in half the deadline at most: the replays need the rest
        if deadline_s is not None and time.perf_counter() - began > deadline_s / 2:
            found = [f"{name}: not run, past half of --deadline-s {deadline_s:g}", ""]
        else:
            try:
                found = experiment()
            except Exception as error:
                found = [f"{name} failed: {type(error).__name__}: {error}", ""]
        lines += found
        print("\n".join(found), flush=True)
        save()
    lines += ["## Replayed: the real model's recorded output, each pass on the device", "",
              "| request | job | end to end s | prefill s | decode s | decode ms a token | tokens | passes | accepted | "
              "same as recorded |", "|---|---|---|---|---|---|---|---|---|---|"]
    report["requests"] = []
    for r in recorded["requests"]:
        if deadline_s is not None and time.perf_counter() - began > deadline_s:
            lines.append(f"| {r['name']} | not run: past --deadline-s {deadline_s:g} | | | | | | | | |")
            continue
        entry = {"name": r["name"], "prompt": len(r["prompt_ids"]), "jobs": {}}
        report["requests"].append(entry)
        for job in QUICKDRAFT_JOBS:
            if job == "prediction" and r["prediction"] is None:
                continue
            m = entry["jobs"][job] = timed_quickdraft(g, r, job, rounds)
            lines.append(row(r["name"], f"quickdraft {job}", m, m["passes"], m["accepted"]))
            print(lines[-1], flush=True)
        for job in HF_JOBS:
            m = entry["jobs"][job] = timed_transformers(hf, r, job, rounds)
            lines.append(row(r["name"], job, m, "-", "-"))
            print(lines[-1], flush=True)
        jobs = entry["jobs"]
        ours = jobs.get("prediction") or jobs["lookup"]
        lines.append(f"| {r['name']} | ratios | hf plain / ours {jobs['hf plain']['total_s'] / ours['total_s']:.2f}x, "
                     f"hf prompt lookup / ours {jobs['hf prompt lookup']['total_s'] / ours['total_s']:.2f}x, plain "
                     f"decoding per token ours / hf {jobs['plain']['decode_s'] / jobs['hf plain']['decode_s']:.2f}x "
                     "| | | | | | | |")
        print(lines[-1], flush=True)
        save()
    lines.append("")
    try:  # whether the device ran as fast after the replays as before them (the replays ran slower per token)
        t = per_token(g, hf, recorded["requests"][0], check_tokens, 1, title=", again after the replays", kernels=False)
    except Exception as error:
        t = [f"per token after the replays failed: {type(error).__name__}: {error}", ""]
    lines += t
    print("\n".join(t), flush=True)
    same = same and all(m["same"] is not False for e in report["requests"] for m in e["jobs"].values())
    lines.append(f"total {time.perf_counter() - began:.0f} s")
    save()
    return 0 if same and (report["tests"] is None or report["tests"]["rc"] == 0) else 1


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    rec = sub.add_parser("record", help="here, with the real model: the requests and its plain output")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--model", default="qwen2.5-coder-0.5b")
    rec.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    go = sub.add_parser("run", help="on the device: tests, load check, replayed timings")
    go.add_argument("files", type=Path, help="what record wrote")
    go.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    go.add_argument("--out", type=Path, required=True)
    go.add_argument("--rounds", type=int, default=1, help="runs of each job (the median is reported)")
    go.add_argument("--skip-tests", action="store_true")
    go.add_argument("--deadline-s", type=float, help="start no further request past this many seconds")
    go.add_argument("--only", help="a request's name: replay that one alone (a dry run on the CPU)")
    go.add_argument("--max-new-tokens", type=int, help="at most this many of each recording's tokens (a dry run)")
    cut = sub.add_parser("split", help="here: a real model's GGUF in parts for several calls (bench/real_weights.py)")
    cut.add_argument("--model", default="smollm2-135m")
    cut.add_argument("--out", type=Path, required=True)
    cut.add_argument("--part-mib", type=float, default=56.0, help="at most this many MiB a part: a call carries 64 in all, the working tree and .device with it")
    cut.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    keep = sub.add_parser("stash", help="on the device: keep this call's part until the call that runs `real`")
    keep.add_argument("part", type=Path, help="a folder that split wrote")
    real = sub.add_parser("real", help="on the device: join the parts and generate for real against transformers")
    real.add_argument("part", type=Path, help="the folder with the last part")
    real.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    real.add_argument("--out", type=Path, required=True)
    real.add_argument("--rounds", type=int, default=1, help="runs of each job, taking turns (the median is reported)")
    real.add_argument("--max-new-tokens", type=int, help="at most this many new tokens a request (a dry run)")
    real.add_argument("--deadline-s", type=float, help="start no further request past this many seconds")
    args = ap.parse_args(argv)
    if args.mode == "record":
        record(args.out, args.model, args.data)
        return 0
    if args.mode in ("split", "stash", "real"):
        from . import real_weights
        from .. import models

        if args.mode == "split":
            asked = [{k: r[k] for k in ("name", "messages", "prediction", "max_new_tokens")} for r in requests(args.data)]
            wheel = real_weights.download_wheel(args.out.with_name(args.out.name + "-wheels"))
            manifest = real_weights.split(models.gguf_file(args.model), args.out, args.part_mib, args.model, asked,
                                          [wheel])
            print(f"{manifest['file']} of {args.model}: {len(manifest['parts'])} parts in {args.out}/1 .. "
                  f"{args.out}/{len(manifest['parts'])}, one call each", file=sys.stderr)
            return 0
        if args.mode == "stash":
            real_weights.stash(args.part)
            return 0
        return real_weights.run_real(args.part, args.device, args.out, args.rounds, args.max_new_tokens,
                                     deadline_s=args.deadline_s)
    if args.only or args.max_new_tokens:  # a copy of the files with one request, or shorter recordings
        recorded = json.loads((args.files / "requests.json").read_text())
        recorded["requests"] = [r for r in recorded["requests"] if args.only in (None, r["name"])]
        if not recorded["requests"]:
            raise SystemExit(f"no request named {args.only!r}")
        for r in recorded["requests"] if args.max_new_tokens else ():
            r["max_new_tokens"] = min(r["max_new_tokens"], args.max_new_tokens)
            r["output_ids"] = r["output_ids"][: r["max_new_tokens"]]
        subset = args.out / "files"
        shutil.copytree(args.files, subset, dirs_exist_ok=True)
        (subset / "requests.json").write_text(json.dumps(recorded))
        args.files = subset
    return run(args.files, args.device, args.out, args.rounds, args.skip_tests, args.deadline_s,
               min(128, args.max_new_tokens or 128))


if __name__ == "__main__":
    sys.exit(main())
