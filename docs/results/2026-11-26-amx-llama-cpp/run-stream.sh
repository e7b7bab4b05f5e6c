# issue 20 on the AMX Xeon: the one-token step's products against the memory's bandwidth, with oneDNN's AMX kernels
# and without them (ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16: the AVX512-BF16 kernels the EPYC runs)
lscpu | grep -E "^Model name|^Model:"
first=$(( $(nproc) >= 4 ? 2 : 0 ))
P="env OMP_NUM_THREADS=2 taskset -c $first,$(( first + 1 )) python3"
$P .device/matmul_stream.py 2>&1 | grep -v Warn
ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 $P .device/matmul_stream.py 2>&1 | grep -v Warn | grep isa
for isa in default AVX512_CORE_BF16; do
  env $( [ $isa = default ] || echo ONEDNN_MAX_CPU_ISA=$isa ) ONEDNN_VERBOSE=1 $P -c "
import torch
w = torch.ops.mkldnn._reorder_linear_weight(torch.randn(4864, 896).bfloat16(), 32)
for n in (1, 32): torch.ops.mkldnn._linear_pointwise(torch.randn(n, 896).bfloat16(), w, None, 'none', [None], '')
" 2>&1 | grep -o "exec,cpu,inner_product,[^,]*\|exec,cpu,matmul,[^,]*" | sort | uniq -c | sed "s/^/[$isa] /"
done
