"""Tree drafts for the prediction drafter, replayed through the engine (issue 44, item 2): are they worth their rows?

Two prototypes, kept here because they did not pay (README.md):
  * Alignments: after a re-anchor the drafter keeps up to `branches` alignments alive (the winner and the runners-up
    with at least `min_evidence` tokens of agreement), drafts their continuations as one trie (a branch costs rows
    only where it differs from the others, at most `extra` of them) and keeps the ones the output follows.
  * TreeOf: the prediction's draft as the trunk, prompt lookup's draft (up to `extra` tokens past what they share) as
    a branch: lookup as a branch where prediction+lookup takes it only as a fallback.
A tree pass is priced as a linear pass of as many rows (a lower bound: the real runner's tree mask and the cache's
gather after it cost more), and the sizer counts a tree's tokens as its deepest path's.

    .venv/bin/python docs/results/2026-11-27-verify-vs-prefill/collect_outputs.py refactor 12 22 outputs.jsonl
    .venv/bin/python docs/results/2026-11-27-verify-vs-prefill/collect_outputs.py edit_eval 12 40 outputs.jsonl
    .venv/bin/python docs/results/2026-11-27-verify-vs-prefill/collect_outputs.py apply_edit_eval 12 60 outputs.jsonl
    .venv/bin/python docs/results/2026-11-27-trees-after-a-miss/replay_trees.py outputs.jsonl
"""
import json
import sys

sys.path.insert(0, "scripts")
from draft_replay import cost_of, replay  # noqa: E402

import quickdraft.sizing as sizing  # noqa: E402
from quickdraft import trees  # noqa: E402
from quickdraft.core import Draft  # noqa: E402
from quickdraft.drafters.base import FirstOf  # noqa: E402
from quickdraft.drafters.build import PredictionOrLookup  # noqa: E402
from quickdraft.drafters.lookup import PromptLookupDrafter  # noqa: E402
from quickdraft.drafters.prediction import PredictionDrafter  # noqa: E402

DEPTH = {"last": None}  # the deepest path of the last tree proposed: what the sizer counts as drafted
_record = sizing.DraftSizer.record


def record(self, source, drafted, accepted, pass_tokens, seconds, draft_seconds=0.0, tree=False):
    return _record(self, source, DEPTH["last"] if tree and DEPTH["last"] else drafted, accepted, pass_tokens, seconds,
                   draft_seconds, tree)


sizing.DraftSizer.record = record


def trie(trunk: tuple[int, ...], branches: list[list[int]], extra: int) -> tuple[list[int], list[int], list[list[int]]]:
    """Tokens and parents of a tree: trunk first (a chain), then each branch from the root, sharing nodes with what is
    there, at most `extra` new nodes per branch; members[node] = the branches through it (0: the trunk)."""
    tokens, parents, members = list(trunk), list(range(-1, len(trunk) - 1)), [[0] for _ in trunk]
    child = {(parents[i], tokens[i]): i for i in range(len(tokens))}
    for b, seq in enumerate(branches, 1):
        node, added = -1, 0
        for t in seq:
            nxt = child.get((node, t))
            if nxt is None:
                if added == extra:
                    break
                tokens.append(t), parents.append(node), members.append([])
                nxt = child[node, t] = len(tokens) - 1
                added += 1
            members[nxt].append(b)
            node = nxt
    return tokens, parents, members


