"""Every figure of README.md from the rows kept here: each method's end-to-end seconds over quickdraft's `auto`
(prediction+lookup) per task, median [range] per workload, and the exactness flags. python3 summary.py > summary.txt"""

import json
import statistics
from collections import defaultdict
from pathlib import Path

rows = [json.loads(line) for line in (Path(__file__).parent / "quickdraft-bench" / "runs.jsonl").open()]
seconds = {(r["workload"], r["task"], r["method"]): r["seconds"] for r in rows}
tasks = defaultdict(list)
for workload, task, method in seconds:
    if method == "prediction+lookup":
        tasks[workload].append(task)
print("seconds over prediction+lookup, median [min-max] per task; prediction+lookup's own total")
for workload, names in tasks.items():
    total = sum(seconds[workload, t, "prediction+lookup"] for t in names)
    print(f"\n{workload} ({len(names)} tasks): prediction+lookup {total:.1f} s in all")
    for method in ("hf-prompt-lookup", "hf-plain", "plain"):
        ratios = [seconds[workload, t, method] / seconds[workload, t, "prediction+lookup"] for t in names
                  if (workload, t, method) in seconds]
        print(f"  {method}: {statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}] over {len(ratios)}")
    plain = [seconds[workload, t, "hf-plain"] / seconds[workload, t, "plain"] for t in names
             if (workload, t, "hf-plain") in seconds]
    print(f"  hf-plain over quickdraft plain: {statistics.median(plain):.2f}x [{min(plain):.2f}-{max(plain):.2f}]")
drafted = [r for r in rows if r["method"] not in ("plain", "hf-plain")]
for engine in ("quickdraft", "transformers"):
    mine = [r for r in drafted if r["engine"] == engine]
    print(f"\n{engine}: {sum(bool(r['identical']) for r in mine)} of {len(mine)} drafted runs identical to its own plain")
