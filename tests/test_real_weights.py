"""The real-weights device check's parts: a file cut into folders, stashed call by call, joined and checked
(bench/real_weights.py). The generation itself needs a GGUF model and runs on the device (docs/gpu.md#real-weights)."""

import hashlib
import json
import os

import pytest

from quickdraft.bench import real_weights


@pytest.fixture
def gguf(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(os.urandom(5 * 1024 + 123))
    return path


def test_split_cuts_whole_parts_with_a_manifest_in_each_folder(gguf, tmp_path):
    wheel = tmp_path / "gguf-0.0.0-py3-none-any.whl"
    wheel.write_bytes(b"wheel")
    out = tmp_path / "parts"
    manifest = real_weights.split(gguf, out, 2 / 1024, "tiny", [{"name": "r"}], [wheel])  # 2 KiB a part
    assert [p["bytes"] for p in manifest["parts"]] == [2048, 2048, 1024 + 123]
    assert sorted(x.name for x in out.iterdir()) == ["1", "2", "3"]
    for p in manifest["parts"]:
        folder = out / p["folder"]
        assert json.loads((folder / "manifest.json").read_text()) == manifest
        assert hashlib.sha256((folder / p["name"]).read_bytes()).hexdigest() == p["sha256"]
    assert (out / "3" / wheel.name).is_file() and not (out / "1" / wheel.name).exists()
    assert manifest["sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest()


def test_parts_stashed_call_by_call_join_to_the_same_file(gguf, tmp_path):
    out, stash = tmp_path / "parts", tmp_path / "stash"
    manifest = real_weights.split(gguf, out, 2 / 1024, "tiny", [])
    for folder in ("1", "2", "3"):
        real_weights.stash(out / folder, stash)
    assert real_weights.join(manifest, stash).read_bytes() == gguf.read_bytes()


def test_a_part_lost_between_calls_is_named_before_anything_loads(gguf, tmp_path):
    out, stash = tmp_path / "parts", tmp_path / "stash"
    manifest = real_weights.split(gguf, out, 2 / 1024, "tiny", [])
    real_weights.stash(out / "3", stash)  # the machine went back after the first two calls
    with pytest.raises(FileNotFoundError, match="part01, part02 of model.gguf are not in"):
        real_weights.join(manifest, stash)


def test_a_damaged_part_is_refused_when_stashed(gguf, tmp_path):
    out = tmp_path / "parts"
    real_weights.split(gguf, out, 2 / 1024, "tiny", [])
    part = out / "2" / "part02"
    part.write_bytes(b"x" + part.read_bytes()[1:])
    with pytest.raises(ValueError, match="is not the part the manifest names"):
        real_weights.stash(out / "2", tmp_path / "stash")


def test_split_again_replaces_only_its_own_folders(gguf, tmp_path):
    out = tmp_path / "parts"
    real_weights.split(gguf, out, 2 / 1024, "tiny", [])
    (out / "notes.txt").write_text("mine")
    manifest = real_weights.split(gguf, out, 4 / 1024, "tiny", [])
    assert len(manifest["parts"]) == 2
    assert sorted(x.name for x in out.iterdir()) == ["1", "2", "notes.txt"]


@pytest.mark.real_model
def test_a_real_model_joined_from_its_parts_drafts_what_it_decodes_plainly(tmp_path):
    """The device call end to end on the CPU, on SmolLM2-135M's real GGUF in two parts: joined, loaded with the load's
    check, and every quickdraft job's output equal to its plain decoding; transformers' jobs run beside it."""
    from quickdraft import models

    code = "def area(w, h):\n    return w * h\n\n\nprint(area(2, 3))\n"
    asked = [{"name": "tiny edit", "messages": [{"role": "user", "content": f"Rename area to surface:\n```python\n{code}```"}],
              "prediction": f"```python\n{code.replace('area', 'surface')}```", "max_new_tokens": 24}]
    parts, stash, out = tmp_path / "parts", tmp_path / "stash", tmp_path / "out"
    manifest = real_weights.split(models.gguf_file("smollm2-135m", progress=False), parts, 60, "smollm2-135m", asked)
    assert len(manifest["parts"]) == 2
    real_weights.stash(parts / "1", stash)  # the first call; the second joins and runs
    assert real_weights.run_real(parts / "2", "cpu", out, into=stash) == 0
    report = json.loads((out / "real_weights.json").read_text())
    jobs = report["requests"][0]["jobs"]
    assert set(jobs) == {"quickdraft plain", "quickdraft prediction", "quickdraft lookup", "transformers plain",
                         "transformers prompt lookup"}
    assert all(jobs[f"quickdraft {job}"]["same"] for job in ("plain", "prediction", "lookup"))
    assert jobs["quickdraft plain"]["tokens"] > 0 and jobs["quickdraft prediction"]["passes"] < jobs["quickdraft plain"]["passes"]
    assert "| tiny edit | ratios |" in (out / "real_weights.md").read_text()
