"""The server under attack: the catalogue in hostile.py against a live server on loopback, then what a
single request cannot show (slow clients, too many connections, a big request ahead of a small one, a
worker thread that dies, CORS, errors that must not leak).

Every case asserts its exact status, an OpenAI error object where one is due, and that /health answers
within a second while the case runs and after it.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest

from conftest import save_char_model
from hostile import CASES, CHAT, COMPLETIONS, JSON_TYPE, OK_CHAT, Case
from test_server import SlowRunner, generations, scripted_generator, serving

import quickdraft
from quickdraft import cli
from quickdraft.errors import QuickdraftError
from quickdraft.server import ServerLimits, create_app
from quickdraft.tokenizer import ByteTokenizer

HEALTH_LIMIT = 1.0  # seconds /health may take, during any case and after it
QUICK = {"header_timeout": 1.0, "body_timeout": 1.5, "keep_alive_timeout": 1.0}


@pytest.fixture(scope="module")
def hostile_url(tmp_path_factory):
    chars = [chr(c) for c in range(32, 127)] + ["\n"]
    template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    folder = save_char_model(tmp_path_factory.mktemp("hostile-model"), chars, chat_template=template, decoder=True)
    gen = quickdraft.load(str(folder), progress=False)
    assert gen.runner.max_context == 512  # the catalogue's CONTEXT
    with serving(gen, limits=QUICK) as url:
        yield url


def send(url: str, case: Case) -> tuple[int, dict[str, str], bytes]:
    if "Content-Length" in case.headers:  # a length that is not the body's: only a raw socket sends that
        return send_raw(url, case)
    with httpx.Client(base_url=url, timeout=60) as http:
        r = http.request(case.method, case.path, content=case.content(), headers=case.headers)
        return r.status_code, dict(r.headers), r.content


def send_raw(url: str, case: Case) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        head = f"{case.method} {case.path} HTTP/1.1\r\nHost: {host}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in case.headers.items()) + "\r\n"
        sock.sendall(head.encode() + (case.content() or b""))
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def health_during(url: str, action) -> tuple[object, list[float]]:
    """Run action() in a thread, timing /health every 0.1 s meanwhile and once after it."""
    out: dict = {}

    def run():
        try:
            out["value"] = action()
        except BaseException as e:  # noqa: BLE001 - reported below
            out["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    times = []
    with httpx.Client(timeout=10) as http:
        while True:
            done = not thread.is_alive()
            t0 = time.monotonic()
            assert http.get(url + "/health").status_code == 200
            times.append(time.monotonic() - t0)
            if done:
                break
            time.sleep(0.1)
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"], times


def check_answer(case: Case, status: int, headers: dict[str, str], body: bytes) -> None:
    assert status == case.status, (case.name, status, body[:300])
    if status >= 400:
        error = json.loads(body)["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"], (case.name, error)
        if case.code is not None:
            assert error["code"] == case.code, (case.name, error)
        assert "Traceback" not in error["message"] and "Error:" not in error["message"], error
    elif case.body and isinstance(case.body, dict) and case.body.get("stream"):
        assert body.endswith(b"data: [DONE]\n\n") and b'"error"' not in body, (case.name, body[-300:])
    elif case.method == "POST":
        doc = json.loads(body)
        assert doc["choices"][0]["finish_reason"] in ("stop", "length"), (case.name, doc)
    assert headers.get("x-content-type-options") == "nosniff", (case.name, headers)


def test_the_catalogue_is_large_and_named_once():
    names = [c.name for c in CASES]
    assert len(CASES) >= 100 and len(set(names)) == len(names)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_request(hostile_url, case):
    (status, headers, body), times = health_during(hostile_url, lambda: send(hostile_url, case))
    check_answer(case, status, headers, body)
    assert max(times) < HEALTH_LIMIT, (case.name, times)


def test_no_hostile_request_did_model_work_it_should_not(hostile_url):
    """After the whole catalogue the server is up, counts no error and no 5xx, and still answers correctly."""
    text = httpx.get(hostile_url + "/metrics").text
    assert 'outcome="error"} 0' in text
    assert not [line for line in text.splitlines() if line.startswith("quickdraft_http_requests_total")
                and 'status="5' in line], text
    r = httpx.post(hostile_url + CHAT, json={**OK_CHAT, "temperature": 0})
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] in ("stop", "length")


# -- slow and greedy clients -----------------------------------------------------------------------


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closed the connection within `seconds`, and what it sent before."""
    sock.settimeout(seconds)
    data = b""
    try:
        while piece := sock.recv(65536):
            data += piece
        return True, data
    except (socket.timeout, TimeoutError):
        return False, data
    except ConnectionResetError:
        return True, data


