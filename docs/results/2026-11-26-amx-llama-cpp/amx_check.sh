#!/usr/bin/env bash
# Issue 20's checks on a CPU with AMX, in one call of the device tool (a lent machine whose CPU has AMX: the
# device's own torch, no network, 64 MiB a call, so random weights of qwen2.5-coder-0.5b's shapes and the real
# model's output replayed on them: random_weights.py and replay_on_weights.py, next to this script).
#
#   here:   bash docs/results/2026-11-26-amx-llama-cpp/amx_check.sh prepare    # wheels the device lacks into .whl/; into .device/ the model's
#                                                # config, tokenizer, the README edit's recorded output (recorded with
#                                                # the real model if missing: about 2 minutes), llama-cpp-python
#                                                # compiled for that CPU (about 10 minutes, once), the real GGUF's
#                                                # header (random_gguf.py, next to this script) and the edit's prompt ids
#   there:  the device tool's run with command "bash docs/results/2026-11-26-amx-llama-cpp/amx_check.sh run", carry [".device", ".whl"],
#           timeout_s 560: lscpu, what 2 cores read from memory, stock llama.cpp's plain decoding of the edit (random
#           weights in the real file's types; AMX repack off, then on), the edit replayed (the prediction whole, plain
#           decoding's first 300 tokens; with and without padded keys), paired steps (padded keys against none), a
#           profiled step, the lean pass against the model's forward where time is left, and the runner's tests.
#           About 8 minutes on the machine of 2026-11-26, where the device tool brought back 8 of the files in $OUT
#           (the tables are in the call's output too).
#
# What the calls of 2026-11-26 found: docs/results/2026-11-26-amx-e2e/README.md (the edit replayed, padded keys in
# their first form) and docs/results/2026-11-26-amx-llama-cpp/README.md (this script as it is: stock llama.cpp, the
# memory floor, the kept padded keys).
set -u
cd "$(dirname "$0")/../../.."  # the repository root
LLAMA_CPP_VERSION=0.3.36  # scripts/setup.sh's
# what llama.cpp's native build turns on for that CPU (its flags: avx512f/vbmi/vnni/bf16, avx_vnni, amx_tile/int8/bf16)
AMX_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_AVX_VNNI=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=ON \
-DGGML_AMX_INT8=ON -DGGML_AMX_BF16=ON"

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
    [ -f .device/edit-script.json ] || .venv/bin/python docs/results/2026-11-26-amx-llama-cpp/replay_on_weights.py record \
        --out .device/edit-script.json --jobs plain,prediction || exit 1
    # stock llama.cpp there: llama-cpp-python compiled here for that CPU's instruction sets (AMX included; not
    # runnable here), diskcache (which it imports), the real GGUF's header and the edit's prompt ids
    python3 -m pip download -q --no-deps --only-binary=:all: -d .whl diskcache==5.6.3 || exit 1
    local llama=.device/llama-amx
    if ! ls $llama/llama_cpp_python-*.whl > /dev/null 2>&1; then
        echo "compiling llama-cpp-python $LLAMA_CPP_VERSION for the AMX Xeon (about 10 minutes)" >&2
        CMAKE_ARGS="$AMX_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=2 .venv/bin/python -m pip wheel -q --no-deps \
            --no-cache-dir --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_CPP_VERSION" -w $llama || exit 1
    fi
    cp "$(ldconfig -p | grep -m1 -o '/[^ ]*libgomp.so.1$')" .device/libgomp.so.1
    local gguf
    gguf=$(.venv/bin/python -c "from quickdraft.models import gguf_file; print(gguf_file('qwen2.5-coder-0.5b'))") || exit 1
    [ -f .device/q05.head.xz ] || .venv/bin/python docs/results/2026-11-26-amx-llama-cpp/random_gguf.py header "$gguf" .device/q05.head.xz || exit 1
    .venv/bin/python - <<'EOF2' || exit 1
import json
script = json.load(open(".device/edit-script.json"))
prompts = {"model": script["model"], "gguf": "/tmp/q05.gguf", "eos": [],  # no eos: every run writes all the tokens
           "prompts": [{"workload": "edit", "task": "readme", "prompt_ids": script["prompt_ids"]}]}
json.dump(prompts, open(".device/llama-prompts.json", "w"))
EOF2
    du -sh .whl .device
}

