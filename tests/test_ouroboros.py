"""The Ouroboros drafter: exact against plain decoding under every mechanism, lossless under sampling,
the draft cache kept in step, phrase drafting and lengthening doing what they claim, and the API,
CLI and server options that reach it."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from conftest import TreeMarkovRunner, assert_follows, reference_greedy, tiny_model
from quickdraft.core import Stats
from quickdraft.drafters.phrase_pool import PhrasePool
from quickdraft.drafters.ouroboros import OuroborosConfig, OuroborosDrafter
from quickdraft.engine import Limits, generate
from quickdraft.errors import QuickdraftError
from quickdraft.runners.base import Runner
from quickdraft.runners.hf import HFRunner
from quickdraft.runners.scripted import ScriptedRunner
from quickdraft.sampling import SamplingParams, probs_from_logits
from quickdraft.sizing import PassCosts

ALL_ON = OuroborosConfig(gamma=8, window=4, branches=3, draft_phrases=3)
CONFIGS = {
    "default": OuroborosConfig(),
    "all on, short gamma": ALL_ON,
    "token by token, no lengthening": replace(ALL_ON, draft_phrases=0, window=0, branches=0),
    "lengthening only": replace(ALL_ON, draft_phrases=0, window=0),
    "phrase drafting only": replace(ALL_ON, branches=0, harvest=False),
    "lookahead window only": replace(ALL_ON, draft_phrases=0, branches=0, context=False, harvest=False),
    "many branches": replace(ALL_ON, branches=8, phrase_length=3),
}


class Linear(Runner):
    """A runner without trees (like llama.cpp): the drafter must fall back to linear drafts."""

    def __init__(self, runner):
        self.inner = runner
        self.vocab_size, self.max_context = runner.vocab_size, runner.max_context

    length = property(lambda self: self.inner.length)

    def reset(self):
        self.inner.reset()

    def prefill(self, tokens):
        self.inner.prefill(tokens)

    def forward(self, tokens):
        return self.inner.forward(tokens)

    def rollback(self, length):
        self.inner.rollback(length)


def run(target_runner, draft_runner, prompt, n, config, pool=None, stats=None, trees_on_target=True, costs=None):
    pool = pool if pool is not None else PhrasePool(config.pool)
    drafter = OuroborosDrafter(draft_runner, pool, config, trees_on_target=trees_on_target, costs=costs)
    steps = list(generate(target_runner, prompt, Limits(n), drafter, stats=stats))
    return [t for s in steps for t in s.tokens], steps, drafter


PROMPT = [5, 17, 33, 2, 71, 5, 17, 33, 2, 9, 9, 40, 41, 42, 5, 17]


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("draft", ["same model (always right)", "other model (mostly wrong)", "noisy copy (partly right)"])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_ouroboros_reproduces_plain_greedy_decoding(arch, draft, config):
    target = tiny_model(arch)
    if draft.startswith("same"):
        draft_model = target
    elif draft.startswith("other"):
        draft_model = tiny_model(arch, seed=1)
    else:
        draft_model = tiny_model(arch)
        with torch.no_grad():
            for p in draft_model.parameters():
                p.add_(torch.randn_like(p) * 0.05)
    n = 48
    truth = reference_greedy(target, PROMPT, n)
    stats = Stats()
    out, steps, drafter = run(HFRunner(target), HFRunner(draft_model), PROMPT, n, CONFIGS[config], stats=stats)
    assert out == truth
    if draft.startswith("same"):
        assert stats.accepted_prediction_tokens > n // 2  # a draft model equal to the target is mostly kept
    # the draft cache is a prefix of the context (+ draft) after every request
    context = PROMPT + out
    assert drafter.cached == context[: len(drafter.cached)]
    assert drafter.runner.length == len(drafter.cached)


@pytest.mark.parametrize("config", ["default", "all on, short gamma", "many branches"])
def test_ouroboros_on_runners_without_trees(config):
    # llama.cpp-like runners: phrases are tried one at a time and drafts lengthened by one phrase.
    target = tiny_model("llama")
    n = 40
    truth = reference_greedy(target, PROMPT, n)
    for draft_model in (target, tiny_model("llama", seed=1)):
        stats = Stats()
        out, steps, _ = run(Linear(HFRunner(target)), Linear(HFRunner(draft_model)), PROMPT, n, CONFIGS[config],
                            stats=stats, trees_on_target=False)
        assert out == truth
        assert all(s.verdict.draft.parents is None for s in steps)


def test_stops_at_eos_and_limits_inside_drafted_blocks():
    script = [4, 5, 6, 4, 5, 6, 4, 5, 7, 8]
    prompt = [1, 4, 5, 6, 4, 5, 6, 4, 5, 6]
    # The draft model writes the same script: whole blocks are drafted, EOS (7) falls inside one.
    drafter = OuroborosDrafter(ScriptedRunner(script, 12, eos=11), PhrasePool(ALL_ON.pool), ALL_ON)
    steps = list(generate(ScriptedRunner(script, 12, eos=11), prompt, Limits(50, frozenset({11})), drafter))
    assert [t for s in steps for t in s.tokens] == script  # 7 is an ordinary token here; 11 ends the script
    drafter = OuroborosDrafter(ScriptedRunner(script, 12, eos=11), PhrasePool(ALL_ON.pool), ALL_ON)
    steps = list(generate(ScriptedRunner(script, 12, eos=11), prompt, Limits(50, frozenset({7})), drafter))
    assert [t for s in steps for t in s.tokens] == [4, 5, 6, 4, 5, 6, 4, 5]
    assert steps[-1].finish_reason == "stop" and len(steps) < 8
    drafter = OuroborosDrafter(ScriptedRunner(script, 12, eos=11), PhrasePool(ALL_ON.pool), ALL_ON)
    steps = list(generate(ScriptedRunner(script, 12, eos=11), prompt, Limits(5), drafter))
    assert [t for s in steps for t in s.tokens] == [4, 5, 6, 4, 5]
    assert steps[-1].finish_reason == "length"


def test_phrase_drafting_takes_several_tokens_per_draft_forward():
    # The prompt repeats a phrase that the output repeats too: with phrases, one draft forward drafts
    # several tokens; token by token, one.
    script = [20, 21, 22, 23, 24, 25] * 5
    prompt = [1, 20, 21, 22, 23, 24, 25, 20, 21, 22, 23, 24, 25, 2]
    with_phrases = replace(OuroborosConfig(), branches=0, harvest=False, warm_start=False)
    without = replace(with_phrases, draft_phrases=0)
    counts = {}
    for name, config in (("phrases", with_phrases), ("token by token", without)):
        stats = Stats()
        out, _, _ = run(ScriptedRunner(script, 30, eos=29), ScriptedRunner(script, 30, eos=29), prompt, 30, config,
                        stats=stats)
        assert out == script
        counts[name] = (stats.draft_forwards, stats.accepted_prediction_tokens)
    assert counts["phrases"][0] * 3 <= counts["token by token"][0]
    assert counts["phrases"][1] >= counts["token by token"][1]


def test_lengthening_adds_the_branch_the_target_keeps():
    # The draft model knows only the first token; the pool knows two continuations of it, the second
    # of which is right: lengthening sends both as branches and the target keeps the right one.
    script = [20, 21, 22, 23, 24, 25, 26]
    wrong_draft = [20, 9, 9, 9, 9, 9, 9, 9, 9]
    config = OuroborosConfig(gamma=1, branches=2, draft_phrases=0, harvest=False, context=False, warm_start=True)
    pool = PhrasePool(config.pool)
    pool.add((20, 21, 22, 23))  # right
    pool.add((20, 30, 31))  # wrong, most recent: the first branch
    stats = Stats()
    out, steps, _ = run(ScriptedRunner(script, 40, eos=39), ScriptedRunner(wrong_draft, 40, eos=39), [1, 2], 5, config,
                        pool=pool, stats=stats)
    assert out == script[:5]
    first = steps[0].verdict
    assert first.draft.parents is not None  # a tree: trunk (20,) with two branches
    assert first.tokens == (20, 21, 22, 23, 24)  # the second branch, then the target's bonus
    assert first.path == (0, 3, 4, 5)


def test_no_lengthening_after_a_draft_the_draft_model_doubts():
    # As above, but the draft model's top probability (0.998 on its scripted token) is below
    # min_confidence: it stops after one token, and no branches hang from a token it doubts.
    script = [20, 21, 22, 23, 24, 25, 26]
    config = OuroborosConfig(gamma=4, branches=2, draft_phrases=0, harvest=False, context=False, warm_start=True,
                             min_confidence=0.999)
    pool = PhrasePool(config.pool)
    pool.add((20, 21, 22, 23))
    out, steps, _ = run(ScriptedRunner(script, 40, eos=39), ScriptedRunner(script, 40, eos=39), [1, 2], 5, config,
                        pool=pool)
    assert out == script[:5]
    first = steps[0].verdict
    assert first.draft.parents is None and first.draft.tokens == (20,)
    assert first.tokens == (20, 21)
    pool.add((23, 24, 25))
    pool.add((23, 9, 9))
    confident = replace(config, min_confidence=0.3)  # trusted: 4 tokens, then both phrases after 23 as branches
    out, steps, _ = run(ScriptedRunner(script, 40, eos=39), ScriptedRunner(script, 40, eos=39), [1, 2], 7, confident,
                        pool=pool)
    assert out == script[:7]
    assert steps[0].verdict.draft.parents is not None and steps[0].verdict.tokens == (20, 21, 22, 23, 24, 25, 26)


def test_min_joint_ends_the_draft_where_the_draft_model_doubts_the_whole():
    # The scripted draft model gives its token 0.998: the draft's odds after k tokens are 0.998^k.
    # min_joint 0.995 keeps two tokens (0.996) and drops the third (0.994); no branches after it.
    script = [20, 21, 22, 23, 24, 25, 26, 27, 28]
    config = OuroborosConfig(gamma=6, branches=2, draft_phrases=0, harvest=False, context=False, min_joint=0.995)
    pool = PhrasePool(config.pool)
    pool.add((21, 22, 23))  # would lengthen a trusted draft ending in 21
    pool.add((25, 26, 27))
    out, steps, _ = run(ScriptedRunner(script, 40, eos=39), ScriptedRunner(script, 40, eos=39), [1, 2], 9, config,
                        pool=pool)
    assert out == script
    first = steps[0].verdict.draft
    assert first.tokens == (20, 21) and first.parents is None
    assert first.confidence == pytest.approx((0.998, 0.998), abs=1e-3)
    out, steps, _ = run(ScriptedRunner(script, 40, eos=39), ScriptedRunner(script, 40, eos=39), [1, 2], 9,
                        replace(config, min_joint=0.0), pool=pool)
    assert out == script and steps[0].verdict.draft.tokens == tuple(script[:8])  # 6 of its own, then 26, 27


def linear_costs(per_token: float) -> PassCosts:
    """Pass costs t(n) = 1 + per_token (n - 1), measured at 1 and 64 tokens (interpolated between)."""
    costs = PassCosts()
    costs.record(1, 1.0)
    costs.record(64, 1.0 + 63 * per_token)
    return costs


def test_branches_pay_by_expected_output_per_second():
    # (E + P Y) / t(tree) > E / t(trunk): a 16-token trunk, lengthened to 24 draft tokens.
    config = OuroborosConfig(phrase_length=6)  # prior Y = 5
    def pays(confidence, costs, branch_yield=(0.0, 0.0)):
        d = OuroborosDrafter(ScriptedRunner([1], 8, eos=7), PhrasePool(config.pool), config, costs=costs)
        d.branch_yield = list(branch_yield)
        return d.branches_pay(confidence, 24)
    doubtful, sure = (0.9,) * 16, (1.0,) * 16  # E 8.33, P 0.185 (gain 0.93 tokens); E 17, P 1 (gain 5)
    assert pays(doubtful, None) and pays(sure, None)  # no costs measured: lengthen, as the paper does
    one_size = PassCosts()
    one_size.record(1, 1.0)
    assert pays(doubtful, one_size)
    assert pays(doubtful, linear_costs(0.002))  # nearly flat, a GPU: t(25) / t(17) = 1.016 < 1.11
    assert not pays(doubtful, linear_costs(0.084))  # this CPU's 1.5B (0.287 s + 0.024 s a token): 1.29 > 1.11
    assert pays(sure, linear_costs(0.01))  # 1.069 < 22 / 17
    assert not pays(sure, linear_costs(0.01), branch_yield=(0.0, 10.0))  # Y = 5 / 11: 17.45 / 17 < 1.069


def test_lengthening_follows_the_measured_costs_and_learns_what_branches_yield():
    # As in test_lengthening_adds_the_branch_the_target_keeps, with pass costs: steep ones keep the
    # trunk alone, flat ones lengthen it; the output is plain decoding's either way.
    script = [20, 21, 22, 23, 24, 25, 26]
    wrong_draft = [20, 9, 9, 9, 9, 9, 9, 9, 9]
    config = OuroborosConfig(gamma=1, branches=2, draft_phrases=0, harvest=False, context=False, warm_start=True)
    for per_token, tree in ((5.0, False), (0.0, True)):  # t(n) about in proportion to n; flat
        pool = PhrasePool(config.pool)
        pool.add((20, 21, 22, 23))
        pool.add((20, 30, 31))
        out, steps, drafter = run(ScriptedRunner(script, 40, eos=39), ScriptedRunner(wrong_draft, 40, eos=39), [1, 2],
                                  5, config, pool=pool, costs=linear_costs(per_token))
        assert out == script[:5]
        first = steps[0].verdict
        assert (first.draft.parents is not None) == tree
        assert first.tokens == ((20, 21, 22, 23, 24) if tree else (20, 21))
    assert drafter.branch_yield == [3.0, 1.0]  # the flat run's one lengthened pass: 3 branch tokens kept
    always = replace(config, branches_by_cost=False)  # the paper's rule: lengthen whatever it costs
    pool = PhrasePool(config.pool)
    pool.add((20, 21, 22, 23))
    _, steps, _ = run(ScriptedRunner(script, 40, eos=39), ScriptedRunner(wrong_draft, 40, eos=39), [1, 2], 5, always,
                      pool=pool, costs=linear_costs(5.0))
    assert steps[0].verdict.draft.parents is not None


def test_harvest_from_the_target_feeds_the_pool():
    script = [20, 21, 22, 23, 24, 25, 26, 27]
    draft_script = [20, 21, 9, 23, 24, 25, 26, 27]  # wrong at one token, right after it
    config = OuroborosConfig(gamma=8, branches=0, draft_phrases=0, context=False, warm_start=True, min_confidence=0)
    pool = PhrasePool(config.pool)
    run(ScriptedRunner(script, 40, eos=39), ScriptedRunner(draft_script, 40, eos=39), [1, 2], 8, config, pool=pool)
    # the target agreed with 23.. after the wrong 9: harvested as a phrase following 9
    assert pool.lookup(9, 4) and pool.lookup(9, 4)[0][:3] == (9, 23, 24)
    pool_off = PhrasePool(config.pool)
    run(ScriptedRunner(script, 40, eos=39), ScriptedRunner(draft_script, 40, eos=39), [1, 2], 8,
        replace(config, harvest=False), pool=pool_off)
    assert not pool_off.lookup(9, 4)


def test_warm_start_keeps_the_pool_and_cold_start_clears_it():
    target = tiny_model("llama")
    for warm in (True, False):
        config = replace(OuroborosConfig(), warm_start=warm)
        pool = PhrasePool(config.pool)
        run(HFRunner(target), HFRunner(target), PROMPT, 12, config, pool=pool)
        first = len(pool)
        assert first > 0
        run(HFRunner(target), HFRunner(target), [7, 8, 9], 6, config, pool=pool)
        phrases = {p for bucket in pool._by_first.values() for p in bucket}
        from_first_request = any(p[:3] == tuple(PROMPT[:3]) for p in phrases)
        assert from_first_request == warm


def test_sampled_output_keeps_the_joint_distribution():
    """Sampled target, Ouroboros drafts (trees) from a different Markov draft model: the first three
    tokens follow plain sampling's exact joint distribution (chi-square, significance 1e-4)."""
    g = torch.Generator().manual_seed(5)
    V = 4
    table = torch.randn(V, V, generator=g) * 1.5  # [V, V]
    draft_table = torch.randn(V, V, generator=g) * 1.5  # [V, V]
    params = SamplingParams(temperature=0.9, top_k=3)
    step = probs_from_logits(table, params)  # [V, V]
    prompt = [0, 1, 2, 3, 1, 0, 1, 2]
    truth = step[prompt[-1]][:, None, None] * step[:, :, None] * step[None, :, :]  # [V, V, V]
    config = OuroborosConfig(gamma=3, branches=3, phrase_length=3, warm_start=True)
    pool = PhrasePool(config.pool)
    target, draft = TreeMarkovRunner(table), TreeMarkovRunner(draft_table)
    counts = torch.zeros(V, V, V)
    n = 3000
    for seed in range(n):
        drafter = OuroborosDrafter(draft, pool, config)
        steps = generate(target, prompt, Limits(3), drafter, sampling=SamplingParams(0.9, top_k=3, seed=seed))
        out = [t for s in steps for t in s.tokens]
        counts[out[0], out[1], out[2]] += 1
    assert_follows(counts, truth)


