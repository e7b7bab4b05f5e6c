"""runners/native.py and softmax.c: the bf16 softmax kernel, and torch's softmax wherever it cannot run."""

import pytest
import torch

from quickdraft.runners import native

kernel = pytest.mark.skipif(not native.in_use(), reason=f"the softmax kernel does not run here: {native.unavailable()}")


def _scores(rows: int, cols: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, cols, generator=g) * 6).bfloat16()


@kernel
@pytest.mark.parametrize("cols", [1, 5, 16, 17, 64, 100, 1024, 3001])
def test_the_kernel_computes_softmax_rounded_to_bf16(cols):
    """Within one bf16 rounding of the float64 softmax, weights summing to 1, and torch's own bits on nearly every
    weight (both round the float32 softmax once); every row length, whole blocks of 16 and a remainder."""
    x = _scores(37, cols)
    ours, theirs = native.softmax(x), torch.softmax(x, -1)
    exact = torch.softmax(x.double(), -1)
    assert ours.dtype == torch.bfloat16 and ours.shape == x.shape
    assert ((ours.double() - exact).abs() <= exact * (2**-8 + 1e-6)).all()  # half a bf16 step, and float32 error
    assert torch.allclose(ours.double().sum(-1), torch.ones(37, dtype=torch.float64), atol=cols * 2**-8)
    assert (ours != theirs).float().mean() < 0.01


@kernel
def test_masked_keys_weigh_exactly_zero():
    """Keys masked with the dtype's lowest number (eager attention's mask) or -inf (the padding of attention.attend)
    get weight 0, as torch's softmax gives them, and rows of wildly different scales stay finite."""
    x = _scores(8, 200)
    x[:, 150:170] += torch.finfo(torch.bfloat16).min
    x[:, 170:] = float("-inf")
    x[3] *= 1000
    ours = native.softmax(x)
    assert torch.equal(ours == 0, torch.softmax(x, -1) == 0)
    assert (ours[:, 150:] == 0).all() and ours.isfinite().all()


@kernel
def test_a_row_gets_the_same_bits_in_a_pass_of_any_size():
    """Row invariance by construction: a row's weights depend on its own scores only, not on how many rows the call
    has, where the row sits, or how many threads share them (the verify passes rely on it: runners/attention.py)."""
    x = _scores(300, 777, seed=3)
    whole = native.softmax(x)
    for start, stop in ((0, 1), (5, 6), (0, 33), (100, 229), (299, 300)):
        assert torch.equal(native.softmax(x[start:stop].clone()), whole[start:stop])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(native.softmax(x), whole)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(native.softmax(x.view(3, 100, 777)), whole.view(3, 100, 777))  # any leading shape


def test_what_the_kernel_does_not_take_gets_torchs_softmax():
    """float32, a non-contiguous view, an empty tensor: torch's softmax, bit for bit."""
    x = _scores(10, 64)
    assert torch.equal(native.softmax(x.float()), torch.softmax(x.float(), -1))
    view = x[:, ::2]  # [10, 32], rows not contiguous
    assert torch.equal(native.softmax(view), torch.softmax(view, -1))
    assert native.softmax(torch.empty(0, 5, dtype=torch.bfloat16)).shape == (0, 5)


def _fresh(monkeypatch, **env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    native._load.cache_clear()


@pytest.fixture
def rebuilt(monkeypatch, tmp_path):
    """native's state as at a fresh start, builds kept under tmp_path; restored after."""
    monkeypatch.setenv("QUICKDRAFT_HOME", str(tmp_path))
    yield lambda **env: _fresh(monkeypatch, **env)
    monkeypatch.undo()
    native._load.cache_clear()


def test_turned_off_it_is_torchs_softmax_and_says_why(rebuilt):
    rebuilt(QUICKDRAFT_NATIVE="0")
    assert not native.in_use() and native.unavailable() == "QUICKDRAFT_NATIVE=0"
    x = _scores(4, 300)
    assert torch.equal(native.softmax(x), torch.softmax(x, -1))


def test_a_compiler_that_fails_leaves_torchs_softmax_and_the_reason(rebuilt, monkeypatch, tmp_path):
    """A build that fails is no error: softmax() is torch's, and unavailable() names the failure (or, on a CPU the
    kernel cannot run on, that)."""
    failing = tmp_path / "cc"
    failing.write_text("#!/bin/sh\necho 'cc: error: no such instruction' >&2\nexit 1\n")
    failing.chmod(0o755)
    rebuilt(CC=str(failing))
    x = _scores(4, 300)
    assert torch.equal(native.softmax(x), torch.softmax(x, -1))
    why = native.unavailable()
    assert why is not None and ("did not build" in why or "the CPU lacks" in why)
    assert not list(tmp_path.glob("kernels/*.so"))


@kernel
def test_the_build_is_kept_and_taken_by_the_next_start(rebuilt, tmp_path):
    rebuilt()
    assert native.in_use()
    built = list((tmp_path / "kernels").glob("softmax-*.so"))
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    rebuilt()
    assert native.in_use() and built[0].stat().st_mtime_ns == stamp  # not built again
