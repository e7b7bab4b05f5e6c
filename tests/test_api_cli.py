"""The public API and the CLI: bad input fails clearly before any work; a full CLI run on a tiny
model saved to disk gives the same output with and without drafts."""

from __future__ import annotations

import io
import json
import os
import re

import pytest
from transformers import Lfm2Config, Lfm2ForCausalLM

from quickdraft import SamplingParams, cli
from quickdraft.api import Generator
from quickdraft.drafters.draft_model import DraftModelConfig
from quickdraft.drafters.lookup import LookupConfig
from quickdraft.drafters.ouroboros import OuroborosConfig
from quickdraft.errors import QuickdraftError, UnsupportedModelError
from quickdraft.runners import ScriptedRunner
from quickdraft.runners.hf import HFRunner
from quickdraft.tokenizer import ByteTokenizer


@pytest.fixture
def scripted():
    tok = ByteTokenizer()
    return Generator(ScriptedRunner(tok.encode("hello world, hello again"), 257, tok.eos, max_context=64), tok)


@pytest.mark.parametrize(
    "prompt,options,message",
    [
        ("", {}, "prompt is empty"),
        ([], {}, "messages is empty"),
        (42, {}, "prompt must be a string or a list of messages"),
        ("x" * 64, {}, "context holds 64"),
        ("hi", {"max_new_tokens": 0}, "max_new_tokens must be a positive integer"),
        ("hi", {"max_new_tokens": -3}, "max_new_tokens must be a positive integer"),
        ("hi", {"prediction": 7}, "prediction must be a string or a list of text parts; got int"),
        ("hi", {"prediction": [{"type": "image", "url": "x"}]}, "prediction[0] must be a text part"),
        ("hi", {"drafter": "magic"}, "drafter must be one of"),
        ("hi", {"drafter": "prediction"}, "needs a prediction"),
        ("hi", {"drafter": "none", "prediction": "x"}, "would ignore it"),
        ("hi", {"policy": "fast"}, "policy must be 'default' or 'openai'"),
        ("hi", {"stop": 3}, "stop must be a string or a list of strings"),
        ("hi", {"stop": [""]}, "must not be empty"),
        ("hi", {"sampling": {"temperature": 1}}, "sampling must be a SamplingParams"),
        ([{"role": "user", "content": "hi"}], {}, "no chat template"),
        ([{"role": "user", "content": "hi", "tool_calls": []}], {}, "keys a chat template is not given: 'tool_calls'"),
        ([{"role": "user", "content": "hi", "name": 3}], {}, "name must be a string"),
        ("a\udcffb", {}, "prompt is not valid Unicode text"),
        ("hi", {"drafter": "none", "lookup": LookupConfig(num_tokens=3)}, "lookup settings were given"),
        ("hi", {"drafter": "lookup", "ouroboros": OuroborosConfig(gamma=4)}, "ouroboros settings were given"),
        ("hi", {"draft": DraftModelConfig(k=3)}, "draft_length) were given, but this request drafts with 'lookup'"),
        ("hi", {"policy": "openai"}, "policy 'openai' applies to a prediction"),
        ("hi", {"drafter": "lookup", "pool_scope": "user:42"}, "pool_scope 'user:42' names an Ouroboros phrase pool"),
        ("hi", {"prediction": [{"type": "text", "text": "\ud800"}]}, "prediction is not valid Unicode text"),
    ],
)
def test_bad_input_fails_before_any_work(scripted, prompt, options, message):
    with pytest.raises(QuickdraftError, match=re.escape(message)):
        scripted.stream(prompt, **options)
    assert scripted.runner.passes == 0