@pytest.mark.parametrize("kwargs, message", [
    (dict(gamma=0), "gamma must be an integer >= 1"),
    (dict(branches=-1), "branches must be an integer >= 0"),
    (dict(window=True), "window must be an integer"),
    (dict(phrase_length=1), "phrase_length must be an integer >= 2"),
    (dict(min_confidence=1.0), "min_confidence"),
    (dict(min_joint=-0.1), "min_joint must be a number in"),
])
def test_bad_config_is_refused(kwargs, message):
    with pytest.raises(QuickdraftError, match=message):
        OuroborosConfig(**kwargs)


def test_cli_parses_ouroboros_settings():
    from quickdraft.drafters.ouroboros import ouroboros_config

    assert ouroboros_config("") == OuroborosConfig()
    assert ouroboros_config("gamma=16, branches=0,warm-start=no") == OuroborosConfig(gamma=16, branches=0,
                                                                                      warm_start=False)
    assert ouroboros_config("min_joint=0,branches_by_cost=no") == OuroborosConfig(min_joint=0.0, branches_by_cost=False)
    for bad, message in (("gama=3", "KEY one of"), ("gamma", "KEY=VALUE"), ("gamma=x", "must be a number"),
                         ("harvest=maybe", "yes or no"), ("gamma=0", ">= 1")):
        with pytest.raises(QuickdraftError, match=message):
            ouroboros_config(bad)


