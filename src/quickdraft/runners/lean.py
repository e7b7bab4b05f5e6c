"""Decoding and verify passes without transformers' plumbing between the layers, for Llama-shaped decoders.

A one-token step spends part of its time outside the work of its layers: the model's and every layer's forward
wrappers (keyword deprecation, output capture, config defaults, gradient-checkpointing calls), keyword plumbing
through every layer and the attention interface looked up again in each of them (measured, on a model of a real
one's shapes with next to no weights: docs/runtime.md#the-lean-pass). `LeanPass` is the direct call sequence:

    x = embed(ids)                                    [1, n, C]
    cos, sin = rotary(x, positions); mask = the model's own causal mask (create_causal_mask)
    for each layer:
        h = input_norm(x)
        q, k, v = q_proj(h), k_proj(h), v_proj(h)     [1, H|Hkv, n, D], rotated (the model's apply_rotary_pos_emb)
        k, v = cache.update(k, v, layer)              [1, Hkv, L, D]
        x = x + o_proj(attention(q, k, v, mask))      the runner's attention (attention.py)
        x = x + mlp(post_attention_norm(x))
    logits = lm_head(norm(x))                         [1, n, V]

The same modules compute the same numbers in the same order as the model's forward, so the logits are its bits;
`agrees` checks that on the model at load (load.lean_checked), which keeps the model's forward where they differ.
Only for the layer classes in LAYERS (their forward is the sequence above, in transformers 5.x), without
sliding-window layers, and only while the attention set is the runner's own (a target's; prefill keeps the model's
forward) or SDPA (a draft model's, loaded as transformers loads it; its load compares the two paths too). On real
weights the plumbing is a few percent of a small model's step, less of a larger one's.

On the runner's own attention the pass can also keep the cache in KeyBuffers: no copy of the whole cache
every step, and attention products whose shape changes every 64 tokens, not every token (measured:
docs/runtime.md#padded-keys). The load turns that on where the logits stay the model forward's, bit for bit.

Where every Linear computes in fixed-size row blocks (kernels.FixedRows: on a GPU) the pass can pad its rows once,
`pad_rows`: the embeddings of a pass of n tokens get rows up to whole blocks (N rows), every Linear, norm and
activation runs on all N (each row on its own, as every Linear's blocks already assume), and only attention and the
cache see the n real rows; the logits of the n are returned. A Linear then finds whole blocks and pads nothing: on a
GPU, where a step costs its kernel launches rather than its rows, that is two launches fewer per Linear
(docs/gpu.md#what-is-exact-and-how). The runner turns it on there; the load keeps it where its logits stay the model
forward's and the check passes with it.
"""

from __future__ import annotations

import inspect
import sys
from typing import Sequence

import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from . import attention

# decoder layer class -> its attention class, whose forward LeanPass reproduces
LAYERS = {"Qwen2DecoderLayer": "Qwen2Attention", "LlamaDecoderLayer": "LlamaAttention"}
# attention implementations it calls: the runner's own (targets) and transformers' SDPA (draft models, which load as
# transformers loads them)
USABLE = (attention.NAME, attention.ROWS, "sdpa")


