"""Runner over llama.cpp (llama-cpp-python's low-level API) for GGUF models, in their own 4-bit weights.

On a CPU llama.cpp reads the 4-bit weights of a GGUF file directly instead of float32 copies, which
makes a one-token pass much cheaper than transformers' (measured:
docs/llamacpp.md#what-it-costs-and-what-drafting-can-gain-here). This module gives the engine
the same Runner protocol over it, plus the GGUF's own vocabulary as the Tokenizer:

    prefill(tokens)      llama_decode in chunks of n_batch, no logits; after a reset, the whole chunks the last
                         sequence's prefill shares with these tokens stay (prefix reuse, as runners/hf.HFRunner)
    forward(tokens)      one llama_decode with logits for every position -> [n, vocab] float32
    rollback(length)     llama_memory_seq_rm(mem, seq 0, from length to the end)
    reset()              llama_memory_clear (deferred to the next call: prefill may keep a prefix)

Exactness. A verify pass evaluates n tokens in one llama_decode, where plain decoding evaluates one.
ggml's CPU kernels are not batch-invariant by default: several take another code path, which rounds
differently, once a matrix product has more than one row, so with the stock build and settings a pass of n
tokens gives other logits than n one-token passes (measured: docs/llamacpp.md#exactness). The four causes and
what this runner does about each:

    llamafile's sgemm (F32/F16/Q8_0/Q4_0 weights, 2+ rows)    build with -DGGML_LLAMAFILE=OFF (checked here)
    repacked weights: gemm for 4+ rows, gemv below            use_extra_bufts = False
    flash attention: split-KV for 1 query, tiled for many     flash attention off
    tiled K-quant matmul from 8 rows (Q4_K, Q6_K, ...)        GGML_CPU_TILED_MM=0

With all four, a pass of n tokens gives every row the logits n one-token passes give, bit for bit
(`batch_invariance` measures it; tests/test_llamacpp.py checks it), so every drafter's output equals this
runner's plain decoding token for token, which is llama.cpp's greedy decoding on these kernels (with its default
repacked weights llama.cpp writes other text at some near-ties). The price is speed: without the batched
kernels prefill is slower than a stock build's and a pass costs nearly in proportion to its tokens, which is why
this runner asks for drafts capped at what pays (draft_sizing "cost"; measured:
docs/llamacpp.md#what-it-costs-and-what-drafting-can-gain-here). The environment variable is set when this module
is imported (it is read once, at llama.cpp's first matrix product); a process that sets it to anything else is
refused, like a build with llamafile.

Trees (several candidate continuations in one pass, through sequence ids) are not offered by this
runner yet: it has no tree `forward`, and no drafter asks for one yet.

Models whose state cannot be cut back to any earlier position (recurrent or hybrid layers) are refused
at construction; sliding-window models keep their full cache (swa_full) so that rollback is exact.
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..cpu import usable_cores
from ..errors import ModelError, QuickdraftError, UnsupportedModelError
from ..tokenizer import render_chat_template
from .base import Runner, reusable_prefix

DEFAULT_MAX_CONTEXT = 16384  # tokens of KV cache allocated when the caller sets no max_context
MAX_N_CTX = 2**32 - 256  # llama_context_params.n_ctx is a uint32, which llama.cpp rounds up to a multiple of 256
REBUILD = ("CMAKE_ARGS=-DGGML_LLAMAFILE=OFF pip install --force-reinstall --no-deps --no-binary llama-cpp-python "
           "llama-cpp-python  (in a checkout: bash scripts/setup.sh --with-llama-cpp)")
os.environ.setdefault("GGML_CPU_TILED_MM", "0")  # before llama.cpp's first matrix product: see Exactness above


def _llama() -> Any:
    """The llama_cpp module, or a clear error saying how to install it."""
    try:
        import llama_cpp
    except ImportError:
        raise QuickdraftError(
            f"the llama.cpp runner needs llama-cpp-python, built without llamafile: {REBUILD}; it compiles "
            "llama.cpp, about 8 minutes on 2 cores") from None
    return llama_cpp


@functools.cache
def _silence_logs() -> Any:
    """llama.cpp's log callback set to one that prints nothing, once per process; the callback is returned (and
    so kept referenced by the cache) so that ctypes does not free it."""
    ll = _llama()
    silence = ll.llama_log_callback(lambda level, text, user_data: None)
    ll.llama_log_set(silence, ctypes.c_void_p(0))
    return silence


@functools.cache
def _start_backend() -> None:
    _llama().llama_backend_init()  # once per process


def _init_backend(verbose: bool) -> None:
    check_batch_invariant_build(_llama())
    if not verbose:
        _silence_logs()
    _start_backend()


def check_batch_invariant_build(ll: Any) -> None:
    """Refuse a llama.cpp whose verify passes would not compute what one-token decoding computes."""
    info = ll.llama_print_system_info().decode(errors="replace")
    if "LLAMAFILE = 1" in info:
        raise UnsupportedModelError(
            "this llama-cpp-python was built with llamafile's sgemm, which rounds a pass of several tokens "
            "differently from a pass of one: drafted output would not be exactly plain decoding's. Rebuild it "
            f"without: {REBUILD}")
    if os.environ.get("GGML_CPU_TILED_MM") != "0":
        raise UnsupportedModelError(
            f"GGML_CPU_TILED_MM={os.environ.get('GGML_CPU_TILED_MM')!r} turns on ggml's tiled K-quant matmul for "
            "passes of 8+ tokens, which rounds differently from one-token passes; unset it (quickdraft sets it to 0)")


@dataclass(frozen=True)
class LlamaCppConfig:
    """How the llama.cpp runner is set up.

    max_context: tokens of KV cache (prompt + output); None: the model's training context, at most
    DEFAULT_MAX_CONTEXT (the cache is allocated up front: 12 KiB a token for qwen2.5-coder-0.5b).
    threads: None: every core this process may use.
    n_batch: most tokens per llama_decode call (prefill chunks and verify passes are split to fit).
    """

    max_context: int | None = None
    threads: int | None = None
    n_batch: int = 512
    verbose: bool = False  # llama.cpp's own log on stderr

    def __post_init__(self) -> None:
        if self.max_context is not None and (not isinstance(self.max_context, int) or self.max_context < 2):
            raise QuickdraftError(f"max_context must be an integer >= 2; got {self.max_context!r}")
        if self.max_context is not None and self.max_context > MAX_N_CTX:
            raise QuickdraftError(f"max_context {self.max_context} is more than llama.cpp's context size can hold "
                                  f"(a 32-bit count, rounded up to 256: at most {MAX_N_CTX})")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise QuickdraftError(f"threads must be a positive integer; got {self.threads!r}")
        if not isinstance(self.n_batch, int) or self.n_batch < 1:
            raise QuickdraftError(f"n_batch must be a positive integer; got {self.n_batch!r}")


class LlamaCppModel:
    """A GGUF file loaded by llama.cpp: weights and vocabulary, shared by its runner and tokenizer."""

    def __init__(self, gguf: str | Path, verbose: bool = False):
        ll = _llama()
        path = Path(gguf).expanduser()
        if not path.is_file():
            raise ModelError(f"GGUF file not found: {path}")
        _init_backend(verbose)
        params = ll.llama_model_default_params()
        params.n_gpu_layers = 0  # the CPU path; a GPU build of llama.cpp is not what this runner is for
        params.use_extra_bufts = False  # no repacked weights: their gemm (4+ rows) and gemv round differently
        self.path = path
        self.model = ll.llama_model_load_from_file(str(path).encode(), params)
        if not self.model:
            raise ModelError(f"llama.cpp could not load {path} (not a GGUF model file, or an architecture this "
                             f"llama.cpp does not know; run with verbose=True for its log)")
        self.vocab = ll.llama_model_get_vocab(self.model)
        self.n_vocab: int = ll.llama_vocab_n_tokens(self.vocab)
        self.n_ctx_train: int = ll.llama_model_n_ctx_train(self.model)
        self._ll = ll

    def meta(self, key: str) -> str | None:
        """A metadata value of the GGUF as text (None if absent)."""
        size = 256
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._ll.llama_model_meta_val_str(self.model, key.encode(), buf, size)
            if n < 0:
                return None
            if n < size:
                return buf.value.decode("utf-8", errors="replace")
            size = n + 1

    def token_text(self, token: int) -> str:
        return self._ll.llama_vocab_get_text(self.vocab, token).decode("utf-8", errors="replace")

    def get_vocab(self) -> dict[str, int]:
        """Token text -> id, as the GGUF stores it (the same mapping transformers reads from it)."""
        return {self.token_text(i): i for i in range(self.n_vocab)}

    def __del__(self) -> None:
        if getattr(self, "model", None):
            self._ll.llama_model_free(self.model)
            self.model = None


class LlamaCppRunner(Runner):
    """The Runner protocol (runners/base.py) over one llama.cpp context, sequence 0."""

    draft_sizing = "cost"  # a pass costs nearly in proportion to its tokens here: cap drafts (sizing.py)

    def __init__(self, model: LlamaCppModel, config: LlamaCppConfig = LlamaCppConfig()):
        ll = self._ll = _llama()
        self.llm = model
        self.config = config
        if ll.llama_model_is_recurrent(model.model) or ll.llama_model_is_hybrid(model.model):
            raise UnsupportedModelError(
                f"{model.path.name} has recurrent layers, whose state cannot be rolled back to an earlier position; "
                "draft-and-verify needs a KV cache that can be cut back to the accepted length")
        self.max_context: int = config.max_context or min(model.n_ctx_train or DEFAULT_MAX_CONTEXT, DEFAULT_MAX_CONTEXT)
        self.vocab_size: int = model.n_vocab
        self.threads = config.threads or usable_cores()
        self.n_batch = min(config.n_batch, self.max_context)
        params = ll.llama_context_default_params()
        params.n_ctx = self.max_context
        params.n_batch = params.n_ubatch = self.n_batch
        params.n_seq_max = 1
        params.n_threads = params.n_threads_batch = self.threads
        params.swa_full = True  # keep every position of sliding-window layers: rollback must be exact
        # flash attention takes a split-KV path for one query and a tiled one for many: off, so that a verify
        # pass and one-token decoding compute each row alike (see the module docstring)
        params.flash_attn_type = ll.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.no_perf = True
        self.ctx = ll.llama_init_from_model(model.model, params)
        if not self.ctx:
            raise ModelError(f"llama.cpp could not create a context of {self.max_context} tokens for {model.path.name} "
                             "(out of memory? pass a smaller max_context)")
        if (made := ll.llama_n_ctx(self.ctx)) < self.max_context:  # another size than asked: the cache would overflow
            ll.llama_free(self.ctx)
            self.ctx = None
            raise ModelError(f"llama.cpp made a context of {made} tokens where {self.max_context} were asked for")
        self.memory = ll.llama_get_memory(self.ctx)
        self.batch = ll.llama_batch_init(self.n_batch, 0, 1)
        self._length = 0
        self.reuse_prefix = True  # the bench turns it off (bench/harness.Session)
        self.take_prefix = True  # False: prefill takes nothing kept (a request's prefix_reuse False); still keeps
        self._chunked: list[int] = []  # tokens in the first positions that whole prefill chunks from 0 computed
        self._previous: list[int] | None = None  # after reset: the last sequence's _chunked, its cache not cleared yet

    @property
    def length(self) -> int:
        return self._length

    def reset(self) -> None:
        self._settle()
        self._previous = self._chunked if self.reuse_prefix and self._chunked else None
        if self._previous is None:
            self._ll.llama_memory_clear(self.memory, True)
        self._length, self._chunked = 0, []

    def _settle(self, keep: int = 0) -> None:
        """After a reset that kept the cache for prefix reuse: drop all but its first `keep` positions."""
        if self._previous is not None:
            if not self._ll.llama_memory_seq_rm(self.memory, 0, keep, -1):
                raise RuntimeError(f"llama.cpp could not remove positions {keep}.. from its cache")
            self._previous = None

    def prefill(self, tokens: Sequence[int]) -> int:
        """Append `tokens`; returns how many came from the last sequence's cache (prefix reuse: 0 without)."""
        tokens = list(tokens)
        start = 0
        if self._previous is not None:
            start = reusable_prefix(self._previous, tokens, self.n_batch) if self.take_prefix else 0
            self._settle(keep=start)
            self._length = start
        fresh = self._length == start  # passes start at a chunk boundary from position 0
        for begin in range(start, len(tokens), self.n_batch):
            self._decode(tokens[begin : begin + self.n_batch], logits=False)
        if fresh and self._length == len(tokens):
            self._chunked = tokens[: len(tokens) - len(tokens) % self.n_batch]
        return start

    def forward(self, tokens: Sequence[int]) -> torch.Tensor:
        self._settle()
        rows = []
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            self._decode(chunk, logits=True)
            ptr = self._ll.llama_get_logits(self.ctx)  # [len(chunk), n_vocab] float32, row-major
            rows.append(np.ctypeslib.as_array(ptr, shape=(len(chunk), self.vocab_size)).copy())
        return torch.from_numpy(rows[0] if len(rows) == 1 else np.concatenate(rows))  # [n, vocab_size]

    def rollback(self, length: int) -> None:
        self._settle()
        if length > self._length:
            raise ValueError(f"cannot roll back to {length} tokens: the cache holds only {self._length}")
        del self._chunked[length:]
        if length < self._length and not self._ll.llama_memory_seq_rm(self.memory, 0, length, -1):
            raise RuntimeError(f"llama.cpp could not remove positions {length}.. from its cache")
        self._length = length

    def _decode(self, tokens: Sequence[int], logits: bool) -> None:
        """Append `tokens` (at most n_batch) at the next positions of sequence 0."""
        n = len(tokens)
        if n == 0:
            return
        if self._length + n > self.max_context:
            raise QuickdraftError(f"{self._length + n} tokens do not fit the context of {self.max_context}")
        b = self.batch
        b.n_tokens = n
        for i, t in enumerate(tokens):
            b.token[i] = t
            b.pos[i] = self._length + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = logits
        rc = self._ll.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with code {rc} on {n} tokens at position {self._length}")
        self._length += n

    def __del__(self) -> None:
        ll = getattr(self, "_ll", None)
        if ll is None:
            return
        if getattr(self, "batch", None) is not None:
            ll.llama_batch_free(self.batch)
            self.batch = None
        if getattr(self, "ctx", None):
            ll.llama_free(self.ctx)
            self.ctx = None


