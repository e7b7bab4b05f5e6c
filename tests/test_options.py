"""quickdraft.options.LoadOptions: every model option checked before anything loads, in one place."""

from __future__ import annotations

import pytest

from quickdraft import cli
from quickdraft.errors import QuickdraftError
from quickdraft.options import LoadOptions


@pytest.mark.parametrize("options, message", [
    (dict(runner="vllm"), "runner must be one of transformers, llama.cpp; got 'vllm'"),
    (dict(draft_model="d", draft_runner="onnx"), "draft_runner must be one of"),
    (dict(draft_precision="int4", draft_model="d"), "draft_precision must be one of int8, bf16, fp32"),
    (dict(draft_precision="fp32"), "draft_precision applies to a draft model"),
    (dict(draft_precision="fp32", draft_model="d", draft_runner="llama.cpp"), "draft_precision applies"),
    (dict(kernels="mkl"), "kernels must be one of auto, onednn, torch; got 'mkl'"),
    (dict(kernels="onednn", runner="llama.cpp"), "kernels applies to the transformers runner"),
    (dict(kernels="torch", runner="llama.cpp"), "kernels applies to the transformers runner"),
    (dict(kernels="torch", runner="llama.cpp", draft_model="d"), "kernels applies to the transformers runner"),
    (dict(threads=2), "threads applies to the llama.cpp runner"),
    (dict(dtype="fp16"), "dtype must be one of auto, bf16, fp32; got 'fp16'"),
    (dict(dtype="bf16", runner="llama.cpp"), "dtype applies to the transformers runner"),
])
def test_bad_options_are_refused_with_what_is_wrong(options, message):
    with pytest.raises(QuickdraftError, match=message.replace("(", r"\(")):
        LoadOptions(**options)


def test_good_options_and_the_target_dtype():
    amd = {"model": "AMD EPYC", "flags": ["avx2", "fma"]}
    zen4 = {"model": "AMD EPYC", "flags": ["avx2", "fma", "avx512f", "avx512_bf16"]}
    amx = {"model": "Intel Xeon", "flags": ["avx2", "avx512f", "amx_tile", "amx_bf16"]}
    assert LoadOptions().target_dtype(amd) == "fp32"  # auto: bf16 only where the CPU computes it natively
    assert LoadOptions().target_dtype(zen4) == "bf16"
    assert LoadOptions().target_dtype(amx) == "bf16"
    assert LoadOptions(kernels="onednn").target_dtype(amx) == "bf16"  # oneDNN packs bf16 weights too
    assert LoadOptions(kernels="torch").target_dtype(zen4) == "bf16"
    assert LoadOptions(runner="llama.cpp").target_dtype(amx) == "fp32"  # not a transformers target
    assert LoadOptions(dtype="bf16").target_dtype(amd) == "bf16"  # asked for: the load decides
    assert LoadOptions(dtype="fp32").target_dtype(amx) == "fp32"
    LoadOptions(runner="llama.cpp", threads=2, draft_model="d", draft_runner="transformers", draft_precision="fp32",
                kernels="onednn")  # kernels for the transformers draft: allowed


def test_cli_refuses_bad_model_options_before_loading(capsys, monkeypatch):
    from quickdraft import loading

    monkeypatch.setattr(loading, "_Opened", lambda *a, **k: pytest.fail("a model was opened"))
    assert cli.main(["generate", "--runner", "llama.cpp", "--dtype", "bf16", "hi"]) == 2
    assert "dtype applies to the transformers runner" in capsys.readouterr().err
    assert cli.main(["serve", "--runner", "llama.cpp", "--kernels", "onednn"]) == 2
    assert "kernels applies to the transformers runner" in capsys.readouterr().err


class _FakeOpened:
    """loading._Opened without files: a bf16 load refused as the invariance check refuses it."""
    loads: list = []

    def __init__(self, kind, name, options, progress):
        pass

    def runner(self, draft_precision=None, dtype="fp32"):
        from quickdraft.errors import UnsupportedModelError
        from quickdraft.runners.scripted import ScriptedRunner

        _FakeOpened.loads.append(dtype)
        if dtype == "bf16":
            raise UnsupportedModelError("dtype bf16: passes are not row-invariant on this CPU")
        return ScriptedRunner([1, 2, 3], vocab_size=257, eos=256)

    def tokenizer(self):
        from quickdraft.tokenizer import ByteTokenizer

        return ByteTokenizer()


