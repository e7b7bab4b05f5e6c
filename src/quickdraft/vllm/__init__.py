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

from . import versions

TESTED_VERSIONS = versions.TESTED_VERSIONS  # quickdraft.vllm.TESTED_VERSIONS, as the docs name it

_log = logging.getLogger("vllm.quickdraft")  # under vLLM's logger: printed the way vLLM prints its own


def register() -> None:
    """vLLM's general-plugin entry point, run in each of its processes: patch (once per process) on a tested vLLM;
    on any other, patch nothing and warn (quickdraft's Proposer then refuses to start: check_version)."""
    version = versions.vllm_version()
    if version not in versions.TESTED_VERSIONS:
        _log.warning("%s; until then the plugin is inactive and this vLLM runs unchanged.",
                     versions.untested_message(version))
        return
    from . import patches

    try:
        patches.apply()
    except Exception:  # vLLM calls plugins without a try: a failure here must not stop a vLLM that never asked
        _log.exception("quickdraft's vLLM plugin could not patch this vLLM; it is inactive, and quickdraft's Proposer "
                       "will refuse to start")


def __getattr__(name: str):  # quickdraft.vllm.Proposer, imported only where vLLM asks for it
    if name == "Proposer":
        from .proposer import Proposer

        return Proposer
    raise AttributeError(name)
