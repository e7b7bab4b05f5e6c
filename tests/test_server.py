"""The OpenAI-compatible server, end to end: uvicorn on a free 127.0.0.1 port in a background thread,
spoken to with the official `openai` client (and httpx where raw HTTP matters).

Served output equals the library's (Generator.generate) for the same request; counts are exact on a
scripted model; every bad request gets the right status and an OpenAI error object and the server
stays up; many clients at once get their own complete answers, a client that leaves frees the model,
a full queue answers 429, /health answers during a long generation.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import openai
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import save_char_model

import quickdraft
from quickdraft import SamplingParams, cli
from quickdraft.api import Generator
from quickdraft.drafters.ouroboros import OuroborosConfig
from quickdraft.runners import ScriptedRunner
from quickdraft.server import ServerLimits, create_app
from quickdraft.server.http import config as http_config
from quickdraft.spans import PredictionSpans
from quickdraft.tokenizer import ByteTokenizer

GREEDY = SamplingParams(temperature=0.0)
PLAIN = {"quickdraft": {"drafter": "none"}}  # one token per pass: generation time is predictable
SCRIPT = "hello world, hello again"


# -- servers ------------------------------------------------------------------------------------------


@contextmanager
def serving(generator: Generator, limits: ServerLimits = ServerLimits(), **options):
    """Run create_app(generator) under uvicorn in a thread, as `quickdraft serve` runs it; yield its base URL.
    limits: a ServerLimits, or a dict of the fields that differ from the defaults."""
    options.setdefault("model_name", "tiny")
    limits = ServerLimits(**limits) if isinstance(limits, dict) else limits
    app = create_app(generator, limits=limits, **options)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(http_config(app, limits, log_level="warning", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def client(url: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def chat_folder(tmp_path_factory):
    """A tiny random llama with a one-character-per-token tokenizer (printable ASCII) that has a chat template."""
    chars = [chr(c) for c in range(32, 127)] + ["\n"]
    template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    return save_char_model(tmp_path_factory.mktemp("tiny-chat-model"), chars, chat_template=template, decoder=True)


@pytest.fixture(scope="module")
def reference(chat_folder) -> Generator:
    """The same model loaded a second time: the library's answers, computed beside the server's."""
    return quickdraft.load(str(chat_folder), progress=False)


@pytest.fixture(scope="module")
def tiny_url(chat_folder):
    with serving(quickdraft.load(str(chat_folder), progress=False), limits={"max_body_bytes": 64 << 10}) as url:
        yield url


def scripted_generator(runner_cls=ScriptedRunner, script: str = SCRIPT, **kw) -> Generator:
    tok = ByteTokenizer()
    return Generator(runner_cls(tok.encode(script), 257, tok.eos, max_context=kw.pop("max_context", 64), **kw), tok)


@pytest.fixture(scope="module")
def scripted_url():
    with serving(scripted_generator(), model_name="scripted") as url:
        yield url


def generations(url: str, key: str | None = None) -> dict[str, float]:
    """quickdraft_generations_total by outcome, read from /metrics."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    text = httpx.get(url + "/metrics", headers=headers).text
    out = {}
    for line in text.splitlines():
        if line.startswith("quickdraft_generations_total{"):
            out[line.split('"')[1]] = float(line.rsplit(" ", 1)[1])
    return out


def read_stream(stream) -> tuple[str, str | None, object]:
    """Text, finish_reason and usage of an openai stream of chunks."""
    text, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            piece = choice.delta.content if hasattr(choice, "delta") else choice.text
            text.append(piece or "")
            finish = choice.finish_reason or finish
    return "".join(text), finish, usage


# -- same answers as the library ----------------------------------------------------------------------

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "say abc def"}]


def _partly_right(text: str) -> str:
    """The text with a few characters replaced in the middle: a prediction that is partly right."""
    mid = len(text) // 2
    return text[:mid] + "#~#" + text[mid + 3:]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("predicted", [False, True])
def test_chat_equals_the_library(tiny_url, reference, stream, predicted):
    plain = reference.generate(MESSAGES, drafter="none", max_new_tokens=24, sampling=GREEDY)
    prediction = [{"type": "text", "text": _partly_right(plain.text)}] if predicted else None
    # sizing off on both sides: the library and the server each measure their own pass costs, so with sizing
    # the same request may be drafted differently (the counts, never the text)
    expected = reference.generate(MESSAGES, prediction=prediction, max_new_tokens=24, sampling=GREEDY,
                                  draft_sizing="off")
    assert expected.text == plain.text
    args = dict(model="tiny", messages=MESSAGES, max_completion_tokens=24, temperature=0,
                extra_body={"quickdraft": {"draft_sizing": "off"}})
    if predicted:
        args["prediction"] = {"type": "content", "content": prediction}
    c = client(tiny_url)
    if stream:
        text, finish, usage = read_stream(c.chat.completions.create(**args, stream=True,
                                                                    stream_options={"include_usage": True}))
    else:
        r = c.chat.completions.create(**args)
        text, finish, usage = r.choices[0].message.content, r.choices[0].finish_reason, r.usage
        assert r.object == "chat.completion" and r.model == "tiny" and r.choices[0].message.role == "assistant"
    assert text == expected.text
    assert finish == expected.finish_reason
    s = expected.stats
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (
        s.prompt_tokens, s.completion_tokens, s.prompt_tokens + s.completion_tokens)
    details = usage.completion_tokens_details
    assert details.accepted_prediction_tokens == s.accepted_prediction_tokens
    assert details.rejected_prediction_tokens == s.rejected_prediction_tokens
    if predicted:
        assert s.accepted_prediction_tokens > 0 and s.rejected_prediction_tokens > 0


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("predicted", [False, True])
def test_completions_equal_the_library(tiny_url, reference, stream, predicted):
    prompt = "abc def ghi"
    plain = reference.generate(prompt, chat=False, drafter="none", max_new_tokens=20, sampling=GREEDY)
    prediction = _partly_right(plain.text) if predicted else None
    expected = reference.generate(prompt, chat=False, prediction=prediction, max_new_tokens=20, sampling=GREEDY,
                                  stop=plain.text[12:14], draft_sizing="off")  # sizing off: as in the chat test
    args = dict(model="tiny", prompt=prompt, max_tokens=20, temperature=0, stop=[plain.text[12:14]],
                extra_body={"quickdraft": {"draft_sizing": "off"}})
    if predicted:
        args["extra_body"]["prediction"] = {"type": "content", "content": prediction}
    c = client(tiny_url)
    if stream:
        text, finish, usage = read_stream(c.completions.create(**args, stream=True,
                                                               stream_options={"include_usage": True}))
    else:
        r = c.completions.create(**args)
        text, finish, usage = r.choices[0].text, r.choices[0].finish_reason, r.usage
    assert (text, finish) == (expected.text, expected.finish_reason)
    assert usage.completion_tokens == expected.stats.completion_tokens
    assert usage.completion_tokens_details.accepted_prediction_tokens == expected.stats.accepted_prediction_tokens
    assert usage.completion_tokens_details.rejected_prediction_tokens == expected.stats.rejected_prediction_tokens