@pytest.mark.parametrize("dtype", ["auto", "bf16"])
def test_auto_falls_back_to_fp32_where_the_bf16_load_is_refused(monkeypatch, dtype):
    from quickdraft import cpu, loading
    from quickdraft.errors import UnsupportedModelError

    monkeypatch.setattr(loading, "_Opened", _FakeOpened)
    monkeypatch.setattr("quickdraft.models.check_name", lambda name: None)  # "m" names the fake model
    monkeypatch.setattr(cpu, "has_native_bf16", lambda info=None: True)
    _FakeOpened.loads = []
    if dtype == "bf16":  # asked for by name: refused, not silently replaced
        with pytest.raises(UnsupportedModelError, match="not row-invariant"):
            loading.load_with("m", LoadOptions(dtype=dtype))
        assert _FakeOpened.loads == ["bf16"]
    else:
        with pytest.warns(UserWarning, match="not row-invariant.*dtype auto falls back to fp32"):
            loading.load_with("m", LoadOptions(dtype=dtype))
        assert _FakeOpened.loads == ["bf16", "fp32"]


# -- DecodeOptions ------------------------------------------------------------------------------------

from quickdraft import DecodeOptions, SamplingParams  # noqa: E402


@pytest.mark.parametrize("options, message", [
    ({"drafter": "magic"}, "drafter must be one of auto, prediction, lookup"),
    ({"drafter": object()}, "an object with begin, propose and observe"),
    ({"policy": "sometimes"}, "policy"),
    ({"max_new_tokens": 0}, "max_new_tokens must be a positive integer; got 0"),
    ({"max_new_tokens": True}, "max_new_tokens must be a positive integer"),
    ({"stop": ["ok", ""]}, "stop strings must not be empty"),
    ({"stop": 5}, "stop must be a string or a list of strings"),
    ({"chat": "yes"}, "chat must be True, False or None"),
    ({"sampling": {"temperature": 1}}, "sampling must be a SamplingParams; got dict"),
    ({"lookup": 3}, "lookup must be a LookupConfig"),
    ({"acceptance": "mentored", "sampling": SamplingParams(1.0)}, "needs kl_bound"),
    ({"acceptance": "mentored", "kl_bound": 0.1}, "with greedy decoding"),
    ({"draft_sizing": "sometimes"}, "draft_sizing must be one of auto, cost, off"),
    ({"pool_scope": 3}, "pool_scope must be a string"),
])
def test_decode_options_refuse_what_is_wrong_when_made(options, message):
    with pytest.raises(QuickdraftError, match=message.replace("(", r"\(")):
        DecodeOptions(**options)


def test_decode_options_normalise_and_check_the_load():
    o = DecodeOptions(stop="END", drafter="draft-model")
    assert o.stop == ("END",) and DecodeOptions(stop=None).stop == () and o.sampling.greedy
    with pytest.raises(QuickdraftError, match="needs a draft model: pass --draft-model"):
        o.check_load(LoadOptions())
    o.check_load(LoadOptions(draft_model="small"))


def test_stream_takes_an_options_object_and_keyword_changes():
    from quickdraft.api import Generator
    from quickdraft.runners.scripted import ScriptedRunner
    from quickdraft.tokenizer import ByteTokenizer

    tok = ByteTokenizer()
    script = "hello world, hello again"
    gen = Generator(ScriptedRunner(tok.encode(script), 257, tok.eos), tok)
    options = DecodeOptions(drafter="lookup", max_new_tokens=11, draft_sizing="off")
    by_object = gen.generate("hi", options)
    by_keywords = gen.generate("hi", drafter="lookup", max_new_tokens=11, draft_sizing="off")
    assert by_object.text == by_keywords.text == script[:11]
    assert by_object.stats.target_passes == by_keywords.stats.target_passes
    changed = gen.generate("hi", options, max_new_tokens=5, stop=["lo"])  # the object's fields, changed
    assert changed.text == "hel" and changed.finish_reason == "stop" and options.max_new_tokens == 11
    with pytest.raises(QuickdraftError, match="unknown option.*max_tokens.*the options are DecodeOptions' fields"):
        gen.stream("hi", max_tokens=5)
    with pytest.raises(QuickdraftError, match="options must be a DecodeOptions; got dict"):
        gen.stream("hi", {"drafter": "lookup"})
