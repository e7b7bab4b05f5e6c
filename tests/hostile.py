"""A catalogue of hostile and edge-case requests, as an attacker or a careless client sends them.

Each Case is one HTTP request and the status quickdraft's own server must answer (`status`), with the
error code where one is due. tests/test_hostile.py sends them all to a live server on loopback and checks
the status, the OpenAI error object, and that /health answers within a second during and after each.
The server under test: a tiny chat model with a 512-token context, `model` "tiny", the default limits
(8 MiB bodies), no API key, listening on 127.0.0.1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
JSON_TYPE = {"Content-Type": "application/json"}
OK_CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
OK_COMPLETION = {"model": "tiny", "prompt": "hi", "max_tokens": 4}
CONTEXT = 512


@dataclass(frozen=True)
class Case:
    name: str
    body: Any = None  # a dict (sent as JSON), bytes (sent as they are) or None
    status: int = 400
    code: str | None = None  # the error object's code, where the case pins one
    path: str = CHAT
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON_TYPE))

    def content(self) -> bytes | None:
        return json.dumps(self.body).encode() if isinstance(self.body, dict) else self.body


def chat(**changes: Any) -> dict:
    return {k: v for k, v in {**OK_CHAT, **changes}.items() if v is not ...}


def completion(**changes: Any) -> dict:
    return {k: v for k, v in {**OK_COMPLETION, **changes}.items() if v is not ...}


def raw(text: str) -> bytes:
    return text.encode()


def _malformed() -> list[Case]:
    bodies = [b"", b"{", b'{"model": "tiny",', b"\xff\xfe\x00", b"null", b"[]", b'"hi"', b"42", b"true",
              b'{"model": "tiny", "messages": [{"role": "user", "content": "hi"}]} trailing',
              b'{"model": "tiny", "model": "tiny", "messages": NaN}', b"{'model': 'tiny'}",
              b'{"model": "tiny", "messages": [{"role": "user", "content": "\\ud800"}], "max_tokens": 1e400}',
              b"[" * 10000 + b"]" * 10000]
    return [Case(f"malformed JSON {i}", body) for i, body in enumerate(bodies)]


def _types() -> list[Case]:
    wrong = {"model": 5, "messages": {"role": "user"}, "max_tokens": "4", "temperature": "0", "top_p": [1],
             "stream": 1, "stop": 5, "seed": 1.5, "n": "1", "user": 7, "prediction": "text",
             "quickdraft": [], "stream_options": True, "max_completion_tokens": True}
    cases = [Case(f"{name} of the wrong type", chat(**{name: value}), code="invalid_type"
                  if name not in ("stop", "max_completion_tokens") else None) for name, value in wrong.items()]
    cases += [
        Case("message role unknown", chat(messages=[{"role": "robot", "content": "x"}])),
        Case("message content a number", chat(messages=[{"role": "user", "content": 5}])),
        Case("message content an image part", chat(messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "http://127.0.0.1/x.png"}}]}])),
        Case("message without content", chat(messages=[{"role": "user"}])),
        Case("messages empty", chat(messages=[])),
        Case("completions prompt of token ids", completion(prompt=[1, 2, 3]), path=COMPLETIONS),
        Case("completions batch of prompts", completion(prompt=["a", "b"]), path=COMPLETIONS),
        Case("completions prompt missing", completion(prompt=...), path=COMPLETIONS, code="missing_required_parameter"),
        Case("model missing", chat(model=...), code="missing_required_parameter"),
        Case("prediction content of the wrong type", chat(prediction={"type": "content", "content": 7})),
        Case("prediction with another type", chat(prediction={"type": "text", "content": "x"})),
        Case("quickdraft drafter unknown", chat(quickdraft={"drafter": "magic"})),
        Case("quickdraft lookup sizes crossed", chat(quickdraft={"lookup": {"min_ngram": 3, "max_ngram": 2}})),
    ]
    return cases


def _numbers() -> list[Case]:
    return [
        Case("temperature 1e-300 decodes greedily", chat(temperature=1e-300), 200),
        Case("temperature 1e-45 decodes greedily", chat(temperature=1e-45), 200),
        Case("temperature 1e-45 streamed", chat(temperature=1e-45, stream=True), 200),
        Case("temperature 5e-324", chat(temperature=5e-324), 200),
        Case("temperature -0.0", chat(temperature=-0.0), 200),
        Case("temperature 2 with top_k 1", chat(temperature=2, quickdraft={"top_k": 1}), 200),
        Case("temperature just above the greedy floor", chat(temperature=1.1e-5, seed=1), 200),
        Case("top_p 1e-300", chat(temperature=1, top_p=1e-300, seed=1), 200),
        Case("top_p 5e-324 streamed", chat(temperature=1, top_p=5e-324, seed=2, stream=True), 200),
        Case("top_p 1e-300 with temperature 1e-300", chat(temperature=1e-300, top_p=1e-300), 200),
        Case("top_k 10**18", chat(temperature=1, quickdraft={"top_k": 10**18}, seed=3), 200),
        Case("seed 2**64 - 1", chat(temperature=1, seed=2**64 - 1), 200),
        Case("seed -2**63", chat(temperature=1, seed=-(2**63)), 200),
        Case("seed 2**64", chat(seed=2**64)),
        Case("temperature 1e308", chat(temperature=1e308)),
        Case("temperature -1e-300", chat(temperature=-1e-300)),
        Case("temperature 1e400 (inf)", raw('{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], '
                                             '"temperature": 1e400}')),
        Case("top_p 0", chat(top_p=0)),
        Case("top_p 1.0000001", chat(top_p=1.0000001)),
        Case("top_k -1", chat(quickdraft={"top_k": -1})),
        Case("max_tokens 0", chat(max_tokens=0)),
        Case("max_tokens -1", chat(max_tokens=-1)),
        Case("max_tokens 10**12", chat(max_tokens=10**12), code="context_length_exceeded"),
        Case("max_tokens 2**63", chat(max_tokens=2**63), code="context_length_exceeded"),
        Case("max_tokens 10**30", chat(max_tokens=10**30), code="context_length_exceeded"),
        Case("max_tokens one over the context", chat(max_tokens=CONTEXT), code="context_length_exceeded"),
        Case("max_completion_tokens over the context", chat(max_tokens=..., max_completion_tokens=10**6),
             code="context_length_exceeded"),
        Case("completions max_tokens over the context", completion(max_tokens=10**9), path=COMPLETIONS,
             code="context_length_exceeded"),
        Case("max_tokens 1", chat(max_tokens=1), 200),
        Case("n 0", chat(n=0)),
        Case("n 10**9", chat(n=10**9)),
        Case("kl_bound 1e308 under sampling", chat(seed=4, quickdraft={"acceptance": "mentored", "kl_bound": 1e308}), 200),
        Case("mentored under a temperature the floor makes greedy",
             chat(temperature=1e-300, quickdraft={"acceptance": "mentored", "kl_bound": 0.1})),
        Case("draft_length 10**9", chat(quickdraft={"draft_length": 10**9})),
        Case("lookup num_tokens 10**9", chat(quickdraft={"lookup": {"num_tokens": 10**9}})),
    ]


def _unknown_and_unsupported() -> list[Case]:
    unknown = [Case(f"unknown field {name}", chat(**{name: 1}), code="unknown_parameter")
               for name in ("frobnicate", "__proto__", "constructor", "max_tokens ", "Model")]
    unknown += [Case("unknown field in a message", chat(messages=[{"role": "user", "content": "x", "speaker": "a"}]),
                     code="unknown_parameter"),
                Case("unknown quickdraft option", chat(quickdraft={"speed": 11}), code="unknown_parameter")]
    unsupported = {"logprobs": True, "top_logprobs": 3, "tools": [{"type": "function", "function": {"name": "f"}}],
                   "tool_choice": "required", "response_format": {"type": "json_object"}, "logit_bias": {"1": 5},
                   "presence_penalty": 0.5, "frequency_penalty": -1, "modalities": ["audio"],
                   "audio": {"voice": "x"}, "reasoning_effort": "high", "store": True, "n": 2}
    cases = [Case(f"unsupported {name}", chat(**{name: value}), code="unsupported_parameter")
             for name, value in unsupported.items()]
    cases += [Case("unsupported echo", completion(echo=True), path=COMPLETIONS, code="unsupported_parameter"),
              Case("unsupported best_of", completion(best_of=3), path=COMPLETIONS, code="unsupported_parameter"),
              Case("prediction with n 2", chat(prediction={"type": "content", "content": "x"}, n=2),
                   code="unsupported_parameter"),
              Case("stream_options without stream", chat(stream_options={"include_usage": True}),
                   code="unsupported_parameter")]
    return unknown + cases


def _sizes() -> list[Case]:
    code = "def f(x):\n    return x\n"
    over = code * (CONTEXT * 16 // len(code) + 1)  # more than 16 characters a token of the context
    under = code * (CONTEXT * 16 // len(code) - 1)  # more tokens than the context, fewer characters than that
    return [
        Case("a 3 MB prediction", chat(prediction={"type": "content", "content": "x" * (3 << 20)}),
             code="context_length_exceeded"),
        Case("a prediction just over the characters the context can hold",
             chat(prediction={"type": "content", "content": over}), code="context_length_exceeded"),
        Case("a prediction longer than the context in tokens is used as far as it fits",
             chat(prediction={"type": "content", "content": under}), 200),
        Case("a prediction of 20,000 text parts", chat(prediction={"type": "content", "content": [
            {"type": "text", "text": "abcdef"}] * 20000}), code="context_length_exceeded"),
        Case("a 3 MB message", chat(messages=[{"role": "user", "content": "y" * (3 << 20)}]),
             code="context_length_exceeded"),
        Case("a 3 MB completions prompt", completion(prompt="z" * (3 << 20)), path=COMPLETIONS,
             code="context_length_exceeded"),
        Case("a prompt over the context in tokens", chat(messages=[{"role": "user", "content": "x" * 600}]),
             code="context_length_exceeded"),
        Case("a completions prompt over the context in tokens", completion(prompt="x" * 600), path=COMPLETIONS,
             code="context_length_exceeded"),
        Case("a completions prompt that leaves no room for the default 16 tokens", completion(prompt="x" * 500, max_tokens=...),
             path=COMPLETIONS, code="context_length_exceeded"),
        Case("a completions prompt that leaves room for max_tokens", completion(prompt="x" * 500, max_tokens=4),
             path=COMPLETIONS, status=200),
        Case("150,000 invalid messages", chat(messages=[{"role": "robot", "content": 5}] * 150000)),
        Case("150,000 valid messages", chat(messages=[{"role": "user", "content": "a"}] * 150000)),
        Case("300,000 stop strings", chat(stop=["ab"] * 300000)),
        Case("65 stop strings", chat(stop=[f"s{i}" for i in range(65)])),
        Case("64 stop strings", chat(stop=[f"s{i}" for i in range(64)]), 200),
        Case("a stop string of 5,000 characters", chat(stop=["q" * 5000])),
        Case("a 9 MB body", chat(messages=[{"role": "user", "content": "w" * (9 << 20)}]), 413,
             code="request_too_large"),
        Case("Content-Length of 1 GB announced", b'{"model": "tiny"}', 413, code="request_too_large",
             headers={**JSON_TYPE, "Content-Length": str(1 << 30)}),
        Case("a deeply nested quickdraft object", raw('{"model": "tiny", "messages": [{"role": "user", "content": '
                                                       '"x"}], "quickdraft": ' + "{\"a\": " * 500 + "1" + "}" * 500 + "}")),
    ]


def _browser_borne() -> list[Case]:
    plain = {"Content-Type": "text/plain"}
    return [
        Case("text/plain body", chat(), 415, code="unsupported_media_type", headers=plain),
        Case("text/plain body to completions", completion(), 415, code="unsupported_media_type", headers=plain,
             path=COMPLETIONS),
        Case("form body", chat(), 415, code="unsupported_media_type",
             headers={"Content-Type": "application/x-www-form-urlencoded"}),
        Case("multipart body", chat(), 415, code="unsupported_media_type",
             headers={"Content-Type": "multipart/form-data; boundary=x"}),
        Case("no Content-Type", chat(), 415, code="unsupported_media_type", headers={}),
        Case("JSON with a charset", chat(), 200, headers={"Content-Type": "application/json; charset=utf-8"}),
        Case("a foreign Host (DNS rebinding)", chat(), 400, code="invalid_host",
             headers={**JSON_TYPE, "Host": "attacker.example"}),
        Case("a foreign Host on a GET", None, 400, code="invalid_host", method="GET", path="/v1/models",
             headers={"Host": "rebind.attacker.example:8000"}),
        Case("a foreign Host on the playground", None, 400, code="invalid_host", method="GET", path="/",
             headers={"Host": "evil.test"}),
        Case("Host localhost with a port", None, 200, method="GET", path="/v1/models",
             headers={"Host": "localhost:9999"}),
        Case("a cross-origin POST with an Origin header", chat(), 200,
             headers={**JSON_TYPE, "Origin": "https://evil.test"}),
        Case("a CORS preflight (CORS off)", None, 405, method="OPTIONS",
             headers={"Origin": "https://evil.test", "Access-Control-Request-Method": "POST"}),
    ]


def _routes_and_odd_inputs() -> list[Case]:
    return [
        Case("GET on chat completions", None, 405, method="GET"),
        Case("DELETE on chat completions", None, 405, method="DELETE"),
        Case("PUT on completions", completion(), 405, method="PUT", path=COMPLETIONS),
        Case("unknown route", completion(), 404, path="/v1/embeddings", code="unknown_url"),
        Case("a path climbing out", None, 404, method="GET", path="/../../etc/passwd", code="unknown_url"),
        Case("a 4 KB path", None, 404, method="GET", path="/" + "a" * 4096, code="unknown_url"),
        Case("a model that does not exist", chat(model="gpt-4o"), 404, code="model_not_found"),
        Case("a model id with a path", None, 404, method="GET", path="/v1/models/../../x", code="unknown_url"),
        Case("a model id that does not exist", None, 404, method="GET", path="/v1/models/nope", code="model_not_found"),
        Case("a NUL in the content", chat(messages=[{"role": "user", "content": "a\u0000b"}]), 200),
        Case("a lone surrogate in the content", raw('{"model": "tiny", "messages": [{"role": "user", "content": '
                                                     '"\\ud800"}], "max_tokens": 2}'), code="invalid_json"),
        Case("emoji and right-to-left text", chat(messages=[{"role": "user", "content": "\U0001F600 \u05e9\u05dc\u05d5\u05dd"}]), 200),
        Case("an empty message", chat(messages=[{"role": "user", "content": ""}]), 200),
        Case("an empty completions prompt", completion(prompt=""), path=COMPLETIONS),
        Case("an empty prediction", chat(prediction={"type": "content", "content": ""}), 200),
        Case("a stop string that matches at once", chat(stop=["a", "b", "c", "d", "e", " "]), 200),
        Case("a prediction with a drafter that ignores it",
             chat(prediction={"type": "content", "content": "x"}, quickdraft={"drafter": "none"})),
        Case("a drafter that needs a prediction", chat(quickdraft={"drafter": "prediction"})),
        Case("streamed with usage", chat(stream=True, stream_options={"include_usage": True}), 200),
        Case("streamed completions", completion(stream=True), 200, path=COMPLETIONS),
        Case("ouroboros scope user without a user", chat(quickdraft={"ouroboros": {"scope": "user"}})),
        Case("a very long user id", chat(user="u" * 100000), 200),
    ]


CASES: list[Case] = (_malformed() + _types() + _numbers() + _unknown_and_unsupported() + _sizes() + _browser_borne()
                     + _routes_and_odd_inputs())
