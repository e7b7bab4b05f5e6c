"""The transformers runner's own eager attention: every row of a pass gets the bits a one-token pass gives it.

transformers' eager attention first repeats each key/value head for every query head that shares it
(repeat_kv): with grouped-query attention that writes the whole cache again, G times over, in every layer
of every step (qwen2.5-coder-0.5b: 14 query heads on 2 KV heads, 7 copies). Here the G query heads of a group
are stacked as rows of one product against their shared keys instead (`attend`):

    query [b, H, n, D] -> [b, Hkv, G n, D]           (head h = kv G + g, as repeat_kv orders them)
    scores = query keys^T * scaling                  [b, Hkv, G n, L]
    weights = softmax(scores + mask) in float32      (the mask [b, 1, n, L] broadcast over g)
    output = weights values -> [b, n, H, D]

Row invariance. A row of an n-token pass sees L keys of which the last ones are masked (weight 0); the
same position in a one-token pass sees only its own keys. The sums over keys must not depend on how many
masked keys follow. n-token passes against one-token decoding at every cache length, on a CPU with AVX512_BF16
(measured: docs/runtime.md#attention):
- torch's softmax over a row of fewer than 16 keys takes another path than over a longer row: rows are padded
  with -inf keys to a multiple of SOFTMAX_BLOCK, so every row has whole blocks (the softmax kernel, native.py,
  computes each row alone, invariant by construction, and runs in bf16 where it is built; torch's elsewhere);
- bf16 weights times values: oneDNN splits a sum over about 1,000 keys or more differently by its
  length: the values are summed VALUE_BLOCK keys at a time, blocks added in float32;
- the scaled, masked scores are written straight into the padded rows, and in bf16 the softmax writes bf16
  (computed in float32 and rounded once: the bits of a float32 softmax rounded to bf16); with torch's, the same bits
  as copying the scores into padded rows, a float32 softmax and a conversion, with fewer copies of the scores
  (measured with docs/results/2026-11-26-verify-attention/ab_attention.py: docs/runtime.md#attention);
- with both, `grouped_attention` (NAME) is row-invariant in bf16 at every length tried. It is checked on
  the model at load (runners/load.exact_runner), which falls back to `rows_attention` where it is not.
- on a GPU torch's softmax picks its kernel by row length, so the softmax's sums are folded there in an order no
  masked key changes (softmax_rows: gpu_softmax's Triton kernel, else folded_softmax);
- float32 (MKL and oneDNN) splits the same sums in more ways, by length and by layout; there
  `rows_attention` (ROWS) is used: a pass of n > 1 tokens computes each row on its own, with the operands
  of a one-token pass at that position: the keys that row may see (a prefix of the cache in a linear
  pass; the cache and its ancestors in a tree pass). Same shapes, same kernels: invariant by
  construction, for n small products per layer, each reading the cache once per row.
"""

from __future__ import annotations

import math

import torch

from . import gpu_softmax, native

NAME = "quickdraft_grouped"
ROWS = "quickdraft_rows"
PREFILL = "quickdraft_prefill"
SOFTMAX_BLOCK = 64  # softmax rows are padded with -inf keys to a multiple of this
VALUE_BLOCK = 1024  # weights times values is summed this many keys at a time
# Query positions per product in `prefill_attention`: the smallest block as fast as larger ones (measured:
# docs/runtime.md#prefill-attention)
PREFILL_BLOCK = 64


