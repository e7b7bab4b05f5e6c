#!/bin/bash
# The README's edit, drafted, two checkouts alternately, 4 runs each: decode tok/s, passes, decode and prefill seconds.
# Usage, from the repository root: bash ab_readme_edit.sh OLD_SRC NEW_SRC
for r in 1 2 3 4; do
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for side in $order; do
    src=$([ $side = old ] && echo "$1" || echo "$2")
    PYTHONPATH=$src .venv/bin/python -m quickdraft generate --edit examples/inventory.py \
      "Rename the function parse_line to parse_record and update its caller." --max-new-tokens 1024 --json 2>/dev/null \
      | .venv/bin/python -c "import json,sys; d=json.load(sys.stdin)['stats']; print('$side', round(d['decode_tokens_per_s'],1), d['target_passes'], round(d['decode_s'],3), round(d['prefill_s'],3))"
  done
done
