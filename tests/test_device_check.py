"""The device check's experimental forms compute what the runner computes (the check itself asks only whether
they stay row-invariant on the device, so a wrong form would pass it)."""

from __future__ import annotations

import pytest
import torch

from quickdraft.bench.device_check import batched_values
from quickdraft.runners import attention


@pytest.mark.parametrize("keys", [64, attention.VALUE_BLOCK, attention.VALUE_BLOCK + 64, 3 * attention.VALUE_BLOCK - 64])
def test_batched_value_blocks_sum_what_the_blocks_sum(keys):
    torch.manual_seed(0)
    weights = torch.softmax(torch.randn(1, 2, 21, keys), dim=-1).to(torch.bfloat16)  # [b, Hkv, R, W]
    value = torch.randn(1, 2, keys, 64).to(torch.bfloat16)  # [b, Hkv, W, D]
    blocks, batched = attention.weighted_values(weights, value), batched_values(weights, value)
    assert batched.shape == blocks.shape == (1, 2, 21, 64) and batched.dtype == torch.bfloat16
    if keys <= attention.VALUE_BLOCK:  # one product either way
        assert torch.equal(batched, blocks)
    exact = torch.matmul(weights.double(), value.double())  # [b, Hkv, R, D]
    # the blocks added in another order: at most a bf16 rounding apart from each other and from the exact sum
    for got in (blocks, batched):
        torch.testing.assert_close(got.double(), exact, rtol=2 ** -7, atol=2 ** -9)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("rows", [1, 31, 32, 33, 65, 129])
def test_batched_row_blocks_compute_the_blocks_linear(rows, bias):
    from quickdraft.bench.device_check import batched_forward
    from quickdraft.runners.kernels import FixedRows

    torch.manual_seed(0)
    layer = FixedRows(torch.nn.Linear(48, 80, bias=bias), 32)
    x = torch.randn(1, rows, 48)  # [b, rows, in]
    with torch.no_grad():
        blocks, batched = layer(x), batched_forward(layer, x)
    assert batched.shape == blocks.shape == (1, rows, 80)
    torch.testing.assert_close(batched, blocks)
