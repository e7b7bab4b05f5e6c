"""vLLM's step loop for one request, replayed without vLLM: what the tests check the plugin's counts against
and what docs/results/2026-11-24-vllm-sizing/vllm_replay.py models step costs with.

vLLM's first output token comes from the prefill; then every step verifies the draft the proposer gave for
the context so far, emits the longest agreeing prefix of it and one token of the model's own (the bonus),
and the proposer observes that (proposer.observe_step), as Proposer does inside vLLM.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

from ..core import EMPTY_DRAFT, Draft
from ..drafters.base import Drafter
from .proposer import observe_step


def replay_steps(drafter: Drafter, prompt: Sequence[int], output: Sequence[int],
                 propose: Callable[[list[int], int], Draft]) -> Iterator[tuple[Draft, int, list[int]]]:
    """(draft, accepted, emitted tokens) of each decode step of a request whose greedy output is `output`.
    propose(context, i): the draft verified at output index i (the proposer's budget and cuts applied)."""
    drafter.begin(list(prompt))
    context = list(prompt)
    observe_step(drafter, context, EMPTY_DRAFT, list(output[:1]))
    i = 1
    while i < len(output):
        draft = propose(context, i)
        accepted = 0
        while accepted < len(draft) and i + accepted < len(output) and draft.tokens[accepted] == output[i + accepted]:
            accepted += 1
        new = list(output[i : i + accepted + 1])
        yield draft, accepted, new
        observe_step(drafter, context, draft, new)
        i += len(new)