def test_api_runs_ouroboros_and_refuses_what_it_cannot_do():
    from quickdraft.api import Generator
    from quickdraft.tokenizer import ByteTokenizer

    tok = ByteTokenizer()
    text = "hello world, hello world, hello again"
    script = tok.encode(text)
    plain = Generator(ScriptedRunner(script, 257, tok.eos), tok)
    with pytest.raises(QuickdraftError, match="needs a draft model"):
        plain.generate("hi", drafter="ouroboros")
    gen = Generator(ScriptedRunner(script, 257, tok.eos), tok, draft_runner=ScriptedRunner(script, 257, tok.eos))
    res = gen.generate("hi", drafter="ouroboros", max_new_tokens=60, pool_scope="a")
    assert res.text == text and res.stats.accepted_prediction_tokens > 0
    assert ("a", OuroborosConfig()) in gen.phrase_pools and len(gen.phrase_pool(OuroborosConfig(), "a")) > 0
    assert ("", OuroborosConfig()) not in gen.phrase_pools  # scopes do not share pools
    with pytest.raises(QuickdraftError, match="verifies tree drafts on this runner, which mentored acceptance"):
        gen.generate("hi", drafter="ouroboros", sampling=SamplingParams(1.0), acceptance="mentored", kl_bound=0.1)
    with pytest.raises(QuickdraftError, match="must be an OuroborosConfig"):
        gen.generate("hi", drafter="ouroboros", ouroboros={"gamma": 3})
    with pytest.raises(QuickdraftError, match="pool_scope must be a string"):
        gen.generate("hi", drafter="ouroboros", pool_scope=3)
    with pytest.raises(QuickdraftError, match="would ignore it"):
        gen.generate("hi", drafter="ouroboros", prediction="hello")


