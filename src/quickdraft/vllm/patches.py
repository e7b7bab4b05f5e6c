"""Every vLLM internal the plugin touches, in one place (tested with vLLM 0.32.0: quickdraft.vllm.TESTED_VERSIONS).

vLLM loads general plugins in each of its processes (API server, engine core, workers), so `apply` runs in
each; every patch is harmless where its class is unused, and applied once per process.

    vllm.engine.arg_utils.EngineArgs.create_engine_config
        notes whether quickdraft's proposer is the speculative method, and if so turns on per-request
        spec-decode metrics ("summary") when left off: the accepted/rejected counts come from them
    vllm.entrypoints.serve.engine.serving.BaseServing._check_model
        validates `prediction` and quickdraft's vllm_xargs before any work, bounds the prediction (limits.py:
        characters before tokenizing, then tokens) and tokenizes it, off the event loop; refuses the integers
        vLLM itself would answer with a 500 (check_ranges); refuses quickdraft's fields on the requests it does
        not serve (/v1/chat/completions/batch); a bad request gets vLLM's OpenAI-style error object with status 400
    vllm.entrypoints.openai.{chat_completion,completion}.protocol.*Request.to_sampling_params
        carries the prediction's token ids into SamplingParams.extra_args["qd_prediction_ids"] (vLLM's request
        schema keeps an unknown top-level field in model_extra and passes it nowhere)
    vllm.entrypoints.openai.chat_completion.serving.OpenAIServingChat.chat_completion_full_generator /
    .chat_completion_stream_generator, vllm.entrypoints.openai.completion.serving.OpenAIServingCompletion
    .request_output_to_completion_response / .completion_stream_generator
        add usage.completion_tokens_details.{accepted,rejected}_prediction_tokens (streamed: on the usage chunk)
    vllm.v1.worker.gpu_model_runner.GPUModelRunner.__init__
        hands the model runner to quickdraft's Proposer (vLLM gives a custom proposer only the config)
    Two fixes of vLLM's sampling with speculative decoding on CPU, patched in the worker (from the runner's
    __init__). With speculative decoding every step goes through vLLM's rejection sampler, which applies each
    request's temperature, top_k and top_p to the draft tokens' logits:
    vllm.v1.sample.rejection_sampler.expand_batch_to_tokens (CPU only)
        spreads a per-request value over its draft tokens. On CPU it runs vLLM's C++ expand kernel on an int64
        copy of its output (vllm/utils/cpu_triton_utils._expand_kernel_impl) and never copies it back, so the
        temperatures, top_k and top_p it returns are uninitialized memory: sampled requests were scaled by
        garbage, and top_k raised "selected index k out of range", which stopped the engine. Replaced by the
        same spreading in torch (repeat_interleave)
    vllm.v1.sample.ops.topk_topp_sampler.apply_top_k_only
        returns the logits as they are when they have no rows: in a step without draft tokens (any request's
        first) they are empty, and its k.max() raised in vLLM's CPU path and stopped the engine: one request with
        top_k >= 1 at a temperature above 0 took the whole server down

The prediction is tokenized here, in the API server process, and nowhere else: the engine core and its workers
receive a list of at most max_model_len token ids, so no request can make the engine's step tokenize or index an
unbounded text (a 10.5 MB prediction once killed the worker for memory when the proposer tokenized it there).

Counts. vLLM counts, per request, the draft tokens it verified and those it accepted (scheduler:
accepted = tokens emitted by a step - 1). OpenAI's meaning (core.Stats) counts as accepted only draft tokens
that appear in the output: the Proposer never drafts past max_tokens or an end-of-generation token, so a
length limit or EOS cannot cut accepted tokens off. A stop string could, but vLLM sends no metrics for a request
its API server ends at one; where metrics do come, at most completion_tokens - 1 are reported accepted (the first
output token is never a draft token) and the rest rejected.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import QuickdraftError
from .limits import prediction_limits

PROPOSER = "quickdraft.vllm.Proposer"
REQUEST_XARGS = ("qd_drafter", "qd_policy", "qd_sizing")  # the vllm_xargs a request may set
PREDICTION_IDS = "qd_prediction_ids"  # SamplingParams.extra_args: the prediction's token ids, set here only
INT64_MAX = 2**63 - 1
# vLLM passes some integer fields to its engine without an upper bound (top_k, stream_interval, those inside
# repetition_detection, ...): beyond 2**64 - 1 its msgpack encoder raises and the request gets a 500 with an empty
# message. Every integer of a request is bounded here (check_ranges), as vLLM bounds seed and priority.
_state = {"applied": False, "proposer": False}  # per process: patched yet; quickdraft's proposer configured


def apply() -> None:
    if _state["applied"]:
        return
    _patch_engine_args()
    _patch_requests()
    _patch_usage()
    _patch_runner()
    _state["applied"] = True  # only once all took: quickdraft's Proposer refuses to start otherwise


# -- engine configuration --------------------------------------------------------------------------

def uses_proposer(speculative_config: dict[str, Any] | None) -> bool:
    return bool(speculative_config) and speculative_config.get("model") == PROPOSER


def _patch_engine_args() -> None:
    from vllm.engine.arg_utils import EngineArgs

    create = EngineArgs.create_engine_config

    def create_engine_config(self, *args, **kwargs):
        if uses_proposer(self.speculative_config):
            _state["proposer"] = True
            if self.per_request_spec_decode_metrics == "none":
                self.per_request_spec_decode_metrics = "summary"
        return create(self, *args, **kwargs)

    EngineArgs.create_engine_config = create_engine_config


# -- requests in ----------------------------------------------------------------------------------

def prediction_text(request: Any) -> str | None:
    """The text of a request's OpenAI `prediction` (validated by quickdraft's own schema), or None.
    Raises QuickdraftError with OpenAI's kind of message for a malformed one."""
    raw = (request.model_extra or {}).get("prediction")
    if raw is None:
        return None
    from pydantic import ValidationError

    from ..api import text_parts
    from ..server.schemas import Prediction

    try:
        prediction = Prediction.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in ("prediction", *first["loc"]))
        raise QuickdraftError(f"Invalid value for '{where}': {first['msg']}") from None
    return text_parts(prediction.content, "prediction.content")


