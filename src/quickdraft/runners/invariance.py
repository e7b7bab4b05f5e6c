"""Row invariance on the transformers runner: a verify pass computes, for every row, the numbers a one-token
pass computes for it, bit for bit.

Drafted output is plain decoding's only if that holds; kernels rarely promise it. Rows of a pass of M tokens
against the same rows computed one at a time, on a CPU with AVX-512 and AVX512_BF16 (measured:
docs/runtime.md#row-invariance):

    float32 Linear, packed (kernels.PackedLinear)         M = 1 differs from M >= 2 where the inner dimension
                                                          is long (896 x 4864, 1536 x 1536 ...); M >= 2 agree
    float32 Linear, torch's (MKL)                         three paths: M = 1, M = 2-3, M >= 4
    bfloat16 Linear (oneDNN)                              equal for most shapes; differs where the output is
                                                          narrow and the inner dimension long, by M, 2 threads
    attention over L keys, masked ones weighing 0         float32: differs from the same sum over fewer keys
                                                          (the sum over L is split by its length); bf16 eager:
                                                          equal; SDPA: differs

With AMX, packed bf16 products of 16 rows or more take other kernels than smaller ones, and 16-31 rows differ
again from 32 or more: nearly every packed shape differs by M there, while torch's own bf16 Linear differs only
where the inner dimension is long (measured: docs/cpu.md#amx).

And which rows differ there depends on the data: a model whose every shape probed invariant can still give one
row of a long pass other bits than a one-token pass, with equal inputs, where the load's check did not look.
Probing cannot show invariance there.

So the runner (load.exact_runner) loads its own eager attention and makes its Linear layers row-invariant
(`make_row_invariant`) one of two ways:
- with AMX, in bf16: every Linear in a FixedRows layer, which computes each pass in products of exactly
  FIXED_ROWS rows (zero rows filling the last), so every row of every pass takes the same product, whatever
  the data: invariant by construction, and with AMX cheaper than the padding below (measured:
  docs/cpu.md#fixed-row-blocks);
- elsewhere: exactly the layers whose shape is not invariant wrapped in a RowPadded layer, which pads a pass
  of fewer rows than the layer needs to that many (the fewest of PAD_ROWS that makes the layer invariant: 2 for
  the float32 layers above, 16 for the bf16 ones here), probed once per distinct shape at load
  (`pad_where_needed`). Where a packed layer needs padding, torch's own Linear over the same weight is probed
  too, and of the two ways that are invariant the one that needs fewer rows is kept (`choose`).
In float32 attention runs one row at a time in passes of several tokens (attention.rows_attention).
`row_invariance` then checks the whole model: logits of n-token passes against one-token passes at the same
positions.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Sequence

import torch

from .kernels import PackedLinear, RowPadded, FixedRows, linear_layers

# With AMX every bf16 Linear runs in products of this many rows (FixedRows; module docstring), chosen against 16 and
# 64 (measured: docs/cpu.md#fixed-row-blocks)
FIXED_ROWS = 32
PAD_ROWS = (2, 4, 8, 16, 32, 64)  # the paddings pad_where_needed tries, fewest rows first
# pass sizes probed against one-row passes (129: the last token and a prediction draft of its longest, 128 tokens)
PROBE_ROWS = (2, 3, 4, 5, 8, 9, 16, 17, 24, 32, 33, 48, 64, 65, 96, 128, 129)


def rows_invariant(layer: torch.nn.Module, in_features: int, dtype: torch.dtype, seed: int = 0) -> bool:
    """Whether `layer` gives each row the same bits in passes of PROBE_ROWS rows as alone (random inputs)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(max(PROBE_ROWS), in_features, generator=g).to(layer.weight.device, dtype)  # [65, in]
    with torch.inference_mode():
        alone = torch.cat([layer(x[i : i + 1]) for i in range(x.shape[0])])  # [64, out]
        return all(torch.equal(layer(x[:m]), alone[:m]) for m in PROBE_ROWS)


def rows_needed(layer: torch.nn.Module, in_features: int, dtype: torch.dtype) -> int | None:
    """The fewest rows `layer` must compute for its passes to be row-invariant here: 1 (no padding), one of
    PAD_ROWS, or None where no padding tried makes it so."""
    if rows_invariant(layer, in_features, dtype):
        return 1
    return next((rows for rows in PAD_ROWS if rows_invariant(RowPadded(layer, rows), in_features, dtype)), None)


Make = Callable[[torch.nn.Module], torch.nn.Module]
# How a Linear shape runs row-invariantly (plan): None, as it is (or left to the model's check where nothing tried
# helps); ("own", rows): its own kernel padded to rows; ("alternative", rows): the alternative's kernel, padded to
# rows where rows > 1. Plain data, so that a load can keep it (load.kept_probe).
Plan = tuple[str, int] | None
# A probe's answer for a layer: remember(layer, probe) returns probe() or the answer it gave before for this shape
Remember = Callable[[torch.nn.Module, Callable[[], Plan]], Plan]


