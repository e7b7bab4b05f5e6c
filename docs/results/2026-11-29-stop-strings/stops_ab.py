"""StopStrings of two checkouts side by side: microseconds per output token of the stop-string check over
qwen2.5-coder-0.5b's tokenizer, in steps of 1, 8 and 64 tokens, with a stop string that never fires (best of 5,
alternating). Usage: python stops_ab.py OLD_SRC NEW_SRC (each a checkout's src folder), from the repository root."""
import importlib
import sys
import time
from pathlib import Path


def stop_strings(src: str):
    for name in [m for m in sys.modules if m == "quickdraft" or m.startswith("quickdraft.")]:
        del sys.modules[name]
    sys.path.insert(0, src)
    try:
        return importlib.import_module("quickdraft.stopping").StopStrings
    finally:
        sys.path.remove(src)


classes = {"old": stop_strings(sys.argv[1]), "new": stop_strings(sys.argv[2])}
from transformers import AutoTokenizer  # noqa: E402

from quickdraft.models import home  # noqa: E402 (the new checkout's, already imported)
from quickdraft.tokenizer import HFTokenizer  # noqa: E402

tok = HFTokenizer(AutoTokenizer.from_pretrained(home() / "qwen2.5-coder-0.5b" / "hf"))
ids = tok.encode(Path("examples/inventory.py").read_text() * 3, add_special_tokens=False)[:1500]
for step in (1, 8, 64):
    best = {}
    for rnd in range(5):
        for name in ("old", "new") if rnd % 2 == 0 else ("new", "old"):
            s = classes[name](["\n\n\n\n###"], tok.decode, tok.decodes_locally)
            out = []
            t = time.perf_counter()
            for i in range(0, len(ids), step):
                out.extend(ids[i:i + step])
                assert s(out, len(ids[i:i + step])) is None
            best[name] = min(best.get(name, 1e9), (time.perf_counter() - t) / len(ids))
    print(f"step {step:3d}: old {best['old'] * 1e6:6.1f} us/token, new {best['new'] * 1e6:6.1f} us/token")
