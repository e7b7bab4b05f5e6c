"""How a model is loaded: one validated options object for the library, the CLI, the server and the bench.

Every rule that needs no model is checked when a LoadOptions is made, so a front end fails on a bad
option before anything is downloaded or loaded:

    >>> LoadOptions(runner="llama.cpp", dtype="bf16")
    QuickdraftError: dtype applies to the transformers runner (llama.cpp runs the GGUF's own quantisation)

dtype (the transformers target's weights and activations):
    "fp32"  float32
    "bf16"  bfloat16: on a CPU with native bf16 (AVX512_BF16 or AMX) a pass is cheaper, and much cheaper for
            many tokens (measured: docs/runtime.md#fp32-against-bf16)
    "auto"  bf16 where the CPU computes bf16 in hardware (AVX512_BF16 or AMX) and the model's bf16 passes
            pass the row-invariance check at load; fp32 elsewhere, and where that check refuses the model
            (the load says so on stderr).
In either dtype, kernels "auto" packs the Linear layers' weights once for oneDNN where it runs that dtype
(runners.kernels.use_kernels); "torch" leaves torch's own Linear.

device (where a transformers model, its cache and every pass live):
    "cpu"   the CPU
    "cuda"  torch's current CUDA GPU: the target in bf16 ("auto"), Linear layers on torch's kernels, every pass
            in fixed-size row blocks (runners/invariance.py), a draft model in bf16; refused here, before anything
            loads, where torch sees no GPU (docs/gpu.md)
    "auto"  cuda where torch sees a GPU (unless another option is a CPU path: llama.cpp, onednn, int8), else the CPU
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import QuickdraftError

if TYPE_CHECKING:  # imported where used at run time: making an options object loads no model code before it is checked
    from .acceptance import Acceptance, Rule
    from .drafters.base import Drafter
    from .drafters.build import DrafterName
    from .drafters.draft_model import DraftModelConfig
    from .drafters.lookup import LookupConfig
    from .drafters.ouroboros import OuroborosConfig
    from .drafters.prediction import Policy
    from .sampling import SamplingParams
    from .sizing import Sizing

RUNNERS = ("transformers", "llama.cpp")
KERNELS = ("auto", "onednn", "torch")
DRAFT_PRECISIONS = ("int8", "bf16", "fp32")
DTYPES = ("auto", "bf16", "fp32")
DEVICES = ("auto", "cpu", "cuda")


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU (a function, so that tests can say it does not)."""
    import torch

    return torch.cuda.is_available()


@dataclass(frozen=True)
class LoadOptions:
    runner: str = "transformers"  # the target's runner
    draft_model: str | None = None  # a smaller model with the same tokenizer (alias, folder or .gguf)
    draft_runner: str | None = None  # None: the target's
    draft_precision: str | None = None  # a transformers draft model's: "int8" (None: int8) or "fp32"
    max_context: int | None = None  # KV cache / context cap (None: the model's)
    threads: int | None = None  # llama.cpp threads (None: every core this process may use)
    kernels: str = "auto"  # a transformers model's Linear layers (runners.kernels.use_kernels)
    dtype: str = "auto"  # the transformers target's precision (module docstring)
    device: str = "auto"  # where transformers models run (module docstring)

    def __post_init__(self) -> None:
        if self.draft_runner is not None and self.draft_model is None:
            raise QuickdraftError("draft_runner applies to a draft model: give draft_model too")
        for what, value, least, rule in (("max_context", self.max_context, 2, "an integer >= 2"),
                                         ("threads", self.threads, 1, "a positive integer")):  # as LlamaCppConfig words it
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
                raise QuickdraftError(f"{what} must be {rule}; got {value!r}")
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
        if self.kernels != "auto" and "transformers" not in uses:
            raise QuickdraftError("kernels applies to the transformers runner (llama.cpp runs its own)")
        if self.threads is not None and "llama.cpp" not in uses:
            raise QuickdraftError("threads applies to the llama.cpp runner (runner='llama.cpp')")
        if self.dtype not in DTYPES:
            raise QuickdraftError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if self.dtype != "auto" and self.runner != "transformers":
            raise QuickdraftError("dtype applies to the transformers runner (llama.cpp runs the GGUF's own quantisation)")
        if self.device not in DEVICES:
            raise QuickdraftError(f"device must be one of {', '.join(DEVICES)}; got {self.device!r}")
        if self.device == "cuda":
            if "llama.cpp" in uses:
                raise QuickdraftError("device 'cuda' applies to the transformers runner (quickdraft's llama.cpp runner "
                                      "runs on the CPU)")
            if self.kernels == "onednn":
                raise QuickdraftError("kernels 'onednn' packs weights for the CPU; on device 'cuda' use kernels auto or torch")
            if self.draft_precision == "int8":
                raise QuickdraftError("draft_precision 'int8' (dynamic int8) is a CPU path; on device 'cuda' a draft model "
                                      "runs in bf16 (the default there) or fp32")
            if not cuda_available():
                import torch

                build = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
                raise QuickdraftError(f"device 'cuda': torch {torch.__version__} ({build}) sees no CUDA GPU on this "
                                      "machine; use device cpu or auto")

    def resolved_device(self) -> str:
        """"cpu" or "cuda": device with "auto" resolved: cuda where torch sees a GPU, unless another option asks
        for a CPU path (the llama.cpp runner, kernels onednn, an int8 draft model)."""
        if self.device != "auto":
            return self.device
        cpu_only = self.runner != "transformers" or self.kernels == "onednn" or self.draft_precision == "int8"
        return "cpu" if cpu_only or not cuda_available() else "cuda"

    def draft_dtype(self) -> str:
        """A transformers draft model's precision: draft_precision, else int8 on the CPU and bf16 on a GPU."""
        return self.draft_precision or ("bf16" if self.resolved_device() == "cuda" else "int8")

    def target_dtype(self, cpu: dict | None = None) -> str:
        """The precision the transformers target is tried in first: dtype with "auto" resolved for this CPU
        (cpu: cpu.cpu_info()'s dict, for tests). With "auto" a bf16 load the invariance check refuses falls
        back to fp32 (loading.load_with); an explicit "bf16" is refused instead."""
        from .cpu import has_native_bf16

        if self.dtype != "auto":
            return self.dtype
        if self.runner != "transformers":
            return "fp32"
        if self.resolved_device() == "cuda":
            return "bf16"
        return "bf16" if has_native_bf16(cpu) else "fp32"


