"""The wire formats of the OpenAI-compatible endpoints: request bodies in, response objects out.

Requests are validated strictly, as OpenAI's service does: a string is not an integer, an unknown
field is refused ("Unrecognized request argument supplied: foo"), and an OpenAI parameter this
server does not implement is accepted only at the value that makes it a no-op (`logprobs: false`,
`tools: []`, `presence_penalty: 0`, ...); any other value is refused by name. quickdraft's own options
live in one extension object, `"quickdraft": {...}`, validated just as strictly.

A request becomes exactly one `Generator.stream(prompt, decode_options(...), prediction=...)` call.
Defaults follow OpenAI: temperature 1, top_p 1; chat `max_tokens` defaults to the rest of the context,
completions `max_tokens` to 16. A temperature below sampling.GREEDY_BELOW (1e-5) decodes greedily.

Sizes are bounded where the schema can see them: at most MAX_MESSAGES messages and MAX_STOP stop
strings of at most MAX_STOP_CHARS characters; list items are checked until the first bad one
(fail_fast), so a body of many bad items costs no more than one. The text sizes against the model's
context are checked in app.py, before tokenising.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Callable, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ..acceptance import Rule
from ..api import Chunk, Result
from ..core import Stats
from ..drafters.build import DrafterName
from ..drafters.draft_model import DraftModelConfig
from ..drafters.lookup import LookupConfig
from ..drafters.ouroboros import OuroborosConfig
from ..drafters.prediction import Policy
from ..errors import QuickdraftError
from ..openai_rules import PREDICTION_REFUSES, n_refused, refused_with_prediction
from ..options import DecodeOptions
from ..sampling import SamplingParams
from ..sizing import Sizing
from ..spans import PredictionSpans

STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
MAX_MESSAGES = 4096  # messages in one chat request
MAX_STOP = 64  # stop strings in one request (OpenAI allows 4)
MAX_STOP_CHARS = 1024  # characters of one stop string (the stream holds back that many at the end)


class UnsupportedParameter(Exception):
    """A known OpenAI parameter set to a value this server does not implement (answered with 400)."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param
        self.message = message


# -- field types with their own messages ------------------------------------------------------------


