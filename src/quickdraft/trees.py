"""Token trees: several candidate continuations verified in one target pass.

A tree draft is a Draft whose `parents` say where each token hangs: parents[i] is the index of draft
token i's parent in the draft, or -1 when it follows the root, the last context token (which goes in
as input 0 of the pass). Parents come before children (parents[i] < i), so any prefix of a tree
draft is itself a tree, and a linear draft is the chain parents = (-1, 0, 1, ...).

The pass runs the inputs [root, *draft.tokens]; input j = i + 1 holds draft token i. Each input
attends to the cached context and to its own ancestors (itself included), and sits at the position
its depth gives it, so every root-to-leaf path computes exactly what a linear pass over that path
alone would (up to float rounding in the kernels).

Example: draft tokens (a, b, c, d) with parents (-1, 0, 0, 2): two branches, root-a-b and root-a-c-d.

    inputs     root  a   b   c   d        depth  0  1  2  2  3
    root        1    .   .   .   .        positions = cached + depth
    a           1    1   .   .   .        paths (leaves): (0, 1) and (0, 2, 3)
    b           1    1   1   .   .
    c           1    1   .   1   .
    d           1    1   .   1   1
"""

from __future__ import annotations

from typing import Sequence

import torch

from .errors import QuickdraftError


def check_parents(parents: Sequence[int], n_tokens: int) -> None:
    """Refuse parents that do not describe a tree over n_tokens draft tokens in parent-first order."""
    if len(parents) != n_tokens:
        raise QuickdraftError(f"a tree draft needs one parent per token: {n_tokens} tokens, {len(parents)} parents")
    for i, p in enumerate(parents):
        if not isinstance(p, int) or not -1 <= p < i:
            raise QuickdraftError(f"tree parent {p!r} of draft token {i} must be -1 (the root) or an earlier token's index")


def chain(n: int) -> tuple[int, ...]:
    """The parents of a linear draft of n tokens: chain(3) -> (-1, 0, 1)."""
    return tuple(range(-1, n - 1))


def depths(parents: Sequence[int]) -> list[int]:
    """Depth of every input of the pass (root first): parents (-1, 0, 0, 2) -> [0, 1, 2, 2, 3]."""
    d = [0]
    for p in parents:
        d.append(d[p + 1] + 1)
    return d


def ancestor_mask(parents: Sequence[int]) -> torch.Tensor:
    """mask[j, i] is True when input i is input j itself or one of its ancestors; [n + 1, n + 1] bool."""
    n = len(parents)
    mask = torch.zeros(n + 1, n + 1, dtype=torch.bool)  # [n + 1, n + 1]
    mask[0, 0] = True
    for i, p in enumerate(parents):
        mask[i + 1] = mask[p + 1]
        mask[i + 1, i + 1] = True
    return mask


def children(parents: Sequence[int]) -> list[list[int]]:
    """Draft indices of the children of every input (root first): (-1, 0, 0, 2) -> [[0], [1, 2], [], [3], []]."""
    kids: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for i, p in enumerate(parents):
        kids[p + 1].append(i)
    return kids


def paths(parents: Sequence[int]) -> list[tuple[int, ...]]:
    """Every root-to-leaf path as draft indices, in leaf order: (-1, 0, 0, 2) -> [(0, 1), (0, 2, 3)]."""
    has_child = {p for p in parents}
    out = []
    for leaf in range(len(parents)):
        if leaf in has_child:
            continue
        path = [leaf]
        while parents[path[-1]] >= 0:
            path.append(parents[path[-1]])
        out.append(tuple(reversed(path)))
    return out


def from_branches(branches: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Merge candidate continuations into one tree (a trie: shared prefixes are sent once).

    Returns (tokens, parents). Example: branches (5, 6, 7), (5, 8), (9,) -> tokens (5, 6, 7, 8, 9),
    parents (-1, 0, 1, 0, -1): 5 is shared, 6-7 and 8 hang from it, 9 hangs from the root.
    """
    tokens: list[int] = []
    parents: list[int] = []
    index: dict[tuple[int, int], int] = {}  # (parent, token) -> draft index
    for branch in branches:
        parent = -1
        for t in branch:
            node = index.get((parent, t))
            if node is None:
                node = index[(parent, t)] = len(tokens)
                tokens.append(t)
                parents.append(parent)
            parent = node
    return tuple(tokens), tuple(parents)
