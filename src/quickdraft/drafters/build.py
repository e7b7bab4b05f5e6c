"""Drafters from a name, a prediction and settings: one factory for every place that drafts.

quickdraft's own engine (api.Generator) and the vLLM plugin (quickdraft/vllm/) both build their drafters
here, so the same request gets the same drafter objects whichever engine verifies them. This module
builds the drafters that need nothing but tokens (prediction, prompt lookup, both, none); the ones that
need a second model (draft-model, ouroboros) are built by the Generator, which owns that model.

    >>> build_drafter("prediction+lookup", prediction_ids=[5, 6, 7])   # PredictionOrLookup
    >>> build_drafter("auto", prediction_ids=[5, 6, 7])                # PredictionOrLookup too
    >>> build_drafter("auto", [5, 6, 7], policy="openai")             # PredictionDrafter
    >>> build_drafter("auto", prediction_ids=None)                    # PromptLookupDrafter
"""

from __future__ import annotations

from typing import Literal, Sequence, get_args

from ..core import Draft
from ..errors import QuickdraftError
from .base import Drafter, FirstOf, NoDrafter
from .lookup import SHORT_SOURCE, LookupConfig, PromptLookupDrafter
from .prediction import PredictionConfig, PredictionDrafter

# The drafter names, defined here once: the API, the CLI, the server's schema, the bench and the vLLM plugin take
# them from here (DrafterName for type hints and pydantic, DRAFTER_NAMES for choices and messages).
DrafterName = Literal["auto", "prediction", "lookup", "prediction+lookup", "draft-model", "ouroboros", "none"]
DRAFTER_NAMES: tuple[DrafterName, ...] = get_args(DrafterName)
NEEDS_DRAFT_MODEL: tuple[DrafterName, ...] = ("draft-model", "ouroboros")
NEEDS_PREDICTION: tuple[DrafterName, ...] = ("prediction", "prediction+lookup")
TOKEN_DRAFTERS = tuple(n for n in DRAFTER_NAMES if n not in NEEDS_DRAFT_MODEL)  # what build_drafter builds (and vLLM)


def check_drafter(drafter: str, has_prediction: bool, has_draft_model: bool) -> None:
    """Refuse a drafter name that cannot serve this request, before any work (the messages callers see)."""
    if drafter not in DRAFTER_NAMES:
        raise QuickdraftError(f"drafter must be one of {', '.join(DRAFTER_NAMES)}; got {drafter!r}")
    if drafter in NEEDS_PREDICTION and not has_prediction:
        raise QuickdraftError(f"drafter {drafter!r} needs a prediction")
    if drafter in ("lookup", *NEEDS_DRAFT_MODEL, "none") and has_prediction:
        raise QuickdraftError(f"a prediction was given but drafter {drafter!r} would ignore it; use 'auto' or 'prediction'")
    if drafter in NEEDS_DRAFT_MODEL and not has_draft_model:
        raise QuickdraftError(f"drafter {drafter!r} needs a draft model: load the model with draft_model=... "
                              "(CLI: --draft-model ALIAS|PATH)")


def resolve_auto(drafter: str, has_prediction: bool, has_draft_model: bool, policy: str = "default") -> str:
    """"auto": with a prediction, the prediction and prompt lookup where it has nothing ("prediction+lookup"; under
    the "openai" policy the prediction alone, as OpenAI's service drafts); without one, the draft model if loaded,
    else prompt lookup. Lookup in a prediction's gaps drafts the lines a model copies from elsewhere in the prompt
    (an edit snippet's), and costs nothing measurable where the prediction covers the output (measured:
    docs/drafters.md#prediction-and-lookup)."""
    if drafter != "auto":
        return drafter
    if has_prediction:
        return "prediction" if policy == "openai" else "prediction+lookup"
    return "draft-model" if has_draft_model else "lookup"


class PredictionOrLookup(FirstOf):
    """prediction+lookup: the prediction's draft, else prompt lookup's (FirstOf), except right after the prediction
    re-anchored on fewer tokens of agreement than lookup's shortest match (min_ngram): there lookup's draft, where it
    has one, rests on more evidence. That is where the output left the prediction for text the prompt holds, e.g. a
    model that writes an edit snippet's own lines rather than the merged file (replayed:
    docs/drafters.md#prediction-and-lookup).

    Example: prediction "a b c d e f", prompt "... x y z w ...", output so far "a b x y z": the prediction lost its
    place at x and re-anchored on one token at best, while lookup matches "x y z" and drafts "w ..."."""

    def __init__(self, prediction: PredictionDrafter, lookup: PromptLookupDrafter):
        super().__init__([prediction, lookup])
        self.prediction, self.lookup = prediction, lookup

    def propose(self, context: Sequence[int], budget: int) -> Draft:
        p = self.prediction
        if p.anchor is not None and p.agreed == 0 and p.run < self.lookup.config.min_ngram:
            draft = self.lookup.propose(context, budget)
            if len(draft) and draft.source != SHORT_SOURCE:  # a short match is no more evidence than the re-anchor
                return draft
        return super().propose(context, budget)


def build_drafter(drafter: str, prediction_ids: Sequence[int] | None, policy: str = "default",
                  lookup: LookupConfig = LookupConfig()) -> Drafter:
    """A fresh drafter (per request) for a name in TOKEN_DRAFTERS; prediction_ids: the prediction, tokenized.

    Raises QuickdraftError for a name this factory does not build, a policy that does not exist, or a
    prediction that the drafter would need or ignore.
    """
    if drafter in NEEDS_DRAFT_MODEL:
        raise QuickdraftError(f"drafter {drafter!r} needs a draft model, which build_drafter does not load; "
                              f"use one of {', '.join(TOKEN_DRAFTERS)}")
    has_prediction = prediction_ids is not None
    check_drafter(drafter, has_prediction, has_draft_model=False)
    drafter = resolve_auto(drafter, has_prediction, has_draft_model=False, policy=policy)
    if not isinstance(lookup, LookupConfig):
        raise QuickdraftError(f"lookup must be a LookupConfig; got {type(lookup).__name__}")
    config = PredictionConfig.for_policy(policy)  # validates the policy name
    if drafter == "prediction+lookup":
        return PredictionOrLookup(PredictionDrafter(list(prediction_ids), config), PromptLookupDrafter(lookup))
    if drafter == "prediction":
        return PredictionDrafter(list(prediction_ids), config)
    return PromptLookupDrafter(lookup) if drafter == "lookup" else NoDrafter()