def test_headers_that_never_finish_are_cut_off(hostile_url):
    with _connect(hostile_url) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        t0 = time.monotonic()
        closed, _ = _closed_within(sock, 5)
        assert closed and time.monotonic() - t0 < QUICK["header_timeout"] + 1.0
    with _connect(hostile_url) as sock:  # trickling a byte at a time does not reset the clock
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        t0 = time.monotonic()
        for byte in b"X-Slow: yes":
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.2)
        closed, _ = _closed_within(sock, 3)
        assert closed and time.monotonic() - t0 < QUICK["header_timeout"] + 2.5


def test_a_body_that_trickles_in_gets_408(hostile_url):
    with _connect(hostile_url) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"model\": ")
        t0 = time.monotonic()
        closed, data = _closed_within(sock, 6)
        assert data.startswith(b"HTTP/1.1 408") and b'"request_timeout"' in data, data[:300]
        assert time.monotonic() - t0 < QUICK["body_timeout"] + 1.5


def test_an_idle_kept_alive_connection_is_closed(hostile_url):
    with _connect(hostile_url) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        closed, data = _closed_within(sock, QUICK["keep_alive_timeout"] + 2)
        assert data.startswith(b"HTTP/1.1 200") and closed


def test_connections_past_the_cap_get_503_and_are_closed():
    with serving(scripted_generator(), model_name="scripted", limits={"max_connections": 3}) as url:
        held = [_connect(url) for _ in range(3)]
        try:
            time.sleep(0.2)
            with _connect(url) as extra:
                closed, data = _closed_within(extra, 3)
            assert closed and data.startswith(b"HTTP/1.1 503") and b'"too_many_connections"' in data
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.2)
        assert httpx.get(url + "/health").status_code == 200  # room again once they are gone


def test_concurrent_streams_flood(hostile_url):
    def one(i):
        body = {**OK_CHAT, "messages": [{"role": "user", "content": f"flood {i}"}], "stream": True, "max_tokens": 8}
        with httpx.Client(timeout=60) as http:
            r = http.post(hostile_url + CHAT, json=body)
            return r.status_code, r.content

    def flood():
        results = [None] * 24
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, one(i))) for i in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return results

    results, times = health_during(hostile_url, flood)
    assert all(status == 200 and body.endswith(b"data: [DONE]\n\n") for status, body in results)
    assert max(times) < HEALTH_LIMIT, times


# -- preparation does not block --------------------------------------------------------------------


class SlowTokenizer(ByteTokenizer):
    """Tokenising a long text takes seconds (as a multi-megabyte prediction does with a real tokenizer)."""

    def encode(self, text, add_special_tokens=True):
        if len(text) > 200:
            time.sleep(3.0)
        return super().encode(text, add_special_tokens)


def test_a_small_request_does_not_wait_behind_a_big_ones_preparation():
    tok = SlowTokenizer()
    from quickdraft.api import Generator
    from quickdraft.runners import ScriptedRunner

    gen = Generator(ScriptedRunner(tok.encode("hello world"), 257, tok.eos, max_context=4096), tok)
    with serving(gen, model_name="scripted") as url:
        big = {"model": "scripted", "prompt": "p", "max_tokens": 4, "temperature": 0,
               "prediction": {"type": "content", "content": "x" * 1000}}
        small = {"model": "scripted", "prompt": "p", "max_tokens": 4, "temperature": 0}
        slow = threading.Thread(target=lambda: httpx.post(url + COMPLETIONS, json=big, timeout=30))
        slow.start()
        time.sleep(0.3)  # the big one is being tokenised
        t0 = time.monotonic()
        r = httpx.post(url + COMPLETIONS, json=small, timeout=30)
        waited = time.monotonic() - t0
        slow.join(30)
        assert r.status_code == 200 and r.json()["choices"][0]["text"] == "hell"
        assert waited < 1.0, waited


def test_queue_full_is_answered_before_tokenising():
    tok = SlowTokenizer()
    from quickdraft.api import Generator

    class Gated(SlowRunner):
        gate = threading.Event()

        def forward(self, tokens):
            assert self.gate.wait(30)
            return super().forward(tokens)

    gen = Generator(Gated(tok.encode("hello world"), 257, tok.eos, max_context=4096), tok)
    with serving(gen, model_name="scripted", limits={"max_queue": 1}) as url:
        body = {"model": "scripted", "prompt": "p", "max_tokens": 4, "temperature": 0}
        threads = [threading.Thread(target=lambda: httpx.post(url + COMPLETIONS, json=body, timeout=30))
                   for _ in range(2)]
        for t in threads:  # one runs (held at the gate), one waits
            t.start()
            time.sleep(0.3)
        t0 = time.monotonic()
        r = httpx.post(url + COMPLETIONS, json={**body, "prompt": "q" * 1000}, timeout=30)  # would take 3 s to tokenise
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limit_exceeded"
        assert time.monotonic() - t0 < 1.0
        Gated.gate.set()
        for t in threads:
            t.join(30)


