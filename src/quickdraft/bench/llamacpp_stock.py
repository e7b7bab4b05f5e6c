"""llama-cpp-python's high-level `Llama`, built the one way every baseline and test here builds it.

The bench's `llamacpp-plain` / `llamacpp-prompt-lookup` baselines, the llama.cpp tests' ground truth and
scripts/llamacpp_stock_baseline.py all construct their `Llama` through `stock_llama`, so what the bench
runs is what the tests run.

"Stock" means llama-cpp-python's defaults, with one exception. On a build with llama.cpp's AMX kernels
(a native build on a CPU with AMX-INT8 and AVX512-VNNI: llama.cpp's system info says `AMX_INT8 = 1`), the
default model parameters load the quantized weights into AMX-repacked buffers ("AMX model buffer size = ..." in
its log), and decoding then segfaults inside libggml-cpu (llama-cpp-python 0.3.36; a plain pip build crashes the
same way; seen: docs/llamacpp.md#stock-baselines-on-cpus-with-amx). There, and only there, the weights are loaded
without extra buffer types (`use_extra_bufts = False`, llama.cpp's `--no-repack`): this turns off the
AMX buffers and, with them, the CPU repacked-weight buffers, since llama.cpp offers one switch for both.
Such a baseline is recorded as `stock_repack: false` and named "(no repack)" in reports. Elsewhere
(AVX2, AVX-512 without AMX) the AMX path is not compiled in and nothing is changed.

quickdraft's own llama.cpp runner always loads without extra buffer types (runners/llamacpp.py), for
exactness, so it is not affected.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator


def build_has_amx(system_info: str | None = None) -> bool:
    """Whether this llama.cpp build has the AMX kernels (its system info lists `AMX_INT8 = 1`)."""
    if system_info is None:
        import llama_cpp

        system_info = llama_cpp.llama_print_system_info().decode()
    return "AMX_INT8 = 1" in system_info


def repack_allowed(system_info: str | None = None) -> bool:
    """Whether a stock Llama may keep its default extra buffer types (repacked weights) on this build:
    everywhere but where they include the AMX buffers that crash (module docstring)."""
    return not build_has_amx(system_info)


@contextlib.contextmanager
def _model_params(use_extra_bufts: bool) -> Iterator[None]:
    """Llama() takes no argument for extra buffer types: it reads llama_model_default_params() from
    llama_cpp.llama_cpp in its constructor, so that function answers with our value for the duration."""
    import llama_cpp.llama_cpp as ll

    default = ll.llama_model_default_params

    def params() -> Any:
        p = default()
        p.use_extra_bufts = use_extra_bufts
        return p

    ll.llama_model_default_params = params
    try:
        yield
    finally:
        ll.llama_model_default_params = default


def stock_llama(model_path: str | Path, n_ctx: int, threads: int, num_pred_tokens: int | None = None) -> Any:
    """llama-cpp-python's Llama on a GGUF with its default settings (AMX repack off where it crashes).

    num_pred_tokens: None for plain decoding, else llama-cpp-python's own prompt lookup drafting that
    many tokens (LlamaPromptLookupDecoding). Its model_params.use_extra_bufts says which way it loaded.
    """
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    draft = LlamaPromptLookupDecoding(num_pred_tokens=num_pred_tokens) if num_pred_tokens else None
    with _model_params(use_extra_bufts=repack_allowed()):
        # logits_all with a draft: llama-cpp-python 0.3.36 turns it on itself for drafting but sizes its
        # score buffer from the argument, and overflows it on the first prompt longer than n_batch
        return Llama(model_path=str(model_path), n_ctx=n_ctx, n_threads=threads, draft_model=draft,
                     logits_all=draft is not None, verbose=False)
