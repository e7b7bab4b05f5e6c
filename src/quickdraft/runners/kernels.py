"""Linear layers packed once for oneDNN (PackedLinear), in a module of their own so that hf.py and invariance.py
both import them without importing each other."""

from __future__ import annotations

import torch


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