def test_sampling_defaults_follow_openai_and_the_extension_is_used(tiny_url, reference):
    """No temperature given: OpenAI's default 1 (sampled), reproducible with a seed; the extension
    object's drafter and top_k reach the engine."""
    expected = reference.generate("abc", chat=False, max_new_tokens=12, drafter="lookup",
                                  sampling=SamplingParams(temperature=1.0, top_p=1.0, top_k=5, seed=7))
    greedy = reference.generate("abc", chat=False, max_new_tokens=12, sampling=GREEDY)
    r = client(tiny_url).completions.create(model="tiny", prompt="abc", max_tokens=12, seed=7,
                                            extra_body={"quickdraft": {"drafter": "lookup", "top_k": 5}})
    assert r.choices[0].text == expected.text != greedy.text
    assert r.model_extra["quickdraft"]["target_passes"] == expected.stats.target_passes


@pytest.mark.parametrize("stream", [False, True])
def test_a_seed_gives_plain_samplings_text_with_a_prediction(tiny_url, stream):
    """Sampled with a seed, a chat request with a prediction answers the text the same request gets without drafting,
    token for token (acceptance/rejection.verify_walk), with the server's own draft sizing on, and keeps the
    prediction's tokens where they are that text."""
    c = client(tiny_url)
    ask = dict(model="tiny", messages=MESSAGES, max_completion_tokens=24, temperature=0.9, top_p=0.95, seed=11)
    plain = c.chat.completions.create(**ask, extra_body={"quickdraft": {"drafter": "none"}}).choices[0].message.content
    for prediction in (plain, _partly_right(plain)):
        args = dict(ask, prediction={"type": "content", "content": prediction})
        if stream:
            text, _, usage = read_stream(c.chat.completions.create(**args, stream=True,
                                                                   stream_options={"include_usage": True}))
        else:
            r = c.chat.completions.create(**args)
            text, usage = r.choices[0].message.content, r.usage
        assert text == plain
        assert usage.completion_tokens_details.accepted_prediction_tokens > 0


def test_scripted_counts_are_exact(scripted_url):
    """Script "hello world, hello again" (one byte per token), prompt "hi".

    policy openai, prediction "hello WORLD, hello again": the first pass drafts 16 tokens and the
    model keeps "hello " (6) and corrects "W" -> "w": 6 accepted, 10 rejected; the openai policy
    drafts again only after 32 agreeing tokens, which 24 never reach. 24 output tokens.
    policy default, right prediction: pass 1 drafts 16 (all kept, bonus "l"), pass 2 the 7 left
    (all kept, bonus EOS): 23 accepted, 0 rejected, 2 passes.
    """
    c = client(scripted_url)
    cases = [({"type": "content", "content": "hello WORLD, hello again"}, "openai", 6, 10),
             ({"type": "content", "content": [{"type": "text", "text": SCRIPT}]}, "default", 23, 0)]
    for prediction, policy, accepted, rejected in cases:
        body = {"prediction": prediction, "quickdraft": {"policy": policy, "draft_sizing": "off"}}  # counts as drafted
        r = c.completions.create(model="scripted", prompt="hi", max_tokens=60, temperature=0, extra_body=body)
        assert (r.choices[0].text, r.choices[0].finish_reason) == (SCRIPT, "stop")
        assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (2, 24, 26)
        d = r.usage.completion_tokens_details
        assert (d.accepted_prediction_tokens, d.rejected_prediction_tokens) == (accepted, rejected)
        text, finish, usage = read_stream(c.completions.create(
            model="scripted", prompt="hi", max_tokens=60, temperature=0, extra_body=body, stream=True,
            stream_options={"include_usage": True}))
        assert (text, finish, usage.completion_tokens) == (SCRIPT, "stop", 24)
        d = usage.completion_tokens_details
        assert (d.accepted_prediction_tokens, d.rejected_prediction_tokens) == (accepted, rejected)
    r = c.completions.create(model="scripted", prompt="hi", max_tokens=5, temperature=0)
    assert (r.choices[0].text, r.choices[0].finish_reason, r.usage.completion_tokens) == ("hello", "length", 5)
    assert r.model_extra["quickdraft"]["target_passes"] == 5  # no prediction, nothing to look up: plain


def test_raw_stream_shape(scripted_url):
    """The chunks as bytes: a role chunk, content, an empty delta with finish_reason, usage, [DONE]."""
    body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    r = httpx.post(scripted_url + "/v1/chat/completions", json=body)
    assert r.status_code == 400 and "chat template" in r.json()["error"]["message"]  # ByteTokenizer has none
    body = {"model": "scripted", "prompt": "hi", "stream": True, "max_tokens": 60, "temperature": 0,
            "stream_options": {"include_usage": True}}
    with httpx.stream("POST", scripted_url + "/v1/completions", json=body) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert len({c["id"] for c in chunks}) == 1 and all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks[:-1]) == SCRIPT
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]][-1] == "stop"
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 24