def test_auto_drafts_by_lookup_where_the_prediction_has_nothing():
    """drafter "auto" with a prediction is prediction+lookup: past the prediction's end, lookup drafts the output's
    repeat ("hello world" again); the prediction alone, and "auto" under policy "openai", draft nothing there. The
    output is the target's either way, and the counts add up across sources."""
    tok = ByteTokenizer()
    text = "hello world, hello world again"
    g = Generator(ScriptedRunner(tok.encode(text), 257, tok.eos, max_context=64), tok)
    runs = {name: g.generate("hi", prediction="hello", draft_sizing="off", **options)
            for name, options in (("auto", {}), ("openai", {"policy": "openai"}), ("prediction", {"drafter": "prediction"}))}
    assert all(r.text == text for r in runs.values())
    assert {"prediction", "lookup"} <= set(runs["auto"].stats.by_source) <= {"prediction", "lookup", "lookup-short"}
    assert set(runs["openai"].stats.by_source) == set(runs["prediction"].stats.by_source) == {"prediction"}
    assert runs["auto"].stats.target_passes < runs["prediction"].stats.target_passes
    s = runs["auto"].stats
    assert s.accepted_prediction_tokens == sum(a for a, _ in s.by_source.values())


def test_prediction_as_text_parts_equals_string(scripted):
    # sizing off: the counts compared across two requests would otherwise follow measured pass times (the
    # cap decides how much of the prediction is drafted), which vary between the two on a real clock
    a = scripted.generate("hi", prediction="hello world", draft_sizing="off")
    b = scripted.generate("hi", prediction=[{"type": "text", "text": "hello "}, {"type": "text", "text": "world"}],
                          draft_sizing="off")
    assert a.token_ids == b.token_ids and a.stats.as_dict()["accepted_prediction_tokens"] == b.stats.accepted_prediction_tokens


def test_stream_pieces_add_up_to_the_text(scripted):
    s = scripted.stream("hi", prediction="hello world, hello", stop=["again"])
    pieces = [c.text for c in s]
    assert "".join(pieces) == s.result.text == "hello world, hello "
    assert s.result.finish_reason == "stop"
    assert "".join(t for t, _ in s.result.segments) == s.result.text


def test_model_whose_cache_cannot_be_rolled_back_is_refused():
    config = Lfm2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, layer_types=["conv", "full_attention"])
    with pytest.raises(UnsupportedModelError, match="cannot be rolled back"):
        HFRunner(Lfm2ForCausalLM(config))


# -- the CLI, end to end on a tiny model saved as a transformers folder ---------------------------


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_generate_json_compare(tiny_folder, tmp_path, capsys):
    code, out, _ = run_cli(capsys, "generate", "--model", str(tiny_folder), "--max-new-tokens", "40", "--json", "abc def")
    assert code == 0
    plain = json.loads(out)
    pred = tmp_path / "pred.txt"
    pred.write_text(plain["text"][:25] + "xyz" + plain["text"][28:])
    code, out, _ = run_cli(capsys, "generate", "--model", str(tiny_folder), "--max-new-tokens", "40", "--json",
                           "--prediction", str(pred), "--compare", "abc def")
    assert code == 0
    doc = json.loads(out)
    assert doc["compare"]["identical"] is True
    assert doc["token_ids"] == plain["token_ids"]
    assert doc["stats"]["accepted_prediction_tokens"] > 0
    assert doc["stats"]["accepted_prediction_tokens"] == sum(doc["from_draft"])


@pytest.mark.parametrize("kernels", ["torch", "onednn"])
def test_cli_kernels(tiny_folder, capsys, kernels):
    code, out, _ = run_cli(capsys, "generate", "--model", str(tiny_folder), "--kernels", kernels, "--max-new-tokens",
                           "24", "--json", "--drafter", "lookup", "--compare", "abc abc abc")
    assert code == 0 and json.loads(out)["compare"]["identical"] is True


