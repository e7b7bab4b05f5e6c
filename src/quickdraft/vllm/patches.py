"""Every vLLM internal the plugin touches, in one place (tested with vLLM 0.32.0: quickdraft.vllm.TESTED_VERSIONS).

vLLM loads general plugins in each of its processes (API server, engine core, workers), so `apply` runs in
each; every patch is harmless where its class is unused, and applied once per process.

    vllm.engine.arg_utils.EngineArgs.create_engine_config
        notes whether quickdraft's proposer is the speculative method, and if so turns on per-request
        spec-decode metrics ("summary") when left off: the accepted/rejected counts come from them
    vllm.entrypoints.serve.engine.serving.BaseServing._check_model
        validates `prediction` and quickdraft's vllm_xargs before any work; a bad request gets vLLM's
        OpenAI-style error object with status 400
    vllm.entrypoints.openai.{chat_completion,completion}.protocol.*Request.to_sampling_params
        carries the prediction's text into SamplingParams.extra_args["qd_prediction"] (vLLM's request schema
        keeps an unknown top-level field in model_extra and passes it nowhere)
    vllm.entrypoints.openai.chat_completion.serving.OpenAIServingChat.chat_completion_full_generator /
    .chat_completion_stream_generator, vllm.entrypoints.openai.completion.serving.OpenAIServingCompletion
    .request_output_to_completion_response / .completion_stream_generator
        add usage.completion_tokens_details.{accepted,rejected}_prediction_tokens (streamed: on the usage chunk)
    vllm.v1.worker.gpu_model_runner.GPUModelRunner.__init__
        hands the model runner to quickdraft's Proposer (vLLM gives a custom proposer only the config)

Counts. vLLM counts, per request, the draft tokens it verified and those it accepted (scheduler:
accepted = tokens emitted by a step - 1). OpenAI's meaning (core.Stats) counts as accepted only draft tokens
that appear in the output: the Proposer never drafts past max_tokens or an end-of-generation token, so a
length limit or EOS cannot cut accepted tokens off; a stop string can, and then at most completion_tokens - 1
are reported accepted (the first output token is never a draft token) and the rest rejected.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import QuickdraftError

PROPOSER = "quickdraft.vllm.Proposer"
_state = {"applied": False, "proposer": False}  # per process: patched yet; quickdraft's proposer configured


def apply() -> None:
    if _state["applied"]:
        return
    _state["applied"] = True
    _patch_engine_args()
    _patch_requests()
    _patch_usage()
    _patch_runner()


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
    from ..server.schemas import PREDICTION_REFUSES

    fields = {**(request.model_extra or {}), **{k: getattr(request, k) for k in type(request).model_fields}}
    if (fields.get("n") or 1) > 1:
        return "n", f"Invalid value for 'n': Predicted Outputs does not support n > 1; send {fields['n']} requests instead."
    if fields.get("use_beam_search") or (fields.get("best_of") or 1) > 1:
        name = "use_beam_search" if fields.get("use_beam_search") else "best_of"
        return name, f"'{name}' is not supported with Predicted Outputs (prediction)."
    for name in sorted(PREDICTION_REFUSES - {"n"}, key=lambda n: (n == "tool_choice", n)):  # tools before its choice
        value = fields.get(name)
        if name == "tool_choice" and value == "auto" and not _set(fields.get("tools")):
            continue  # vLLM's default
        if name == "logprobs" and type(request).__name__ == "CompletionRequest" and value == 0:
            value = 1  # completions: logprobs 0 asks for the chosen token's logprob
        if _set(value):
            return name, f"'{name}' is not supported with Predicted Outputs (prediction)."
    return None


def check_request(request: Any) -> tuple[str, str] | None:
    """(param, message) of what is wrong with a request's prediction or quickdraft options, or None."""
    from ..drafters.build import TOKEN_DRAFTERS, check_drafter
    from ..drafters.prediction import PredictionConfig
    from .proposer import DRAFTER_ENV, POLICY_ENV, check_sizing, request_drafter

    xargs = getattr(request, "vllm_xargs", None) or {}
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
    if asked is not None and asked not in TOKEN_DRAFTERS:
        return "vllm_xargs", (f"vllm_xargs.qd_drafter must be one of {', '.join(TOKEN_DRAFTERS)} on vLLM; got {asked!r} "
                              "(draft-model and ouroboros run on quickdraft's own engine)")
    try:
        if sizing is not None:
            check_sizing(sizing, "vllm_xargs.qd_sizing")
        PredictionConfig.for_policy(policy or os.environ.get(POLICY_ENV, "default"))
        has = text is not None
        check_drafter(request_drafter(asked, os.environ.get(DRAFTER_ENV, "auto"), has), has, has_draft_model=False)
    except QuickdraftError as e:
        return ("prediction" if text is not None and asked is None else "vllm_xargs"), str(e)
    return None


def _patch_requests() -> None:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    from vllm.entrypoints.serve.engine.serving import BaseServing

    check_model = BaseServing._check_model

    async def _check_model(self, request):
        if isinstance(request, (ChatCompletionRequest, CompletionRequest)) and (problem := check_request(request)):
            return self.create_error_response(problem[1], param=problem[0])
        return await check_model(self, request)

    BaseServing._check_model = _check_model

    for cls in (ChatCompletionRequest, CompletionRequest):
        to_sampling_params = cls.to_sampling_params

        def with_prediction(self, *args, _original=to_sampling_params, **kwargs):
            params = _original(self, *args, **kwargs)
            text = prediction_text(self)  # validated in _check_model
            if text is not None:
                params.extra_args = {**(params.extra_args or {}), "qd_prediction": text}
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
        drafter = getattr(self, "drafter", None)
        if hasattr(drafter, "bind_runner"):
            drafter.bind_runner(self)

    GPUModelRunner.__init__ = __init__