def _set(value: Any) -> bool:
    """Whether an OpenAI parameter is set to something that does something (vLLM's defaults do not)."""
    return value not in (None, False, 0, 0.0, [], {}, "none", ["text"])


def prediction_conflict(request: Any) -> tuple[str, str] | None:
    """(param, message) for the first parameter OpenAI refuses beside a prediction, as OpenAI words it."""
    from ..openai_rules import PREDICTION_REFUSES, n_refused, refused_with_prediction

    fields = {**(request.model_extra or {}), **{k: getattr(request, k) for k in type(request).model_fields}}
    if (fields.get("n") or 1) > 1:
        return "n", n_refused(fields["n"], predicted=True)
    if fields.get("use_beam_search") or (fields.get("best_of") or 1) > 1:
        name = "use_beam_search" if fields.get("use_beam_search") else "best_of"
        return name, refused_with_prediction(name)
    for name in sorted(PREDICTION_REFUSES - {"n"}, key=lambda n: (n == "tool_choice", n)):  # tools before its choice
        value = fields.get(name)
        if name == "tool_choice" and value == "auto" and not _set(fields.get("tools")):
            continue  # vLLM's default
        if name == "logprobs" and type(request).__name__ == "CompletionRequest" and value == 0:
            value = 1  # completions: logprobs 0 asks for the chosen token's logprob
        if _set(value):
            return name, refused_with_prediction(name)
    return None


def check_ranges(request: Any) -> tuple[str, str] | None:
    """(param, message) for the first integer of a request, at any depth, above 2**63 - 1 (which vLLM would fail
    on with a 500 where it does not bound the field itself), or None."""
    def walk(value: Any, where: str) -> tuple[str, str] | None:
        if hasattr(value, "model_dump"):  # a field of vLLM's that is a pydantic model of its own
            value = value.model_dump()
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):  # or a dataclass (RepetitionDetection...)
            value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if isinstance(value, int) and not isinstance(value, bool) and value > INT64_MAX:
            return where, f"'{where}' must be at most {INT64_MAX} (2**63 - 1); got {value}."
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in items:
            if found := walk(item, f"{where}.{key}" if isinstance(key, str) else f"{where}[{key}]"):
                return found
        return None

    fields = {**{k: getattr(request, k, None) for k in type(request).model_fields}, **(request.model_extra or {})}
    for name, value in fields.items():
        if value is not None and not isinstance(value, (str, float)) and (found := walk(value, name)):
            return found
    return None


