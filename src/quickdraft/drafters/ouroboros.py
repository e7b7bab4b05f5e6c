"""Ouroboros (Zhao et al. 2024): a draft model that drafts phrase by phrase, and drafts lengthened by
phrases that the target verifies together as a tree.

Mechanisms (each can be turned off in OuroborosConfig, for ablations):
    phrase drafting  each draft-model forward feeds, after its newest token, the pool's phrases that
                     follow that token (up to `draft_phrases`, as a tree); the draft model's own greedy
                     choices walk the tree (acceptance/tree.py), so one forward yields every phrase
                     token it agrees with plus one token of its own; where it agreed with a phrase
                     past a token it rejected, those runs are harvested too (its own verification
                     feeds the pool, like the target's under `harvest`). 0: token by token.
    lookahead        `window` guessed tokens ride along with every draft forward as one more branch;
                     the draft model's choices after them are the next forward's guesses (Jacobi
                     iteration, as in lookahead decoding), and where guesses and choices agree they are
                     harvested as phrases: the draft model feeds its own pool. 0: off.
    lengthening      after `gamma` draft tokens, the top `branches` phrases that follow the draft's last
                     token are appended as branches: one target pass verifies trunk and branches and
                     keeps the longest path it agrees with. Not after a draft the draft model ended
                     early because it doubted its last token, and (`branches_by_cost`) only where the
                     target's measured pass costs say the branches pay (below). 0: off.
    harvest          phrases from the target's verification: where the target agreed with a rejected
                     part of the draft, its choices say what follows (phrase_pool.harvest).
    context          phrases of the prompt and of the output so far (prompt-lookup style).
    warm start       the pool outlives the request (kept per model by api.Generator, optionally per
                     user), so earlier requests' phrases draft later ones.

The draft model drafts greedily whatever the target's sampling, so every draft token is a point mass:
exact under greedy decoding and lossless under sampling (acceptance/rejection.py, acceptance/tree.py).
Draft-model and pool choices change speed only, never what the target emits.

When lengthening pays. Branch tokens count only if the whole trunk is accepted, and on a GPU a pass
of 40 tokens costs about what one of 25 does, but on a CPU it costs clearly more (measured with
scripts/kernel_costs.py: docs/ouroboros.md#what-it-does). So the drafter lengthens a draft only
when its expected output per second of target time is higher with the branches than without:

    c_i   = the draft model's probability of trunk token i, calibrated by its misses in this request
            (draft_model.calibrate); P = c_1 ... c_n, the odds that the whole trunk is accepted
    E     = 1 + c_1 + c_1 c_2 + ... + P      expected output tokens of the pass without branches
    Y     = accepted branch tokens per lengthened pass whose trunk was accepted (decayed mean; prior:
            one pass in which a whole phrase was accepted, phrase_length - 1 tokens)
    lengthen  iff  (E + P Y) / t(n + b + 1)  >  E / t(n + 1)

with t the Generator's measured pass costs (sizing.PassCosts) for the trunk's n tokens and the tree's
n + b. With no costs measured yet it lengthens, as the paper does. Worked example, n = 24, b = 8, E = 17,
P = 0.5, Y = 5, with t(33) = 1.21 t(25) (a CPU): (17 + 2.5) / 1.21 = 16.1 < 17, no branches; where
t(33) = 1.02 t(25), as on a GPU, it lengthens (19.5 / 1.02 = 19.1 > 17, in units of t(25)).

Example of one draft forward (draft_phrases 2, window 0): cached context ... 7, newest token 5; pool
phrases after 5: (5, 6, 1), (5, 9, 9). The forward feeds [5, 6, 1, 9, 9] with parents (-1, 0, -1, 2)
for the draft part; the draft model picks 6 after 5, then 1 after 6, then 4 after 1: this forward
drafted (6, 1, 4), where token-by-token drafting would have drafted one token.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import torch

from .. import trees
from ..acceptance.tree import verify_tree
from ..core import EMPTY_DRAFT, Draft, Verdict
from ..errors import QuickdraftError
from ..runners.base import Runner
from ..sampling import SamplingParams
from ..sizing import PassCosts
from .base import Drafter
from .draft_model import calibrate, note_misses, realign
from .phrase_pool import PhrasePool, PoolConfig, harvest


@dataclass(frozen=True)
class OuroborosConfig:
    gamma: int = 24  # draft tokens before lengthening
    phrase_length: int = 6  # beta: longest phrase in the pool
    pool_size: int = 8192  # phrases kept in the pool (least recently used evicted)
    draft_phrases: int = 3  # pool phrases tried per draft forward; 0: draft token by token
    window: int = 0  # lookahead (Jacobi) window W riding along with each draft forward; 0: off
    branches: int = 3  # K: phrases appended to the draft as tree branches; 0: no lengthening
    harvest: bool = True  # phrases from the target's verification
    context: bool = True  # phrases of the prompt and the output
    warm_start: bool = True  # keep the pool across requests
    min_confidence: float = 0.3  # stop drafting when the draft model's top probability falls below this
    min_joint: float = 0.5  # stop drafting where the product of those (calibrated) falls below this; 0: never
    branches_by_cost: bool = True  # lengthen only when measured pass costs say it pays (above); no: always

    def __post_init__(self) -> None:
        least = {"gamma": 1, "phrase_length": 2, "pool_size": 1, "draft_phrases": 0, "window": 0, "branches": 0}
        for name, low in least.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise QuickdraftError(f"ouroboros {name} must be an integer >= {low}; got {v!r}")
        for name in ("min_confidence", "min_joint"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
                raise QuickdraftError(f"ouroboros {name} must be a number in [0, 1); got {v!r}")

    @property
    def pool(self) -> PoolConfig:
        return PoolConfig(max_phrases=self.pool_size, phrase_length=self.phrase_length)


class OuroborosDrafter(Drafter):
    sizes_itself = True  # its own draft-length rule; draft_sizing "auto" leaves it uncapped on transformers (sizing.py)

    def __init__(self, runner: Runner, pool: PhrasePool, config: OuroborosConfig = OuroborosConfig(),
                 trees_on_target: bool = True, costs: PassCosts | None = None):
        """runner: the draft model's. pool: the phrase pool (shared across requests for warm start).
        trees_on_target: the target can verify trees; if not, a draft is lengthened by one phrase.
        costs: the target's measured pass costs (the Generator's); None: lengthen whenever phrases fit."""
        self.runner = runner
        self.pool = pool
        self.config = config
        self.tree_draft = runner.supports_trees  # else one phrase per draft forward, linearly
        self.tree_target = trees_on_target
        self.costs = costs
        self.cached: list[int] = []  # tokens in the draft model's cache: a prefix of context + draft
        self.window: list[int] = []  # lookahead guesses for the tokens after the newest one
        self.fed = 0  # context phrases starting before this index are in the pool
        self.misses = [0.0, 0.0]  # decayed [trunks cut short, cuts their probabilities predicted], this request
        self.branch_yield = [0.0, 0.0]  # decayed [accepted branch tokens, lengthened passes with the trunk accepted]
        self._raw: list[float] = []  # the last draft's trunk: the draft model's probability of each token
        self._lengthened = False  # whether the last draft carried branches

    def begin(self, prompt: Sequence[int]) -> None:
        if not self.config.warm_start:
            self.pool.clear()
        self.runner.reset()
        self.cached, self.window, self.fed = [], [], 0
        self.misses, self.branch_yield, self._raw, self._lengthened = [0.0, 0.0], [0.0, 0.0], [], False
        if self.config.context:
            self._feed_context(prompt)
        if len(prompt) > 1:
            self.runner.prefill(prompt[:-1])
            self.cached = list(prompt[:-1])

    def _feed_context(self, context: Sequence[int]) -> None:
        """Add the context's phrases that are complete (phrase_length tokens) and not yet added."""
        L = self.pool.config.phrase_length
        for s in range(self.fed, len(context) - L + 1):
            self.pool.add(context[s : s + L])
        self.fed = max(self.fed, len(context) - L + 1)

    # -- drafting --------------------------------------------------------------------------------
    def propose(self, context: Sequence[int], budget: int) -> Draft:
        gamma = min(self.config.gamma, budget, self.runner.max_context - len(context) - 1)
        if gamma <= 0:
            return EMPTY_DRAFT
        new = list(context[len(self.cached) :])  # at least the newest context token (never cached)
        draft: list[int] = []
        raw: list[float] = []  # the draft model's probability of each draft token
        confidence: list[float] = []  # calibrated by this request's misses
        forwards, joint, confident = 0, 1.0, True
        while len(draft) < gamma and confident:  # until gamma, or the draft model doubts its last token
            made, probs = self._draft_forward(new, gamma - len(draft))
            forwards += 1
            for token, p in zip(made, probs):
                c = calibrate(p, self.misses)
                joint *= c  # its odds that the draft is right up to here
                if draft and joint < self.config.min_joint:
                    confident = False  # the draft model doubts the draft from here on (keep at least one token)
                    break
                draft.append(token)
                raw.append(p)
                confidence.append(c)
            confident = confident and probs[-1] >= self.config.min_confidence
            new = [made[-1]]
        self._raw, self._lengthened = raw[:gamma], False
        trunk = Draft(tuple(draft[:gamma]), source="ouroboros", forwards=forwards, confidence=tuple(confidence[:gamma]))
        # No branches after a doubted token: they pay only if the whole trunk is accepted (rare on
        # HumanEval: 5 fewer draft tokens over 4 prompts).
        return self._lengthen(trunk, budget) if confident else trunk

    def _draft_forward(self, new: list[int], room: int) -> tuple[list[int], list[float]]:
        """One draft-model forward over `new` and a tree of phrase candidates hanging from new[-1].

        Returns the tokens it drafted (accepted phrase tokens + the draft model's own next token) and
        the draft model's probability of each (its top probability: it drafts greedily). The draft
        cache then holds the context and the accepted phrase tokens."""
        phrases = [p[1 : room + 1] for p in self.pool.lookup(new[-1], self.config.draft_phrases)] if room > 1 else []
        window = self.window[: self.config.window]
        if not self.tree_draft:
            phrases, window = phrases[:1], []  # one linear candidate
        branches = [p for p in phrases if p] + ([tuple(window)] if window else [])
        tokens, parents = trees.from_branches(branches)
        m = len(new)
        if self.tree_draft:
            # inputs new[0..m-1] then the tree; tree roots hang from new[-1] (input m - 1)
            pass_parents = trees.chain(m - 1) + tuple(p + m - 1 if p >= 0 else m - 2 for p in parents)
            logits = self.runner.forward_tree([*new, *tokens], pass_parents)  # [m + len(tokens), V]
        else:
            logits = self.runner.forward([*new, *tokens])  # tokens is one chain here
        logits = logits[m - 1 :]  # [1 + len(tokens), V]: rows after new[-1] and after each tree token
        verdict = verify_tree(Draft(tokens, parents=parents), logits, SamplingParams(), None)
        path = verdict.path or ()
        start = len(self.cached)
        if self.tree_draft:
            self.runner.keep(start, (*range(m), *(m + i for i in path)))
        else:
            self.runner.rollback(start + m + len(path))
        self.cached.extend(new)
        self.cached.extend(verdict.tokens[:-1])
        self._learn(tokens, parents, verdict.argmax)
        self._slide_window(tokens, parents, window, verdict)
        rows = [0, *(i + 1 for i in path)]  # the row that chose each drafted token
        top = torch.softmax(logits[rows].float(), dim=-1).amax(dim=-1)  # [len(rows)]
        return list(verdict.tokens), top.tolist()

    def _learn(self, tokens: Sequence[int], parents: Sequence[int], argmax: Sequence[int]) -> None:
        """Harvest phrases from a verification pass over a tree (target's or draft model's choices)."""
        for path in trees.paths(parents):
            d = [tokens[i] for i in path]
            c = [argmax[0], *(argmax[i + 1] for i in path)]
            acc = next((i for i in range(len(d)) if d[i] != c[i]), len(d))
            for phrase in harvest(d, c, acc):
                self.pool.add(phrase)

    def _slide_window(self, tokens: Sequence[int], parents: Sequence[int], window: list[int], verdict: Verdict) -> None:
        """Jacobi step: the draft model's choices after the window's guesses guess the next window."""
        W = self.config.window
        if not W:
            return
        if not window:  # first forward: guess what the draft model said after the newest token
            self.window = [verdict.tokens[-1]] * W
            return
        kids, rows = trees.children(parents), [0]
        for g in window:  # the window's inputs (it may share a prefix with a phrase branch)
            rows.append(next(i for i in kids[rows[-1]] if tokens[i] == g) + 1)
        choices = [verdict.argmax[r] for r in rows]  # o_0 .. o_W: the draft model's choice after each guess
        guesses = choices[len(verdict.tokens):]  # guesses for the positions after this forward's bonus
        self.window = (guesses + [guesses[-1] if guesses else verdict.tokens[-1]] * W)[:W]

    def _lengthen(self, trunk: Draft, budget: int) -> Draft:
        """Append the top-K phrases that follow the trunk's last token as branches (a tree), if they pay."""
        K = self.config.branches if self.tree_target else min(1, self.config.branches)
        room = budget - len(trunk)
        tails = [p[1 : room + 1] for p in self.pool.lookup(trunk.tokens[-1], K)] if room > 0 else []
        tails = [t for t in tails if t]
        if not tails:
            return trunk
        if not self.tree_target:
            tokens, parents = trunk.tokens + tails[0], None
        else:
            tokens, parents = trees.from_branches([trunk.tokens + t for t in tails])
        if self.config.branches_by_cost and not self.branches_pay(trunk.confidence, len(tokens)):
            return trunk
        self._lengthened = True
        return Draft(tokens, source="ouroboros", forwards=trunk.forwards, parents=parents)

    def branches_pay(self, confidence: Sequence[float], size: int) -> bool:
        """Whether a pass over the trunk (its tokens' calibrated probabilities) lengthened to `size`
        draft tokens yields more expected output per second of target time than the trunk alone (module
        docstring). True while the costs of either pass are unknown."""
        if self.costs is None:
            return True
        t_trunk = self.costs.seconds(len(confidence) + 1)
        t_tree = self.costs.seconds(size + 1, tree=self.tree_target)  # linear when the target cannot do trees
        if t_trunk is None or t_tree is None:
            return True
        expected, joint = 1.0, 1.0  # E and P
        for c in confidence:
            joint *= c
            expected += joint
        accepted, passes = self.branch_yield
        y = (accepted + self.config.phrase_length - 1) / (passes + 1)  # Y, with a one-pass prior of a whole phrase
        return (expected + joint * y) / t_tree > expected / t_trunk

    # -- learning from the target -------------------------------------------------------------------
    def observe(self, context: Sequence[int], verdict: Verdict) -> None:
        realign(self.runner, self.cached, context)
        n = min(len(self._raw), len(verdict.draft))  # the trunk as sent (a sizer may have trimmed it)
        if verdict.draft.source == "ouroboros" and n:
            note_misses(self.misses, self._raw[:n], verdict.accepted)
            if self._lengthened and verdict.accepted >= n:
                self.branch_yield[0] = 0.9 * self.branch_yield[0] + verdict.accepted - n
                self.branch_yield[1] = 0.9 * self.branch_yield[1] + 1
            self._raw = []
        if self.config.harvest and verdict.argmax is not None and len(verdict.draft):
            d = verdict.draft
            self._learn(d.tokens, d.parents if d.parents is not None else trees.chain(len(d)), verdict.argmax)
        if self.config.context:
            self._feed_context(context)


def ouroboros_config(value: str) -> OuroborosConfig:
    """The CLI's --ouroboros text: 'gamma=16,branches=0,warm_start=no' -> OuroborosConfig(gamma=16, branches=0,
    warm_start=False)."""
    fields = {f.name: f.type for f in dataclasses.fields(OuroborosConfig)}
    options: dict[str, object] = {}
    for item in filter(None, value.split(",")):
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in fields:
            raise QuickdraftError(f"--ouroboros takes KEY=VALUE pairs with KEY one of {', '.join(fields)}; got {item!r}")
        raw = raw.strip()
        if fields[key] == "bool":
            if raw.lower() not in ("yes", "no", "true", "false", "on", "off", "1", "0"):
                raise QuickdraftError(f"--ouroboros {key} must be yes or no; got {raw!r}")
            options[key] = raw.lower() in ("yes", "true", "on", "1")
        else:
            try:
                options[key] = float(raw) if fields[key] == "float" else int(raw)
            except ValueError:
                raise QuickdraftError(f"--ouroboros {key} must be a number; got {raw!r}") from None
    return OuroborosConfig(**options)  # validates the values
