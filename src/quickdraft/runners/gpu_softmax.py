"""The runner's softmax on a GPU: one Triton kernel whose sums do not depend on a row's length.

torch's CUDA softmax picks its kernel by row length, and its kernels add a row in other orders, so a verify pass's
rows, padded to the pass's longest, could get other bits than a one-token pass's (attention.softmax_rows).
attention.folded_softmax is invariant by construction, in elementwise kernels only, but it takes log2(n) + 6 of
them where torch's softmax takes one, in every layer of every step. This kernel takes one, and is invariant by the
same construction: each of BLOCK lanes adds its column of the row, tile after tile, in order (a masked column past
the row adds exp(-inf) = 0, exactly), and the lanes' sums are then added in a fixed tree of halves, so that neither
the row's length nor the compiler's layout of the lanes changes the order of any sum.

softmax(x) runs it on a contiguous CUDA tensor where Triton is installed and its check at first use passes (one
width against another, and agreement with folded_softmax); elsewhere it returns None and the caller folds.
unavailable() says why not. Decided once a process, so every pass of a generation computes alike.
"""

from __future__ import annotations

import functools
import os

import torch

BLOCK = 256  # lanes a program adds a row with
ENV = "QUICKDRAFT_TRITON"  # 0: attention folds its sums in torch instead


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_rows(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr, HALVINGS: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        x_row, y_row = x_ptr + row * n_cols, y_ptr + row * n_cols
        lanes = tl.arange(0, BLOCK)
        top = tl.full((BLOCK,), float("-inf"), tl.float32)
        for start in range(0, n_cols, BLOCK):  # the row's largest score: exact in any order
            x = tl.load(x_row + start + lanes, mask=start + lanes < n_cols, other=float("-inf")).to(tl.float32)
            top = tl.maximum(top, x)
        m = tl.max(top, 0)
        acc = tl.zeros((BLOCK,), tl.float32)
        for start in range(0, n_cols, BLOCK):  # each lane its column, tile after tile
            x = tl.load(x_row + start + lanes, mask=start + lanes < n_cols, other=float("-inf")).to(tl.float32)
            acc += tl.exp(x - m)
        for _ in tl.static_range(HALVINGS):  # lanes added half onto half: [.., 2] -> two halves, added
            low, high = tl.split(tl.reshape(acc, (2, acc.numel // 2)).permute(1, 0))
            acc = low + high
        total = tl.sum(acc, 0)  # of one lane: exact
        for start in range(0, n_cols, BLOCK):
            x = tl.load(x_row + start + lanes, mask=start + lanes < n_cols, other=float("-inf")).to(tl.float32)
            tl.store(y_row + start + lanes, (tl.exp(x - m) / total).to(y_ptr.dtype.element_ty),
                     mask=start + lanes < n_cols)

    return softmax_rows


def _run(x: torch.Tensor) -> torch.Tensor:
    """The kernel over the rows of contiguous x [..., n] -> y in x's dtype (computed in float32, rounded once)."""
    y = torch.empty_like(x)
    n = x.shape[-1]
    _kernel()[(x.numel() // n,)](x, y, n, BLOCK=BLOCK, HALVINGS=BLOCK.bit_length() - 1)
    return y


@functools.cache
def _check(device: torch.device) -> str | None:
    """None where the kernel runs here and passes its check, else why not: a row padded from 1,000 keys to other
    widths gets the same bits, and the weights agree with folded_softmax's."""
    if os.environ.get(ENV, "1").lower() in ("0", "off", "no", "false"):
        return f"{ENV}=0"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed"
    from .attention import folded_softmax

    try:
        g = torch.Generator().manual_seed(0)
        scores = (torch.randn(16, 1000, generator=g) * 4).to(device)  # [rows, keys]
        rows = [_run(torch.nn.functional.pad(scores, (0, w - 1000), value=float("-inf")))[:, :1000]
                for w in (1024, 1088, 2112, 9280)]
        if not all(torch.equal(rows[0], r) for r in rows):
            return "its rows differ by width on this device"
        if not torch.allclose(rows[0], folded_softmax(scores), rtol=1e-5, atol=1e-7):
            return "it does not compute softmax on this device"
    except Exception as e:  # a Triton or driver that cannot compile or run it
        return f"it did not run: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


def softmax(x: torch.Tensor) -> torch.Tensor | None:
    """softmax(x, -1) in x's dtype (float32 inside, rounded once) from the kernel, for a contiguous tensor on a GPU
    where it runs; None elsewhere."""
    if x.device.type != "cuda" or not x.is_contiguous() or x.numel() == 0 or _check(x.device) is not None:
        return None
    return _run(x)


def unavailable(device: torch.device | str = "cuda") -> str | None:
    """Why softmax() returns None on this device (None: it runs the kernel)."""
    device = torch.device(device)
    if device.type != "cuda":
        return "not a CUDA device"
    return _check(device)
