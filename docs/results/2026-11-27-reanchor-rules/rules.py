"""Re-anchoring rules, replayed through the engine (README.md): three rules on the evidence of 4 tokens anywhere and 1
within 64 of hint (none kept), and that evidence against the kept one (2 anywhere, 1 within 24).

    .venv/bin/python docs/results/2026-11-27-reanchor-rules/rules.py outputs.jsonl   # collect_outputs.py's rows
    .venv/bin/python docs/results/2026-11-27-reanchor-rules/rules.py held            # the oracle's held-out tasks
    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
      .venv/bin/python docs/results/2026-11-27-reanchor-rules/rules.py model refactor 4 12  # the evidence, on the model
"""
import json
import sys

sys.path.insert(0, "scripts")
from draft_replay import cost_of, replay  # noqa: E402

import quickdraft.sizing as sizing  # noqa: E402
from quickdraft.drafters.build import PredictionOrLookup as PL  # noqa: E402
from quickdraft.drafters.lookup import PromptLookupDrafter as Lookup  # noqa: E402
from quickdraft.drafters.prediction import PredictionConfig, PredictionDrafter  # noqa: E402

BEFORE, AFTER = PredictionConfig(strong_ngram=4, window=64), PredictionConfig()  # the evidence before and after


class History(PredictionDrafter):
    """Candidates of equal fresh evidence ranked by the whole output's backward match (the hint of a same-length
    replacement first), then by distance to hint: in repetitive text, prefer the copy the output came from."""
    def _match_length(self, out, j, fresh=True):
        if fresh:
            return super()._match_length(out, j)
        P, L = self.prediction, 0
        while L < 64 and L < len(out) and L < j and out[-1 - L] == self.subs.get(P[j - 1 - L], P[j - 1 - L]):
            L += 1
        return L

    def _realign(self, out):
        P, n = self.prediction, self.realignments
        scored = {j: self._match_length(out, j) for j in self._candidates(out) | {self.hint} if j < len(P)}
        if self.replaced and self.hint in scored and not any(scored.get(self.hint + d) for d in (-1, 1)):
            scored[self.hint] = max(scored[self.hint], 1)
        ok = {j: L for j, L in scored.items() if L >= self.config.recovery_threshold}
        if not ok:
            return
        history = {j: 65 if self.replaced and j == self.hint else self._match_length(out, j, fresh=False) for j in ok}
        best = max(ok, key=lambda j: (ok[j], history[j], -abs(j - self.hint), j >= self.hint, -j))
        self.hint = best  # the base rule then finds best on top (equal L, nearest to hint)
        super()._realign(out)
        assert self.realignments > n


