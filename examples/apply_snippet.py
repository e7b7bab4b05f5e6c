"""Fast apply: merge a lazy edit snippet into a file, the merge the snippet describes as the prediction.

The snippet (the kind an editor's chat model writes) shows only the changed code; `# ... existing code ...`
stands for the rest. The model writes the whole merged file. The prediction is the merge guessed from the
snippet (`prompts.merged_guess`: each marker filled with the file's lines it stands for), so where the model
merges as asked every token is drafted; where it departs, prompt lookup drafts from the file and the snippet.
The output is the same as plain greedy decoding would give, sooner. The default model is small: it may merge part of a snippet only (one run here
added the KeyError check but not remove(), and dropped the module docstring); the speed is the point.

    .venv/bin/python examples/apply_snippet.py
"""

from pathlib import Path

import quickdraft
from quickdraft.prompts import apply_request

ORIGINAL = (Path(__file__).parent / "inventory.py").read_text()

SNIPPET = '''\
# ... existing code ...
    def restock(self, sku: str, amount: int) -> None:
        if amount <= 0:
            raise ValueError("amount must be positive")
        if sku not in self.items:
            raise KeyError(f"unknown sku {sku!r}")
        self.items[sku].quantity += amount

    # ... existing code ...

    def remove(self, sku: str) -> Item:
        """Take an item out of the inventory and return it."""
        return self.items.pop(sku)


# ... existing code ...
'''

gen = quickdraft.load()  # the default model, qwen2.5-coder-0.5b
message, prediction = apply_request(ORIGINAL, SNIPPET, "inventory.py")
# drafter "auto" (the default) beside a prediction: prediction+lookup, so the snippet's new lines are drafted from the
# prompt where the original file has nothing to offer
result = gen.generate([{"role": "user", "content": message}], prediction=prediction, max_new_tokens=1200)
print(result.text)
s = result.stats
print(f"\n{s.completion_tokens} tokens: {s.accepted_prediction_tokens} accepted and {s.rejected_prediction_tokens} "
      f"rejected prediction tokens (by source {s.by_source}), {s.target_passes} passes of the model, "
      f"{s.prefill_s:.1f} s prefill + {s.decode_s:.1f} s decode")
