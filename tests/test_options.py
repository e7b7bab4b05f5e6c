"""quickdraft.options.LoadOptions: every model option checked before anything loads, in one place."""

from __future__ import annotations

import pytest

from quickdraft import cli
from quickdraft.errors import QuickdraftError
from quickdraft.options import LoadOptions


@pytest.mark.parametrize("options, message", [
    (dict(runner="vllm"), "runner must be one of transformers, llama.cpp; got 'vllm'"),
    (dict(draft_model="d", draft_runner="onnx"), "draft_runner must be one of"),
    (dict(draft_precision="int4", draft_model="d"), "draft_precision must be one of int8, fp32"),
    (dict(draft_precision="fp32"), "draft_precision applies to a draft model"),
    (dict(draft_precision="fp32", draft_model="d", draft_runner="llama.cpp"), "draft_precision applies"),
    (dict(kernels="mkl"), "kernels must be one of auto, onednn, torch; got 'mkl'"),
    (dict(kernels="onednn", runner="llama.cpp"), "kernels applies to the transformers runner"),
    (dict(threads=2), "threads applies to the llama.cpp runner"),
    (dict(dtype="fp16"), "dtype must be one of auto, bf16, fp32; got 'fp16'"),
    (dict(dtype="bf16", runner="llama.cpp"), "dtype applies to the transformers runner"),
    (dict(dtype="bf16", kernels="onednn"), "packs float32 weights"),
])
def test_bad_options_are_refused_with_what_is_wrong(options, message):
    with pytest.raises(QuickdraftError, match=message.replace("(", r"\(")):
        LoadOptions(**options)


def test_good_options_and_the_target_dtype():
    assert LoadOptions().target_dtype == "fp32"  # auto: float32 until bf16 is exact by construction
    assert LoadOptions(dtype="bf16").target_dtype == "bf16"
    LoadOptions(runner="llama.cpp", threads=2, draft_model="d", draft_runner="transformers", draft_precision="fp32",
                kernels="onednn")  # kernels for the transformers draft: allowed


def test_cli_refuses_bad_model_options_before_loading(capsys, monkeypatch):
    from quickdraft import api

    monkeypatch.setattr(api, "_Opened", lambda *a, **k: pytest.fail("a model was opened"))
    assert cli.main(["generate", "--runner", "llama.cpp", "--dtype", "bf16", "hi"]) == 2
    assert "dtype applies to the transformers runner" in capsys.readouterr().err
    assert cli.main(["serve", "--kernels", "onednn", "--dtype", "bf16"]) == 2
    assert "packs float32 weights" in capsys.readouterr().err