def json_type(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def _text_or_parts(value: Any) -> Any:
    """A string, or OpenAI's list of {"type": "text", "text": str} parts (kept as given)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        for i, part in enumerate(value):
            ok = (isinstance(part, dict) and set(part) == {"type", "text"} and part["type"] == "text"
                  and isinstance(part["text"], str))
            if not ok and isinstance(part, dict) and part.get("type") == "text" and set(part) - {"type", "text"}:
                extra = ", ".join(repr(k) for k in sorted(set(part) - {"type", "text"}))
                raise ValueError(f"part {i} has keys this server does not use: {extra} (a text part is "
                                 f'{{"type": "text", "text": "..."}})')
            if not ok:
                kind = part.get("type") if isinstance(part, dict) else None
                got = f"a part of type {kind!r}" if isinstance(kind, str) else json_type(part)
                raise ValueError(f'part {i} must be a text part {{"type": "text", "text": "..."}} (only text is '
                                 f"supported); got {got}")
        return value
    raise ValueError(f"expected a string or a list of text parts, got {json_type(value)}")


def _stop(value: Any) -> Any:
    if value is None or isinstance(value, str):
        strings = [] if value is None else [value]
    elif isinstance(value, list) and len(value) > MAX_STOP:
        raise ValueError(f"at most {MAX_STOP} stop strings are accepted; got {len(value)}")
    elif isinstance(value, list) and all(isinstance(s, str) for s in value):
        strings = value
    else:
        raise ValueError(f"expected a string or a list of strings, got {json_type(value)}")
    if any(s == "" for s in strings):
        raise ValueError("stop strings must not be empty")
    if (longest := max(map(len, strings), default=0)) > MAX_STOP_CHARS:
        raise ValueError(f"a stop string may be at most {MAX_STOP_CHARS} characters long; got one of {longest}")
    return value


def _prompt(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        return value[0]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        raise ValueError(f"a batch of {len(value)} prompts is not supported; send one prompt per request")
    raise ValueError(f"expected a string (token-id prompts are not supported), got {json_type(value)}")


TextContent = Annotated[Any, AfterValidator(_text_or_parts)]
StopField = Annotated[Any, AfterValidator(_stop)]
PromptField = Annotated[Any, AfterValidator(_prompt)]


# -- request bodies ---------------------------------------------------------------------------------


class Prediction(BaseModel):
    """OpenAI's Predicted Outputs: the text the output is expected to be."""

    model_config = STRICT
    type: Literal["content"]
    content: TextContent


class StreamOptions(BaseModel):
    model_config = STRICT
    include_usage: bool | None = None  # a last chunk with `usage` (and empty `choices`)
    include_obfuscation: bool | None = None  # accepted and ignored: this server adds no obfuscation padding


class LookupOptions(BaseModel):
    """Prompt-lookup drafter settings (quickdraft.LookupConfig)."""

    model_config = STRICT
    max_ngram: int = Field(LookupConfig.max_ngram, ge=1, le=64)
    min_ngram: int = Field(LookupConfig.min_ngram, ge=1, le=64)
    # drafts of at most 128 tokens: the longest pass the load's check runs (runners/load.CHECK_SIZES, 129 rows)
    num_tokens: int = Field(LookupConfig.num_tokens, ge=1, le=128)
    single_match_tokens: int = Field(LookupConfig.single_match_tokens, ge=0, le=128)
    prefer: Literal["longest", "first", "latest"] = LookupConfig.prefer
    growth: int = Field(LookupConfig.growth, ge=0, le=64)
    max_tokens: int = Field(LookupConfig.max_tokens, ge=1, le=128)
    short_ngram: int = Field(LookupConfig.short_ngram, ge=0, le=64)  # 0: no short matches
    short_tokens: int = Field(LookupConfig.short_tokens, ge=1, le=128)

    def config(self) -> LookupConfig:
        return LookupConfig(**self.model_dump())


class OuroborosOptions(BaseModel):
    """Ouroboros drafter settings (quickdraft.OuroborosConfig); scope "user" keeps one phrase pool per
    request `user` (which must then be given) instead of one per model."""

    model_config = STRICT
    gamma: int = Field(OuroborosConfig.gamma, ge=1, le=256)
    branches: int = Field(OuroborosConfig.branches, ge=0, le=16)
    draft_phrases: int = Field(OuroborosConfig.draft_phrases, ge=0, le=16)
    window: int = Field(OuroborosConfig.window, ge=0, le=64)
    phrase_length: int = Field(OuroborosConfig.phrase_length, ge=2, le=32)
    harvest: bool = OuroborosConfig.harvest
    context: bool = OuroborosConfig.context
    warm_start: bool = OuroborosConfig.warm_start
    branches_by_cost: bool = OuroborosConfig.branches_by_cost
    min_confidence: float = Field(OuroborosConfig.min_confidence, ge=0, lt=1, allow_inf_nan=False)
    min_joint: float = Field(OuroborosConfig.min_joint, ge=0, lt=1, allow_inf_nan=False)
    # pool_size is the server's (OuroborosConfig's default): the pools outlive requests, and one request must not
    # size a pool every later request of its scope shares
    scope: Literal["model", "user"] = "model"

    def config(self) -> OuroborosConfig:
        return OuroborosConfig(**self.model_dump(exclude={"scope"}))


class QuickdraftOptions(BaseModel):
    """The `"quickdraft"` extension object: options beyond OpenAI's (send it with the openai
    client's `extra_body={"quickdraft": {...}}`)."""

    model_config = STRICT
    drafter: DrafterName = "auto"
    policy: Policy = "default"  # prediction drafting policy
    top_k: int = Field(0, ge=0)  # keep the k most likely tokens when sampling; 0: all
    lookup: LookupOptions | None = None
    draft_length: Literal["auto"] | Annotated[int, Field(ge=1, le=256)] = "auto"  # draft-model tokens per pass
    # mentored: lossy, bounded, sampling only; typical: lossy, no bound; threshold at 1.0: exact (relaxed.py)
    acceptance: Rule = "exact"
    kl_bound: float | None = Field(None, ge=0, allow_inf_nan=False)  # per-token KL bound for mentored
    ouroboros: OuroborosOptions | None = None  # settings of drafter "ouroboros"
    draft_sizing: Sizing = "auto"  # drafts capped by measured pass costs, or as proposed
    prefix_reuse: bool = True  # false: prefill the whole prompt, taking nothing an earlier request computed (timing)
    # the text split by origin, [[text, from_draft], ...]: in each streamed chunk's "quickdraft" object (with
    # the step's tokens, drafted and accepted counts; chunks of a step that released no text too), or in the
    # response's; what the playground colours
    segments: bool = False


class BaseRequest(BaseModel):
    """Fields common to /v1/chat/completions and /v1/completions."""

    model_config = STRICT

    model: str
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)  # default 1 (OpenAI's); 0: greedy, exact
    top_p: float | None = Field(None, gt=0, le=1)  # default 1
    stop: StopField = None
    seed: int | None = Field(None, ge=-(2**63), lt=2**64)  # makes sampling reproducible
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, ge=1)  # 1 only
    user: str | None = None  # an end-user id: scopes the Ouroboros phrase pool when quickdraft.ouroboros.scope is "user"
    prediction: Prediction | None = None
    quickdraft: QuickdraftOptions | None = None
    # OpenAI parameters this server does not implement: accepted only at their no-op values (NOOP below).
    frequency_penalty: Any = None
    presence_penalty: Any = None
    logit_bias: Any = None


