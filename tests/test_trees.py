"""Tree drafts: the pure helpers (tables), the runner's tree pass against branches run one by one,
tree acceptance (greedy and sampled), and the engine's output against plain decoding."""

from __future__ import annotations

import pytest
import torch

from conftest import TreeMarkovRunner, assert_follows, needs_sliding_rollback, reference_greedy, tiny_model
from quickdraft import trees
from quickdraft.acceptance import Acceptance, verify_tree
from quickdraft.core import Draft
from quickdraft.engine import Limits, generate
from quickdraft.errors import QuickdraftError
from quickdraft.runners.hf import HFRunner
from quickdraft.runners.scripted import ScriptedRunner
from quickdraft.sampling import SamplingParams, probs_from_logits
from quickdraft.sizing import PassCosts

# -- pure helpers ------------------------------------------------------------------------------------

TABLE = [
    # parents, depths, paths, children
    ((), [0], [], [[]]),
    ((-1,), [0, 1], [(0,)], [[0], []]),
    ((-1, 0, 1), [0, 1, 2, 3], [(0, 1, 2)], [[0], [1], [2], []]),
    ((-1, 0, 0, 2), [0, 1, 2, 2, 3], [(0, 1), (0, 2, 3)], [[0], [1, 2], [], [3], []]),
    ((-1, -1, 1, 1), [0, 1, 1, 2, 2], [(0,), (1, 2), (1, 3)], [[0, 1], [], [2, 3], [], []]),
]


@pytest.mark.parametrize("parents, depths, paths, kids", TABLE)
def test_tree_tables(parents, depths, paths, kids):
    trees.check_parents(parents, len(parents))
    assert trees.depths(parents) == depths
    assert trees.paths(parents) == paths
    assert trees.children(parents) == kids


@pytest.mark.parametrize("parents, depths, paths, kids", TABLE)
def test_ancestor_mask_against_a_slow_reference(parents, depths, paths, kids):
    mask = trees.ancestor_mask(parents)
    n = len(parents) + 1
    for j in range(n):  # input j sees input i iff walking up from j reaches i
        seen, node = {0, j}, j
        while node > 0:
            node = parents[node - 1] + 1
            seen.add(node)
        assert mask[j].nonzero().flatten().tolist() == sorted(seen)


def test_worked_mask_from_the_module_docstring():
    expected = torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 0, 1, 0], [1, 1, 0, 1, 1]])
    assert torch.equal(trees.ancestor_mask((-1, 0, 0, 2)), expected.bool())


def test_chain_and_from_branches():
    assert trees.chain(3) == (-1, 0, 1)
    assert trees.chain(0) == ()
    assert trees.from_branches([(5, 6, 7), (5, 8), (9,)]) == ((5, 6, 7, 8, 9), (-1, 0, 1, 0, -1))
    assert trees.from_branches([(5, 6), (5, 6)]) == ((5, 6), (-1, 0))  # duplicates merge
    assert trees.from_branches([]) == ((), ())
    tokens, parents = trees.from_branches([(1, 2, 3), (1, 2, 4), (1, 5)])
    assert [tuple(tokens[i] for i in p) for p in trees.paths(parents)] == [(1, 2, 3), (1, 2, 4), (1, 5)]


@pytest.mark.parametrize("parents, n, message", [
    ((-1, 0), 3, "one parent per token"),
    ((0,), 1, "parent 0 of draft token 0"),
    ((-1, 1), 2, "parent 1 of draft token 1"),
    ((-1, -2), 2, "parent -2"),
])
def test_bad_parents_are_refused(parents, n, message):
    with pytest.raises(QuickdraftError, match=message):
        trees.check_parents(parents, n)


def test_head_of_a_tree_is_a_subtree():
    d = Draft((5, 6, 7, 8), parents=(-1, 0, 0, 2))
    assert d.head(3).parents == (-1, 0, 0) and d.head(3).tokens == (5, 6, 7)
    assert d.head(9) is d


