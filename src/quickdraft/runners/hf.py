"""Runner for any Hugging Face transformers causal LM whose KV cache can be cut back.

Uses transformers' DynamicCache: `crop` removes the rejected tail; sliding-window layers record
their past so that they too can be cut back (transformers refuses to crop them otherwise).
"""

from __future__ import annotations

import inspect
from typing import Sequence

import torch
import transformers
from packaging.version import Version
from transformers import DynamicCache, PreTrainedModel

from .. import trees
from . import attention
from .base import reusable_prefix
from .kernels import FixedRows, PackedLinear, one_product
from .lean import LeanPass
from ..errors import UnsupportedModelError

# Tokens per prefill pass. Passes start at fixed positions (0, 512, 1024, ... from the start of a sequence): that
# bounds attention memory on long prompts, and makes the cache rows of a prompt's whole chunks the same bits
# whatever tokens follow them, so that a later prompt that starts with them can take them (prefix reuse, HFRunner).
# Passes of 512 cost about what passes of 1,024 do (measured: docs/runtime.md#prefix-reuse).
PREFILL_CHUNK = 512
# Earlier sequences whose whole prefill chunks a runner keeps for prefix reuse (HFRunner): clients that take turns
# each find theirs. Each costs its chunks' cache: 12 KiB a token for qwen2.5-coder-0.5b in bf16 (a 2,048-token
# file: 24 MiB), 28 KiB for the 1.5B.
KEPT_PREFIXES = 4


# transformers before 5.18 hands a sliding-window layer that records its past (for rollback) every key it holds,
# while the mask covers the window: a second pass without a crop between fails (seen with 5.17; 5.18 slices them to
# the mask)
SLIDING_ROLLBACK_FROM = "5.18"


