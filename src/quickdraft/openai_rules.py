"""OpenAI's rules for Predicted Outputs, worded as OpenAI words them: one place for quickdraft's own server
(server/schemas.py) and the vLLM plugin (vllm/patches.py), which read them off their own request objects.

OpenAI refuses these beside a `prediction` (and quickdraft with it); `max_completion_tokens`, which OpenAI
also lists, quickdraft supports with a prediction.
"""

from __future__ import annotations

PREDICTION_REFUSES = frozenset({"n", "logprobs", "top_logprobs", "tools", "tool_choice", "functions",
                                "function_call", "presence_penalty", "frequency_penalty", "audio", "modalities"})


def n_refused(n: int, predicted: bool) -> str:
    """The message for n > 1 (which neither server supports; with a prediction, OpenAI's reason)."""
    why = "Predicted Outputs does not support n > 1" if predicted else "only n = 1 is supported"
    return f"Invalid value for 'n': {why}; send {n} requests instead."


def refused_with_prediction(name: str) -> str:
    return f"'{name}' is not supported with Predicted Outputs (prediction)."
