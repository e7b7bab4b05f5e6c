cd /work/main
for v in /tmp/prerm/src src /tmp/prerm/src src; do
PYTHONPATH=$v .venv/bin/python -m quickdraft generate --edit examples/inventory.py "Rename the function parse_line to parse_record and update its caller." --max-new-tokens 1024 --compare --json 2>/dev/null | .venv/bin/python -c '
import json,sys; d=json.load(sys.stdin); s=d["stats"]; c=d["compare"]; print(sys.argv[1], round(s["decode_s"],2), s["target_passes"], round(c["plain_decode_tokens_per_s"],2), c["identical"])' $v
done
