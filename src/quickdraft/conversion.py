"""GGUF file -> transformers folder: the conversion models.resolve runs once per model.

transformers loads the GGUF (dequantised to float32) and the result is saved as a plain safetensors folder, which
later loads without dequantising again. The GGUF's own chat template and end-of-generation ids are carried over
(transformers' GGUF loader drops or narrows them), and the folder is written under a temporary name and renamed
into place, so a half-written conversion is never found.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import struct
import sys
import time
from pathlib import Path
from typing import IO, Mapping

from tqdm import tqdm

from .errors import ModelError

# Token texts that end generation when present in a vocabulary (besides the GGUF eos/eot/eom ids).
END_MARKERS = ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>",
               "<|end_of_text|>", "<|end|>", "<EOT>")
END_ID_KEYS = ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")


def convert(gguf: Path, out_dir: Path, progress: bool = True) -> Path:
    """Load ``gguf`` with transformers (float32) and save it as a plain safetensors folder.

    The folder is written under a temporary name and renamed at the end, so a half-written
    conversion is never found at ``out_dir``. An existing ``out_dir`` is replaced. Returns ``out_dir``.
    """
    gguf, out_dir = Path(gguf), Path(out_dir)
    if not gguf.is_file():
        raise ModelError(f"GGUF file not found: {gguf}")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _convert_into(gguf, tmp, progress)
        _replace_dir(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _convert_into(gguf: Path, out: Path, progress: bool) -> None:
    started = time.monotonic()
    steps = tqdm(total=3, desc=f"convert {gguf.name}", unit="step", file=sys.stderr,
                 disable=not progress, bar_format="{desc}: {n}/{total} {postfix} [{elapsed}]")
    quiet = contextlib.nullcontext() if progress else contextlib.redirect_stderr(io.StringIO())
    with steps, quiet:
        steps.set_postfix_str("loading tokenizer", refresh=True)
        tokenizer = _load_gguf_tokenizer(gguf)
        steps.update()
        steps.set_postfix_str("loading and dequantising weights (about a minute)", refresh=True)
        model = _load_gguf_model(gguf)
        steps.update()
        steps.set_postfix_str("saving safetensors", refresh=True)
        metadata = _gguf_metadata(gguf)
        _fix_chat_template(tokenizer, metadata)
        _fix_eos(model, tokenizer, metadata)
        _strip_quantizer(model)
        model.save_pretrained(out, safe_serialization=True)
        tokenizer.save_pretrained(out)
        _write_source_note(out, gguf, time.monotonic() - started)
        steps.update()
    _check_saved(out, expect_template=bool(metadata.get("tokenizer.chat_template")))


def _load_gguf_tokenizer(gguf: Path):  # -> transformers tokenizer
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except Exception as exc:  # transformers raises many kinds for unsupported files
        raise ModelError(f"transformers could not read the tokenizer of {gguf}: {exc}") from exc


def _load_gguf_model(gguf: Path):  # -> transformers PreTrainedModel
    import torch
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                    dtype=torch.float32)
    except Exception as exc:
        hint = " (install it: pip install accelerate)" if "accelerate" in str(exc) else ""
        raise ModelError(f"transformers could not load the weights of {gguf}: {exc}{hint}") from exc


_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
                 12: "d"}  # GGUF value type -> struct format; 8 is a string, 9 an array
_GGUF_WANTED = ("tokenizer.chat_template", *END_ID_KEYS)


def _gguf_metadata(gguf: Path) -> dict[str, object]:
    """The GGUF metadata used here (chat template, end token ids), from the file's header.

    A small reader of the key/value header that skips arrays: the gguf package's GGUFReader also decodes the
    whole vocabulary, which is slow for a large one.
    """
    with open(gguf, "rb") as source:
        if source.read(4) != b"GGUF":
            raise ModelError(f"{gguf} is not a GGUF file (bad magic)")
        order = "<" if struct.unpack("<I", source.read(4))[0] < 0x10000 else ">"
        _tensors, count = struct.unpack(order + "QQ", source.read(16))
        found: dict[str, object] = {}
        for _ in range(count):
            key = _read_gguf_string(source, order)
            (kind,) = struct.unpack(order + "I", source.read(4))
            value = _read_gguf_value(source, order, kind)
            if key in _GGUF_WANTED:
                found[key] = value
    return found


def _read_gguf_string(source: IO[bytes], order: str) -> str:
    (length,) = struct.unpack(order + "Q", source.read(8))
    return source.read(length).decode("utf-8", errors="replace")


def _read_gguf_value(source: IO[bytes], order: str, kind: int) -> object:
    """Read one value; arrays are skipped (returned as None)."""
    if kind == 8:
        return _read_gguf_string(source, order)
    if kind in _GGUF_SCALARS:
        fmt = order + _GGUF_SCALARS[kind]
        return struct.unpack(fmt, source.read(struct.calcsize(fmt)))[0]
    if kind != 9:
        raise ModelError(f"unknown GGUF metadata type {kind}")
    item, length = struct.unpack(order + "IQ", source.read(12))
    if item in _GGUF_SCALARS:
        source.seek(length * struct.calcsize(_GGUF_SCALARS[item]), os.SEEK_CUR)
    else:
        for _ in range(length):
            _read_gguf_value(source, order, item)
    return None


def _fix_chat_template(tokenizer, metadata: dict[str, object]) -> None:
    """Keep the GGUF's chat template (the ground truth) on the tokenizer."""
    template = metadata.get("tokenizer.chat_template")
    if isinstance(template, str) and template and tokenizer.chat_template != template:
        tokenizer.chat_template = template