def test_segments_say_which_text_the_draft_gave(scripted_url):
    """quickdraft.segments: each streamed chunk splits its text by origin and counts its step; the response
    without streaming carries the whole text's segments. Prediction "hello WORLD, hello again", policy
    openai (as above): "hello " accepted, "w" and the rest the model's own, 6 accepted and 10 rejected."""
    ext = {"policy": "openai", "draft_sizing": "off", "segments": True}
    body = {"model": "scripted", "prompt": "hi", "stream": True, "max_tokens": 60, "temperature": 0,
            "prediction": {"type": "content", "content": "hello WORLD, hello again"}, "quickdraft": ext}
    with httpx.stream("POST", scripted_url + "/v1/completions", json=body) as r:
        chunks = [json.loads(line[6:]) for line in r.iter_lines() if line and line != "data: [DONE]"]
    steps = [c["quickdraft"] for c in chunks if "quickdraft" in c]
    assert len(steps) == 19  # one per target pass, each sent (the 16-token draft's pass, then 18 plain ones)
    for c in chunks:
        if "quickdraft" in c:
            assert "".join(t for t, _ in c["quickdraft"]["segments"]) == c["choices"][0]["text"]
    assert "".join(c["choices"][0]["text"] for c in chunks) == SCRIPT
    assert (sum(s["drafted"] for s in steps), sum(s["accepted"] for s in steps)) == (16, 6)
    assert sum(s["tokens"] for s in steps) == 24
    coloured = [seg for s in steps for seg in s["segments"]]
    assert coloured[0] == ["hello ", True] and "".join(t for t, f in coloured if f) == "hello "
    r = httpx.post(scripted_url + "/v1/completions", json={**body, "stream": False}).json()
    assert r["quickdraft"]["segments"] == [["hello ", True], [SCRIPT[6:], False]]
    plain = httpx.post(scripted_url + "/v1/completions", json={**body, "quickdraft": {"policy": "openai"}}).text
    assert '"segments"' not in plain  # only when asked


def test_prediction_spans_in_the_answer(scripted_url):
    """quickdraft.prediction_spans: in the response's "quickdraft" object, and streamed in the chunks' as they become
    final (the pieces add up to the response's); absent without a prediction. Prediction "hello WORLD, hello again"
    for "hello world, hello again": "WORLD" dropped, "world" inserted, the rest kept (spans.py)."""
    body = {"model": "scripted", "prompt": "hi", "max_tokens": 60, "temperature": 0,
            "prediction": {"type": "content", "content": "hello WORLD, hello again"}}
    expected = {"kept": [[0, 6, 0, 6], [11, 24, 11, 24]], "inserted": [[6, 11]], "dropped": [[6, 11]]}
    r = httpx.post(scripted_url + "/v1/completions", json=body).json()
    assert r["choices"][0]["text"] == SCRIPT and r["quickdraft"]["prediction_spans"] == expected
    with httpx.stream("POST", scripted_url + "/v1/completions", json={**body, "stream": True}) as s:
        chunks = [json.loads(line[6:]) for line in s.iter_lines() if line and line != "data: [DONE]"]
    pieces = [c["quickdraft"]["prediction_spans"] for c in chunks if "quickdraft" in c]
    joined = PredictionSpans()
    for piece in pieces:  # kept pieces of one range come in the chunks that release its text
        for k in piece["kept"]:
            joined.add_kept(*k)
        joined.inserted += map(tuple, piece["inserted"])
        joined.dropped += map(tuple, piece["dropped"])
    assert len(pieces) > 1 and joined.as_dict() == expected
    plain = httpx.post(scripted_url + "/v1/completions", json={**body, "prediction": None}).json()
    assert "prediction_spans" not in plain["quickdraft"]
    with httpx.stream("POST", scripted_url + "/v1/completions", json={**body, "prediction": None, "stream": True}) as s:
        assert "prediction_spans" not in s.read().decode()


def test_models_health_metrics(tiny_url):
    c = client(tiny_url)
    assert [m.id for m in c.models.list().data] == ["tiny"]
    assert c.models.retrieve("tiny").owned_by == "quickdraft"
    with pytest.raises(openai.NotFoundError):
        c.models.retrieve("gpt-4o")
    assert httpx.get(tiny_url + "/health").json()["status"] == "ok"
    text = httpx.get(tiny_url + "/metrics").text
    for name in ("quickdraft_http_requests_total", "quickdraft_generations_total", "quickdraft_prompt_tokens_total",
                 "quickdraft_completion_tokens_total", "quickdraft_accepted_prediction_tokens_total",
                 "quickdraft_rejected_prediction_tokens_total", "quickdraft_accepted_tokens_per_pass",
                 "quickdraft_request_duration_seconds_bucket", "quickdraft_time_to_first_token_seconds_count",
                 "quickdraft_queue_wait_seconds_sum", "quickdraft_queue_depth"):
        assert f"\n{name}" in text
    before = generations(tiny_url)["done"]
    c.completions.create(model="tiny", prompt="abc", max_tokens=3, temperature=0)
    assert generations(tiny_url)["done"] == before + 1


def test_bearer_key():
    with serving(scripted_generator(), model_name="scripted", api_key="s3cret") as url:
        assert httpx.get(url + "/health").status_code == 200  # no key needed
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
            for method, path in (("GET", "/v1/models"), ("GET", "/metrics"), ("POST", "/v1/completions")):
                r = httpx.request(method, url + path, headers=headers, json={})
                assert r.status_code == 401, (headers, path)
                assert r.json()["error"]["type"] == "invalid_request_error"
        with pytest.raises(openai.AuthenticationError):
            client(url, "wrong").completions.create(model="scripted", prompt="hi", max_tokens=2)
        r = client(url, "s3cret").completions.create(model="scripted", prompt="hi", max_tokens=2, temperature=0)
        assert r.choices[0].text == "he"
        assert generations(url, "s3cret")["done"] == 1