class LlamaCppTokenizer:
    """The Tokenizer protocol (tokenizer.py) through the GGUF's own vocabulary.

    Matches transformers' tokenizer for the same file (tests/test_llamacpp.py): encode parses special
    tokens written in the text, decode leaves special tokens out, chat prompts render the GGUF's chat
    template the way transformers does and are tokenized without adding BOS (the template has it), and the
    end-of-generation ids are the ones the transformers runner's conversion gives the same file
    (conversion.end_token_ids).

    llama.cpp itself makes control tokens of every token whose text looks like an end or FIM marker, whatever
    type the GGUF gives it (llama-vocab.cpp, "control-looking token"): it then ends generation there, drops
    its text in decoding and reads it out of any text as the one token. '</s>' is such a token: an ordinary
    one in qwen2.5's vocabulary, a user-defined one in gemma3's, so an HTML <s>...</s> would lose its closing
    tag or end the output. Those tokens ("promoted": the control attribute beside the GGUF's own type) are
    kept here as the GGUF has them: decoded as their text, a normal one tokenized as text, a user-defined one
    read out of text as llama.cpp and transformers read every user-defined token.
    """

    def __init__(self, model: LlamaCppModel):
        from ..conversion import END_ID_KEYS, end_token_ids

        self.llm = model
        ll = self._ll = model._ll
        attrs = [ll.llama_vocab_get_attr(model.vocab, t) for t in range(model.n_vocab)]
        control, typed = ll.LLAMA_TOKEN_ATTR_CONTROL, (ll.LLAMA_TOKEN_ATTR_NORMAL | ll.LLAMA_TOKEN_ATTR_USER_DEFINED
                                                       | ll.LLAMA_TOKEN_ATTR_BYTE)
        self._attrs = attrs
        self._promoted = frozenset(t for t, a in enumerate(attrs) if a & control and a & typed)
        self._promoted_normal = {t: model.token_text(t) for t in self._promoted if attrs[t] & ll.LLAMA_TOKEN_ATTR_NORMAL}
        # every END_MARKERS text is on llama.cpp's lists of control-looking tokens, so the vocabulary's control
        # tokens hold each one the vocabulary has
        controls = {model.token_text(t): t for t, a in enumerate(attrs) if a & control}
        metadata = {key: int(value) for key in END_ID_KEYS if (value := model.meta(key)) is not None}
        eos = ll.llama_vocab_eos(model.vocab)
        self.eos_token_ids = frozenset(end_token_ids(metadata, eos if eos >= 0 else None, controls))
        self.decodes_locally = True  # decode joins each token's piece
        self.chat_template = model.meta("tokenizer.chat_template")

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        if any(promoted in text for promoted in self._promoted_normal.values()):
            return self._encode_keeping_promoted(text, add_special_tokens)
        return self._tokenize(text, add_special_tokens, parse_special=True)

    def _tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 8
        while True:
            out = (self._ll.llama_token * cap)()
            n = self._ll.llama_tokenize(self.llm.vocab, data, len(data), out, cap, add_special, parse_special)
            if n >= 0:
                return list(out[:n])
            cap = -n

    @functools.cached_property
    def _specials(self) -> list[tuple[str, int, int]]:
        """(text, id, attributes) of the tokens llama.cpp reads out of text, but for the promoted normal ones,
        longest first as llama.cpp takes them."""
        ll = self._ll
        kinds = ll.LLAMA_TOKEN_ATTR_CONTROL | ll.LLAMA_TOKEN_ATTR_USER_DEFINED | ll.LLAMA_TOKEN_ATTR_UNKNOWN
        found = [(self.llm.token_text(t), t, a) for t, a in enumerate(self._attrs) if a & kinds and t not in self._promoted_normal]
        return sorted(found, key=lambda s: -len(s[0].encode("utf-8")))

    def _encode_keeping_promoted(self, text: str, add_special: bool) -> list[int]:
        """llama.cpp's own split of text at special tokens (tokenizer_st_partition: each special token in
        turn, longest first, with its lstrip/rstrip attributes), without the promoted normal ones; the text
        between them is tokenized with special tokens off, so a promoted normal token's text stays text."""
        ll = self._ll
        space = " \t\n\v\f\r"  # C's isspace, as llama.cpp strips
        pieces: list[str | int] = [text]
        for special, token, attr in self._specials:
            split: list[str | int] = []
            for piece in pieces:
                if isinstance(piece, int) or special not in piece:
                    split.append(piece)
                    continue
                parts = piece.split(special)
                for i, part in enumerate(parts):
                    if i and attr & ll.LLAMA_TOKEN_ATTR_RSTRIP:
                        part = part.lstrip(space)
                    if i < len(parts) - 1 and attr & ll.LLAMA_TOKEN_ATTR_LSTRIP:
                        part = part.rstrip(space)
                    if part:
                        split.append(part)
                    if i < len(parts) - 1:
                        split.append(token)
            pieces = split
        vocab = self.llm.vocab
        ids = [ll.llama_vocab_bos(vocab)] if add_special and ll.llama_vocab_get_add_bos(vocab) else []
        for piece in pieces:
            ids.extend([piece] if isinstance(piece, int) else self._tokenize(piece, False, parse_special=False))
        if add_special and ll.llama_vocab_get_add_eos(vocab):
            ids.append(ll.llama_vocab_eos(vocab))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return b"".join(self._piece(t) for t in ids).decode("utf-8", errors="replace")

    def _piece(self, token: int) -> bytes:
        special = token in self._promoted  # llama.cpp renders a control token's text only when asked
        buf = ctypes.create_string_buffer(64)
        n = self._ll.llama_token_to_piece(self.llm.vocab, token, buf, 64, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._ll.llama_token_to_piece(self.llm.vocab, token, buf, -n, 0, special)
        return buf.raw[:n]

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template)

    def encode_chat(self, messages: list[dict[str, str]]) -> list[int]:
        if not self.chat_template:
            raise QuickdraftError("this model's GGUF has no chat template: pass the prompt as a plain string")
        special = {}
        for name, fn in (("bos_token", self._ll.llama_vocab_bos), ("eos_token", self._ll.llama_vocab_eos)):
            t = fn(self.llm.vocab)
            if t >= 0:
                special[name] = self.llm.token_text(t)
        text = render_chat_template(self.chat_template, messages, **special)
        return self.encode(text, add_special_tokens=False)


def batch_invariance(runner: LlamaCppRunner, tokens: Sequence[int], split: int) -> float:
    """Largest |logit difference| between scoring tokens[split:] in one pass and one token at a time.

    0.0 means a verify pass sees exactly the numbers plain decoding sees on this model and prefix.
    """
    runner.reset()
    runner.prefill(tokens[:split])
    together = runner.forward(tokens[split:])  # [n, vocab]
    runner.rollback(split)
    alone = torch.cat([runner.forward([t]) for t in tokens[split:]])  # [n, vocab]
    runner.reset()
    return float((together - alone).abs().max())