def quickdraft_fields(request: Any) -> list[str]:
    """The fields of quickdraft's that a request carries: 'prediction', 'vllm_xargs' with a qd_ option."""
    extra = getattr(request, "model_extra", None) or {}
    xargs = getattr(request, "vllm_xargs", None) or extra.get("vllm_xargs") or {}
    return (["prediction"] if extra.get("prediction") is not None else []) + \
        (["vllm_xargs"] if isinstance(xargs, dict) and any(str(k).startswith("qd_") for k in xargs) else [])


def check_request(request: Any, max_model_len: int | None = None) -> tuple[str, str] | None:
    """(param, message) of what is wrong with a request's prediction or quickdraft options, or None.
    Cheap (no tokenizing): a prediction longer than the server's character limit for it is refused here."""
    from ..drafters.build import TOKEN_DRAFTERS, check_drafter
    from ..drafters.prediction import PredictionConfig
    from .proposer import DRAFTER_ENV, POLICY_ENV, check_sizing, request_drafter

    xargs = getattr(request, "vllm_xargs", None) or {}
    foreign = sorted(k for k in xargs if k.startswith("qd_") and k not in REQUEST_XARGS)
    if foreign:  # qd_prediction_ids among them: the prediction's ids come from `prediction`, tokenized here
        return "vllm_xargs", (f"vllm_xargs.{foreign[0]} is not a quickdraft option a request can set; they are "
                              f"{', '.join(REQUEST_XARGS)} (the prediction goes in the top-level 'prediction')")
    asked, policy, sizing = xargs.get("qd_drafter"), xargs.get("qd_policy"), xargs.get("qd_sizing")
    try:
        text = prediction_text(request)
    except QuickdraftError as e:
        return "prediction", str(e)
    if text is None and asked is None and policy is None and sizing is None:
        return None  # nothing of quickdraft's in this request
    if not _state["proposer"]:
        what = "prediction" if text is not None else "vllm_xargs"
        return what, (f"'{what}' needs quickdraft's proposer, and this vLLM server was started without it: start it "
                      f"with `quickdraft serve --engine vllm`, or with --speculative-config "
                      f"'{{\"model\": \"{PROPOSER}\", \"num_speculative_tokens\": 32}}'.")
    if text is not None and (conflict := prediction_conflict(request)):
        return conflict
    if text is not None and max_model_len is not None and len(text) > (most := prediction_limits(max_model_len)[0]):
        return "prediction", (f"The prediction has {len(text)} characters; this server accepts at most {most} "
                              f"({most // max_model_len} per token of its {max_model_len}-token context).")
    if asked is not None and asked not in TOKEN_DRAFTERS:
        return "vllm_xargs", (f"vllm_xargs.qd_drafter must be one of {', '.join(TOKEN_DRAFTERS)} on vLLM; got {asked!r} "
                              "(draft-model and ouroboros run on quickdraft's own engine)")
    try:
        if sizing is not None:
            check_sizing(sizing, "vllm_xargs.qd_sizing")
        PredictionConfig.for_policy(os.environ.get(POLICY_ENV, "default") if policy is None else policy)
        has = text is not None
        check_drafter(request_drafter(asked, os.environ.get(DRAFTER_ENV, "auto"), has), has, has_draft_model=False)
    except QuickdraftError as e:
        return ("prediction" if text is not None and asked is None else "vllm_xargs"), str(e)
    return None


# The prediction's token ids from _check_model to to_sampling_params: both run in the task that serves the request
# (vLLM's create_chat_completion / create_completion), which this variable is private to. Held with the request,
# so that ids can only reach the request they were made from.
_prediction_ids: contextvars.ContextVar[tuple[Any, list[int]] | None] = contextvars.ContextVar("qd_prediction_ids",
                                                                                               default=None)
_tokenizers: dict[tuple[Any, ...], Any] = {}
_tokenizer_lock = threading.Lock()
# One thread tokenizes predictions, one at a time: the event loop goes on serving meanwhile, and a burst of
# predictions queues here instead of taking every core.
_tokenize_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quickdraft-prediction")


def _tokenizer(model_config: Any) -> Any:
    """The model's tokenizer, loaded once per process as the proposer loaded it before (transformers' AutoTokenizer),
    a copy of quickdraft's own: vLLM's renderer changes its tokenizer's truncation while it tokenizes prompts."""
    key = (model_config.tokenizer, model_config.tokenizer_revision, model_config.trust_remote_code)
    with _tokenizer_lock:
        if key not in _tokenizers:
            from transformers import AutoTokenizer

            _tokenizers[key] = AutoTokenizer.from_pretrained(key[0], revision=key[1], trust_remote_code=key[2])
        return _tokenizers[key]