# -- bad input ------------------------------------------------------------------------------------------

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
OK_CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
OK_COMPLETION = {"model": "tiny", "prompt": "hi", "max_tokens": 4}
PRED = {"type": "content", "content": "abc"}
JSON = {"Content-Type": "application/json"}


def _with(base: dict, **changes) -> dict:
    body = {**base, **changes}
    return {k: v for k, v in body.items() if v is not ...}


BAD = [
    # (path, body (dict, or raw bytes), status, param, words in the message)
    (CHAT, b'{"model": "tiny", "messages": [', 400, None, "could not parse the JSON"),
    (CHAT, b"\xff\xfe not json", 400, None, "could not parse the JSON"),
    (CHAT, b"[1, 2]", 400, None, "must be a JSON object"),
    (CHAT, b"", 400, None, "could not parse the JSON"),
    (CHAT, _with(OK_CHAT, messages=...), 400, "messages", "Missing required parameter"),
    (CHAT, _with(OK_CHAT, model=...), 400, "model", "Missing required parameter"),
    (CHAT, _with(OK_CHAT, messages=[]), 400, "messages", "at least 1"),
    (CHAT, _with(OK_CHAT, messages="hi"), 400, "messages", "Invalid type"),
    (CHAT, _with(OK_CHAT, messages=[{"role": "user"}]), 400, "messages[0].content", "Missing required"),
    (CHAT, _with(OK_CHAT, messages=[{"role": "robot", "content": "x"}]), 400, "messages[0].role", "Invalid value"),
    (CHAT, _with(OK_CHAT, messages=[{"role": "tool", "content": "x"}]), 400, "messages[0].role", "Invalid value"),
    (CHAT, _with(OK_CHAT, messages=[{"role": "user", "content": 5}]), 400, "messages[0].content", "a string or a list"),
    (CHAT, _with(OK_CHAT, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
     400, "messages[0].content", "only text is supported"),
    (CHAT, _with(OK_CHAT, messages=[{"role": "user", "content": "x", "tool_calls": [{"id": "c1"}]}]), 400,
     "messages[0].tool_calls", "not supported by this server"),
    (CHAT, _with(OK_CHAT, messages=[{"role": "assistant", "content": "x", "refusal": "no"}]), 400,
     "messages[0].refusal", "not supported by this server"),
    (CHAT, _with(OK_CHAT, messages=[{"role": "user", "content": "x", "speaker": "a"}]), 400,
     "messages[0].speaker", "Unrecognized request argument"),
    (CHAT, _with(OK_CHAT, messages=[{"role": "user", "content": "hi", "name": "a"}]), 400, None,
     "does not use a message's name"),
    (CHAT, _with(OK_CHAT, messages=[{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {}}]}]),
     400, "messages[0].content", "keys this server does not use: 'cache_control'"),
    (CHAT, _with(OK_CHAT, max_tokens="5"), 400, "max_tokens", "expected an integer, but got a string"),
    (CHAT, _with(OK_CHAT, max_tokens=0), 400, "max_tokens", "greater than or equal to 1"),
    (CHAT, _with(OK_CHAT, max_tokens=2.5), 400, "max_tokens", "expected an integer"),
    (CHAT, _with(OK_CHAT, max_completion_tokens=3), 400, "max_tokens", "not both"),
    (CHAT, _with(OK_CHAT, temperature=3), 400, "temperature", "less than or equal to 2"),
    (CHAT, _with(OK_CHAT, temperature="hot"), 400, "temperature", "expected a number"),
    (CHAT, _with(OK_CHAT, top_p=0), 400, "top_p", "greater than 0"),
    (CHAT, _with(OK_CHAT, stream="yes"), 400, "stream", "expected a boolean"),
    (CHAT, _with(OK_CHAT, stop=[1]), 400, "stop", "a string or a list of strings"),
    (CHAT, _with(OK_CHAT, stop=[""]), 400, "stop", "must not be empty"),
    (CHAT, _with(OK_CHAT, seed=2**70), 400, "seed", "less than"),
    (CHAT, _with(OK_CHAT, stream_options={"include_usage": True}), 400, "stream_options", "only allowed when 'stream'"),
    (CHAT, _with(OK_CHAT, n=2), 400, "n", "only n = 1"),
    (CHAT, _with(OK_CHAT, frobnicate=1), 400, "frobnicate", "Unrecognized request argument supplied: frobnicate"),
    (CHAT, _with(OK_CHAT, model="gpt-4o"), 404, "model", "does not exist"),
    (CHAT, _with(OK_CHAT, messages=[{"role": "user", "content": "x" * 600}]), 400, "messages",
     "maximum context length is 512 tokens. However, your messages resulted in"),
    (CHAT, _with(OK_CHAT, logprobs=True), 400, "logprobs", "not supported by this server"),
    (CHAT, _with(OK_CHAT, safety_identifier="x" * 65), 400, "safety_identifier", "at most 64"),
    (CHAT, _with(OK_CHAT, safety_identifier=7), 400, "safety_identifier", "expected a string"),
    (CHAT, _with(OK_CHAT, prompt_cache_key=["k"]), 400, "prompt_cache_key", "expected a string"),
    (COMPLETIONS, _with(OK_COMPLETION, safety_identifier="u"), 400, "safety_identifier", "Unrecognized request"),
    (CHAT, _with(OK_CHAT, tools=[{"type": "function", "function": {"name": "f"}}]), 400, "tools", "not supported"),
    (CHAT, _with(OK_CHAT, response_format={"type": "json_object"}), 400, "response_format", "not supported"),
    (CHAT, _with(OK_CHAT, prediction=PRED, n=2), 400, "n", "Predicted Outputs does not support n > 1"),
    (CHAT, _with(OK_CHAT, prediction=PRED, logprobs=True), 400, "logprobs", "not supported with Predicted Outputs"),
    (CHAT, _with(OK_CHAT, prediction=PRED, tools=[{"type": "function"}]), 400, "tools", "with Predicted Outputs"),
    (CHAT, _with(OK_CHAT, prediction=PRED, presence_penalty=0.5), 400, "presence_penalty", "with Predicted Outputs"),
    (CHAT, _with(OK_CHAT, logit_bias={"65": 0, "66": 1}), 400, "logit_bias", "not supported"),
    (CHAT, _with(OK_CHAT, logprobs=0), 400, "logprobs", "not supported"),
    (CHAT, _with(OK_CHAT, prediction=PRED, frequency_penalty=1), 400, "frequency_penalty", "with Predicted Outputs"),
    (CHAT, _with(OK_CHAT, prediction={"type": "content", "content": 7}), 400, "prediction.content", "a string or a list"),
    (CHAT, _with(OK_CHAT, prediction={"type": "text", "content": "x"}), 400, "prediction.type", "Invalid value"),
    (CHAT, _with(OK_CHAT, prediction="abc"), 400, "prediction", "expected an object"),
    (CHAT, _with(OK_CHAT, quickdraft={"drafter": "magic"}), 400, "quickdraft.drafter", "Invalid value"),
    (CHAT, _with(OK_CHAT, quickdraft={"speed": 11}), 400, "quickdraft.speed", "Unrecognized request argument"),
    (CHAT, _with(OK_CHAT, quickdraft={"drafter": "prediction"}), 400, None, "needs a prediction"),
    (CHAT, _with(OK_CHAT, prediction=PRED, quickdraft={"drafter": "none"}), 400, None, "would ignore it"),
    (CHAT, _with(OK_CHAT, quickdraft={"lookup": {"min_ngram": 3, "max_ngram": 2}}), 400, None, "n-gram sizes"),
    (CHAT, _with(OK_CHAT, quickdraft={"lookup": {"growth": -1}}), 400, "quickdraft.lookup.growth", "greater than or equal"),
    (CHAT, _with(OK_CHAT, user="u", quickdraft={"ouroboros": {"scope": "user"}}), 400, None,
     "names an Ouroboros phrase pool, but this request drafts with 'lookup'"),
    (CHAT, _with(OK_CHAT, quickdraft={"drafter": "ouroboros", "ouroboros": {"pool_size": 9}}), 400,
     "quickdraft.ouroboros.pool_size", "Unrecognized request argument"),
    (CHAT, _with(OK_CHAT, quickdraft={"drafter": "ouroboros", "ouroboros": {"min_confidence": 1}}), 400,
     "quickdraft.ouroboros.min_confidence", "less than 1"),
    (CHAT, _with(OK_CHAT, quickdraft={"drafter": "none", "lookup": {"num_tokens": 3}}), 400, None,
     "lookup settings were given, but this request drafts with 'none'"),
    (CHAT, _with(OK_CHAT, quickdraft={"draft_length": 4}), 400, None, "the server's draft_length) were given"),
    (CHAT, _with(OK_CHAT, quickdraft={"policy": "openai"}), 400, None, "applies to a prediction"),
    (COMPLETIONS, _with(OK_COMPLETION, prompt=...), 400, "prompt", "Missing required parameter"),
    (COMPLETIONS, _with(OK_COMPLETION, prompt=["a", "b"]), 400, "prompt", "batch of 2 prompts"),
    (COMPLETIONS, _with(OK_COMPLETION, prompt=[1, 2, 3]), 400, "prompt", "token-id prompts are not supported"),
    (COMPLETIONS, _with(OK_COMPLETION, prompt=""), 400, None, "prompt is empty"),
    (COMPLETIONS, _with(OK_COMPLETION, echo=True), 400, "echo", "not supported"),
    (COMPLETIONS, _with(OK_COMPLETION, best_of=3), 400, "best_of", "not supported"),
    (COMPLETIONS, _with(OK_COMPLETION, messages=[]), 400, "messages", "Unrecognized request argument"),
    (COMPLETIONS, b'{"model": "tiny", "prompt": "' + b"a" * (70 << 10) + b'"}', 413, None, "larger than"),
    ("/v1/embeddings", OK_COMPLETION, 404, None, "Unknown request URL"),
]


