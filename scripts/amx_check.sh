#!/usr/bin/env bash
# Issue 20's checks on a CPU with AMX, in one call of the device tool (a lent machine whose CPU has AMX: the
# device's own torch, no network, 64 MiB a call, so random weights of qwen2.5-coder-0.5b's shapes and the real
# model's output replayed on them: scripts/random_weights.py, scripts/replay_on_weights.py).
#
#   here:   bash scripts/amx_check.sh prepare    # wheels the device lacks into .whl/, the model's config, tokenizer
#                                                # and the README edit's recorded output into .device/ (records it
#                                                # with the real model if missing: about 2 minutes)
#   there:  the device tool's run with command "bash scripts/amx_check.sh run", carry [".device", ".whl"],
#           timeout_s 480: writes lscpu, the edit replayed (with and without padded keys), paired steps (the lean
#           pass against the model's forward, padded keys against none), a profiled step and the runner's tests
#           into $OUT. About 5 minutes on the machines of 2026-11-26.
#
# What the calls of 2026-11-26 found: docs/results/2026-11-26-amx-e2e/README.md.
set -u
cd "$(dirname "$0")/.."

prepare() {
    for path in /.device/ /.whl/; do
        grep -qx "$path" .git/info/exclude || echo "$path" >> .git/info/exclude
    done
    mkdir -p .whl .device/rq05
    local versions
    versions=$(.venv/bin/python - <<'EOF'
import importlib.metadata as m
names = ["transformers", "fastapi", "starlette", "pydantic", "pydantic_core", "typing-inspection", "annotated-types",
         "uvicorn", "gguf"]
print(" ".join(f"{n}=={m.version(n)}" for n in names))
EOF
)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl $versions || exit 1
    local folder
    folder=$(.venv/bin/python -c "from quickdraft.models import resolve; print(resolve('qwen2.5-coder-0.5b'))") || exit 1
    for name in config.json generation_config.json tokenizer_config.json chat_template.jinja; do
        cp "$folder/$name" .device/rq05/
    done
    xz -9 -c "$folder/tokenizer.json" > .device/rq05/tokenizer.json.xz
    [ -f .device/edit-script.json ] || .venv/bin/python scripts/replay_on_weights.py record \
        --out .device/edit-script.json --jobs plain,prediction || exit 1
    du -sh .whl .device
}

run() {
    local T0 P R left
    T0=$(date +%s)
    el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=src:/tmp/site PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES="" TOKENIZERS_PARALLELISM=false
    lscpu > "$OUT/lscpu.txt"
    grep -E "^Model name|^CPU family|^Model:" "$OUT/lscpu.txt"
    grep -o "amx[a-z_0-9]*\|avx512_bf16" "$OUT/lscpu.txt" | sort -u | tr '\n' ' '; echo
    python3 scripts/random_weights.py .device/rq05 /tmp/rq05 2>&1 | grep -v Writing; el weights
    P="env OMP_NUM_THREADS=2 python3"  # 2 threads, as the issue's 2-core Xeon; pinned to 2 cores where taskset is
    local first=$(( $(nproc) >= 4 ? 2 : 0 ))  # (not core 0 where there are more: the machine's own work runs there)
    command -v taskset > /dev/null && P="env OMP_NUM_THREADS=2 taskset -c $first,$(( first + 1 )) python3"
    R="scripts/replay_on_weights.py replay .device/edit-script.json --model /tmp/rq05 --dtype bf16"
    $P $R --jobs prediction,plain --max-new-tokens 300 --paths as-loaded,unpadded --rounds 2 2>&1 | grep -v Warn \
        | tee "$OUT/replay.txt"; el replay
    $P scripts/ab_lean.py --model /tmp/rq05 --dtype bf16 --contexts 800,2000 --rounds 3 --against unpadded 2>&1 \
        | grep -v Warn | tee "$OUT/ab-padded.txt"; el padded
    $P scripts/ab_lean.py --model /tmp/rq05 --dtype bf16 --contexts 800,2000 --rounds 3 2>&1 | grep -v Warn \
        | tee "$OUT/ab-lean.txt"; el lean
    $P scripts/step_profile.py --model /tmp/rq05 --dtypes bf16 --context 800 --steps 20 --top 14 2>&1 \
        | grep -v Warn | tee "$OUT/profile.txt"; el profile
    left=$(( 450 - ($(date +%s) - T0) ))
    [ "$left" -lt 40 ] && { el "no time left for the tests"; return 0; }
    OMP_NUM_THREADS=2 timeout -s INT "$left" python3 -m pytest -q -p no:cacheprovider -m "not real_model" -n 8 -rfE \
        tests/test_lean.py tests/test_runtime.py tests/test_kernels.py tests/test_trees.py tests/test_exactness.py \
        tests/test_prefix_reuse.py tests/test_draft_model.py tests/test_sizing.py tests/test_replay.py \
        -k "not server and not take_nothing and not sliding_window" -o addopts="" > "$OUT/tests.txt" 2>&1
    el "tests rc $?"
    grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.txt" | tail -12
}

case "${1:-}" in
    prepare) prepare ;;
    run) [ -n "${OUT:-}" ] || { echo "run is for the device machine, where OUT is set" >&2; exit 2; }; run ;;
    *) echo "usage: bash scripts/amx_check.sh prepare|run" >&2; exit 2 ;;
esac