def tokenize_prediction(model_config: Any, text: str) -> list[int]:
    return list(_tokenizer(model_config).encode(text, add_special_tokens=False))


async def prepare_prediction(model_config: Any, request: Any) -> tuple[str, str] | None:
    """Tokenize a checked request's prediction (in _tokenize_pool) and hold its ids for to_sampling_params;
    (param, message) if it has more tokens than the server's context."""
    text = prediction_text(request)
    if text is None:
        return None
    try:
        ids = await asyncio.get_running_loop().run_in_executor(_tokenize_pool, tokenize_prediction, model_config, text)
    except (TypeError, ValueError) as e:  # text the tokenizer refuses, such as a lone surrogate (\ud800)
        return "prediction", f"The prediction cannot be tokenized by this model's tokenizer: {e}"
    most = prediction_limits(model_config.max_model_len)[1]
    if len(ids) > most:
        return "prediction", (f"The prediction has {len(ids)} tokens; this server's context holds at most {most} "
                              "(its max model length), and a prediction cannot be longer than the output it predicts.")
    _prediction_ids.set((request, ids))
    return None


def sampling_extra_args(request: Any, extra_args: dict[str, Any] | None) -> dict[str, Any] | None:
    """SamplingParams.extra_args with the request's prediction ids (none a client sent in vllm_xargs)."""
    args = {k: v for k, v in (extra_args or {}).items() if k != PREDICTION_IDS}
    held = _prediction_ids.get()
    if held is not None and held[0] is request:
        args[PREDICTION_IDS] = held[1]
    elif prediction_text(request) is not None:
        raise RuntimeError("quickdraft: a request's prediction reached to_sampling_params without passing "
                           "_check_model, which tokenizes it: this vLLM serves requests in a way the plugin does "
                           "not know (quickdraft.vllm.TESTED_VERSIONS)")
    return args or None


def _patch_requests() -> None:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    from vllm.entrypoints.serve.engine.serving import BaseServing

    check_model = BaseServing._check_model

    async def _check_model(self, request):
        if not isinstance(request, (ChatCompletionRequest, CompletionRequest)):
            if fields := quickdraft_fields(request):  # /v1/chat/completions/batch copies them into each conversation
                return self.create_error_response(
                    f"'{fields[0]}' is not supported on this endpoint: send each conversation to /v1/chat/completions "
                    "as a request of its own", param=fields[0])
            return await check_model(self, request)
        if problem := check_ranges(request) or check_request(request, self.model_config.max_model_len):  # cheap first
            return self.create_error_response(problem[1], param=problem[0])
        if (error := await check_model(self, request)) is not None:  # vLLM's: the model's name
            return error
        if problem := await prepare_prediction(self.model_config, request):
            return self.create_error_response(problem[1], param=problem[0])
        return None

    BaseServing._check_model = _check_model

    for cls in (ChatCompletionRequest, CompletionRequest):
        to_sampling_params = cls.to_sampling_params

        def with_prediction(self, *args, _original=to_sampling_params, **kwargs):
            params = _original(self, *args, **kwargs)
            params.extra_args = sampling_extra_args(self, params.extra_args)
            return params

        cls.to_sampling_params = with_prediction


# -- usage out ------------------------------------------------------------------------------------

def prediction_counts(metrics: dict[str, Any], completion_tokens: int) -> dict[str, int]:
    """OpenAI's accepted/rejected prediction tokens from vLLM's per-request spec-decode metrics.

    >>> prediction_counts({"num_draft_tokens": 40, "num_accepted_draft_tokens": 30}, completion_tokens=31)
    {'accepted_prediction_tokens': 30, 'rejected_prediction_tokens': 10}
    """
    drafted = int(metrics.get("num_draft_tokens") or 0)
    accepted = min(int(metrics.get("num_accepted_draft_tokens") or 0), max(completion_tokens - 1, 0))
    return {"accepted_prediction_tokens": accepted, "rejected_prediction_tokens": drafted - accepted}


def _add_counts(usage: Any, metrics: Any) -> None:
    if usage is None or metrics is None or metrics.speculative_decoding is None:
        return
    from vllm.entrypoints.serve.engine.protocol import CompletionTokenUsageInfo

    details = usage.completion_tokens_details
    counts = prediction_counts(metrics.speculative_decoding.model_dump(), usage.completion_tokens or 0)
    usage.completion_tokens_details = CompletionTokenUsageInfo(
        reasoning_tokens=getattr(details, "reasoning_tokens", None) or 0, **counts)  # its extra="allow" keeps them