def test_cli_prompt_from_file_and_plain_output(tiny_folder, tmp_path, capsys):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("abc def")
    code, out, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "--max-new-tokens", "10",
                             "--prompt-file", str(prompt), "--drafter", "lookup")
    assert code == 0
    assert "\033[" not in out  # not a terminal: no colour codes
    assert " tokens, " in err and "passes" in err and "finish: " in err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--model", "no-such-model", "hi"], "known aliases"),
        (["--model", "./missing/folder", "hi"], "not found"),
        (["--max-new-tokens", "0", "hi"], "max_new_tokens must be a positive integer"),
        (["--prediction", "/nonexistent/file", "hi"], "cannot read prediction file"),
        (["--prompt-file", "/nonexistent/p", ], "cannot read prompt file"),
        (["hi", "--prompt-file", "x"], "either as an argument or with --prompt-file"),
        (["--temperature", "-1", "hi"], "temperature must be a finite number >= 0"),
        (["--top-p", "0", "hi"], "top_p must be in (0, 1]"),
        (["--model", "no-such-model", "--max-new-tokens", "0", "hi"], "max_new_tokens must be a positive integer"),
        # checked before the model is looked for, let alone loaded (an alias not cached yet is a download)
        (["--model", "no-such-model", "--drafter", "prediction", "hi"], "needs a prediction"),
        (["--model", "no-such-model", "--drafter", "lookup", "--prediction", __file__, "hi"], "would ignore it"),
        (["--model", "no-such-model", "--draft-length", "4", "hi"],
         "draft_length) were given, but this request drafts with 'lookup'"),
        (["--model", "no-such-model", "--ouroboros", "gamma=4", "hi"], "ouroboros settings were given"),
        (["--model", "no-such-model", "--policy", "openai", "hi"], "policy 'openai' applies to a prediction"),
        (["--model", "no-such-model", "--system", "be brief", "--chat", "no", "hi"], "--system is a chat message"),
        (["--model", "no-such-model", "--max-context", "-5", "hi"], "max_context must be an integer >= 2"),
        (["--model", "no-such-model", "--draft-runner", "llama.cpp", "hi"], "draft_runner applies to a draft model"),
        (["--model", "no-such-model", "--temperature", "0.8", "--seed", str(2**70), "hi"], "seed must be an integer in"),
        (["--model", "no-such-model", "--temperature", "inf", "hi"], "temperature must be a finite number"),
        (["--system", "be brief", "hi"], "this model's tokenizer has no chat template"),
        # a draft model's bad name before the target is pulled (an alias not cached yet: a download)
        (["--model", "smollm2-135m", "--draft-model", "/nonexistent/draft", "hi"], "model file or folder not found"),
    ],
)
def test_cli_bad_input(tiny_folder, capsys, monkeypatch, tmp_path, argv, message):
    monkeypatch.setenv("QUICKDRAFT_HOME", str(tmp_path))  # no alias is cached: resolving one would pull it
    monkeypatch.setattr("quickdraft.models.pull", lambda *a, **k: pytest.fail("a model was pulled"))
    argv = argv if "--model" in argv else ["--model", str(tiny_folder), *argv]
    code, _, err = run_cli(capsys, "generate", *argv)
    assert code == 2
    assert message in err


def test_cli_refuses_text_that_is_not_utf8(tiny_folder, tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"def f():\xff\xfe\n")
    for flag in ("--prediction", "--prompt-file", "--edit"):
        argv = [flag, str(bad)] + ([] if flag == "--prompt-file" else ["hi"])
        code, _, err = run_cli(capsys, "generate", "--model", str(tiny_folder), *argv)
        assert code == 2 and f"{str(bad)!r} is not UTF-8 text (byte 8" in err, (flag, err)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"ab\xffc")))
    code, _, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "-")
    assert code == 2 and "standard input is not UTF-8 text" in err


def test_cli_json_compare_exits_3_where_the_outputs_differ(tiny_folder, capsys, monkeypatch):
    """--compare's exit code says whether the greedy outputs differ, with --json as without (made to differ)."""
    real = cli._comparison
    monkeypatch.setattr(cli, "_comparison", lambda a, b: {**real(a, b), "identical": False})
    argv = ["generate", "--model", str(tiny_folder), "--max-new-tokens", "8", "--compare", "abc"]
    assert run_cli(capsys, *argv)[0] == 3
    code, out, _ = run_cli(capsys, *argv, "--json")
    assert code == 3 and json.loads(out)["compare"]["identical"] is False


def test_cli_stops_quietly_when_the_reader_goes_away(tiny_folder, tmp_path, capsys, monkeypatch):
    class Closed(io.StringIO):  # a pipe whose reader exited (| head -c 1)
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            return os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)

    monkeypatch.setattr("sys.stdout", Closed())
    assert cli.main(["generate", "--model", str(tiny_folder), "--max-new-tokens", "8", "abc"]) == 141


