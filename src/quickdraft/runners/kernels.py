"""The Linear layers the transformers runner computes with, and the int8 Linear of draft models.

- PackedLinear: a Linear whose weight is packed once for oneDNN (use_kernels picks it where it runs);
- RowPadded: a Linear run on at least `min_rows` rows, so that a short pass takes a longer one's kernel path;
- FixedRows: a Linear computed in products of exactly `rows` rows, whatever the pass's size;
- quantize_for_drafting: a draft model's Linear layers in dynamic int8.

Which layers get RowPadded or FixedRows, and why that makes verify passes give one-token decoding's bits, is
runners/invariance.py's job; loading and checking the whole model is runners/load.py's.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from transformers import PreTrainedModel

from ..errors import UnsupportedModelError
from ..options import DRAFT_PRECISIONS, KERNELS

MIN_ROWS = 16  # rows a RowPadded layer computes at least, unless told otherwise


def quantize_for_drafting(model: PreTrainedModel, precision: str) -> PreTrainedModel:
    """A draft model in the precision it drafts in; "int8": dynamic int8 Linear layers (a CPU path); "bf16": bfloat16
    (the default on a GPU).

    Only for draft models: their numbers decide what is proposed, never what is emitted, so a
    cheaper draft changes speed, not output (under sampling the drafter reports the distributions
    of the model it actually ran, which keeps speculative sampling lossless). int8 drafts several times cheaper
    than float32 on a CPU (measured: docs/drafters.md#the-draft-model).
    """
    if precision not in DRAFT_PRECISIONS:
        raise ValueError(f"draft precision must be one of {', '.join(DRAFT_PRECISIONS)}; got {precision!r}")
    if precision == "fp32":
        return model
    if precision == "bf16":
        return model.to(torch.bfloat16)
    import warnings

    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():  # torch points eager quantization users to torchao; it works as is
        warnings.simplefilter("ignore")
        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


PACK_ROWS = 16  # the pass size oneDNN lays packed weights out for (PackedLinear)


class PackedLinear(torch.nn.Module):
    """A Linear layer (float32 or bfloat16) whose weight is kept in oneDNN's blocked layout, packed once at load.

    torch's own Linear reorders the weight on every call when a pass carries a few tokens, so a decoding step
    reads every weight about twice. Packed once, each pass reads it once (measured: docs/runtime.md#packed-weights).

    The weight is laid out for passes of PACK_ROWS rows. In float32 that choice matters: laid out for one row,
    oneDNN's products of 2 to 32 rows are slower and one row no faster; in bf16 the layout makes no difference.
    The numbers are oneDNN's, bit for bit those of torch's own Linear in bf16 where that was compared and within
    float rounding of them in float32, and the same for plain decoding and for verification passes, which run the
    same layers.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):  # [out, in], [out]
        super().__init__()
        self.out_features, self.in_features = weight.shape
        # [out, in] in oneDNN's blocked layout, laid out for passes of PACK_ROWS rows
        self.register_buffer("weight", torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_ROWS))
        self.register_buffer("bias", None if bias is None else bias.detach().clone())  # [out]

    def __deepcopy__(self, memo: dict) -> PackedLinear:  # a blocked tensor has no storage to copy
        return PackedLinear(self.weight.to_dense(), self.bias)

    def _apply(self, fn, recurse: bool = True) -> PackedLinear:
        """model.float(), .to(dtype) and the like: applied to the plain weight, then packed again (a blocked
        tensor converts to no other dtype)."""
        weight = fn(self.weight.to_dense())  # [out, in]
        self.weight = torch.ops.mkldnn._reorder_linear_weight(weight, PACK_ROWS)
        self.bias = None if self.bias is None else fn(self.bias)
        return self

    def to_linear(self, weight: torch.nn.Parameter | None = None) -> torch.nn.Linear:
        """torch's own Linear over this layer's weight (dense again, its own copy; or `weight`, the same numbers
        already dense: a tied output layer's embedding) and bias."""
        linear = torch.nn.Linear(self.in_features, self.out_features, bias=self.bias is not None, device="meta")
        linear.weight = weight if weight is not None else torch.nn.Parameter(self.weight.to_dense(), requires_grad=False)
        if self.bias is not None:
            linear.bias = torch.nn.Parameter(self.bias, requires_grad=False)  # [out]
        return linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., in] -> [..., out]
        rows = x.reshape(-1, self.in_features).contiguous()  # [rows, in]
        out = torch.ops.mkldnn._linear_pointwise(rows, self.weight, self.bias, "none", [], "")  # [rows, out]
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def packable(dtype: torch.dtype) -> bool:
    """Whether oneDNN can run packed Linear layers of this dtype here (bf16: where this CPU has the instructions
    oneDNN's bf16 kernels need; torch says which)."""
    if not torch.backends.mkldnn.is_available():
        return False
    return dtype == torch.float32 or (dtype == torch.bfloat16 and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def use_kernels(model: PreTrainedModel, kernels: str) -> str:
    """Put a model's Linear layers on the kernels asked for; returns those it runs on.

    "onednn": every Linear becomes a PackedLinear (a tied output layer gets its own packed copy of
    the embedding: more memory, by the embedding's size); "torch": left as loaded; "auto": onednn
    where oneDNN runs the model's dtype (float32 or bfloat16) here, else torch.
    """
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {', '.join(KERNELS)}; got {kernels!r}")
    usable = model.device.type == "cpu" and packable(model.dtype)  # oneDNN packs for the CPU
    if kernels == "auto":
        kernels = "onednn" if usable else "torch"
    if kernels == "onednn" and not usable:
        raise UnsupportedModelError(f"kernels='onednn' needs torch built with oneDNN and a float32 model, or a bfloat16 "
                                    f"one on a CPU with oneDNN's bf16 kernels; this model is {model.dtype} on "
                                    f"{model.device.type} here")
    if kernels == "onednn":
        for module in list(model.modules()):
            for name, child in list(module.named_children()):
                if type(child) is torch.nn.Linear:
                    setattr(module, name, PackedLinear(child.weight, child.bias))
    return kernels


class _Wrapped(torch.nn.Module):
    """A Linear layer inside another: what code reading a Linear asks of it (the runner reads the output layer's
    out_features; transformers ties and resizes embeddings through weight)."""

    def __init__(self, linear: torch.nn.Module):
        super().__init__()
        self.linear = linear

    @property
    def in_features(self) -> int:
        return self.linear.in_features

    @property
    def out_features(self) -> int:
        return self.linear.out_features

    @property
    def weight(self) -> torch.Tensor:
        return self.linear.weight


class RowPadded(_Wrapped):
    """A Linear layer run on at least MIN_ROWS rows (zero rows added and dropped), so that every pass takes
    the kernel path of a MIN_ROWS-row product, whatever its own number of rows."""

    def __init__(self, linear: torch.nn.Module, min_rows: int = MIN_ROWS):
        super().__init__(linear)
        self.min_rows = min_rows

    def extra_repr(self) -> str:
        return f"min_rows={self.min_rows}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., rows, in] -> [..., rows, out]
        rows = x.shape[:-1].numel()
        if rows >= self.min_rows:
            return self.linear(x)
        flat = x.reshape(rows, x.shape[-1])  # [rows, in]
        padded = torch.cat([flat, flat.new_zeros(self.min_rows - rows, flat.shape[-1])])  # [min_rows, in]
        return self.linear(padded)[:rows].reshape(*x.shape[:-1], -1)


class FixedRows(_Wrapped):
    """A Linear layer whose passes are computed in products of exactly `rows` rows, the last block filled up with
    zero rows: every row of every pass, a one-token pass's too, goes through the same product, so its bits do not
    depend on the pass's size, whatever the kernels do with other sizes or the data. (That a product's rows do not
    depend on each other or on their place in it is what the probes and the load's check still test.)

    `in_blocks` False: a pass in one product of its own rows, for prefill, whose rows decide no token
    (`one_product`, around hf.HFRunner.prefill's passes)."""

    def __init__(self, linear: torch.nn.Module, rows: int):
        super().__init__(linear)
        self.rows, self.in_blocks = rows, True

    def extra_repr(self) -> str:
        return f"rows={self.rows}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., rows, in] -> [..., rows, out]
        if not self.in_blocks:
            return self.linear(x)
        rows = x.shape[:-1].numel()
        blocks = -(-rows // self.rows)
        if rows % self.rows:  # the last block filled up with zero rows
            padded = x.new_zeros(blocks * self.rows, x.shape[-1])  # [blocks * self.rows, in]
            padded[:rows] = x.reshape(rows, x.shape[-1])
        else:  # whole blocks already (a pass the lean pass padded: lean.LeanPass.pad_rows)
            padded = x.reshape(rows, x.shape[-1])
        out = torch.cat([self.linear(block) for block in padded.split(self.rows)]) if blocks > 1 else self.linear(padded)
        return out[:rows].reshape(*x.shape[:-1], -1)  # out: [blocks * self.rows, out]


@contextmanager
def one_product(model: torch.nn.Module) -> Iterator[None]:
    """Inside, the model's FixedRows layers compute each pass in one product of its own rows (prefill, whose rows
    decide no token: hf.HFRunner.prefill); blocks again after, also after an error."""
    layers = [m for m in model.modules() if isinstance(m, FixedRows)]
    for layer in layers:
        layer.in_blocks = False
    try:
        yield
    finally:
        for layer in layers:
            layer.in_blocks = True


@contextmanager
def as_transformers_loads_it(model: PreTrainedModel) -> Iterator[None]:
    """Inside, the model computes as transformers loads it, for a baseline of transformers' own generate() on the same
    weights (bench/engines.py): every Linear torch's own (FixedRows and RowPadded unwrapped, a PackedLinear's weight
    dense again), transformers' default attention instead of the runner's. After, also after an error, every layer
    and the attention are the runner's again, computing the same bits.

    A packed weight is dropped while its dense copy is in use and packed again after (seconds for a 0.5B model), so
    that memory is a stock model's; a tied output layer takes the input embedding's weight, as transformers ties it."""
    tied = getattr(model.config.get_text_config(decoder=True), "tie_word_embeddings", False)
    embedding, output = model.get_input_embeddings(), model.get_output_embeddings()
    # (parent, name, the runner's layer, the Linear inside it): every layer the runner put in transformers' place
    layers = [(parent, name, child, child.linear if isinstance(child, (FixedRows, RowPadded)) else child)
              for parent in list(model.modules()) if not isinstance(parent, _Wrapped)
              for name, child in list(parent.named_children()) if isinstance(child, (FixedRows, RowPadded, PackedLinear))]
    attention = model.config._attn_implementation
    try:
        for parent, name, child, inner in layers:
            if isinstance(inner, PackedLinear):  # one layer at a time: a dense copy and a packed one never add up
                setattr(parent, name, inner.to_linear(embedding.weight if tied and output in (child, inner) else None))
                inner.weight = None  # packed again on the way out, from the dense weight in its place
            else:
                setattr(parent, name, inner)
        model.set_attn_implementation(None)  # transformers' default for the model (sdpa where it has it)
        yield
    finally:
        model.set_attn_implementation(attention)
        for parent, name, child, inner in layers:
            if isinstance(inner, PackedLinear) and inner.weight is None:
                inner.weight = torch.ops.mkldnn._reorder_linear_weight(getattr(parent, name).weight.detach(), PACK_ROWS)
            setattr(parent, name, child)


def linear_layers(model: torch.nn.Module) -> list[tuple[torch.nn.Module, str, torch.nn.Module]]:
    """(parent, name, layer) for every Linear of the model, torch's or packed, not yet wrapped."""
    return [(module, name, child) for module in model.modules() for name, child in module.named_children()
            if type(child) in (torch.nn.Linear, PackedLinear)]