@dataclass(frozen=True)
class DecodeOptions:
    """How one request is decoded: everything but the prompt and the prediction, for Generator.stream, the
    CLI, the server and the bench alike. Every rule that needs no model is checked when it is made:

        >>> DecodeOptions(acceptance="mentored")
        QuickdraftError: acceptance 'mentored' needs kl_bound (CLI: --kl-bound D): the largest KL divergence ...

    What needs the model (the prompt's length, a draft model being loaded, the prediction's tokens) is
    checked by Generator.stream, still before any model work.
    """

    drafter: DrafterName | Drafter = "auto"  # a name in drafters.build.DRAFTER_NAMES, or a Drafter object
    policy: Policy = "default"  # prediction drafting policy: "default" or "openai" (drafters/prediction.py)
    max_new_tokens: int = 256
    stop: tuple[str, ...] = ()  # stop strings (a string or a list is taken too)
    chat: bool | None = None  # a string prompt through the chat template (None: messages yes, strings no)
    # the drafters' settings and the sampling: None is replaced by the defaults when the options are made, so these
    # fields are never None afterwards
    lookup: LookupConfig | None = None
    draft: DraftModelConfig | None = None
    sampling: SamplingParams | None = None  # None: greedy
    # "exact"; "mentored" (lossy, sampling only, with kl_bound); "typical" (lossy, sampling only); "threshold" (its
    # thresholds at 1.0: speculative sampling), or an acceptance.Acceptance with its own settings
    acceptance: Rule | Acceptance = "exact"
    kl_bound: float | None = None  # nats per token, for acceptance "mentored"
    draft_sizing: Sizing = "auto"  # "cost", "off" or "auto" (sizing.sizing_for)
    ouroboros: OuroborosConfig | None = None
    pool_scope: str = ""  # whose Ouroboros phrase pool (e.g. "user:ID"); "" the model's
    # take the cache of prompt chunks an earlier request computed (runners/hf.HFRunner): never changes the output,
    # only the time; False prefills the whole prompt, for timing a request as if it came first
    prefix_reuse: bool = True

    def __post_init__(self) -> None:
        from .acceptance import Acceptance
        from .drafters.build import DRAFTER_NAMES
        from .drafters.draft_model import DraftModelConfig
        from .drafters.lookup import LookupConfig
        from .drafters.ouroboros import OuroborosConfig
        from .drafters.prediction import PredictionConfig
        from .sampling import SamplingParams
        from .sizing import SIZING

        def default(name: str, kind: type) -> None:
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, kind())
            elif not isinstance(value, kind):
                article = "an" if kind.__name__[0] in "AEIOU" else "a"
                raise QuickdraftError(f"{name} must be {article} {kind.__name__}; got {type(value).__name__}")

        for name, kind in (("lookup", LookupConfig), ("draft", DraftModelConfig), ("sampling", SamplingParams),
                           ("ouroboros", OuroborosConfig)):
            default(name, kind)
        if isinstance(self.drafter, str):
            if self.drafter not in DRAFTER_NAMES:
                raise QuickdraftError(f"drafter must be one of {', '.join(DRAFTER_NAMES)}; got {self.drafter!r}")
        elif not all(callable(getattr(self.drafter, m, None)) for m in ("begin", "propose", "observe")):
            raise QuickdraftError("drafter must be a drafter name or an object with begin, propose and observe; "
                                  f"got {type(self.drafter).__name__}")
        PredictionConfig.for_policy(self.policy)  # an unknown policy name is refused, whatever the drafter
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) or self.max_new_tokens <= 0:
            raise QuickdraftError(f"max_new_tokens must be a positive integer; got {self.max_new_tokens!r}")
        object.__setattr__(self, "stop", _stop_tuple(self.stop))
        if not isinstance(self.prefix_reuse, bool):
            raise QuickdraftError(f"prefix_reuse must be True or False; got {self.prefix_reuse!r}")
        if self.chat is not None and not isinstance(self.chat, bool):
            raise QuickdraftError(f"chat must be True, False or None; got {self.chat!r}")
        if isinstance(self.acceptance, Acceptance):
            if self.kl_bound is not None:
                raise QuickdraftError("kl_bound goes inside the Acceptance object when acceptance is one")
        elif self.acceptance == "mentored" and self.kl_bound is None:
            raise QuickdraftError("acceptance 'mentored' needs kl_bound (CLI: --kl-bound D): the largest KL divergence "
                                  "per token you accept")
        self.rule.check(self.sampling)
        if self.draft_sizing not in SIZING:
            raise QuickdraftError(f"draft_sizing must be one of {', '.join(SIZING)}; got {self.draft_sizing!r}")
        if not isinstance(self.pool_scope, str):
            raise QuickdraftError(f"pool_scope must be a string; got {type(self.pool_scope).__name__}")

    @property
    def rule(self) -> Acceptance:
        """The acceptance rule (acceptance.Acceptance)."""
        from .acceptance import Acceptance

        if isinstance(self.acceptance, Acceptance):
            return self.acceptance
        if not isinstance(self.acceptance, str):
            raise QuickdraftError(f"acceptance must be a rule name or an Acceptance; got {type(self.acceptance).__name__}")
        return Acceptance(self.acceptance, 0.0 if self.kl_bound is None else self.kl_bound)

    def check_load(self, load: LoadOptions, has_prediction: bool | None = None) -> None:
        """What these options need of the loaded models (and of the request, where has_prediction says whether it
        has a prediction), checked against the load options before loading."""
        from .drafters.build import NEEDS_DRAFT_MODEL, check_drafter, resolve_auto

        if self.drafter in NEEDS_DRAFT_MODEL and load.draft_model is None:
            raise QuickdraftError(f"drafter {self.drafter!r} needs a draft model: pass --draft-model ALIAS|PATH "
                                  "(library: load(..., draft_model=...))")
        if has_prediction is not None:
            check_drafter(self.drafter, has_prediction, load.draft_model is not None)
            self.check_settings_used(resolve_auto(self.drafter, has_prediction, load.draft_model is not None,
                                                  self.policy), has_prediction)

    def check_settings_used(self, drafter: str, has_prediction: bool) -> None:
        """Refuse a drafter's settings given to a request that drafts without that drafter (drafter: the name "auto"
        resolved to): they would change nothing, and a caller who set them expects them to."""
        from .drafters.draft_model import DraftModelConfig
        from .drafters.lookup import LookupConfig
        from .drafters.ouroboros import OuroborosConfig

        used = {"lookup": drafter in ("lookup", "prediction+lookup"), "draft": drafter == "draft-model",
                "ouroboros": drafter == "ouroboros"}
        defaults = {"lookup": LookupConfig(), "draft": DraftModelConfig(), "ouroboros": OuroborosConfig()}
        words = {"draft": "draft settings (the draft model's: draft, --draft-length, the server's draft_length)"}
        for name, default in defaults.items():
            if getattr(self, name) != default and not used[name]:
                raise QuickdraftError(f"{words.get(name, name + ' settings')} were given, but this request drafts with "
                                      f"{drafter!r}, which does not use them")
        if self.pool_scope and drafter != "ouroboros":
            raise QuickdraftError(f"pool_scope {self.pool_scope!r} names an Ouroboros phrase pool, but this request "
                                  f"drafts with {drafter!r}, which keeps none")
        if self.policy != "default" and not has_prediction:
            raise QuickdraftError(f"policy {self.policy!r} applies to a prediction, and this request has none")


def _stop_tuple(stop: Any) -> tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
        raise QuickdraftError(f"stop must be a string or a list of strings; got {stop!r:.80}")
    if any(s == "" for s in stop):
        raise QuickdraftError("stop strings must not be empty")
    return tuple(stop)