class LeanPass:
    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.base = model.model
        self.layers = list(self.base.layers[: model.config.num_hidden_layers])
        module = sys.modules[type(self.layers[0]).__module__]
        self.rotate = module.apply_rotary_pos_emb  # the model's own
        self.create_mask = module.create_causal_mask
        parameters = inspect.signature(self.create_mask).parameters
        self._cache_kw = "cache" if "cache" in parameters else "past_key_values"
        # passes on the runner's own attention keep the cache in KeyBuffers and read it padded: turned on by the load
        # where that keeps the model forward's bits and row invariance (load.lean_checked, exact_runner)
        self.pad_keys = False
        self.key_buffers = KeyBuffers()
        # rows a pass is padded to whole blocks of, once, before the first layer (None: each FixedRows layer pads its
        # own): set by the runner on a GPU (hf.HFRunner), kept by the load where the bits stay (load.lean_checked)
        self.pad_rows: int | None = None

    @classmethod
    def for_model(cls, model: torch.nn.Module) -> LeanPass | None:
        """A LeanPass where the model's layers are ones it reproduces, else None."""
        base = getattr(model, "model", None)
        layers = getattr(base, "layers", None)
        if layers is None or not len(layers) or not hasattr(model, "lm_head"):
            return None
        attentions = [type(getattr(layer, "self_attn", None)).__name__ for layer in layers]
        if any(LAYERS.get(type(layer).__name__) != kind for layer, kind in zip(layers, attentions)):
            return None
        config = model.config.get_text_config(decoder=True)
        if any(t != "full_attention" for t in (getattr(config, "layer_types", None) or [])):
            return None
        if not all(hasattr(base, name) for name in ("embed_tokens", "norm", "rotary_emb")):
            return None
        module = sys.modules[type(layers[0]).__module__]
        if not all(hasattr(module, name) for name in ("apply_rotary_pos_emb", "create_causal_mask")):
            return None
        return cls(model)

    def usable(self) -> bool:
        """Whether the attention set is one it calls: the runner's own (a target's; prefill switches to another for
        its passes) or transformers' SDPA (a draft model's)."""
        return self.model.config._attn_implementation in USABLE

    def __call__(self, ids: torch.Tensor, cache, attention_mask: torch.Tensor | None = None,
                 position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """ids [1, n], an additive mask [1, 1, n, L] or None (causal), positions [1, n] or None -> logits [1, n, V]."""
        n = ids.shape[1]
        N = n + (-n) % self.pad_rows if self.pad_rows else n  # rows every Linear, norm and activation runs on
        x = self.base.embed_tokens(ids)  # [1, n, C]
        if N > n:  # zero rows after the pass's own: rows of their own, whose numbers no real row reads
            x = torch.nn.functional.pad(x, (0, 0, 0, N - n))  # [1, N, C]
        past = cache.get_seq_length()
        if position_ids is None:
            position_ids = torch.arange(past, past + n, device=ids.device)[None]  # [1, n]
        implementation = self.model.config._attn_implementation
        ours = implementation in attention.FUNCTIONS
        # one token of a linear pass sees every key: the model's mask would be 0 everywhere, which the runner's own
        # attention adds to no effect (SDPA gets the model's mask whatever it is: it picks its kernel by it)
        mask = None
        if attention_mask is not None or n > 1 or not ours:
            mask = self.create_mask(config=self.model.config, inputs_embeds=x[:, :n], attention_mask=attention_mask,
                                    position_ids=position_ids, **{self._cache_kw: cache})
        cos, sin = self.base.rotary_emb(x, position_ids)  # [1, n, D] each
        attend = attention.FUNCTIONS[implementation] if ours else ALL_ATTENTION_FUNCTIONS[implementation]
        padded = ours and self.pad_keys and len(cache.layers) == len(self.layers)  # KeyBuffers
        shape = (1, n, -1)
        for i, layer in enumerate(self.layers):
            a = layer.self_attn
            h = layer.input_layernorm(x)  # [1, N, C]
            heads = (1, n, -1, a.head_dim)
            q = a.q_proj(h)[:, :n].view(heads).transpose(1, 2)  # [1, H, n, D]
            k = a.k_proj(h)[:, :n].view(heads).transpose(1, 2)  # [1, Hkv, n, D]
            v = a.v_proj(h)[:, :n].view(heads).transpose(1, 2)  # [1, Hkv, n, D]
            q, k = self.rotate(q, k, cos, sin)
            if padded:
                k, v, count = self.key_buffers.append(i, cache.layers[i], k, v)  # [1, Hkv, P, D]: L keys, padding
                extra = {"key_count": count}
            else:
                k, v, extra = *cache.update(k, v, i), {}  # [1, Hkv, L, D]
            out, _ = attend(a, q, k, v, mask, dropout=0.0, scaling=a.scaling, **extra)  # [1, n, H, D]
            out = out.reshape(shape)  # [1, n, H D]
            out = torch.nn.functional.pad(out, (0, 0, 0, N - n)) if N > n else out.contiguous()  # [1, N, H D]
            x = x + a.o_proj(out)  # [1, N, C]
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.model.lm_head(self.base.norm(x))[:, :n]  # [1, n, V]


class KeyBuffers:
    """The padded keys and values of the cache a LeanPass appends to, one pair of buffers per layer.

    transformers' DynamicLayer concatenates every pass into new tensors of exactly L rows: a copy of the whole cache
    every step, and attention products of a new shape every token, for which oneDNN makes a kernel before running
    it, many times the cost of running one it made before (measured: docs/runtime.md#padded-keys). Here a layer's
    keys and values are views of the first L rows of contiguous buffers of whole attention.SOFTMAX_BLOCKs (the rows
    past L zeros, or rows a rollback left: finite either way), so a step copies its own rows, the cache is copied
    into a larger buffer once every SOFTMAX_BLOCK tokens, and the products, which read whole buffers (dense: a
    product of a slice whose heads lie further apart than its rows would copy it first), change shape at the same
    rate. The buffers are the pass's, not the cache's: whatever replaced a layer's tensors (a prefill through the
    model's forward, a tree pass's keep, prefix reuse) leaves views of no buffer held here, so the next append
    copies them into a new one, and `clear` (the runner's reset) drops them all: a buffer another cache might still
    view is never written."""

    def __init__(self):
        self.buffers: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # layer index -> keys, values [1, Hkv, P, D]

    def clear(self) -> None:
        self.buffers.clear()

    def append(self, i: int, layer, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Append k, v [1, Hkv, n, D] to layer i of a DynamicCache -> its keys and values padded to P rows
        [1, Hkv, P, D], whole attention.SOFTMAX_BLOCKs (the L cached rows, then rows that get weight 0 in
        attention.attend; after a rollback P may exceed L rounded up), L."""
        n = k.shape[-2]
        if not layer.is_initialized:
            layer.lazy_initialization(k, v)
        L = layer.get_seq_length()
        total = L + n
        P = total + (-total) % attention.SOFTMAX_BLOCK
        buffers = self.buffers.get(i)
        viewed = (buffers is not None and L > 0 and layer.keys.data_ptr() == buffers[0].data_ptr()
                  and layer.values.data_ptr() == buffers[1].data_ptr()
                  and layer.keys.stride() == buffers[0].stride() and layer.values.stride() == buffers[1].stride())
        if not viewed or P > buffers[0].shape[-2]:
            buffers = (k.new_zeros(*k.shape[:-2], P, k.shape[-1]), v.new_zeros(*v.shape[:-2], P, v.shape[-1]))
            if L:
                buffers[0][..., :L, :] = layer.keys
                buffers[1][..., :L, :] = layer.values
            self.buffers[i] = buffers
        keys, values = buffers  # [1, Hkv, rows, D]: P rows, or more after a rollback (all read: a slice is not dense)
        keys[..., L:total, :] = k
        values[..., L:total, :] = v
        layer.keys, layer.values = keys[..., :total, :], values[..., :total, :]
        return keys, values, total


def agrees(runner, lean: LeanPass, tokens: Sequence[int] = tuple(range(11, 31))) -> bool:
    """Whether passes through `lean` give the model's forward's logits bit for bit on this model: a one-token pass,
    a pass of several tokens and a tree pass, after a short prefill. Leaves the runner reset."""
    prefix, rest = [t % runner.vocab_size for t in tokens[:12]], [t % runner.vocab_size for t in tokens[12:20]]
    parents = (-1, 0, 0, 2, 1, -1, 5)  # the tree pass's draft: two branches from the root, one of them forking
    logits, kept = {}, runner.lean
    for path in (None, lean):
        runner.lean = path
        runner.reset()
        runner.prefill(prefix)
        logits[path] = [runner.forward(rest[:1]), runner.forward(rest[1:6])]
        runner.rollback(len(prefix))
        logits[path].append(runner.forward_tree(rest, parents))
    runner.lean = kept
    runner.reset()
    return all(torch.equal(a, b) for a, b in zip(logits[None], logits[lean]))