def inherited(div):
    class Inherited(PredictionDrafter):
        """A re-anchor at hint (a same-length replacement) drafts 1/div of the run the lost alignment had."""
        def _realign(self, out):
            hint, prior, n = self.hint, self.agreed, self.realignments
            super()._realign(out)
            if self.realignments > n and self.anchor == hint:
                self.run = max(self.run, min(64, prior // div))
    return Inherited


class Learned(PredictionDrafter):
    """The first draft after a re-anchor as long as the shortest of the last 3 runs that followed a re-anchor."""
    def begin(self, prompt):
        super().begin(prompt)
        self.after, self.from_realign = [], False

    def _realign(self, out):
        if self.from_realign and self.anchor is None and self.agreed:
            self.after.append(self.agreed)
            self.from_realign = False
        n = self.realignments
        super()._realign(out)
        if self.realignments > n:
            self.from_realign = True
            if len(self.after) >= 2:
                self.run = max(self.run, min(128, min(self.after[-3:])) // self.config.growth)


# pass costs measured on the AMD EPYC, as ../2026-11-27-trees-after-a-miss/replay_trees.py has them
SHORT = cost_of({1: 1, 9: 1.16, 17: 1.6, 26: 2.18, 51: 3.5, 89: 6.0, 129: 8.2})  # after ~500 cached tokens
LONG = cost_of({1: 1, 9: 1.17, 17: 1.64, 21: 1.9, 63: 4.6, 91: 7.2, 129: 9.2})  # after ~3,000
RULES = {"prediction": PredictionDrafter, "history tie-break": History, "inherited run, 1/2": inherited(2),
         "inherited run, 1/8": inherited(8), "learned first draft": Learned}
RULES = {name: (lambda rule: lambda p: rule(p, BEFORE))(rule) for name, rule in RULES.items()}
RULES.update({"evidence 2 anywhere, 1 within 24 (kept)": lambda p: PredictionDrafter(p, AFTER),
              "prediction+lookup, evidence before": lambda p: PL(PredictionDrafter(p, BEFORE), Lookup()),
              "prediction+lookup, evidence kept": lambda p: PL(PredictionDrafter(p, AFTER), Lookup())})


def model(wl, lo, hi):
    """The evidence before and after on the model (bf16, greedy, 512 new tokens), the order rotating by task."""
    import quickdraft
    from quickdraft.bench import workloads

    names = ["prediction", "evidence 2 anywhere, 1 within 24 (kept)", "prediction+lookup, evidence before",
             "prediction+lookup, evidence kept"]
    tasks = list(workloads.WORKLOADS[wl].load(workloads.data_dir(), None))[lo:hi]
    gen = quickdraft.load("qwen2.5-coder-0.5b")
    print(f"| {wl} task | tokens | prediction: before / after | prediction+lookup: before / after | same output |")
    print("|---|---|---|---|---|")
    tot = {n: [0, 0.0] for n in names}
    for i, t in enumerate(tasks):
        ids = gen.tokenizer.encode(t.prediction, add_special_tokens=False)
        res = {}
        for n in names[i % 4:] + names[: i % 4]:
            res[n] = gen.generate(t.messages, drafter=RULES[n](ids), max_new_tokens=512)
            tot[n][0] += res[n].stats.target_passes
            tot[n][1] += res[n].stats.decode_s
        same = len({tuple(r.token_ids) for r in res.values()}) == 1
        c = [f"{res[n].stats.target_passes} passes, {res[n].stats.decode_s:.2f} s" for n in names]
        print(f"| {t.id[:32]} | {res[names[0]].stats.completion_tokens} | {c[0]} / {c[1]} | {c[2]} / {c[3]} | {same} |",
              flush=True)
    c = [f"{tot[n][0]} passes, {tot[n][1]:.2f} s" for n in names]
    print(f"| all | | {c[0]} / {c[1]} | {c[2]} / {c[3]} | |")


if sys.argv[1] == "model":
    model(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    sys.exit()
if sys.argv[1] == "held":  # plain outputs of ../2026-11-26-heldout-again, costs of ../2026-11-27-substitutions
    from pathlib import Path

    from draft_replay import plain_turns
    from transformers import AutoTokenizer

    from quickdraft import models
    from quickdraft.tokenizer import HFTokenizer

    tok = HFTokenizer(AutoTokenizer.from_pretrained(models.resolve("qwen2.5-coder-0.5b", progress=False)))
    B = Path("docs/results/2026-11-26-heldout-again/quickdraft-bench")
    rows = [{"workload": w, "prediction": tok.encode(t.prediction, add_special_tokens=False), "prompt": p, "output": o}
            for w in ("refactor", "edit_eval") for r, t, turn, p, o in plain_turns(B, tok, {w}) if not turn and o]
    LONG = cost_of({1: 1, 2: 1.09, 3: .96, 4: .97, 6: 1, 8: 1.16, 12: 1.38, 16: 1.62, 24: 2.12, 33: 2.64, 48: 3.46,
                    65: 4.69, 97: 6.54, 129: 8.39})
    SHORT = cost_of({1: 1, 2: 1.03, 3: .94, 4: .96, 6: .93, 8: 1.05, 12: 1.2, 16: 1.34, 24: 1.69, 33: 2.12, 48: 2.76,
                     65: 3.81, 97: 5.25, 129: 6.79})
else:
    rows = [json.loads(line) for line in open(sys.argv[1])]
print("| workload (tasks) | rule | passes | modelled time | tasks faster / slower by 1 % |\n|---|---|---|---|---|")
for wl in sorted({r["workload"] for r in rows}):
    rs, base = [r for r in rows if r["workload"] == wl], None
    for name, make in RULES.items():
        shared, times, passes = sizing.PassCosts(), [], 0
        for r in rs:
            steps = []
            times.append(replay(make(r["prediction"]), r["prompt"], r["output"], LONG if wl == "refactor" else SHORT,
                                shared, steps))
            passes += len(steps)
        base = base or times
        up, down = sum(a < b * 0.99 for a, b in zip(times, base)), sum(a > b * 1.01 for a, b in zip(times, base))
        print(f"| {wl} ({len(rs)}) | {name} | {passes} | {sum(times):.1f} | {up} / {down} |", flush=True)
