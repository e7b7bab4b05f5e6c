# The first lines of run1.sh, run2.sh and run3.sh as they ran (moved here afterwards; each sourced it): the packages
# the device lacks from the carried wheels, then the random-weight folder of qwen2.5-coder-0.5b's shapes.
set -u
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=src:/tmp/site PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES="" TOKENIZERS_PARALLELISM=false