def plan(layer: torch.nn.Module, in_features: int, alternative: Make | None) -> Plan:
    """How to run a Linear shape row-invariantly (Plan), probed on `layer`.

    As it is where that is invariant; else the fewest PAD_ROWS that make it so, or `alternative(layer)` (another
    kernel over the same weight) where that needs fewer rows: every decoding step computes the padded rows, so
    fewer rows is the cheaper way (a tie keeps the layer's own kernel)."""
    dtype = layer.weight.dtype
    rows = rows_needed(layer, in_features, dtype)
    if rows == 1:
        return None
    other = alternative(layer) if alternative else None
    other_rows = rows_needed(other, in_features, dtype) if other is not None else None
    if other_rows is not None and (rows is None or other_rows < rows):
        return ("alternative", other_rows)
    return None if rows is None else ("own", rows)


def made(how: Plan, alternative: Make | None) -> Make | None:
    """The function that turns a layer into the runner's as `how` says; None: the layer stays as it is."""
    if how is None:
        return None
    kind, rows = how
    if kind == "alternative":
        return alternative if rows == 1 else (lambda layer: RowPadded(alternative(layer), rows))
    return lambda layer: RowPadded(layer, rows)


def choose(layer: torch.nn.Module, in_features: int, alternative: Make | None) -> Make | None:
    """How to run a Linear shape row-invariantly: None (as it is), or a function that turns a layer of this shape
    into the runner's (plan, made); the layer is left to the model's check where nothing tried makes it invariant."""
    return made(plan(layer, in_features, alternative), alternative)


def unpacked(layer: torch.nn.Module) -> torch.nn.Linear | None:
    """torch's own Linear over a packed layer's weight (the alternative pad_where_needed tries); None for others."""
    return layer.to_linear() if isinstance(layer, PackedLinear) else None


def pad_where_needed(model: torch.nn.Module, alternative: Make | None = unpacked,
                     remember: Remember | None = None) -> list[str]:
    """Make every Linear of the model row-invariant on this machine the cheapest way found (`plan`: as it is,
    padded in a RowPadded layer, or `alternative`'s kernel, padded or not); returns the names of the layers
    replaced. Each distinct (out, in) shape is probed once, or its answer taken from `remember` (a load keeps the
    answers: probing the output layer alone takes seconds). A layer nothing tried helps is left as it is (the model's
    check at load then finds the difference). alternative None: only padding is tried."""
    chosen: dict[tuple[int, int], Make | None] = {}
    replaced = []
    for module, name, child in linear_layers(model):
        shape = tuple(child.weight.shape)
        if shape not in chosen:
            probe = partial(plan, child, shape[1], alternative)
            chosen[shape] = made(remember(child, probe) if remember else probe(), alternative)
        if chosen[shape] is not None:
            setattr(module, name, chosen[shape](child))
            replaced.append(name)
    return replaced


def fixed_rows_here(dtype: torch.dtype, device: torch.device | str = "cpu") -> int | None:
    """FIXED_ROWS where products of `dtype` on `device` need fixed-size blocks to be row-invariant: on a GPU,
    whose matrix kernels are chosen by shape, always; on a CPU in bf16 with AMX; else None (padding where needed
    is enough: pad_where_needed)."""
    from ..cpu import has_amx_bf16

    if torch.device(device).type == "cuda":
        return FIXED_ROWS
    return FIXED_ROWS if dtype == torch.bfloat16 and has_amx_bf16() else None


def fix_rows(model: torch.nn.Module, rows: int) -> list[str]:
    """Every Linear of the model (torch's or packed) in a FixedRows layer of `rows` rows; returns their names."""
    layers = linear_layers(model)
    for module, name, child in layers:
        setattr(module, name, FixedRows(child, rows))
    return [name for _, name, _ in layers]


def make_row_invariant(model: torch.nn.Module, alternative: Make | None = unpacked,
                       remember: Remember | None = None) -> list[str]:
    """The runner's Linear layers made row-invariant on this CPU: in fixed-size blocks where its kernels need them
    (fixed_rows_here), else padded where needed (pad_where_needed, with `alternative` and `remember`); returns the
    names of the layers replaced. The load's check then tests the whole model either way."""
    layers = linear_layers(model)
    rows = fixed_rows_here(layers[0][2].weight.dtype, layers[0][2].weight.device) if layers else None
    return fix_rows(model, rows) if rows else pad_where_needed(model, alternative, remember)


def row_invariance(runner, tokens: Sequence[int], sizes: Sequence[int] = (2, 5, 16, 33)) -> float:
    """Largest |logit difference| between rows of one n-token pass and the same positions decoded one token
    at a time, over the sizes given, after tokens[:-max(sizes)] are cached. 0.0: row-invariant there.
    Leaves the runner reset."""
    longest = max(sizes)
    prefix, rest = list(tokens[:-longest]), list(tokens[-longest:])
    worst = 0.0
    runner.reset()
    runner.prefill(prefix)
    one = torch.cat([runner.forward([t]) for t in rest])  # [longest, vocab]
    for n in sizes:
        runner.rollback(len(prefix))
        worst = max(worst, float((runner.forward(rest[:n]) - one[:n]).abs().max()))
    runner.reset()
    return worst
