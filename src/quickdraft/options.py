"""How a model is loaded: one validated options object for the library, the CLI, the server and the bench.

Every rule that needs no model is checked when a LoadOptions is made, so a front end fails on a bad
option before anything is downloaded or loaded:

    >>> LoadOptions(runner="llama.cpp", dtype="bf16")
    QuickdraftError: dtype applies to the transformers runner (llama.cpp runs the GGUF's own quantisation)

dtype (the transformers target's weights and activations):
    "fp32"  float32; Linear layers packed for oneDNN (kernels "auto")
    "bf16"  bfloat16 with torch's own kernels: on a CPU with native bf16 (AVX512_BF16 or AMX) a pass is
            cheaper, and much cheaper for many tokens (docs/runtime.md has the measured costs)
    "auto"  bf16 where the CPU computes bf16 in hardware (AVX512_BF16 or AMX) and the model's bf16 passes
            pass the row-invariance check at load; fp32 elsewhere, and where that check refuses the model
            (the load says so on stderr). kernels "onednn" asks for float32 and so makes auto fp32.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import QuickdraftError

RUNNERS = ("transformers", "llama.cpp")
KERNELS = ("auto", "onednn", "torch")
DRAFT_PRECISIONS = ("int8", "fp32")
DTYPES = ("auto", "bf16", "fp32")


@dataclass(frozen=True)
class LoadOptions:
    runner: str = "transformers"  # the target's runner
    draft_model: str | None = None  # a smaller model with the same tokenizer (alias, folder or .gguf)
    draft_runner: str | None = None  # None: the target's
    draft_precision: str | None = None  # a transformers draft model's: "int8" (None: int8) or "fp32"
    max_context: int | None = None  # KV cache / context cap (None: the model's)
    threads: int | None = None  # llama.cpp threads (None: every core this process may use)
    kernels: str = "auto"  # a float32 transformers model's Linear layers (runners.hf.use_kernels)
    dtype: str = "auto"  # the transformers target's precision (module docstring)

    def __post_init__(self) -> None:
        draft_runner = self.draft_runner or self.runner
        for what, kind in (("runner", self.runner), ("draft_runner", draft_runner)):
            if kind not in RUNNERS:
                raise QuickdraftError(f"{what} must be one of {', '.join(RUNNERS)}; got {kind!r}")
        if self.draft_precision is not None:
            if self.draft_precision not in DRAFT_PRECISIONS:
                raise QuickdraftError(f"draft_precision must be one of {', '.join(DRAFT_PRECISIONS)}; "
                                      f"got {self.draft_precision!r}")
            if self.draft_model is None or draft_runner != "transformers":
                raise QuickdraftError("draft_precision applies to a draft model on the transformers runner "
                                      "(a llama.cpp draft runs its GGUF's own quantisation)")
        if self.kernels not in KERNELS:
            raise QuickdraftError(f"kernels must be one of {', '.join(KERNELS)}; got {self.kernels!r}")
        uses = {self.runner} | ({draft_runner} if self.draft_model else set())
        if self.kernels == "onednn" and "transformers" not in uses:
            raise QuickdraftError("kernels applies to the transformers runner (llama.cpp runs its own)")
        if self.threads is not None and "llama.cpp" not in uses:
            raise QuickdraftError("threads applies to the llama.cpp runner (runner='llama.cpp')")
        if self.dtype not in DTYPES:
            raise QuickdraftError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if self.dtype != "auto" and self.runner != "transformers":
            raise QuickdraftError("dtype applies to the transformers runner (llama.cpp runs the GGUF's own quantisation)")
        if self.dtype == "bf16" and self.kernels == "onednn":
            raise QuickdraftError("kernels 'onednn' packs float32 weights; with dtype 'bf16' torch's own bf16 kernels "
                                  "run (leave kernels at auto)")

    def target_dtype(self, cpu: dict | None = None) -> str:
        """The precision the transformers target is tried in first: dtype with "auto" resolved for this CPU
        (cpu: cpu.cpu_info()'s dict, for tests). With "auto" a bf16 load the invariance check refuses falls
        back to fp32 (api.load_with); an explicit "bf16" is refused instead."""
        from .cpu import has_native_bf16

        if self.dtype != "auto":
            return self.dtype
        if self.runner != "transformers" or self.kernels == "onednn":
            return "fp32"
        return "bf16" if has_native_bf16(cpu) else "fp32"