def attend(q: torch.Tensor, keys_t: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
           scaling: float, groups: int = 1, count: int | None = None) -> torch.Tensor:
    """q [b, Hkv, G n, D] (G = groups query heads per KV head, stacked), keys_t [b, Hkv, D, L], value
    [b, Hkv, L, D], mask (additive) broadcastable to [b, Hkv, G, n, L] (e.g. [b, 1, 1, n, L]) or None
    -> [b, Hkv, G n, D]. The one place the attention sums are computed.

    count: keys_t and value hold `count` keys and then padding, P keys in all, a multiple of SOFTMAX_BLOCK (any
    finite numbers: they get weight 0). The products then have a new shape every SOFTMAX_BLOCK cached tokens
    instead of every token, and oneDNN makes a kernel for each new shape (runners/lean.py, KeyBuffers); the
    scores are scaled and masked in place, in the product's own rows."""
    b, Hkv, R, _ = q.shape
    if _power_of_two(scaling):  # q * scaling is exact: the same bits as scaling every score, with R D products
        q, scaling = q * scaling, None
    scores = torch.matmul(q, keys_t)  # [b, Hkv, R, L], or [b, Hkv, R, P] padded
    if count is None:  # rows padded with -inf keys to whole SOFTMAX_BLOCKs
        L = keys_t.shape[-1]
        logits = scores.new_empty(b, Hkv, R, L + (-L) % SOFTMAX_BLOCK)  # [b, Hkv, R, L rounded up]
        logits[..., :L] = scores
    else:  # whole SOFTMAX_BLOCKs of padded keys already: the product's own rows
        L, logits = count, scores  # [b, Hkv, R, P]
        if logits.shape[-1] % SOFTMAX_BLOCK or logits.shape[-1] < L:
            raise ValueError(f"padded keys: {logits.shape[-1]} in all for {L} keys, not whole blocks of {SOFTMAX_BLOCK}")
    logits[..., L:] = float("-inf")
    if scaling is not None:
        logits[..., :L].mul_(scaling)
    # Scaling and masking stay two roundings: add(alpha=scaling) rounds otherwise, and a pass without a mask (one
    # token) must get the bits of one with it.
    if mask is not None:  # broadcast over the G query heads of a group: [b, Hkv, G, n, L]
        logits.view(b, Hkv, groups, R // groups, -1)[..., :L].add_(mask)
    weights = softmax_rows(logits, q.dtype)
    W = value.shape[-2]  # keys summed over: L, or P padded (the padding's weights are 0)
    return weighted_values(weights[..., :W], value)  # [b, Hkv, R, D]


def softmax_rows(logits: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """softmax(logits, -1) computed in float32 and rounded once to dtype: `attend`'s weights.

    On a CPU: native.softmax in bf16 (its kernel sums each row on its own), torch's in float32, whose sums do not
    depend on the -inf keys past a row's own (module docstring). Elsewhere torch picks its softmax kernel by row
    length (on CUDA a warp kernel for short rows, block kernels for longer ones), and the kernels add in other orders,
    so a verify pass's rows, padded to the pass's longest, could get other bits than a one-token pass's: there the
    sums are folded, invariant by construction: in one Triton kernel where it runs (gpu_softmax), else in torch's
    elementwise kernels (folded_softmax)."""
    if folds_here(logits.device):
        weights = gpu_softmax.softmax(logits)  # [..., n] in logits' dtype, or None where the kernel does not run
        return (folded_softmax(logits) if weights is None else weights).to(dtype)
    if dtype == torch.bfloat16:
        return native.softmax(logits)  # one pass, float32 inside (torch's where the kernel does not run)
    return torch.nn.functional.softmax(logits, dim=-1, dtype=torch.float32).to(dtype)


def softmax_in_use(device: torch.device) -> str:
    """Which softmax softmax_rows computes with on this device, in words (for reports)."""
    if not folds_here(device):
        return "the C kernel (native.py) in bf16, else torch's" if native.in_use() else f"torch's ({native.unavailable()})"
    why = gpu_softmax.unavailable(device)
    return "folded, in one Triton kernel (gpu_softmax.py)" if why is None else f"folded in torch ({why})"


def folds_here(device: torch.device) -> bool:
    """Whether softmax_rows folds its sums on this device: everywhere but on a CPU."""
    return device.type != "cpu"


def folded_softmax(x: torch.Tensor) -> torch.Tensor:
    """softmax(x, -1) in float32 for x [..., n], from elementwise kernels only: each row's exponentials, padded with
    zeros to a power of two, are added half onto half until one sum is left. A key masked with -inf adds an exact
    zero, and folding [v, 0] gives the bits folding v gives, so a row gets the same weights whatever number of masked
    keys follows its own, on any device and kernel. log2(n) + 6 launches where torch's softmax takes one."""
    x = x.float()
    e = torch.exp(x - x.amax(-1, keepdim=True))  # [..., n]
    n = e.shape[-1]
    total = torch.nn.functional.pad(e, (0, (1 << (n - 1).bit_length()) - n))  # [..., 2^k]
    while total.shape[-1] > 1:
        half = total.shape[-1] // 2
        total = total[..., :half] + total[..., half:]  # [..., 2^(k-1)]
    return e / total


def weighted_values(weights: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """weights [b, Hkv, R, W] times value [b, Hkv, W, D] -> [b, Hkv, R, D] in value's dtype: past VALUE_BLOCK keys
    summed a block at a time, the blocks added in float32 (the module docstring says why)."""
    W = value.shape[-2]
    if W <= VALUE_BLOCK:
        return torch.matmul(weights, value)
    out = torch.matmul(weights[..., :VALUE_BLOCK], value[:, :, :VALUE_BLOCK]).float()
    for start in range(VALUE_BLOCK, W, VALUE_BLOCK):
        out += torch.matmul(weights[..., start : start + VALUE_BLOCK], value[:, :, start : start + VALUE_BLOCK])
    return out.to(value.dtype)


def _power_of_two(x: float) -> bool:
    """Whether scaling by x is exact in floating point (head sizes 16, 64, 256: 1/4, 1/8, 1/16)."""
    m, _ = math.frexp(x)
    return x > 0 and m == 0.5


# What some models hand the attention beyond query, keys, values, mask and scaling, which these functions do not
# compute: the keyword it comes as, the attention module's attribute that holds it, and what it is. A runner refuses
# such a model at load (not_computed), and the functions refuse to run it (refuse_what_is_not_computed), rather than
# compute other attention than the model's.
NOT_COMPUTED = (("softcap", "attn_logit_softcapping", "logit soft-capping (Gemma 2)"),
                ("s_aux", "sinks", "attention sinks (gpt-oss)"))


def not_computed(model: torch.nn.Module) -> list[str]:
    """What of NOT_COMPUTED the model's attention modules hold."""
    return [what for _, attribute, what in NOT_COMPUTED
            if any(getattr(m, attribute, None) is not None for m in model.modules())]


def refuse_what_is_not_computed(module: torch.nn.Module | None, kwargs: dict) -> None:
    asked = [what for keyword, _, what in NOT_COMPUTED if kwargs.get(keyword) is not None]
    if asked:
        from ..errors import UnsupportedModelError

        raise UnsupportedModelError(
            f"{type(module).__name__} asks its attention for {' and '.join(asked)}, which quickdraft's exact runner "
            "does not compute")


def grouped_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, scaling: float, dropout: float = 0.0,
                      key_count: int | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """key_count: key and value hold that many keys and then padding (attend's count; the lean pass's KeyBuffers)."""
    refuse_what_is_not_computed(module, kwargs)
    b, H, n, D = query.shape  # key, value: [b, Hkv, L, D], or [b, Hkv, P, D] padded
    Hkv, L = key.shape[1], key.shape[2] if key_count is None else key_count
    G = H // Hkv
    q = query.reshape(b, Hkv, G * n, D)  # [b, Hkv, G n, D]
    mask = None if attention_mask is None else attention_mask[:, :, None, :, :L]  # [b, 1, 1, n, L]: the same for each g
    out = attend(q, key.transpose(2, 3), value, mask, scaling, groups=G, count=key_count)  # [b, Hkv, G n, D]
    return out.view(b, H, n, D).transpose(1, 2).contiguous(), None  # [b, n, H, D]


def rows_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attention_mask: torch.Tensor | None, scaling: float, dropout: float = 0.0,
                   key_count: int | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """key_count: as grouped_attention's (a one-token pass reads the padding; rows of longer passes do not)."""
    refuse_what_is_not_computed(module, kwargs)
    b, H, n, D = query.shape  # key, value: [b, Hkv, L, D]; the runner passes one sequence (b = 1)
    if n == 1:
        return grouped_attention(module, query, key, value, attention_mask, scaling, key_count=key_count)
    if key_count is not None:
        key, value = key[:, :, :key_count], value[:, :, :key_count]  # [b, Hkv, L, D]
    Hkv, L = key.shape[1], key.shape[2]
    G = H // Hkv
    if attention_mask is None:  # causal: row i sees the cache and the pass up to itself
        seen, prefix = [L - n + i + 1 for i in range(n)], [True] * n
    else:
        visible = attention_mask[0, 0, :, :L] == 0  # [n, L]
        counts = visible.sum(-1)  # [n]
        seen = counts.tolist()
        prefix = (visible == (torch.arange(L, device=visible.device) < counts[:, None])).all(-1).tolist()  # [n]: a prefix of the keys?
    # bf16: oneDNN copies a strided slice of the keys before each product; slicing one transposed copy made per
    # pass instead halves the cost of a row's product and gives the same bits as a one-token pass's transposed
    # keys (oneDNN repacks either). float32 (MKL) reads the slices as they are, and needs the same layout as a
    # one-token pass to give its bits.
    keys_t = key.transpose(2, 3).contiguous() if key.dtype == torch.bfloat16 else key.transpose(2, 3)  # [b, Hkv, D, L]
    out = query.new_empty(b, n, Hkv, G, D)
    for i in range(n):
        if prefix[i]:
            k_t, v = keys_t[..., : seen[i]], value[:, :, : seen[i]]  # [b, Hkv, D, seen], [b, Hkv, seen, D] views
        else:  # a tree node: the cache and its ancestors, in order, as a linear pass along its path has them
            index = visible[i].nonzero().flatten()  # [seen]
            k_t, v = key.index_select(2, index).transpose(2, 3), value.index_select(2, index)
        q = query[:, :, i].view(b, Hkv, G, D)  # [b, Hkv, G, D]: grouped_attention's query for n = 1
        out[:, i] = attend(q, k_t, v, None, scaling)  # [b, Hkv, G, D]
    return out.view(b, n, H, D), None  # [b, n, H, D]


def prefill_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, scaling: float, dropout: float = 0.0,
                      causal_prefill: bool = False, **kwargs) -> tuple[torch.Tensor, None]:
    """The bf16 runner's attention for prefill passes (hf.HFRunner.prefill), whose rows need no invariance (their
    logits decide no token), only to be the same bits whenever the same pass runs again (prefix reuse).

    Eager attention's numbers (scores in the query's dtype, softmax computed in float32 and rounded once, as the
    runner's passes compute them: grouped_attention) in products of PREFILL_BLOCK query positions, a KV head's G query
    heads stacked and all KV heads in one batched product, each block against the keys its rows may see: after the
    last key any of them sees nothing is computed, and the mask is added only from the first key any of them may not
    see. Each block's scores stay in the core's caches between the three products, where SDPA's CPU kernel and one
    product over all rows do not: in bf16 faster than SDPA, at eager attention's precision, a little below SDPA's
    (measured: docs/runtime.md#prefill-attention).
    Rows that see no key at all (none in a causal prefill) are not computed as eager attention computes them.
    causal_prefill: the mask is the causal one over the cache and the pass (the runner's prefill passes it through
    the model's forward, whose keywords reach the attention), so the keys each row sees follow from n and L
    without reading the mask in every layer."""
    refuse_what_is_not_computed(module, kwargs)
    b, H, n, D = query.shape  # key, value: [b, Hkv, L, D]
    Hkv, L = key.shape[1], key.shape[2]
    G = H // Hkv
    if causal_prefill:  # row i sees the cache and the pass up to itself; the mask is 0 exactly there
        seen = clear_until = [L - n + i + 1 for i in range(n)]
    else:  # read from the mask, in every layer (HFRunner.prefill says causal_prefill instead)
        seen, clear_until = _key_spans(attention_mask, n, L)
    q = (query * scaling).view(b, Hkv, G, n, D)  # scaled once here rather than every score
    out = query.new_empty(b, Hkv, G, n, D)
    for p0 in range(0, n, PREFILL_BLOCK):
        p1 = min(p0 + PREFILL_BLOCK, n)
        B = p1 - p0
        keys = max(max(seen[p0:p1]), 1)  # the keys these rows may see are among the first `keys`
        clear = min(min(clear_until[p0:p1]), keys)  # and the mask is 0 for all of them before `clear`
        rows = q[:, :, :, p0:p1].reshape(b, Hkv, G * B, D)  # [b, Hkv, G B, D]: every KV head's block in one product
        scores = torch.matmul(rows, key[:, :, :keys].transpose(2, 3))  # [b, Hkv, G B, keys]
        if clear < keys:  # [b, Hkv, G, B, keys - clear] + [b, 1, 1, B, keys - clear]
            scores.view(b, Hkv, G, B, keys)[..., clear:].add_(attention_mask[:, :, None, p0:p1, clear:keys])
        weights = native.softmax(scores)  # [b, Hkv, G B, keys]; bf16: computed in float32, rounded once
        out[:, :, :, p0:p1] = torch.matmul(weights, value[:, :, :keys]).view(b, Hkv, G, B, D)
    return out.view(b, H, n, D).transpose(1, 2).contiguous(), None  # [b, n, H, D]


def _key_spans(attention_mask: torch.Tensor | None, n: int, L: int) -> tuple[list[int], list[int]]:
    """For each query row of an additive mask [b, 1, n, >= L] (None: every key visible), over its first L keys:
    1 + the last key it may see (in any sequence of the batch), and the first key whose mask is not 0 (L: none)."""
    if attention_mask is None:
        return [L] * n, [L] * n
    mask = attention_mask[:, :, :, :L]
    visible = (mask > torch.finfo(mask.dtype).min / 2).any(0)[0]  # [n, L]: keys not masked out
    added = (mask != 0).any(0)[0]  # [n, L]: keys whose score the mask changes
    seen = L - visible.flip(-1).to(torch.uint8).argmax(-1)  # [n]; a row that sees nothing gives L (argmax 0)
    seen = torch.where(visible.any(-1), seen, 0)
    clear_until = torch.where(added.any(-1), added.to(torch.uint8).argmax(-1), L)  # [n]
    return seen.tolist(), clear_until.tolist()


def prefill_here(dtype: torch.dtype, device: torch.device | str = "cpu") -> str:
    """The attention a runner on its own attention (NAME or ROWS) prefills with on this CPU, registered: PREFILL in
    bf16 where the CPU has AVX512_BF16 without AMX (faster than SDPA there), else SDPA: in float32, where SDPA is as
    fast; with AMX, whose SDPA kernel computes on AMX tiles and was not compared with it; on CPUs without bf16
    instructions (measured: docs/runtime.md#prefill-attention)."""
    from ..cpu import has_amx_bf16, has_native_bf16

    if torch.device(device).type != "cpu":  # a GPU: its SDPA kernels (prefill's rows decide no token)
        return "sdpa"
    if dtype == torch.bfloat16 and has_native_bf16() and not has_amx_bf16():  # native bf16 without AMX: AVX512_BF16
        return register(PREFILL)
    return "sdpa"


FUNCTIONS = {NAME: grouped_attention, ROWS: rows_attention, PREFILL: prefill_attention}


def register(name: str = NAME) -> str:
    """Make the attention `name` (NAME: grouped, ROWS: one row at a time, PREFILL: prefill passes) loadable as
    attn_implementation=name, with eager attention's additive float mask; returns name."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(name, FUNCTIONS[name])
    AttentionMaskInterface.register(name, eager_mask)
    return name