class Alignments(PredictionDrafter):
    def __init__(self, prediction, branches=2, extra=8, min_evidence=1):
        self.branches, self.extra, self.min_evidence = branches, extra, min_evidence
        super().__init__(prediction)

    def begin(self, prompt):
        super().begin(prompt)
        self.alts, self._members = [], None

    def propose(self, context, budget):
        self._members, DEPTH["last"] = None, None
        draft = super().propose(context, budget)
        if not self.alts or not draft.tokens:
            return draft
        seqs = [[self.subs.get(t, t) for t in self.prediction[a : a + len(draft)]] for a in self.alts]
        tokens, parents, members = trie(draft.tokens, seqs, self.extra)
        self._members = (members, [self.anchor, *self.alts])
        if len(tokens) == len(draft):  # every alignment drafts the same tokens: a linear draft
            return draft
        DEPTH["last"] = max(trees.depths(parents))
        return Draft(tuple(tokens), source="prediction", parents=tuple(parents))

    def observe(self, context, verdict):
        new, P = verdict.tokens, self.prediction
        if self._members is not None:
            members, anchors = self._members
            path = verdict.path if verdict.path is not None else tuple(range(verdict.accepted))
            on = [anchors[b] for b in members[path[-1]]] if path else anchors  # alignments holding the accepted path
            follows = [a for a in on if all(a + i < len(P) and new[i] in (P[a + i], self.subs.get(P[a + i]))
                                            for i in range(len(new)))]
            if self.anchor not in follows and (follows or self.anchor not in on):
                self.anchor = (follows or on)[0]  # the branch the output took
            self.alts = [a + len(new) for a in follows if a != self.anchor]
        super().observe(context, verdict)

    def _realign(self, out):
        realigned, P = self.realignments, self.prediction
        scored = {j: self._match_length(out, j) for j in self._candidates(out) | {self.hint} if j < len(P)}
        super()._realign(out)
        if self.realignments == realigned:  # no new anchor: the alignments kept alive stay
            self.alts = [a for a in self.alts if a < len(P)] if self.anchor is not None else []
            return
        others = [j for j, L in scored.items() if j != self.anchor and L >= self.min_evidence]
        self.alts = sorted(others, key=lambda j: (-scored[j], abs(j - self.anchor)))[: self.branches - 1]


class TreeOf(FirstOf):
    def __init__(self, drafters, extra=8):
        super().__init__(drafters)
        self.extra = extra

    def propose(self, context, budget):
        DEPTH["last"] = None
        a, b = (d.propose(context, budget) for d in self.drafters)
        if not a.tokens or not b.tokens:
            return a if a.tokens else b
        tokens, parents, _ = trie(a.tokens, [list(b.tokens)], self.extra)
        if len(tokens) == len(a):
            return a
        DEPTH["last"] = max(trees.depths(parents))
        return Draft(tuple(tokens), source="prediction", parents=tuple(parents))


# pass costs measured on the AMD EPYC (../2026-11-27-substitutions/replay_tuning.py)
SHORT = cost_of({1: 1, 9: 1.16, 17: 1.6, 26: 2.18, 51: 3.5, 89: 6.0, 129: 8.2})  # after ~500 cached tokens
LONG = cost_of({1: 1, 9: 1.17, 17: 1.64, 21: 1.9, 63: 4.6, 91: 7.2, 129: 9.2})  # after ~3,000
CONFIGS = {
    "prediction": lambda p: PredictionDrafter(p),
    "alignments, 2 branches, 8 rows": lambda p: Alignments(p, 2, 8),
    "alignments, 3 branches, 8 rows": lambda p: Alignments(p, 3, 8),
    "alignments, 3 branches, 4 rows": lambda p: Alignments(p, 3, 4),
    "alignments, 2 branches, evidence 2": lambda p: Alignments(p, 2, 8, min_evidence=2),
    "prediction+lookup": lambda p: PredictionOrLookup(PredictionDrafter(p), PromptLookupDrafter()),
    "lookup as a branch, 4 rows": lambda p: TreeOf([PredictionDrafter(p), PromptLookupDrafter()], 4),
    "lookup as a branch, 8 rows": lambda p: TreeOf([PredictionDrafter(p), PromptLookupDrafter()], 8),
    "lookup as a branch, 16 rows": lambda p: TreeOf([PredictionDrafter(p), PromptLookupDrafter()], 16),
}

rows = [json.loads(line) for line in open(sys.argv[1] if len(sys.argv) > 1 else "outputs.jsonl")]
print("time in one-token passes, summed over the tasks; against prediction (the alignments) or prediction+lookup")
for wl in sorted({r["workload"] for r in rows}):
    rs = [r for r in rows if r["workload"] == wl]
    for name, make in CONFIGS.items():
        shared, time, passes = sizing.PassCosts(), 0.0, 0
        for r in rs:
            steps = []
            time += replay(make(r["prediction"]), r["prompt"], r["output"], LONG if wl == "refactor" else SHORT, shared,
                           steps)
            passes += len(steps)
        if name in ("prediction", "prediction+lookup"):
            base = time
        print(f"| {wl} ({len(rs)}) | {name} | {passes} passes | {time:.1f} | {time / base:.3f} |", flush=True)
