"""The methods a benchmark compares: one frozen dataclass each, saying what runs and what it needs.

engine     who generates: "quickdraft" (Generator.generate), "transformers" (transformers' own
           generate() on the same weights, as transformers loads them: runners.kernels.as_transformers_loads_it),
           "llama.cpp" (llama-cpp-python on the model's GGUF).
baseline   the plain method of the same tool: speedups and the identity check are against it. Each tool
           is checked against its own plain decoding: quickdraft's methods against "plain",
           transformers' against "hf-plain" (the same weights, but transformers' own kernels and
           plumbing), llama.cpp's against "llamacpp-plain" (the quantised GGUF). How the tools compare
           with each other is the report's head-to-head table, never an exactness verdict.
options    keyword options of the engine's call, as (name, value) pairs.
needs      what must be present: "prediction" (the task has one), "draft-model" (loaded with
           --draft-model), "api:NAME" (DecodeOptions has the field NAME: work in progress
           elsewhere), "llama-cpp" (llama-cpp-python imports), "gguf" (the model is a GGUF file).
exact      the output must equal its baseline's (plain greedy decoding by the same tool) token for token; a
           difference is a failure (another tool's is reported as that tool's, apart from quickdraft's).
sampled    runs under sampling (the benchmark's --temperature, one seed per task and repeat shared by
           every method) instead of greedy, against "plain-sampled". Mentored decoding is defined under
           sampling only.
same_draws a sampled method whose output is its baseline's for the same seed, token for token: drafts
           without distributions (prediction, lookup), verified by the target's own draws
           (acceptance/rejection.verify_walk). Checked like greedy exactness. Other sampled methods
           (speculative sampling with a draft model) are exact in distribution, not draw for draw, and are
           compared for speed only.
planned    set for a method that is not built yet: the harness lists it, with this reason, and
           never runs or imitates it.
rivals     for a quickdraft method: the other tools' nearest methods, compared head to head in the
           report (tokens/s on the same task and repeat).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..acceptance import Acceptance
from .workloads import expand_names

ENGINES = ("quickdraft", "transformers", "llama.cpp")
MENTORED_KL_BOUNDS = (0.1, 0.5)


@dataclass(frozen=True)
class Method:
    name: str
    engine: str
    about: str
    baseline: str = "plain"
    options: tuple[tuple[str, Any], ...] = ()
    needs: tuple[str, ...] = ()
    exact: bool = True
    sampled: bool = False
    same_draws: bool = False
    planned: str | None = None
    rivals: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}; got {self.engine!r}")

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.options)

    @property
    def uses_prediction(self) -> bool:
        return "prediction" in self.needs


def mentored_method(bound: float) -> Method:
    """Mentored decoding with the draft model at KL bound `bound` (nats per token), sampled (scripts/mentored_trade.py
    runs it at other bounds than the registered ones)."""
    return Method(f"mentored-kl{bound:g}", "quickdraft",
                  f"draft model, mentored acceptance, sampled (lossy: KL(target || output) <= {bound:g} nats per token)",
                  baseline="plain-sampled", sampled=True, exact=False,
                  options=(("drafter", "draft-model"), ("acceptance", "mentored"), ("kl_bound", bound)),
                  needs=("draft-model", "api:acceptance"))


def _relaxed(rule: str) -> Method:
    about = {"typical": "Medusa's typical acceptance (epsilon 0.09, delta 0.3)",
             "threshold": "SGLang-style acceptance thresholds (t_single 0.5, t_acc 0.5)"}[rule]
    acceptance = Acceptance("typical") if rule == "typical" else Acceptance("threshold", t_single=0.5, t_acc=0.5)
    return Method(f"{rule}-sampled", "quickdraft", f"draft model, {about}, sampled (lossy, no bound)",
                  baseline="plain-sampled", sampled=True, exact=False,
                  options=(("drafter", "draft-model"), ("acceptance", acceptance)), needs=("draft-model",))


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("plain", "quickdraft", "quickdraft, no drafter: plain greedy decoding (the baseline)", options=(("drafter", "none"),),
           rivals=("hf-plain", "llamacpp-plain")),
    Method("prediction", "quickdraft", "Predicted Outputs, default policy",
           options=(("drafter", "prediction"), ("policy", "default")), needs=("prediction",), rivals=("hf-prompt-lookup",)),
    Method("prediction-openai", "quickdraft", "Predicted Outputs, `openai` policy (16 per pass, 32 to recover)",
           options=(("drafter", "prediction"), ("policy", "openai")), needs=("prediction",), rivals=("hf-prompt-lookup",)),
    Method("prediction+lookup", "quickdraft", "prediction first, prompt lookup where it has nothing",
           options=(("drafter", "prediction+lookup"), ("policy", "default")), needs=("prediction",),
           rivals=("hf-prompt-lookup",)),
    Method("lookup", "quickdraft", "prompt lookup decoding", options=(("drafter", "lookup"),),
           rivals=("hf-prompt-lookup", "llamacpp-prompt-lookup")),
    Method("draft-model", "quickdraft", "speculative decoding with the draft model (adaptive length)",
           options=(("drafter", "draft-model"),), needs=("draft-model",), rivals=("hf-assisted",)),
    Method("ouroboros", "quickdraft", "Ouroboros: the draft model drafts phrase by phrase, drafts lengthened by phrases (tree)",
           options=(("drafter", "ouroboros"),), needs=("draft-model",), rivals=("hf-assisted",)),
    Method("plain-sampled", "quickdraft", "quickdraft, no drafter, sampled: the baseline of the sampled methods",
           baseline="plain-sampled", sampled=True, same_draws=True, options=(("drafter", "none"),)),
    Method("lookup-sampled", "quickdraft", "prompt lookup, sampled (plain sampling's tokens for the same seed)",
           baseline="plain-sampled", sampled=True, same_draws=True, options=(("drafter", "lookup"),)),
    Method("prediction-sampled", "quickdraft", "prediction first, prompt lookup where it has nothing, sampled "
           "(plain sampling's tokens for the same seed)", baseline="plain-sampled", sampled=True, same_draws=True,
           options=(("drafter", "prediction+lookup"), ("policy", "default")), needs=("prediction",)),
    Method("draft-model-sampled", "quickdraft", "draft model, speculative sampling (exact in distribution)",
           baseline="plain-sampled", sampled=True, options=(("drafter", "draft-model"),), needs=("draft-model",)),
    *(mentored_method(b) for b in MENTORED_KL_BOUNDS),
    *(_relaxed(r) for r in ("typical", "threshold")),
    Method("hf-plain", "transformers", "transformers generate(), greedy", baseline="hf-plain",
           needs=("transformers-runner",)),
    Method("hf-prompt-lookup", "transformers", "transformers generate(prompt_lookup_num_tokens=10)", baseline="hf-plain",
           options=(("prompt_lookup_num_tokens", 10),), needs=("transformers-runner",)),
    Method("hf-assisted", "transformers", "transformers generate(assistant_model=the draft model, as loaded)",
           baseline="hf-plain", options=(("assistant_model", "draft"),), needs=("draft-model", "transformers-runner")),
    Method("llamacpp-plain", "llama.cpp", "llama.cpp greedy on the model's GGUF", baseline="llamacpp-plain",
           needs=("llama-cpp", "gguf")),
    Method("llamacpp-prompt-lookup", "llama.cpp", "llama.cpp with LlamaPromptLookupDecoding(num_pred_tokens=10)",
           baseline="llamacpp-plain", options=(("num_pred_tokens", 10),), needs=("llama-cpp", "gguf")),
)}


def check_baselines(methods: dict[str, Method]) -> None:
    """Refuse a method whose baseline is missing or another tool's: every tool's methods are checked against its own
    plain decoding (a transformers method against quickdraft's plain would call transformers' own rounding a
    failure of its drafting)."""
    for m in methods.values():
        base = methods.get(m.baseline)
        if base is None:
            raise ValueError(f"method {m.name}: its baseline {m.baseline!r} is not among the methods")
        if base.engine != m.engine or base.baseline != base.name:
            raise ValueError(f"method {m.name} ({m.engine}): its baseline must be the plain method of the same tool, "
                             f"which is its own baseline; got {m.baseline!r} ({base.engine})")


check_baselines(METHODS)
GROUPS = {
    "all": tuple(METHODS),
    "quickdraft": tuple(n for n, m in METHODS.items() if m.engine == "quickdraft"),
    "baselines": tuple(n for n, m in METHODS.items() if m.engine != "quickdraft"),
    "prediction-methods": tuple(n for n, m in METHODS.items() if m.uses_prediction),
    "sampled": tuple(n for n, m in METHODS.items() if m.sampled),
    "mentored": tuple(n for n in METHODS if n.startswith("mentored")),
    "lossy": tuple(n for n, m in METHODS.items() if m.sampled and not m.exact),
}


def select(names: str | list[str]) -> list[str]:
    """Method names from a comma-separated list (groups: all, quickdraft, baselines, ...), in order.

    The baseline of every chosen method is added first when missing: speedups and identity are
    measured against it.

    >>> select("lookup")
    ['plain', 'lookup']
    """
    chosen = expand_names(names, METHODS, GROUPS, "method")
    baselines = [METHODS[n].baseline for n in chosen if METHODS[n].baseline not in chosen]
    return list(dict.fromkeys(baselines)) + chosen