# -- the worker is supervised; errors do not leak ----------------------------------------------------


class WorkerKilled(BaseException):
    """Not an Exception: what ends a thread (as SystemExit or an exception raised into it would)."""


class KillingRunner(SlowRunner):
    kills = 1

    def forward(self, tokens):
        if KillingRunner.kills:
            KillingRunner.kills -= 1
            raise WorkerKilled("the worker thread is killed")
        return super().forward(tokens)


def test_a_killed_worker_thread_fails_its_request_and_is_restarted():
    gen = scripted_generator(KillingRunner, "abcdefgh", max_context=512)
    with serving(gen, model_name="k") as url:
        body = {"model": "k", "prompt": "hi", "max_tokens": 4, "temperature": 0, "quickdraft": {"drafter": "none"}}
        r = httpx.post(url + COMPLETIONS, json=body, timeout=30)
        assert r.status_code == 500
        error = r.json()["error"]
        assert error["type"] == "server_error" and "request id req_" in error["message"]
        assert "killed" not in error["message"] and "WorkerKilled" not in error["message"]
        health = httpx.get(url + "/health").json()
        assert health["worker_restarts"] == 1 and health["status"] == "ok"
        r = httpx.post(url + COMPLETIONS, json=body, timeout=30)
        assert r.status_code == 200 and r.json()["choices"][0]["text"] == "abcd"
        metrics = httpx.get(url + "/metrics").text
        assert "quickdraft_worker_restarts_total 1" in metrics
        assert 'route="/v1/completions",status="500"} 1' in metrics
        assert generations(url)["error"] == 1


def test_an_unexpected_error_is_a_500_with_an_id_counted_in_metrics(monkeypatch):
    gen = scripted_generator()

    def broken(*args, **kwargs):
        raise RuntimeError("secret internal state /etc/shadow")

    monkeypatch.setattr(gen, "stream", broken)
    with serving(gen, model_name="scripted") as url:
        r = httpx.post(url + COMPLETIONS, json={"model": "scripted", "prompt": "hi", "max_tokens": 2}, timeout=30)
        assert r.status_code == 500
        error = r.json()["error"]
        assert "request id req_" in error["message"] and "secret" not in error["message"]
        metrics = httpx.get(url + "/metrics").text
        assert 'route="/v1/completions",status="500"} 1' in metrics
        assert httpx.get(url + "/health").status_code == 200


# -- browsers ----------------------------------------------------------------------------------------


def test_cors_only_for_named_origins():
    with serving(scripted_generator(), model_name="scripted", cors_origins=("https://app.example",)) as url:
        ask = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
        ok = httpx.options(url + COMPLETIONS, headers={"Origin": "https://app.example", **ask})
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "https://app.example"
        bad = httpx.options(url + COMPLETIONS, headers={"Origin": "https://evil.test", **ask})
        assert bad.status_code == 400 and "access-control-allow-origin" not in bad.headers
        assert "origin" in bad.json()["error"]["message"].lower()
        r = httpx.post(url + COMPLETIONS, json={"model": "scripted", "prompt": "hi", "max_tokens": 2},
                       headers={"Origin": "https://evil.test"})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    with serving(scripted_generator(), model_name="scripted") as url:  # off by default
        r = httpx.post(url + COMPLETIONS, json={"model": "scripted", "prompt": "hi", "max_tokens": 2},
                       headers={"Origin": "https://app.example"})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_allowed_hosts_widen_the_host_check():
    from quickdraft.server import HostPolicy

    with serving(scripted_generator(), model_name="scripted", hosts=HostPolicy(allowed=("api.internal",))) as url:
        assert httpx.get(url + "/health", headers={"Host": "api.internal:8000"}).status_code == 200
        assert httpx.get(url + "/v1/models", headers={"Host": "api.internal"}).status_code == 200
        assert httpx.get(url + "/v1/models", headers={"Host": "other.internal"}).status_code == 400
    assert HostPolicy(listen="0.0.0.0").allows("192.168.1.20:8000")  # any address when listening on all
    assert not HostPolicy(listen="0.0.0.0").allows("rebind.example")
    assert HostPolicy(listen="127.0.0.1").allows("[::1]:8000") and HostPolicy(allowed=("*",)).allows("x.y")
    assert not HostPolicy(listen="127.0.0.1").allows("10.0.0.1")