def test_a_stream_runs_once(scripted):
    stream = scripted.stream("hi", max_new_tokens=4)
    assert "".join(c.text for c in stream) == stream.result.text
    passes = stream.result.stats.target_passes
    with pytest.raises(QuickdraftError, match="a Stream runs once"):
        list(stream)
    assert stream.result.stats.target_passes == passes


@pytest.mark.parametrize("fields, message", [
    ({"seed": 2**64}, "seed must be an integer in"), ({"seed": -2**63 - 1}, "seed must be an integer in"),
    ({"seed": True}, "seed must be an integer"), ({"top_k": True}, "top_k must be an integer"),
    ({"temperature": float("inf")}, "finite"), ({"temperature": float("nan")}, "finite"),
    ({"temperature": True}, "temperature must be"), ({"top_p": True}, "top_p must be")])
def test_sampling_params_refuse_what_would_fail_later(fields, message):
    with pytest.raises(QuickdraftError, match=message):
        SamplingParams(**fields)
    SamplingParams(seed=2**64 - 1)
    SamplingParams(seed=-2**63)


@pytest.mark.parametrize("fields, message", [
    ({"max_context": 0}, "max_context must be an integer >= 2"), ({"max_context": "8"}, "max_context must be"),
    ({"max_context": True}, "max_context must be"), ({"threads": 0, "runner": "llama.cpp"}, "threads must be"),
    ({"draft_runner": "transformers"}, "draft_runner applies to a draft model")])
def test_load_options_refuse_bad_numbers_and_orphans(fields, message):
    from quickdraft.options import LoadOptions

    with pytest.raises(QuickdraftError, match=message):
        LoadOptions(**fields)


def test_cli_models_list_and_unknown(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("QUICKDRAFT_HOME", str(tmp_path))
    code, out, _ = run_cli(capsys, "models", "list")
    assert code == 0 and "qwen2.5-coder-0.5b" in out and str(tmp_path) in out
    code, _, err = run_cli(capsys, "models", "rm", "nope")
    assert code == 2 and "smollm2-135m" in err and "models rm takes an alias" in err


def test_cli_sampling_compare(tiny_folder, capsys):
    code, out, err = run_cli(capsys, "generate", "--model", str(tiny_folder), "--max-new-tokens", "12",
                             "--temperature", "0.8", "--seed", "3", "--compare", "abc def")
    assert code == 0
    assert "identical output: n/a (sampled)" in err
    again = run_cli(capsys, "generate", "--model", str(tiny_folder), "--max-new-tokens", "12",
                    "--temperature", "0.8", "--seed", "3", "abc def")
    assert again[1].strip() == out.strip()  # same seed, same text


def test_edit_request_puts_the_instruction_after_the_file():
    from quickdraft.prompts import edit_request

    message, prediction = edit_request("Rename f to g.", "def f():\n    pass\n", "m.py")
    assert prediction == "```python\ndef f():\n    pass\n```"
    assert message.startswith(prediction) and message.index("Rename f to g.") > len(prediction)


class ChatBytes(ByteTokenizer):
    """Bytes with a trivial chat template: "user: {content}\\n"."""

    @property
    def has_chat_template(self) -> bool:
        return True

    def encode_chat(self, messages):
        return self.encode("".join(f"{m['role']}: {m['content']}\n" for m in messages))


@pytest.mark.parametrize("prompt, message", [("x" * 64, "context holds 64"), ("", "prompt is empty")])
def test_a_string_sent_as_chat_is_checked_like_any_prompt(prompt, message):
    """encode_prompt(str, chat=True) used to return before the empty-prompt and context checks."""
    tok = ChatBytes()
    gen = Generator(ScriptedRunner(tok.encode("hello"), 257, tok.eos, max_context=64), tok)
    with pytest.raises(QuickdraftError, match=message):
        gen.stream(prompt, chat=True)
    assert gen.runner.passes == 0
    assert gen.generate("hi", chat=True, max_new_tokens=3).prompt_token_ids == tok.encode("user: hi\n")