class ChatMessage(BaseModel):
    model_config = STRICT
    role: Literal["system", "developer", "user", "assistant"]  # "developer" is passed on as "system"
    content: TextContent
    name: str | None = None  # passed to the chat template; refused where the template does not use it (api.py)
    # what a response's message carries and a client sends back with it (the openai client's model_dump()):
    # accepted at the values that say nothing (MESSAGE_NOOP), refused by name otherwise
    refusal: Any = None
    tool_calls: Any = None
    function_call: Any = None
    audio: Any = None
    annotations: Any = None

    def as_dict(self) -> dict[str, Any]:
        named = {} if self.name is None else {"name": self.name}
        return {"role": "system" if self.role == "developer" else self.role, "content": self.content, **named}


class ChatCompletionRequest(BaseRequest):
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES, fail_fast=True)
    max_completion_tokens: int | None = Field(None, ge=1)  # the current name of max_tokens
    logprobs: Any = None
    top_logprobs: Any = None
    tools: Any = None
    tool_choice: Any = None
    parallel_tool_calls: Any = None
    functions: Any = None
    function_call: Any = None
    response_format: Any = None
    modalities: Any = None
    audio: Any = None
    reasoning_effort: Any = None
    verbosity: Any = None
    web_search_options: Any = None
    store: Any = None
    metadata: Any = None
    service_tier: Any = None
    moderation: Any = None
    # user's two successors in OpenAI's API: an end-user id, and a key for OpenAI's prompt cache. The prefix cache
    # here matches a request by its tokens (docs/server.md#request-fields), so it needs no key.
    safety_identifier: str | None = Field(None, max_length=64)
    prompt_cache_key: str | None = None
    prompt_cache_options: Any = None
    prompt_cache_retention: Any = None


class CompletionRequest(BaseRequest):
    prompt: PromptField
    logprobs: Any = None
    echo: Any = None
    suffix: Any = None
    best_of: Any = None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _zero_bias(value: Any) -> bool:
    """A logit_bias that biases no logit: {} or every bias 0."""
    return isinstance(value, dict) and all(_number(b) and b == 0 for b in value.values())