def test_bad_requests_get_openai_errors_and_the_server_stays_up(tiny_url, reference):
    before = generations(tiny_url)
    with httpx.Client(base_url=tiny_url, timeout=30) as http:
        for path, body, status, param, words in BAD:
            r = http.post(path, content=body, headers=JSON) if isinstance(body, bytes) else http.post(path, json=body)
            assert r.status_code == status, (body if isinstance(body, dict) else body[:60], r.text)
            error = r.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}, r.text
            assert error["param"] == param and words in error["message"], (body, error)
            assert error["type"] == "invalid_request_error"
        r = http.get("/v1/chat/completions")
        assert r.status_code == 405 and "error" in r.json()
    assert generations(tiny_url) == before  # every refusal came before any model work
    # accepted at their no-op values (a number as any number: 0.0 is 0), and the server still answers
    r = client(tiny_url).chat.completions.create(
        model="tiny", messages=[{"role": "developer", "content": "x"}, {"role": "user", "content": "hi"}],
        max_tokens=4, temperature=0, logprobs=False, presence_penalty=0, frequency_penalty=0.0, tools=[],
        logit_bias={"65": 0}, response_format={"type": "text"}, user="u1", n=1)
    expected = reference.generate([{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}],
                                  max_new_tokens=4, sampling=GREEDY)
    assert r.choices[0].message.content == expected.text
    # a reply sent back as the client returned it (the openai client's own message object, nulls and all)
    turn = [{"role": "user", "content": "hi"}, r.choices[0].message.model_dump(), {"role": "user", "content": "more"}]
    again = client(tiny_url).chat.completions.create(model="tiny", messages=turn, max_tokens=4, temperature=0)
    plain = [{"role": m["role"], "content": m["content"]} for m in turn]
    assert again.choices[0].message.content == reference.generate(plain, max_new_tokens=4, sampling=GREEDY).text


