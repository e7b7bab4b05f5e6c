"""How close to prefill any prediction drafter could bring decoding on the held-out refactors: the measured decode time
scaled by the oracle's modelled time over today's replay (../2026-11-27-substitutions/oracle-refactor.txt, the
`prediction` table), against prefill of the same tokens at the same positions (../2026-11-27-verify-vs-prefill/
refactor.txt). It assumes the modelled ratio holds on the model.

    python3 docs/results/2026-11-27-trees-after-a-miss/bound.py
"""
from pathlib import Path

here = Path(__file__).parent
oracle, table = {}, False
for line in (here / "../2026-11-27-substitutions/oracle-refactor.txt").read_text().splitlines():
    if line.startswith("prediction (sized)"):
        table = True
    elif table and line.startswith("| refactor |") and "| all |" not in line:
        cells = [c.strip() for c in line.strip("|").split("|")]
        today, fastest = (float(x) for x in cells[5].split(" / ")[:2])
        oracle[cells[1]] = today, fastest
print("| task | decode / prefill of the same tokens: measured | at the oracle's time |")
print("|---|---|---|")
for line in (here / "../2026-11-27-verify-vs-prefill/refactor.txt").read_text().splitlines()[2:]:
    cells = [c.strip() for c in line.split("|")]
    task, decode, same = cells[0], float(cells[4]), float(cells[5])
    if task in oracle:
        today, fastest = oracle[task]
        print(f"| {task} | {decode / same:.2f}x | {decode * fastest / today / same:.2f}x |")
