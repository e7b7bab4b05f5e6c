#!/usr/bin/env bash
# The README's first command's edit (with --compare), old code against new, alternating processes in one sitting.
#   bash docs/results/2026-11-27-before-after/readme_edit.sh OLD_CHECKOUT [ROUNDS]
# OLD_CHECKOUT: a worktree of the commit to compare (git worktree add /tmp/old COMMIT); both run on this
# checkout's .venv, the old one through PYTHONPATH.
set -euo pipefail
cd "$(dirname "$0")/../../.."
old=$1 rounds=${2:-2}
instruction="Rename the function parse_line to parse_record and update its caller."
for round in $(seq "$rounds"); do
  for version in old new; do
    src=src; [ "$version" = old ] && src="$old/src"
    PYTHONPATH="$src" .venv/bin/python -m quickdraft generate --edit examples/inventory.py "$instruction" \
      --max-new-tokens 1024 --compare --json 2>/dev/null | .venv/bin/python -c '
import json, sys
d = json.load(sys.stdin); s = d["stats"]; c = d["compare"]
print(json.dumps({"version": sys.argv[1], "tokens": s["completion_tokens"], "prefill_s": round(s["prefill_s"], 3),
                  "decode_s": round(s["decode_s"], 3), "passes": s["target_passes"],
                  "plain_decode_tokens_per_s": round(c["plain_decode_tokens_per_s"], 2), "identical": c["identical"]}))' "$version"
  done
done