class HFRunner:
    """Prefix reuse. `reset` keeps the whole prefill chunks (PREFILL_CHUNK, at their fixed positions) of the cache
    it drops, for the last `kept_prefixes` sequences, and the next `prefill` takes the longest run of them that the
    new tokens start with: the rows a prefill of the new tokens would compute again, with the same passes over the
    same inputs, so the same bits (tests/test_prefix_reuse.py checks it bit for bit). Output never depends on what
    ran before; only the time does. `reuse_prefix` False turns it off (the bench does, so that methods run on the
    same task pay the same prefill), `take_prefix` False only the taking (a request timed as if it came first);
    models with sliding-window layers never reuse (their cache keeps no whole past to cut back).
    """

    def __init__(self, model: PreTrainedModel, max_context: int | None = None, reuse_prefix: bool = True):
        self.model = model.eval()
        # "onednn": every Linear packed; "torch": none; "onednn+torch": some layers kept on torch's Linear, where that
        # needed fewer padded rows to be row-invariant (invariance.choose)
        packed = [isinstance(m, PackedLinear) for m in model.modules() if isinstance(m, (PackedLinear, torch.nn.Linear))]
        self.kernels: str = "onednn" if packed and all(packed) else "onednn+torch" if any(packed) else "torch"
        self.dtype: str = {torch.bfloat16: "bf16", torch.float32: "fp32"}.get(model.dtype, str(model.dtype))
        self.device: torch.device = model.device  # the model's, its cache's and every pass's (docs/gpu.md)
        # whether the load found passes row-invariant on this model (exact_runner); None: not checked (a draft model)
        self.row_invariant: bool | None = None
        self.row_invariance_kept: bool = False  # that answer taken from an earlier load of the same configuration
        # decoding and verify passes without transformers' plumbing (lean.py), where the model's layers are ones it
        # reproduces; used while an attention it calls is set (lean.USABLE). lean_checked drops it where its logits
        # are not the model forward's, bit for bit
        self.lean: LeanPass | None = LeanPass.for_model(model)
        config = model.config.get_text_config(decoder=True)
        self.vocab_size: int = model.get_output_embeddings().out_features  # also for int8 Linear
        self.max_context: int = max_context or getattr(config, "max_position_embeddings", None) or 2048
        self.cache = self._new_cache()  # refuses models it cannot roll back, before any work
        # the cache's keyword: "cache" since transformers 5.20 or so ("past_key_values" warns there and goes in
        # 5.40), "past_key_values" before
        self._cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        # Prefill never yields a logit that decides a token (the engine keeps the last prompt token for its first
        # pass), so only the cache it leaves matters, and that is the same for plain decoding and every drafter
        # whatever attention computed it. The runner's row-invariant attention (attention.py: grouped, or one row
        # at a time) is slow on long prompts (it materialises every score), so prefill runs another there
        # (attention.prefill_here: in bf16 on AVX512_BF16 attention.prefill_attention, faster than SDPA's there; else
        # SDPA; measured: docs/runtime.md#prefill-attention).
        self.prefill_attention: str | None = None
        if model.config._attn_implementation in (attention.NAME, attention.ROWS):
            missing = attention.not_computed(model)
            if missing:
                raise UnsupportedModelError(f"{type(model).__name__}'s attention has {' and '.join(missing)}, which "
                                            "quickdraft's exact runner does not compute")
            self.prefill_attention = attention.prefill_here(model.dtype, model.device)
        # rows per product where every pass runs in fixed-size blocks (bf16 with AMX): the engine fits drafts to them
        self.row_block: int | None = max((m.rows for m in model.modules() if isinstance(m, FixedRows)), default=None)
        # On a GPU, where a step costs its kernel launches more than its rows, the lean pass pads each pass to whole
        # blocks once instead of in every Linear (lean.LeanPass.pad_rows; the load keeps it where the bits stay)
        if self.lean is not None and self.row_block and self.device.type == "cuda":
            self.lean.pad_rows = self.row_block
        # Trees need every layer's keys in one tensor per layer to pick a path from (sliding-window
        # layers keep a rolling buffer instead).
        self.supports_trees: bool = not any(getattr(layer, "is_sliding", False) for layer in self.cache.layers)
        self.prefill_chunk: int = PREFILL_CHUNK
        self.reuse_prefix: bool = reuse_prefix and self.supports_trees
        self.kept_prefixes: int = KEPT_PREFIXES
        self.take_prefix: bool = True  # False: prefill takes nothing kept (one request's prefix_reuse False); still keeps
        self._chunked: list[int] = []  # the tokens in the cache's first rows that whole, aligned prefill passes computed
        self._kept: list[tuple[DynamicCache, list[int]]] = []  # (cache, its tokens): earlier sequences' chunks, newest first

    def _new_cache(self) -> DynamicCache:
        cache = DynamicCache(config=self.model.config)
        if not cache.is_croppable:
            kinds = sorted({type(layer).__name__ for layer in cache.layers if not layer.is_croppable})
            raise UnsupportedModelError(
                f"{type(self.model).__name__} keeps state that cannot be rolled back ({', '.join(kinds)}); "
                "draft-and-verify needs a KV cache that can be cut back to the accepted length"
            )
        sliding = [layer for layer in cache.layers if getattr(layer, "is_sliding", False)]
        if sliding and Version(transformers.__version__) < Version(SLIDING_ROLLBACK_FROM):
            raise UnsupportedModelError(
                f"{type(self.model).__name__} has sliding-window layers, which transformers "
                f"{transformers.__version__} cannot roll back exactly (passes without a crop between them get more "
                f"keys than their mask has); install transformers>={SLIDING_ROLLBACK_FROM}")
        for layer in sliding:
            if hasattr(layer, "activate_past_recording"):
                layer.activate_past_recording()
        return cache

    @property
    def length(self) -> int:
        return self.cache.get_seq_length()

    def reset(self) -> None:
        if self.reuse_prefix and self._chunked:
            self._kept.insert(0, (_cut(self.cache, len(self._chunked)), self._chunked))
            del self._kept[self.kept_prefixes :]
        self.cache, self._chunked = self._new_cache(), []
        if self.lean is not None:
            self.lean.key_buffers.clear()  # the dropped cache's: never written again (lean.KeyBuffers)

    @torch.inference_mode()
    def prefill(self, tokens: Sequence[int]) -> int:
        """Append `tokens`; returns how many of them came from an earlier sequence's cache (prefix reuse: 0 without)."""
        tokens = list(tokens)
        start = 0
        if self.reuse_prefix and self.take_prefix and self.length == 0 and self._kept:  # a new sequence: passes start
            # at 0; an earlier one's whole chunks may serve
            taken = [reusable_prefix(chunked, tokens, self.prefill_chunk) for _, chunked in self._kept]
            start = max(taken)
            if start:
                self.cache, _ = self._kept.pop(taken.index(start))
                self.cache.crop(start - self.length)  # a view: the next pass's append copies it anyway
        passes = self.model.config._attn_implementation
        causal = {"causal_prefill": True} if self.prefill_attention == attention.PREFILL else {}
        if self.prefill_attention:
            self.model.set_attn_implementation(self.prefill_attention)
        try:
            with one_product(self.model):  # for the same reason, one product per layer and pass, not fixed-size blocks
                for begin in range(start, len(tokens), self.prefill_chunk):
                    chunk = torch.tensor([tokens[begin : begin + self.prefill_chunk]], device=self.device)
                    self.model(input_ids=chunk, **{self._cache_kw: self.cache}, use_cache=True, logits_to_keep=1,
                               **causal)
        finally:
            if self.prefill_attention:
                self.model.set_attn_implementation(passes)
        if self.length == len(tokens):  # passes from position 0: its whole chunks can serve a later sequence
            self._chunked = tokens[: len(tokens) - len(tokens) % self.prefill_chunk]
        if self.device.type == "cuda":  # finished when it returns, as on a CPU: the engine times prefill (Stats)
            torch.cuda.synchronize(self.device)
        return start

    def _pass(self, ids: torch.Tensor, mask: torch.Tensor | None = None,
              positions: torch.Tensor | None = None) -> torch.Tensor:
        """ids [1, n] through the model, appended to the cache -> logits [n, vocab_size] (float32, on the CPU: the
        engine's acceptance rules and sampling run there, with the same generator on every device)."""
        if self.lean is not None and self.lean.usable():
            logits = self.lean(ids, self.cache, mask, positions)  # [1, n, vocab_size]
        else:
            extra = {} if mask is None else {"attention_mask": mask, "position_ids": positions}
            logits = self.model(input_ids=ids, **{self._cache_kw: self.cache}, use_cache=True, **extra).logits
        return logits[0].cpu().float()  # moved in the model's dtype: half the bytes in bf16, the same numbers

    @torch.inference_mode()
    def forward(self, tokens: Sequence[int]) -> torch.Tensor:
        return self._pass(torch.tensor([list(tokens)], device=self.device))  # [n, vocab_size]

    @torch.inference_mode()
    def forward_tree(self, tokens: Sequence[int], parents: Sequence[int]) -> torch.Tensor:
        if not self.supports_trees:
            raise UnsupportedModelError(f"{type(self.model).__name__} has sliding-window layers; tree drafts are not supported")
        n, cached = len(tokens), self.length
        dtype = self.model.dtype if self.model.dtype.is_floating_point else torch.float32
        allowed = torch.cat([torch.ones(n, cached, dtype=torch.bool), trees.ancestor_mask(parents)], dim=1)  # [n, cached + n]
        mask = torch.zeros(1, 1, n, cached + n, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
        positions = torch.tensor([[cached + d for d in trees.depths(parents)]])  # [1, n]
        ids = torch.tensor([list(tokens)], device=self.device)  # [1, n]
        return self._pass(ids, mask.to(self.device), positions.to(self.device))  # [n, vocab_size]

    def keep(self, start: int, rows: Sequence[int]) -> None:
        if list(rows) == list(range(len(rows))):  # a prefix of the pass: a plain rollback
            return self.rollback(start + len(rows))
        del self._chunked[start:]
        index = torch.tensor([start + r for r in rows], device=self.device)  # [len(rows)]
        for layer in self.cache.layers:
            layer.keys = torch.cat([layer.keys[..., :start, :], layer.keys.index_select(-2, index)], dim=-2)
            layer.values = torch.cat([layer.values[..., :start, :], layer.values.index_select(-2, index)], dim=-2)

    def rollback(self, length: int) -> None:
        excess = self.length - length
        if excess < 0:
            raise ValueError(f"cannot roll back to {length} tokens: the cache holds only {self.length}")
        self.cache.crop(-excess)  # also when 0: sliding-window layers drop what fell out of the window
        del self._chunked[length:]


def _cut(cache: DynamicCache, length: int) -> DynamicCache:
    """The cache's first `length` rows, in tensors of their own (a cropped view would keep the whole buffer alive)."""
    cache.crop(length - cache.get_seq_length())  # negative (or 0): the rows to drop from the end
    for layer in cache.layers:
        layer.keys, layer.values = layer.keys.contiguous(), layer.values.contiguous()
    return cache