# -- the runner's tree pass --------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen2-onednn", "qwen2-fp32"])
def test_tree_pass_equals_each_branch_run_alone(arch):
    model = tiny_model(arch)
    prompt = [3, 14, 15, 92, 65, 35]
    tokens, parents = trees.from_branches([(8, 9, 7, 9), (8, 3, 2), (8, 3, 8, 4), (6, 2, 6)])
    tree_runner = HFRunner(model)
    tree_runner.prefill(prompt[:-1])
    logits = tree_runner.forward_tree([prompt[-1], *tokens], parents)  # [n + 1, V]
    assert logits.shape == (len(tokens) + 1, tree_runner.vocab_size)
    for path in trees.paths(parents):
        linear = HFRunner(model)
        linear.prefill(prompt[:-1])
        want = linear.forward([prompt[-1], *(tokens[i] for i in path)])  # [len(path) + 1, V]
        got = logits[[0, *(i + 1 for i in path)]]
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen2-onednn", "qwen2-fp32"])
def test_keep_leaves_the_cache_of_the_path(arch):
    # After keeping a path that is not a prefix of the pass, the next pass scores what a cache built
    # from the path alone scores.
    model = tiny_model(arch)
    prompt = [3, 14, 15, 92, 65, 35]
    tokens, parents = trees.from_branches([(8, 9, 7), (6, 2, 6, 1)])
    path = trees.paths(parents)[1]  # (3, 4, 5, 6): the second branch
    runner = HFRunner(model)
    runner.prefill(prompt[:-1])
    runner.forward_tree([prompt[-1], *tokens], parents)
    runner.keep(len(prompt) - 1, (0, *(i + 1 for i in path[:3])))  # root + 6, 2, 6
    assert runner.length == len(prompt) + 3
    reference = HFRunner(model)
    reference.prefill(prompt + [6, 2, 6])
    torch.testing.assert_close(runner.forward([1, 5]), reference.forward([1, 5]), atol=1e-4, rtol=1e-4)


@needs_sliding_rollback
def test_sliding_window_models_refuse_trees():
    runner = HFRunner(tiny_model("gemma3"))
    assert not runner.supports_trees
    steps = generate(runner, [1, 2, 3], Limits(4), TreeDrafter([(4, 5), (6,)]))
    with pytest.raises(QuickdraftError, match="cannot verify tree drafts"):
        list(steps)


# -- acceptance ---------------------------------------------------------------------------------------


def one_hot_rows(choices, vocab=10):
    logits = torch.zeros(len(choices), vocab)
    logits[torch.arange(len(choices)), torch.tensor(choices)] = 5.0
    return logits


def test_greedy_walk_takes_the_branch_the_target_picks():
    draft = Draft((1, 2, 3, 4), parents=(-1, 0, 0, 2))  # root-1-2 and root-1-3-4
    # argmax at root 1, at 1: 3 (second child), at 2: anything, at 3: 4, at 4: 7
    v = verify_tree(draft, one_hot_rows([1, 3, 9, 4, 7]), SamplingParams(), None)
    assert (v.path, v.accepted, v.tokens) == ((0, 2, 3), 3, (1, 3, 4, 7))
    v = verify_tree(draft, one_hot_rows([1, 5, 9, 4, 7]), SamplingParams(), None)  # no child carries 5
    assert (v.path, v.tokens) == ((0,), (1, 5))
    v = verify_tree(draft, one_hot_rows([8, 3, 9, 4, 7]), SamplingParams(), None)  # wrong from the root
    assert (v.path, v.accepted, v.tokens) == ((), 0, (8,))


def test_mentored_refuses_trees():
    from quickdraft.acceptance import verify
    with pytest.raises(QuickdraftError, match="linear drafts only"):
        verify(Draft((1,), parents=(-1,)), one_hot_rows([1, 2]), SamplingParams(1.0), Acceptance("mentored", 0.1),
               torch.Generator())


def test_sampled_tree_drafts_keep_the_joint_distribution():
    """Whole engine, sampled, tree drafts whose branches are the likely, unlikely and second-best
    continuations: the first three tokens follow plain sampling's exact joint distribution."""
    g = torch.Generator().manual_seed(5)
    V = 4
    table = torch.randn(V, V, generator=g) * 1.5  # [V, V]
    params = SamplingParams(temperature=0.9, top_k=3)
    step = probs_from_logits(table, params)  # [V, V]
    prompt = [0, 1, 2, 3, 1]
    truth = step[prompt[-1]][:, None, None] * step[:, :, None] * step[None, :, :]  # [V, V, V]: p(a) p(b|a) p(c|b)
    order = step[1].argsort(descending=True).tolist()
    branches = [(order[1], 0, 1), (order[0], 2), (order[3], 3), (order[0], 1, 1)]
    runner = TreeMarkovRunner(table)
    counts = torch.zeros(V, V, V)
    n = 3000
    for seed in range(n):
        steps = generate(runner, prompt, Limits(3), TreeDrafter(branches), sampling=SamplingParams(0.9, top_k=3, seed=seed))
        out = [t for s in steps for t in s.tokens]
        counts[out[0], out[1], out[2]] += 1
    assert_follows(counts, truth)


# -- the engine with tree drafts ----------------------------------------------------------------------


class TreeDrafter:
    """Proposes the same branches at every step (the test decides which of them are right)."""

    def __init__(self, branches):
        self.tokens, self.parents = trees.from_branches(branches)

    def begin(self, prompt):
        pass

    def propose(self, context, budget):
        return Draft(self.tokens, parents=self.parents, source="tree").head(budget)  # depth <= index + 1

    def observe(self, context, verdict):
        pass