def test_a_name_reaches_a_template_that_uses_it_and_a_refusing_template_gets_400(tmp_path):
    chars = [chr(c) for c in range(32, 127)] + ["\n"]
    template = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
                "{% endif %}{{ m.get('name', m['role']) }}: {{ m['content'] }}\n{% endfor %}assistant:")
    gen = quickdraft.load(str(save_char_model(tmp_path, chars, chat_template=template, decoder=True)), progress=False)
    named = [{"role": "user", "content": "hi", "name": "zed"}]
    assert gen.encode_prompt(named) == gen.tokenizer.encode("zed: hi\nassistant:")
    with serving(gen) as url:
        r = client(url).chat.completions.create(model="tiny", messages=named, max_tokens=3, temperature=0)
        assert r.choices[0].message.content == gen.generate(named, max_new_tokens=3, sampling=GREEDY).text
        r = httpx.post(url + CHAT, json=_with(OK_CHAT, messages=[{"role": "system", "content": "x"}, *named]))
        assert r.status_code == 400 and "refused these messages: System role not supported" in r.json()["error"]["message"]
        assert httpx.get(url + "/health").status_code == 200


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 40) | st.floats(-1, 3, allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
FIELDS = ["model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop",
          "seed", "stream", "stream_options", "n", "user", "prediction", "quickdraft", "logprobs", "tools",
          "presence_penalty", "echo", "safety_identifier", "prompt_cache_key", "nonsense"]
GOOD_VALUES = {
    "model": st.just("tiny"), "max_tokens": st.integers(1, 6), "max_completion_tokens": st.integers(1, 6),
    "messages": st.just([{"role": "user", "content": "hi"}]), "prompt": st.sampled_from(["ab", ["cd"]]),
    "temperature": st.sampled_from([0, 0.5, 1.5]), "stream": st.booleans(), "stop": st.sampled_from(["a", ["b", "c"]]),
    "prediction": st.sampled_from([{"type": "content", "content": "ab"}, {"type": "content", "content": [{"type": "text", "text": "x"}]}]),
    "stream_options": st.just({"include_usage": True}), "quickdraft": st.sampled_from([{"drafter": "lookup"}, {"policy": "openai"}, {"top_k": 3}]),
}


@st.composite
def requests(draw):
    """A valid request with up to 4 fields replaced by good values, random JSON, or removed."""
    path = draw(st.sampled_from([CHAT, COMPLETIONS]))
    body = dict(OK_CHAT if path == CHAT else OK_COMPLETION)
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=4, unique=True)):
        how = draw(st.sampled_from(["good", "good", "random", "remove"]))
        if how == "remove":
            body.pop(name, None)
        elif how == "good" and name in GOOD_VALUES:
            body[name] = draw(GOOD_VALUES[name])
        else:
            body[name] = draw(JSON_VALUES)
    return path, body


def test_fuzzed_bodies_never_get_a_500(chat_folder):
    seen: dict[int, int] = {}
    with serving(quickdraft.load(str(chat_folder), max_context=48, progress=False)) as url, \
            httpx.Client(base_url=url, timeout=30) as http:

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        @given(request=requests())
        def check(request):
            path, body = request
            with http.stream("POST", path, json=body) as r:
                raw = r.read()
            seen[r.status_code] = seen.get(r.status_code, 0) + 1
            assert r.status_code in (200, 400, 404), (body, raw)
            if r.status_code != 200:
                error = json.loads(raw)["error"]
                assert set(error) == {"message", "type", "param", "code"} and isinstance(error["message"], str)
            elif body.get("stream"):
                assert raw.endswith(b"data: [DONE]\n\n") and b'"error"' not in raw
            else:
                doc = json.loads(raw)
                assert doc["choices"][0]["finish_reason"] in ("stop", "length") and "usage" in doc

        check()
        assert httpx.get(url + "/health").status_code == 200
    assert seen.get(400, 0) > 10 and seen.get(200, 0) > 10, seen  # the fuzz reached both sides


# -- concurrency ------------------------------------------------------------------------------------------


def test_concurrent_streaming_clients_each_get_their_own_answer(tiny_url, reference):
    prompts = [f"{chr(97 + i % 26)}{chr(97 + (i * 7) % 26)} x{i}" for i in range(32)]
    expected = [reference.generate(p, chat=False, max_new_tokens=12, sampling=GREEDY).text for p in prompts]

    def one(prompt: str) -> str:
        with httpx.stream("POST", tiny_url + COMPLETIONS, timeout=60, json={
                "model": "tiny", "prompt": prompt, "max_tokens": 12, "temperature": 0, "stream": True}) as r:
            assert r.status_code == 200
            lines = [line for line in r.iter_lines() if line]
        assert lines[-1] == "data: [DONE]"
        return "".join(json.loads(line[6:])["choices"][0]["text"] for line in lines[:-1])

    t0 = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        got = list(pool.map(one, prompts))
    assert got == expected
    assert time.monotonic() - t0 < 30


class SlowRunner(ScriptedRunner):
    """A scripted target whose every pass takes `delay` seconds; counts passes across generations."""

    def __init__(self, *args, delay: float = 0.01, **kw):
        super().__init__(*args, **kw)
        self.delay, self.total_passes = delay, 0

    def forward(self, tokens):
        time.sleep(self.delay)
        self.total_passes += 1
        return super().forward(tokens)


