"""Tree acceptance: follow the target's own choice down the tree as far as a branch offers it.

Starting at the root (the last context token), the target picks its next token at the current node:
its argmax under greedy decoding, a sample from its processed distribution p under sampling. If a
child of the node carries that token, the walk moves to it (an accepted draft token); otherwise the
picked token is the bonus and the walk ends. The accepted tokens are therefore exactly the tokens the
target itself picks along the way:
    greedy    output identical to plain greedy decoding;
    sampling  every emitted token is a draw from p given the tokens before it: lossless.

Under sampling this treats every draft token as a point mass, which is what the deterministic
drafters (prediction, lookup, phrase pools) are. For distinct siblings x_1..x_m it accepts with
probability p(x_1) + ... + p(x_m), the same as SpecInfer's recursive rejection over point-mass
siblings (Miao et al. 2024). A draft model's own distributions (draft.probs) are not used on trees.

Example (greedy): tokens (a, b, c, d), parents (-1, 0, 0, 2). Target argmax at root = a, at a = c,
at c = d, at d = e: path (0, 2, 3), accepted 3, tokens (a, c, d, e).
"""

from __future__ import annotations

import torch

from .. import trees
from ..core import Draft, Verdict
from ..sampling import SamplingParams, draw


def verify_tree(draft: Draft, target_logits: torch.Tensor, sampling: SamplingParams,
                generator: torch.Generator | None) -> Verdict:
    """target_logits: [len(draft) + 1, vocab_size]; row j scores the token after input j ([root, *draft])."""
    assert draft.parents is not None and target_logits.shape[0] == len(draft) + 1, (target_logits.shape, len(draft))
    kids = trees.children(draft.parents)
    argmax = tuple(target_logits.argmax(dim=-1).tolist())  # [len(draft) + 1]
    path: list[int] = []
    node = 0  # input index: 0 is the root, i + 1 is draft token i
    while True:
        row = target_logits[node]  # [vocab_size]
        pick = argmax[node] if sampling.greedy else draw(row, sampling, generator)
        child = next((i for i in kids[node] if draft.tokens[i] == pick), None)
        if child is None:
            break
        path.append(child)
        node = child + 1
    tokens = tuple(draft.tokens[i] for i in path) + (pick,)
    return Verdict(draft=draft, accepted=len(path), tokens=tokens, path=tuple(path), argmax=argmax)