def test_linear_ouroboros_drafts_take_the_lossy_rules():
    # On a target without trees (as llama.cpp) Ouroboros drafts linearly, which every acceptance rule verifies:
    # mentored at D = 0 gives exact's tokens under the same seed, and above 0 keeps its bound per token.
    from conftest import MarkovRunner
    from quickdraft.api import Generator
    from quickdraft.tokenizer import ByteTokenizer

    g = torch.Generator().manual_seed(7)
    table = torch.randn(257, 257, generator=g) * 3.0  # [V, V]
    draft_table = table + torch.randn(257, 257, generator=g)
    tok = ByteTokenizer()

    def run(seed, **rule):
        gen = Generator(MarkovRunner(table), tok, draft_runner=MarkovRunner(draft_table))
        return gen.generate("hi", drafter="ouroboros", max_new_tokens=40,
                            sampling=SamplingParams(1.0, seed=seed), draft_sizing="off", **rule)

    kl = 0.0
    for seed in range(6):
        exact = run(seed)
        assert exact.stats.accepted_prediction_tokens > 0  # the drafts are used
        assert run(seed, acceptance="mentored", kl_bound=0.0).token_ids == exact.token_ids
        lossy = run(seed, acceptance="mentored", kl_bound=0.3)
        assert lossy.stats.kl_per_token <= 0.3 and lossy.stats.as_dict()["lossy"] is True
        kl += lossy.stats.kl
    assert kl > 0  # the bound was used, not only kept
    assert run(0, acceptance="typical").stats.as_dict()["lossy"] is True