def _counts_in_chunk(chunk: str) -> str:
    """A streamed `data: {...}` chunk with spec-decode metrics: the counts added to its usage."""
    if not chunk.startswith("data: {") or '"speculative_decoding"' not in chunk:
        return chunk
    body = json.loads(chunk[len("data: "):])
    metrics = (body.get("metrics") or {}).get("speculative_decoding")
    usage = body.get("usage")
    if metrics is None or usage is None:
        return chunk
    details = usage.get("completion_tokens_details") or {}
    usage["completion_tokens_details"] = {**details, **prediction_counts(metrics, usage.get("completion_tokens") or 0)}
    return f"data: {json.dumps(body)}\n\n"


def _patch_usage() -> None:
    from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat
    from vllm.entrypoints.openai.completion.serving import OpenAIServingCompletion

    full = OpenAIServingChat.chat_completion_full_generator

    async def chat_completion_full_generator(self, *args, **kwargs):
        response = await full(self, *args, **kwargs)
        _add_counts(getattr(response, "usage", None), getattr(response, "metrics", None))
        return response

    OpenAIServingChat.chat_completion_full_generator = chat_completion_full_generator

    build = OpenAIServingCompletion.request_output_to_completion_response

    def request_output_to_completion_response(self, *args, **kwargs):
        response = build(self, *args, **kwargs)
        _add_counts(response.usage, response.metrics)
        return response

    OpenAIServingCompletion.request_output_to_completion_response = request_output_to_completion_response

    for cls, name in ((OpenAIServingChat, "chat_completion_stream_generator"),
                      (OpenAIServingCompletion, "completion_stream_generator")):
        def streamed(self, *args, _original=getattr(cls, name), **kwargs):
            async def chunks():
                async for chunk in _original(self, *args, **kwargs):
                    yield _counts_in_chunk(chunk)
            return chunks()

        setattr(cls, name, streamed)


# -- worker ---------------------------------------------------------------------------------------

def _patch_runner() -> None:
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    init = GPUModelRunner.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        _patch_sampler()
        drafter = getattr(self, "drafter", None)
        if hasattr(drafter, "bind_runner"):
            drafter.bind_runner(self)
            # vLLM skips a drafter for the whole batch once one row's length + K passes max_model_len, and schedules K
            # zero drafts for every row instead: verified for nothing, and counted as rejected. quickdraft's proposer
            # cuts each row's draft to the room that row has left (Proposer.propose), so it runs on every step.
            self._input_fits_in_drafter = lambda metadata: metadata is not None

    GPUModelRunner.__init__ = __init__


def _patch_sampler() -> None:
    """The two sampling fixes in the module docstring; once per process."""
    from vllm.platforms import current_platform
    from vllm.v1.sample import rejection_sampler
    from vllm.v1.sample.ops import topk_topp_sampler

    top_k_only = topk_topp_sampler.apply_top_k_only
    if getattr(top_k_only, "quickdraft", False):
        return

    def apply_top_k_only(logits, k):
        if k.numel() == 0:  # no rows (a step without draft tokens): nothing to mask
            return logits
        return top_k_only(logits, k)

    apply_top_k_only.quickdraft = True
    topk_topp_sampler.apply_top_k_only = apply_top_k_only
    if current_platform.is_cpu():
        rejection_sampler.expand_batch_to_tokens = expand_batch_to_tokens


def expand_batch_to_tokens(x: Any, cu_num_tokens: Any, num_tokens: int, replace_from: Any = 0,
                           replace_to: Any = 0) -> Any:
    """vLLM's expand_batch_to_tokens in torch: x[i] repeated for request i's tokens (cu_num_tokens: the running
    total), any value equal to replace_from replaced by replace_to.

    >>> import torch
    >>> expand_batch_to_tokens(torch.tensor([0.5, 0.0]), torch.tensor([2, 3]), 3, replace_from=0, replace_to=1)
    tensor([0.5000, 0.5000, 1.0000])
    """
    import torch

    counts = torch.diff(cu_num_tokens.to(torch.long), prepend=cu_num_tokens.new_zeros(1, dtype=torch.long))
    expanded = torch.repeat_interleave(x, counts, output_size=num_tokens)
    return expanded.masked_fill(expanded == replace_from, replace_to)