class TruthTreeDrafter(TreeDrafter):
    """Branches built from the reference output at the current position: `make(truth_ahead)` -> branches."""

    def __init__(self, prompt_len, truth, make):
        self.prompt_len, self.truth, self.make = prompt_len, truth, make

    def propose(self, context, budget):
        ahead = self.truth[len(context) - self.prompt_len:]
        branches = [b[:budget] for b in self.make(ahead) if b[:budget]]
        tokens, parents = trees.from_branches(branches)
        return Draft(tokens, parents=parents, source="tree")


def wrong(t):
    return (t + 1) % 96


SHAPES = {
    "always right": lambda a: [tuple(a[:5])],
    "always wrong": lambda a: [tuple(wrong(t) for t in a[:4]), (wrong(a[0]) if a else 1, 2)],
    "partly right": lambda a: [tuple(a[:2]) + tuple(wrong(t) for t in a[2:5])],
    "best branch not first": lambda a: [tuple(a[:1]) + tuple(wrong(t) for t in a[1:4]), tuple(a[:6]),
                                        tuple(wrong(t) for t in a[:3])],
    "branches agree then split": lambda a: [tuple(a[:3]) + (wrong(a[3]) if len(a) > 3 else 5,), tuple(a[:7])],
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen2-onednn", "qwen2-fp32"])
def test_tree_drafts_reproduce_plain_greedy_decoding(arch, shape):
    model = tiny_model(arch)
    prompt = [5, 17, 33, 2, 71, 5, 17]
    n = 40
    truth = reference_greedy(model, prompt, n + 8)
    drafter = TruthTreeDrafter(len(prompt), truth, SHAPES[shape])
    steps = list(generate(HFRunner(model), prompt, Limits(n), drafter))
    out = [t for s in steps for t in s.tokens]
    assert out == truth[:n]
    accepted = sum(s.verdict.accepted for s in steps)
    if shape == "always wrong":
        assert accepted == 0 and len(steps) == n
    else:
        assert accepted > 0 and len(steps) < n


def test_tree_passes_are_timed_apart_from_linear_ones():
    script = [4, 5, 6, 7, 8, 9, 10, 4, 5, 6]
    prompt = [1, 2]

    class Alternating(TruthTreeDrafter):  # a tree of two branches, then a chain of 2 (no parents), and so on
        def propose(self, context, budget):
            ahead = self.truth[len(context) - self.prompt_len:][:2]
            if len(context) % 2:
                return Draft(tuple(ahead), source="tree")
            return super().propose(context, budget)

    costs = PassCosts()
    drafter = Alternating(len(prompt), script, lambda a: [(0, 0), tuple(a[:2])])
    list(generate(ScriptedRunner(script, 12, eos=11), prompt, Limits(10), drafter, costs=costs))
    assert set(costs._tree_sums) == {5} and 3 in costs._sums and 5 not in costs._sums  # trees of 4, chains of 2


def test_tree_block_stops_at_eos_and_limits():
    script = [4, 5, 6, 7, 8, 9]
    prompt = [1, 2]
    # EOS (7) inside the accepted path: the output stops before it.
    drafter = TruthTreeDrafter(len(prompt), script, lambda a: [(9, 9), tuple(a[:5])])
    steps = list(generate(ScriptedRunner(script, 12, eos=11), prompt, Limits(20, frozenset({7})), drafter))
    assert [t for s in steps for t in s.tokens] == [4, 5, 6]
    assert steps[-1].finish_reason == "stop"
    # The token limit falls inside a branch: never past it.
    drafter = TruthTreeDrafter(len(prompt), script, lambda a: [(9, 9), tuple(a[:5])])
    steps = list(generate(ScriptedRunner(script, 12, eos=11), prompt, Limits(4), drafter))
    assert [t for s in steps for t in s.tokens] == [4, 5, 6, 7]
    assert steps[-1].finish_reason == "length"


def test_stats_count_the_path_and_the_rest_as_rejected():
    script = [4, 5, 6, 7, 8, 9]
    prompt = [1, 2]
    drafter = TruthTreeDrafter(len(prompt), script, lambda a: [(9, 9, 9), tuple(a[:2]) + (10,)])
    from quickdraft.core import Stats
    stats = Stats()
    steps = list(generate(ScriptedRunner(script, 12, eos=11), prompt, Limits(3), drafter, stats=stats))
    assert [t for s in steps for t in s.tokens] == [4, 5, 6]
    # A pass may emit 3 tokens, so branches are cut to 2 tokens: tree (9, 9, 4, 5), path (4, 5).
    assert steps[0].verdict.path == (2, 3)
    assert stats.draft_tokens == 4
    assert stats.accepted_prediction_tokens == 2
    assert stats.rejected_prediction_tokens == 4 - 2
    assert stats.target_passes == 1