# Unimplemented OpenAI parameters, and the values at which they change nothing (or a test of such a value).
NOOP: dict[str, tuple[Any, ...] | Callable[[Any], bool]] = {
    "frequency_penalty": (0,), "presence_penalty": (0,), "logit_bias": _zero_bias,
    "logprobs": (False,), "top_logprobs": (0,), "tools": ([],), "tool_choice": ("none",),
    "parallel_tool_calls": (), "functions": ([],), "function_call": ("none",),
    "response_format": ({"type": "text"},), "modalities": (["text"],), "audio": (), "reasoning_effort": (),
    "verbosity": (), "web_search_options": (), "store": (False,), "metadata": ({},), "service_tier": ("auto", "default"),
    "moderation": (), "prompt_cache_options": (), "prompt_cache_retention": (),
    "echo": (False,), "suffix": (), "best_of": (1,),
}


MESSAGE_NOOP: dict[str, tuple[Any, ...]] = {"refusal": (), "tool_calls": ([],), "function_call": (), "audio": (),
                                             "annotations": ([],)}


def _is_noop(value: Any, allowed: tuple[Any, ...] | Callable[[Any], bool]) -> bool:
    """A number matches a number of the same value (0.0 is 0); anything else needs its own JSON type too, since
    0 == False in Python but `logprobs: 0` is not `logprobs: false` in JSON."""
    if value is None:
        return True
    if callable(allowed):
        return allowed(value)
    return any(value == a and (_number(value) and _number(a) or type(value) is type(a)) for a in allowed)