def end_token_ids(metadata: Mapping[str, object], eos_token_id: int | None, vocab: Mapping[str, int]) -> list[int]:
    """A GGUF model's end-of-generation ids, for both runners: the GGUF's eos/eot/eom ids (metadata), the
    tokenizer's eos, and the END_MARKERS the vocabulary (token text -> id) has, in that order."""
    ids = [metadata.get(key) for key in END_ID_KEYS]
    ids.append(eos_token_id)
    ids.extend(vocab.get(text) for text in END_MARKERS)
    unique: list[int] = []
    for value in ids:
        if isinstance(value, int) and value >= 0 and value not in unique:
            unique.append(value)
    return unique


def _fix_eos(model, tokenizer, metadata: dict[str, object]) -> None:
    """Make generation_config stop on every end-of-generation token, and give it a pad id."""
    ids = end_token_ids(metadata, tokenizer.eos_token_id, tokenizer.get_vocab())
    if not ids:
        return
    config = model.generation_config
    config.eos_token_id = ids[0] if len(ids) == 1 else ids
    if config.pad_token_id is None:
        config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else ids[0]


def _strip_quantizer(model) -> None:
    """Forget the GGUF quantizer so that save_pretrained writes plain float32 weights."""
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False


def _write_source_note(out: Path, gguf: Path, seconds: float) -> None:
    import transformers

    note = {"source": str(gguf.resolve()), "source_bytes": gguf.stat().st_size,
            "transformers": transformers.__version__, "convert_seconds": round(seconds, 1)}
    (out / "quickdraft.json").write_text(json.dumps(note, indent=2) + "\n")


def _check_saved(out: Path, expect_template: bool) -> None:
    if not (out / "config.json").is_file() or not any(out.glob("*.safetensors")):
        raise ModelError(f"conversion wrote no config.json or safetensors weights into {out}")
    has_template = (out / "chat_template.jinja").is_file() or "chat_template" in json.loads(
        (out / "tokenizer_config.json").read_text())
    if expect_template and not has_template:
        raise ModelError(f"the saved tokenizer in {out} lost the GGUF's chat template")


def _replace_dir(src: Path, dst: Path) -> None:
    """Move the finished folder ``src`` to ``dst``, replacing an older ``dst``."""
    if dst.exists():
        old = dst.parent / f".{dst.name}.{os.getpid()}.old"
        os.replace(dst, old)
        os.replace(src, dst)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(src, dst)