def test_the_playground_cannot_be_framed(hostile_url):
    r = httpx.get(hostile_url + "/")
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"


def test_an_empty_api_key_is_refused(monkeypatch, capsys):
    with pytest.raises(QuickdraftError, match="empty"):
        create_app(scripted_generator(), model_name="x", api_key="")
    assert cli.main(["serve", "--model", "nowhere", "--api-key", ""]) == 2
    assert "--api-key is empty" in capsys.readouterr().err
    monkeypatch.setenv("QUICKDRAFT_API_KEY", " ")
    assert cli.main(["serve", "--model", "nowhere", "--engine", "vllm"]) == 2
    assert "QUICKDRAFT_API_KEY is empty" in capsys.readouterr().err


def test_limits_are_checked():
    for bad in ({"header_timeout": 0}, {"body_timeout": float("inf")}, {"max_connections": 0},
                {"keep_alive_timeout": -1}, {"max_body_bytes": 10}, {"max_queue": True}):
        with pytest.raises(QuickdraftError):
            ServerLimits(**bad)
    with pytest.raises(QuickdraftError, match="cors-origin"):
        create_app(scripted_generator(), model_name="x", cors_origins=("https://a.example/path",))


# -- the sampler cannot make NaN (library and server alike) --------------------------------------------


def test_tiny_temperatures_and_top_p_cannot_make_nan():
    import torch

    from quickdraft import SamplingParams
    from quickdraft.sampling import GREEDY_BELOW, probs_from_logits

    assert SamplingParams(temperature=1e-300).greedy and SamplingParams(temperature=GREEDY_BELOW / 2).greedy
    assert not SamplingParams(temperature=GREEDY_BELOW).greedy
    logits = torch.tensor([[3.0, 1.0, -2.0, 0.5], [0.0, 0.0, 7.0, 1.0]])
    for params in (SamplingParams(temperature=GREEDY_BELOW, top_p=1e-300), SamplingParams(temperature=1, top_p=5e-324),
                   SamplingParams(temperature=2, top_k=10**18, top_p=1e-300)):
        probs = probs_from_logits(logits, params)
        assert torch.isfinite(probs).all() and torch.equal(probs.argmax(-1), logits.argmax(-1))
        assert torch.allclose(probs.sum(-1), torch.ones(2))
    probs = probs_from_logits(logits, SamplingParams(temperature=1, top_p=1e-300))
    assert torch.equal(probs, torch.nn.functional.one_hot(logits.argmax(-1), 4).float())  # only the likeliest


def test_a_tiny_temperature_decodes_as_greedy_in_the_library():
    gen = scripted_generator(script="hello world")
    from quickdraft import SamplingParams

    greedy = gen.generate("hi", chat=False, max_new_tokens=8, drafter="none").text
    assert gen.generate("hi", chat=False, max_new_tokens=8, sampling=SamplingParams(temperature=1e-45)).text == greedy


class ThreadRecordingRunner(KillingRunner):
    threads: set = set()

    def forward(self, tokens):
        ThreadRecordingRunner.threads.add(threading.current_thread().name)
        return super().forward(tokens)


def test_quickdraft_serve_generates_on_the_main_thread_and_restarts_its_loop():
    """http.serve (what `quickdraft serve` runs): uvicorn on a thread, generations on the calling thread, where
    a loop that dies fails its request and starts again in place."""
    import uvicorn

    from quickdraft.server import http

    KillingRunner.kills = 1
    gen = scripted_generator(ThreadRecordingRunner, "abcdefgh", max_context=512)
    app = create_app(gen, model_name="m")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = uvicorn.Server(http.config(app, ServerLimits(), host="127.0.0.1", port=port, log_level="warning"))
    seen = {}

    def use():
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        body = {"model": "m", "prompt": "hi", "max_tokens": 4, "temperature": 0, "quickdraft": {"drafter": "none"}}
        url = f"http://127.0.0.1:{port}"
        seen["first"] = httpx.post(url + COMPLETIONS, json=body, timeout=30).status_code
        seen["second"] = httpx.post(url + COMPLETIONS, json=body, timeout=30).json()["choices"][0]["text"]
        seen["health"] = httpx.get(url + "/health").json()
        server.should_exit = True

    threading.Thread(target=use, daemon=True).start()
    http.serve(server, app.state.service.worker)
    assert seen["first"] == 500 and seen["second"] == "abcd"
    assert seen["health"]["worker_restarts"] == 1
    assert ThreadRecordingRunner.threads == {threading.main_thread().name}
