"""The rows of runs.jsonl as the report and its plots read them: the latest row per run, speedups against each
row's baseline, rows grouped, and the cells made of them ("median [min-max]")."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Iterable

from .methods import METHODS
from .records import row_key


def latest_rows(rows: Iterable[dict]) -> list[dict]:
    """One row per (workload, task, method, repeat): the last one written (a retried error is replaced)."""
    by: dict[tuple, dict] = {}
    for r in rows:
        by[row_key(r)] = r
    return list(by.values())


def first_divergence(a: list[list[int]], b: list[list[int]]) -> int | None:
    """Index (in the concatenated turns) of the first token where a and b differ; None if equal.

    >>> first_divergence([[1, 2, 3]], [[1, 2, 4]])
    2
    """
    if a == b:
        return None
    fa, fb = [t for turn in a for t in turn], [t for turn in b for t in turn]
    i = 0
    while i < min(len(fa), len(fb)) and fa[i] == fb[i]:
        i += 1
    return i


def on_own_baselines(rows: list[dict]) -> list[dict]:
    """Rows of another tool's methods compared with that tool's own plain decoding, as methods.py defines it today.

    Runs recorded before transformers' methods had their own baseline name quickdraft's "plain" as theirs, so their
    `identical` said whether transformers wrote what quickdraft's plain decoding wrote, not whether its drafting kept
    its own output. Such a row gets its tool's baseline, and `identical` and `first_divergence` are worked out again
    from the output tokens against the first output of that baseline on the task (as the harness takes it). So is
    `identical` of a row written while its baseline's run had failed (None then), once the baseline ran."""
    moved = []
    for r in rows:
        method = METHODS.get(r["method"])
        if method is not None and r.get("engine", "quickdraft") != "quickdraft" and method.baseline != r["baseline"]:
            r = dict(r, baseline=method.baseline)
        moved.append(r)
    reference: dict[tuple[str, str, str], list[list[int]]] = {}
    for r in moved:
        if not r.get("error") and r["method"] == r["baseline"] and not r.get("sampled") and r.get("output_tokens"):
            reference.setdefault((r["workload"], r["task"], r["method"]), r["output_tokens"])
    out = []
    for old, r in zip(rows, moved):
        recheck = r is not old or (r.get("identical") is None and r.get("exact"))  # moved, or its baseline had failed
        if recheck and not r.get("error") and not r.get("sampled"):
            ref = reference.get((r["workload"], r["task"], r["baseline"]))
            known = ref is not None and r.get("output_tokens") is not None
            r["identical"] = r["output_tokens"] == ref if known else None
            r["first_divergence"] = first_divergence(r["output_tokens"], ref) if known else None
        out.append(r)
    return out


def with_speedups(rows: list[dict]) -> list[dict]:
    """Rows (without errors) with `speedup` and `speedup_decode` against their baseline."""
    ok = [r for r in rows if not r.get("error")]
    base: dict[tuple, dict] = {}
    base_med: dict[tuple, dict[str, float | None]] = {}
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in ok:
        if r["method"] == r["baseline"]:
            base[r["workload"], r["task"], r["method"], r["repeat"]] = r
            groups[r["workload"], r["task"], r["method"]].append(r)
    for k, rs in groups.items():
        base_med[k] = {f: median_of([x.get(f) for x in rs]) for f in ("tokens_per_s", "decode_tokens_per_s")}
    out = []
    for r in ok:
        b = base.get((r["workload"], r["task"], r["baseline"], r["repeat"]))
        ref = {f: b.get(f) for f in ("tokens_per_s", "decode_tokens_per_s")} if b else \
            base_med.get((r["workload"], r["task"], r["baseline"]), {})
        r = dict(r)
        r["speedup"] = _ratio(r.get("tokens_per_s"), ref.get("tokens_per_s"))
        r["speedup_decode"] = _ratio(r.get("decode_tokens_per_s"), ref.get("decode_tokens_per_s"))
        out.append(r)
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def median_of(xs: Iterable[float | None]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread_cell(xs: Iterable[float | None], fmt: str = "{:.2f}", suffix: str = "") -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    med = fmt.format(statistics.median(xs)) + suffix
    if len(xs) == 1 or min(xs) == max(xs):
        return med
    return f"{med} [{fmt.format(min(xs))}–{fmt.format(max(xs))}]"


def mean_cell(xs: Iterable[float | None], fmt: str = "{:.1f}") -> str:
    xs = [x for x in xs if x is not None]
    return fmt.format(statistics.mean(xs)) if xs else "–"


def in_method_order(names: Iterable[str]) -> list[str]:
    rank = {n: i for i, n in enumerate(METHODS)}
    return sorted(set(names), key=lambda n: rank.get(n, len(rank)))


def group_by(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        out[tuple(r[k] for k in keys)].append(r)
    return out


def workloads_in(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["workload"] for r in rows))


def kl_bound(method: str) -> float | None:
    """The KL bound D of a mentored method ("mentored-kl0.1" -> 0.1; methods.mentored_method names them), else None."""
    prefix = "mentored-kl"
    return float(method[len(prefix):]) if method.startswith(prefix) else None