def test_a_generator_measures_pass_costs_for_ouroboros_lengthening():
    # Ouroboros sizes its drafts itself (no sizer on transformers), yet its lengthening rule reads the
    # Generator's pass costs: the engine records them without a sizer too, and the drafter gets them.
    from quickdraft.api import Generator
    from quickdraft.tokenizer import ByteTokenizer

    tok = ByteTokenizer()
    script = tok.encode("hello world, hello world, hello again")
    gen = Generator(ScriptedRunner(script, 257, tok.eos), tok, draft_runner=ScriptedRunner(script, 257, tok.eos))
    assert gen.pass_costs.seconds(1) is None
    stream = gen.stream("hi", drafter="ouroboros", max_new_tokens=30)
    assert stream.sizer is None and stream.drafter.costs is gen.pass_costs
    for _ in stream:
        pass
    assert stream.result.stats.accepted_prediction_tokens > 0
    assert any(n > 1 for n in gen.pass_costs._sums)  # and linear drafted passes as linear ones
    assert gen.pass_costs.seconds(max(gen.pass_costs._sums)) > 0


def test_phrase_pools_per_scope_are_bounded():
    from quickdraft.api import Generator
    from quickdraft.tokenizer import ByteTokenizer

    tok = ByteTokenizer()
    gen = Generator(ScriptedRunner([1], 257, tok.eos), tok)
    first = gen.phrase_pool(OuroborosConfig(), "user-0")
    assert gen.phrase_pool(OuroborosConfig(), "user-0") is first  # kept across requests
    for i in range(1, Generator.MAX_PHRASE_POOLS + 5):
        gen.phrase_pool(OuroborosConfig(), f"user-{i}")
        gen.phrase_pool(OuroborosConfig(), "user-0")  # used again: stays
    assert len(gen.phrase_pools) == Generator.MAX_PHRASE_POOLS
    assert gen.phrase_pool(OuroborosConfig(), "user-0") is first
    assert ("user-1", OuroborosConfig()) not in gen.phrase_pools  # the least recently used went first