def refuse_unsupported(req: BaseRequest) -> None:
    """Raise UnsupportedParameter for the first parameter set to something this server does not do."""
    predicted = req.prediction is not None
    if req.n is not None and req.n != 1:
        raise UnsupportedParameter("n", n_refused(req.n, predicted))
    for name in type(req).model_fields:
        if name in NOOP and not _is_noop(getattr(req, name), NOOP[name]):
            if predicted and name in PREDICTION_REFUSES:
                raise UnsupportedParameter(name, refused_with_prediction(name))
            raise UnsupportedParameter(name, f"'{name}' is not supported by this server (quickdraft); leave it unset.")
    for i, message in enumerate(getattr(req, "messages", ())):
        for name, allowed in MESSAGE_NOOP.items():
            if not _is_noop(getattr(message, name), allowed):
                raise UnsupportedParameter(f"messages[{i}].{name}", f"'messages[{i}].{name}' is not supported by "
                                           f"this server (quickdraft): only text messages; leave it unset or null.")
    if req.stream_options is not None and not req.stream:
        raise UnsupportedParameter("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
    if isinstance(req, ChatCompletionRequest) and req.max_tokens is not None and req.max_completion_tokens is not None:
        raise UnsupportedParameter("max_tokens", "Give max_tokens or max_completion_tokens, not both "
                                   "(max_completion_tokens is the current name).")


def _pool_scope(req: BaseRequest, ext: QuickdraftOptions) -> str:
    if ext.ouroboros is None or ext.ouroboros.scope == "model":
        return ""
    user = req.user or (req.safety_identifier if isinstance(req, ChatCompletionRequest) else None)
    if not user:
        raise QuickdraftError("quickdraft.ouroboros.scope 'user' needs an end-user id: the request's 'user' or "
                              "'safety_identifier' field")
    return "user:" + user


def decode_options(req: BaseRequest, *, default_max_tokens: int) -> DecodeOptions:
    """How this request is decoded (raises QuickdraftError, a 400, for what the options object refuses)."""
    ext = req.quickdraft or QuickdraftOptions()
    max_tokens = req.max_tokens
    if isinstance(req, ChatCompletionRequest) and req.max_completion_tokens is not None:
        max_tokens = req.max_completion_tokens
    return DecodeOptions(
        drafter=ext.drafter,
        policy=ext.policy,
        max_new_tokens=default_max_tokens if max_tokens is None else max_tokens,
        stop=req.stop,
        lookup=ext.lookup.config() if ext.lookup is not None else LookupConfig(),
        draft=DraftModelConfig() if ext.draft_length == "auto" else DraftModelConfig(k=ext.draft_length),
        acceptance=ext.acceptance,
        kl_bound=ext.kl_bound,
        ouroboros=ext.ouroboros.config() if ext.ouroboros is not None else OuroborosConfig(),
        pool_scope=_pool_scope(req, ext),
        draft_sizing=ext.draft_sizing,
        prefix_reuse=ext.prefix_reuse,
        sampling=SamplingParams(
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            top_k=ext.top_k,
            seed=req.seed,
        ),
    )


def prediction_text(req: BaseRequest) -> Any:
    """The request's prediction content (a string or text parts), or None."""
    return None if req.prediction is None else req.prediction.content


# -- responses ----------------------------------------------------------------------------------------


def error_body(message: str, type_: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def usage(stats: Stats) -> dict[str, Any]:
    """OpenAI's usage object; the prediction counts have OpenAI's meaning (see core.Stats)."""
    return {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "total_tokens": stats.prompt_tokens + stats.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": stats.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "accepted_prediction_tokens": stats.accepted_prediction_tokens,
            "rejected_prediction_tokens": stats.rejected_prediction_tokens,
            "reasoning_tokens": 0,
            "audio_tokens": 0,
        },
    }


class ResponseIds:
    """id / created / model shared by a response and all of its chunks."""

    def __init__(self, chat: bool, model: str):
        self.chat = chat
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = model

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model, "system_fingerprint": None}

    def completion(self, result: Result, segments: bool = False) -> dict[str, Any]:
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": result.text, "refusal": None},
                      "logprobs": None, "finish_reason": result.finish_reason}
        else:
            choice = {"index": 0, "text": result.text, "logprobs": None, "finish_reason": result.finish_reason}
        body = self._head("chat.completion" if self.chat else "text_completion")
        extension = result.stats.as_dict()
        if segments:
            extension["segments"] = [[text, from_draft] for text, from_draft in result.segments]
        if result.prediction_spans is not None:  # docs/predicted-outputs.md#the-predictions-spans-in-the-answer
            extension["prediction_spans"] = result.prediction_spans.as_dict()
        return {**body, "choices": [choice], "usage": usage(result.stats), "quickdraft": extension}

    def chunk(self, text: str | None, finish_reason: str | None = None, *, role: bool = False,
              with_usage_field: bool = False, step: Chunk | None = None,
              spans: PredictionSpans | None = None) -> dict[str, Any]:
        """One streamed chunk; text None gives an empty delta (the closing chunk). step: the engine step it
        carries, described in a "quickdraft" object (QuickdraftOptions.segments). spans: the prediction's spans that
        became final with it, in the "quickdraft" object too."""
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant"} if role else {}
            if text is not None:
                delta["content"] = text
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        else:
            choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason}
        body = {**self._head("chat.completion.chunk" if self.chat else "text_completion"), "choices": [choice]}
        if with_usage_field:
            body["usage"] = None
        if step is not None:
            body["quickdraft"] = {"segments": [[t, f] for t, f in step.segments], "tokens": len(step.token_ids),
                                  "drafted": step.drafted, "accepted": sum(step.from_draft)}
        if spans is not None:
            body.setdefault("quickdraft", {})["prediction_spans"] = spans.as_dict()
        return body

    def usage_chunk(self, stats: Stats) -> dict[str, Any]:
        """The last chunk when stream_options.include_usage: no choices, the usage of the whole request."""
        head = self._head("chat.completion.chunk" if self.chat else "text_completion")
        return {**head, "choices": [], "usage": usage(stats), "quickdraft": stats.as_dict()}
