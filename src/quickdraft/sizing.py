"""How long a draft pays: a cap on draft length from measured pass costs and acceptance rates.

Verifying is not free where a pass costs in proportion to its tokens (llama.cpp on a small CPU: a
pass of 16 tokens costs 10.8 passes of one, docs/llamacpp.md), so a long draft that is soon wrong
costs more than it saves. The engine therefore caps each draft at the length with the most expected
output per second:

    t(n)  = alpha + beta * (n - 1)       seconds for a target pass over n tokens (fitted online)
    a     = P(next draft token accepted | the ones before it were), per drafter (counted online)
    E(k)  = 1 + a + a^2 + ... + a^k      expected output tokens of a pass with a k-token draft
    cap   = the k <= budget maximising E(k) / t(k + 1)

Worked example, beta / alpha = 0.65 (llama.cpp, qwen2.5-coder-0.5b, 2 cores):
    a = 0.5   E(k)/t: k=0 1.00, k=1 0.91                          -> cap 0 (drafting does not pay)
    a = 0.9   k=0 1.00, k=1 1.15, k=2 1.18, k=3 1.17              -> cap 2
    a = 0.99  k=8 1.39, k=9 1.39, k=16 1.38, k=32 1.29            -> cap 9
With beta / alpha = 0.06 (nearly flat costs) and a = 0.9 the cap is 12; with a = 1 it is the budget.

The engine asks for the cap of the drafter that proposed last before the next draft (one drafter:
always the right one), and trims a draft from another drafter of a chain to that drafter's own cap.
The cap changes how much is drafted, never which tokens are emitted: output stays exact. A source
capped to 0 is still offered one token every `probe_every` passes, so that it can show it is right
again (a prediction re-anchoring after an edit, a lookup finding a long match).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DraftSizer:
    decay: float = 0.9  # weight of older passes in the acceptance and cost estimates, per pass
    min_evidence: float = 4.0  # draft tokens tried before a source's acceptance rate is trusted
    probe_every: int = 8  # a source capped to 0 still drafts 1 token every this many passes
    # decayed sums per source: [accepted tokens, tried tokens] (tried = accepted + 1 per rejection)
    _acceptance: dict[str, list[float]] = field(default_factory=dict)
    # decayed least-squares sums of (x = n - 1, y = seconds): [w, x, y, xx, xy]; a property of the runner,
    # so a Generator passes the same list to the sizer of every request
    cost: list[float] = field(default_factory=lambda: [0.0] * 5)
    _since_probe: dict[str, int] = field(default_factory=dict)

    def cap(self, source: str, budget: int) -> int:
        """Most draft tokens worth verifying for `source` now (at most budget)."""
        a, ratio = self.acceptance(source), self.cost_ratio()
        if budget <= 0 or a is None or ratio is None:
            return max(budget, 0)
        best_k, best, expected, term = 0, 1.0, 1.0, 1.0
        for k in range(1, budget + 1):
            term *= a
            expected += term  # E(k)
            value = expected / (1.0 + ratio * k)
            if value > best:
                best_k, best = k, value
        if best_k == 0:
            waited = self._since_probe.get(source, 0) + 1
            self._since_probe[source] = waited
            if waited >= self.probe_every:
                self._since_probe[source] = 0
                return 1
        return best_k

    def acceptance(self, source: str) -> float | None:
        accepted, tried = self._acceptance.get(source, (0.0, 0.0))
        return accepted / tried if tried >= self.min_evidence else None

    def cost_ratio(self) -> float | None:
        """beta / alpha: the cost of one more token in a pass, in passes of one token (None: not known yet)."""
        w, x, y, xx, xy = self.cost
        spread = w * xx - x * x
        if w <= 0 or spread <= 1e-9 * max(1.0, w * xx):  # one pass size seen so far: no slope yet
            return None
        beta = max(0.0, (w * xy - x * y) / spread)
        alpha = (y - beta * x) / w
        return beta / alpha if alpha > 0 else None

    def record(self, source: str, drafted: int, accepted: int, pass_tokens: int, seconds: float) -> None:
        """One verified pass: its draft's fate and how long the target took over pass_tokens tokens."""
        d = self.decay
        c = self.cost
        x = pass_tokens - 1
        for i, v in enumerate((1.0, x, seconds, x * x, x * seconds)):
            c[i] = d * c[i] + v
        if drafted:
            acc = self._acceptance.setdefault(source, [0.0, 0.0])
            acc[0] = d * acc[0] + accepted
            acc[1] = d * acc[1] + accepted + (accepted < drafted)


SIZING = ("auto", "cost", "off")


def sizing_for(runner: object, choice: str) -> bool:
    """Whether to cap drafts: "cost" yes, "off" no, "auto" as the runner prefers (runner.draft_sizing:
    the llama.cpp runner, whose passes cost in proportion to their tokens; not transformers in float32,
    whose measured speedups were tuned without it)."""
    if choice not in SIZING:
        from .errors import QuickdraftError

        raise QuickdraftError(f"draft_sizing must be one of {', '.join(SIZING)}; got {choice!r}")
    return (getattr(runner, "draft_sizing", "off") if choice == "auto" else choice) == "cost"