run() {
    local T0 P R left first
    T0=$(date +%s)
    el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=src:/tmp/site PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES="" TOKENIZERS_PARALLELISM=false
    lscpu > "$OUT/lscpu.txt"
    grep -E "^Model name|^CPU family|^Model:" "$OUT/lscpu.txt"
    grep -o "amx[a-z_0-9]*\|avx512_bf16" "$OUT/lscpu.txt" | sort -u | tr '\n' ' '; echo
    P="env OMP_NUM_THREADS=2 python3"  # 2 threads, as the issue's 2-core Xeon; pinned to 2 cores where taskset is
    first=$(( $(nproc) >= 4 ? 2 : 0 ))  # (not core 0 where there are more: the machine's own work runs there)
    command -v taskset > /dev/null && P="env OMP_NUM_THREADS=2 taskset -c $first,$(( first + 1 )) python3"
    # 1. what 2 cores read from memory: the floor under a one-token bf16 step, which reads every weight once
    $P - <<'EOF2' 2>&1 | tee "$OUT/bandwidth.txt"
import time, torch
x = torch.ones(2**28)  # 1 GiB of float32
times = []
for _ in range(8):
    t = time.perf_counter()
    x.sum()
    times.append(time.perf_counter() - t)
best = min(times)
print(f"float32 sum over 1 GiB, {torch.get_num_threads()} threads: {best * 1e3:.1f} ms, {2**30 / best / 1e9:.1f} GB/s")
EOF2
    el bandwidth
    # 2. stock llama.cpp, plain greedy decoding of the edit's prompt (all its tokens, no eos), random Q4_K_M weights
    #    with the real file's header; as the bench builds it (AMX repack off: it crashed there), then with it on
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-llama .device/llama-amx/*.whl \
        && python3 docs/results/2026-11-26-amx-llama-cpp/random_gguf.py build .device/q05.head.xz /tmp/q05.gguf && {
        ldconfig -p | grep -q libgomp.so.1 || export LD_LIBRARY_PATH=$PWD/.device
        local L="env PYTHONPATH=/tmp/site-llama:/tmp/site ${P#env }" n
        n=$(python3 -c "import json; print(len(json.load(open('.device/edit-script.json'))['output_ids']))")
        $L -c "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())" 2>&1 | tee "$OUT/llama-info.txt"
        timeout 150 $L scripts/llamacpp_stock_baseline.py run --prompts .device/llama-prompts.json --methods stock-plain \
            --max-new-tokens "edit=$n" --n-ctx 2048 --repeats 2 --out "$OUT/llama-plain.jsonl" > "$OUT/llama-plain.log" 2>&1
        el "llama.cpp rc $?"; tail -3 "$OUT/llama-plain.log"
        timeout 60 $L -c "
import sys; sys.path[:0] = ['src/quickdraft/bench']; sys.argv = ['x', 'run', '--prompts', '.device/llama-prompts.json',
    '--methods', 'stock-plain', '--max-new-tokens', 'edit=300', '--n-ctx', '2048', '--out', '$OUT/llama-repack.jsonl']
import llamacpp_stock; llamacpp_stock.repack_allowed = lambda info=None: True  # AMX buffers on
sys.path.insert(0, 'scripts'); import llamacpp_stock_baseline as b; b.main()" > "$OUT/llama-repack.log" 2>&1
        el "llama.cpp with AMX repack rc $?"; tail -3 "$OUT/llama-repack.log"
    }
    python3 docs/results/2026-11-26-amx-llama-cpp/random_weights.py .device/rq05 /tmp/rq05 2>&1 | grep -v Writing; el weights
    # 3. the edit replayed: the prediction whole, plain decoding's first 300 tokens; with and without padded keys
    R="docs/results/2026-11-26-amx-llama-cpp/replay_on_weights.py replay .device/edit-script.json --model /tmp/rq05 --dtype bf16 --paths as-loaded,unpadded"
    $P $R --jobs prediction --rounds 3 2>&1 | grep -v Warn | tee "$OUT/replay-prediction.txt"; el prediction
    $P $R --jobs plain --max-new-tokens 300 --rounds 2 2>&1 | grep -v Warn | tee "$OUT/replay-plain.txt"; el plain
    # 4. paired steps: padded keys against none; the lean pass against the model's forward; a profiled step
    $P docs/results/2026-11-26-lean-pass/ab_lean.py --model /tmp/rq05 --dtype bf16 --contexts 800,2000 --rounds 3 --against unpadded 2>&1 \
        | grep -v Warn | tee "$OUT/ab-padded.txt"; el padded
    $P scripts/step_profile.py --model /tmp/rq05 --dtypes bf16 --context 800 --steps 20 --top 14 2>&1 \
        | grep -v Warn | tee "$OUT/profile.txt"; el profile
    left=$(( 480 - ($(date +%s) - T0) ))
    [ "$left" -gt 120 ] && { $P docs/results/2026-11-26-lean-pass/ab_lean.py --model /tmp/rq05 --dtype bf16 --contexts 800,2000 --rounds 2 \
        2>&1 | grep -v Warn | tee "$OUT/ab-lean.txt"; el lean; }
    # 5. the runner's tests, in what time is left
    left=$(( 510 - ($(date +%s) - T0) ))
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
    *) echo "usage: bash docs/results/2026-11-26-amx-llama-cpp/amx_check.sh prepare|run" >&2; exit 2 ;;
esac