class GatedRunner(ScriptedRunner):
    """A scripted target whose passes wait for `gate`: a generation as long as the test wants."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.gate, self.entered = threading.Event(), threading.Event()

    def forward(self, tokens):
        self.entered.set()
        assert self.gate.wait(30)
        return super().forward(tokens)


def test_a_client_that_leaves_mid_stream_frees_the_model():
    gen = scripted_generator(SlowRunner, "abcdefghij" * 40, max_context=512, delay=0.01)  # 400 passes: ~4 s
    with serving(gen, model_name="slow") as url:
        c = client(url)
        leaving = c.completions.create(model="slow", prompt="hi", max_tokens=400, temperature=0, stream=True,
                                       extra_body=PLAIN)
        chunks = iter(leaving)
        pieces = [next(chunks).choices[0].text for _ in range(3)]
        assert "".join(pieces) == "abc"
        result = {}
        waiting = threading.Thread(target=lambda: result.update(r=c.completions.create(
            model="slow", prompt="hi", max_tokens=5, temperature=0, extra_body=PLAIN)))
        waiting.start()  # queued behind the long generation
        time.sleep(0.1)
        t0 = time.monotonic()
        leaving.close()
        waiting.join(10)
        assert result["r"].choices[0].text == "abcde"
        assert time.monotonic() - t0 < 2.0  # not the ~4 s the long generation would have taken
        assert gen.runner.total_passes < 150
        assert generations(url)["cancelled"] == 1

        # A client that gives up on a non-streamed answer frees the model too.
        passes = gen.runner.total_passes
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + COMPLETIONS, timeout=0.5, json={
                "model": "slow", "prompt": "hi", "max_tokens": 400, "temperature": 0, **PLAIN})
        t0 = time.monotonic()
        r = client(url).completions.create(model="slow", prompt="hi", max_tokens=5, temperature=0, extra_body=PLAIN)
        assert r.choices[0].text == "abcde" and time.monotonic() - t0 < 2.0
        assert gen.runner.total_passes - passes < 150
        assert generations(url)["cancelled"] == 2


def test_full_queue_gets_429_and_health_answers_during_a_long_generation():
    gen = scripted_generator(GatedRunner, max_context=64)
    with serving(gen, model_name="gated", limits={"max_queue": 1}) as url:
        c = client(url)
        results: dict[str, str] = {}

        def ask(name: str) -> None:
            r = c.completions.create(model="gated", prompt="hi", max_tokens=11, temperature=0)
            results[name] = r.choices[0].text

        first = threading.Thread(target=ask, args=("first",))
        first.start()
        assert gen.runner.entered.wait(10)  # the first generation is inside a model pass, held there
        t0 = time.monotonic()
        health = httpx.get(url + "/health", timeout=5).json()
        assert time.monotonic() - t0 < 1.0 and health["running"] is True and health["queued"] == 0
        second = threading.Thread(target=ask, args=("second",))
        second.start()
        deadline = time.monotonic() + 10
        while httpx.get(url + "/health").json()["queued"] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        r = httpx.post(url + COMPLETIONS, json={"model": "gated", "prompt": "hi", "max_tokens": 2})
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        assert r.json()["error"]["code"] == "rate_limit_exceeded"
        assert "429" in httpx.get(url + "/metrics").text
        gen.runner.gate.set()
        first.join(10)
        second.join(10)
        assert results == {"first": "hello world", "second": "hello world"}


def test_request_timeout():
    gen = scripted_generator(SlowRunner, "abcdefghij" * 20, max_context=512, delay=0.05)  # 200 passes: ~10 s
    with serving(gen, model_name="slow", limits={"request_timeout": 0.5}) as url:
        c = client(url)
        t0 = time.monotonic()
        with pytest.raises(openai.APIStatusError) as e:
            c.completions.create(model="slow", prompt="hi", max_tokens=200, temperature=0, extra_body=PLAIN)
        assert e.value.status_code == 504 and e.value.body["code"] == "request_timeout"
        with pytest.raises(openai.APIError, match="time limit"):
            read_stream(c.completions.create(model="slow", prompt="hi", max_tokens=200, temperature=0, stream=True,
                                             extra_body=PLAIN))
        assert time.monotonic() - t0 < 5
        r = c.completions.create(model="slow", prompt="hi", max_tokens=3, temperature=0)
        assert r.choices[0].text == "abc"
        assert generations(url)["timeout"] == 2


# -- the command line -------------------------------------------------------------------------------


def test_an_answer_finished_as_its_deadline_passes_is_delivered_not_timed_out():
    from quickdraft.server.worker import Job, Worker

    gen = scripted_generator()
    events = []
    job = Job(gen.stream("hi", max_new_tokens=3, drafter="none"), lambda kind, value: events.append(kind),
              deadline=time.monotonic() + 60)
    real = job.stream._chunks

    def late_last_chunk():  # the deadline passes while the last step runs
        for chunk in real():
            if chunk.finish_reason is not None:
                job.deadline = 0.0
            yield chunk

    job.stream._chunks = late_last_chunk
    assert Worker(1)._run(job) == "done"
    assert events[-1] == "done" and "timeout" not in events


def test_cli_serve_loads_once_and_runs_uvicorn(chat_folder, monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: seen.update(config=self.config))
    monkeypatch.setenv("QUICKDRAFT_API_KEY", "from-env")
    assert cli.main(["serve", "--model", str(chat_folder), "--port", "8123", "--max-context", "100",
                     "--draft-model", str(chat_folder), "--header-timeout", "3", "--max-connections", "7"]) == 0
    config = seen["config"]
    assert (config.host, config.port, config.timeout_keep_alive) == ("127.0.0.1", 8123, 5.0)
    assert (config.http.header_timeout, config.http.max_connections) == (3.0, 7)  # the guarded protocol
    service = config.app.state.service
    assert service.model_name == str(chat_folder) and service.generator.runner.max_context == 100
    assert service.generator.draft_runner is not None and service.generator.draft_name == str(chat_folder)
    assert "API key required" in capsys.readouterr().err

    def no_load(*a, **k):
        raise AssertionError("loaded the model before checking the options")

    monkeypatch.setattr("quickdraft.loading._Opened", no_load)  # nothing is opened, let alone loaded
    assert cli.main(["serve", "--model", "no-such-model", "--max-queue", "0"]) == 2
    assert "max_queue must be an integer >= 1" in capsys.readouterr().err


def test_a_draft_model_serves_exactly(chat_folder, reference):
    gen = quickdraft.load(str(chat_folder), draft_model=str(chat_folder), draft_precision="int8", progress=False)
    messages = [{"role": "user", "content": "hello there"}]
    plain = reference.generate(messages, drafter="none", max_new_tokens=30, sampling=GREEDY)
    with serving(gen) as url:
        for extension in ({}, {"draft_length": 3}):
            r = client(url).chat.completions.create(model="tiny", messages=messages, max_tokens=30, temperature=0,
                                                    extra_body={"quickdraft": {"drafter": "draft-model", **extension}})
            assert r.choices[0].message.content == plain.text
            stats = r.model_extra["quickdraft"]
            # the draft model ran; how much of it was sent depends on its confidences and this machine's
            # measured pass costs (sizing.py: trim), which a tiny random model and microsecond passes make a toss-up
            assert stats["draft_forwards"] > 0
            used = stats["by_source"].get("draft-model", {"accepted": 0, "rejected": 0})
            assert used["accepted"] + used["rejected"] <= stats["draft_forwards"]
        with pytest.raises(openai.BadRequestError, match="draft_length"):
            client(url).chat.completions.create(model="tiny", messages=messages, max_tokens=5,
                                                extra_body={"quickdraft": {"draft_length": 0}})
        # Ouroboros, with the pool per model and per user
        settings = {"gamma": 6, "branches": 2, "min_joint": 0.8, "branches_by_cost": False, "scope": "user"}
        for extension, user in (({}, {}), ({"ouroboros": settings}, {"user": "u7"}),
                                ({"ouroboros": settings}, {"safety_identifier": "s9", "prompt_cache_key": "k"})):
            r = client(url).chat.completions.create(
                model="tiny", messages=messages, max_tokens=30, temperature=0, **user,
                extra_body={"quickdraft": {"drafter": "ouroboros", **extension}})
            assert r.choices[0].message.content == plain.text
            assert r.model_extra["quickdraft"]["draft_forwards"] > 0
        config = OuroborosConfig(gamma=6, branches=2, min_joint=0.8, branches_by_cost=False)
        assert ("user:u7", config) in gen.phrase_pools and ("user:s9", config) in gen.phrase_pools
        with pytest.raises(openai.BadRequestError, match="needs an end-user id: the request's 'user' or 'safety_identifier'"):
            client(url).chat.completions.create(model="tiny", messages=messages, max_tokens=5, extra_body={
                "quickdraft": {"drafter": "ouroboros", "ouroboros": {"scope": "user"}}})
        for bad, field in (({"gamma": 0}, "gamma"), ({"min_joint": 1.0}, "min_joint")):
            with pytest.raises(openai.BadRequestError, match=field):
                client(url).chat.completions.create(model="tiny", messages=messages, max_tokens=5, extra_body={
                    "quickdraft": {"drafter": "ouroboros", "ouroboros": bad}})


# -- the real model -------------------------------------------------------------------------------------


@pytest.mark.real_model
def test_real_model_chat_with_prediction_equals_the_library():
    gen = quickdraft.load("smollm2-135m", progress=False)
    messages = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
    plain = gen.generate(messages, drafter="none", max_new_tokens=40, sampling=GREEDY)
    prediction = plain.text.replace("def ", "def  ", 1)
    # Counts are compared across two requests, so without draft sizing: it reads pass times from the real clock,
    # which can draft the prediction differently from one request to the next (the text never changes)
    expected = gen.generate(messages, prediction=prediction, max_new_tokens=40, sampling=GREEDY, draft_sizing="off")
    assert expected.text == plain.text
    with serving(gen, model_name="smollm2-135m") as url:
        r = client(url).chat.completions.create(model="smollm2-135m", messages=messages, max_tokens=40, temperature=0,
                                                prediction={"type": "content", "content": prediction},
                                                extra_body={"quickdraft": {"draft_sizing": "off"}})
    assert r.choices[0].message.content == expected.text
    assert r.usage.completion_tokens == expected.stats.completion_tokens
    d = r.usage.completion_tokens_details
    assert d.accepted_prediction_tokens == expected.stats.accepted_prediction_tokens > 20
    assert d.rejected_prediction_tokens == expected.stats.rejected_prediction_tokens


@pytest.mark.real_model
def test_llama_cpp_runner_served_equals_the_library():
    """The server on the llama.cpp runner (generations run on the worker thread): the same text as the
    library, streamed and not. Accepted counts are not compared exactly: on llama.cpp drafts are sized
    from measured timings (sizing.py), which changes how many tokens are drafted, never the output."""
    gen = quickdraft.load("smollm2-135m", runner="llama.cpp", max_context=2048, progress=False)
    messages = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
    plain = gen.generate(messages, drafter="none", max_new_tokens=40, sampling=GREEDY)
    prediction = plain.text.replace("def ", "def  ", 1)
    with serving(gen, model_name="smollm2-135m") as url:
        c = client(url)
        r = c.chat.completions.create(model="smollm2-135m", messages=messages, max_tokens=40, temperature=0,
                                      prediction={"type": "content", "content": prediction})
        stream = c.chat.completions.create(model="smollm2-135m", messages=messages, max_tokens=40, temperature=0,
                                           stream=True, stream_options={"include_usage": True})
        streamed, finish, usage = read_stream(stream)
    assert r.choices[0].message.content == plain.text == streamed
    assert r.usage.completion_tokens == plain.stats.completion_tokens == usage.completion_tokens
    assert r.usage.completion_tokens_details.accepted_prediction_tokens > 10


def test_lookup_options_reach_every_lookup_setting():
    """The request's quickdraft.lookup has a field for each LookupConfig setting, and each reaches the drafter's
    config: none is unreachable, none dropped."""
    from dataclasses import fields

    from quickdraft.drafters.lookup import LookupConfig
    from quickdraft.server.schemas import LookupOptions

    assert set(LookupOptions.model_fields) == {f.name for f in fields(LookupConfig)}
    changed = {"max_ngram": 4, "min_ngram": 2, "num_tokens": 9, "single_match_tokens": 1, "prefer": "latest",
               "growth": 0, "max_tokens": 40}
    assert LookupOptions(**changed).config() == LookupConfig(**changed)
    assert LookupOptions().config() == LookupConfig()
    from typing import get_args

    from quickdraft.drafters.lookup import PREFER

    assert set(get_args(LookupOptions.model_fields["prefer"].annotation)) == set(PREFER)
