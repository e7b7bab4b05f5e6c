from pathlib import Path
import quickdraft
from quickdraft.bench import harness, report
from quickdraft.bench import workloads as W
from quickdraft.bench.methods import METHODS
methods = [METHODS["plain-sampled"], METHODS["draft-model-sampled"]]
config = harness.BenchConfig(model="qwen2.5-coder-1.5b", workloads=("summarization",), methods=tuple(m.name for m in methods),
                             out=Path("bench-out/exact-recheck2"), data=W.data_dir(), draft_model="qwen2.5-coder-0.5b", limit=20,
                             max_new_tokens=256, repeats=4, temperature=0.7, argv=("bench-out/recheck.py",))
gen = quickdraft.load("qwen2.5-coder-1.5b", draft_model="qwen2.5-coder-0.5b")
harness.run(config, gen, methods=methods)
print(report.build(config.out))
