"""`quickdraft bench`: the harness on a tiny random model (2 prompts per workload), resume, the report and
plots, option checks before any model loads, and the shape of the Predicted Outputs study.

The tiny model writes gibberish; what is checked is the harness: every method runs, every exact
method is identical to plain greedy decoding, the counts add up, and a second run adds nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from conftest import OUROBOROS_RESULTS, load_script, save_char_model

from quickdraft import cli
from quickdraft.bench import harness, methods, report, study, workloads
from quickdraft.bench import rows as rows_mod
from quickdraft.errors import QuickdraftError
from quickdraft.drafters.prediction import PredictionConfig

CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


def _data_or_skip():
    return workloads.data_dir()  # ../shared/data is always beside the checkout (CI too): missing data must fail


@pytest.fixture(scope="module")
def data():
    return _data_or_skip()


@pytest.fixture(scope="module")
def bench_model(tiny_folder, tmp_path_factory):
    """The tiny character-level model with a chat template and room for whole refactor files (8192 tokens)."""
    return save_char_model(tmp_path_factory.mktemp("bench-model"), None, tokenizer=AutoTokenizer.from_pretrained(tiny_folder),
                           chat_template=CHAT_TEMPLATE, layers=1, max_positions=8192, seed=1)


SMOKE = ["bench", "run", "--workloads", "all", "--methods", "all", "--limit", "2", "--max-new-tokens", "24",
         "--repeats", "1", "--no-progress"]


@pytest.fixture(scope="module")
def smoke_run(bench_model, data, tmp_path_factory):
    """One run of every workload x every method on the tiny model, the model drafting for itself."""
    out = tmp_path_factory.mktemp("bench-out")
    with one_thread():
        code = cli.main([*SMOKE, "--model", str(bench_model), "--draft-model", str(bench_model), "--out", str(out),
                         "--data", str(data)])
    return out, code


@contextlib.contextmanager
def one_thread():
    """Tiny tensors: a second thread only adds synchronisation (20x slower on a busy 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def test_smoke_every_workload_and_method(smoke_run, data):
    out, code = smoke_run
    assert code == 0
    rows = harness.read_runs(out)
    assert not [r for r in rows if r.get("error")]
    ran = {r["method"] for r in rows}
    meta = harness.read_meta(out)
    skipped = meta["invocations"][-1]["methods_skipped"]
    # Every method ran, except the ones whose software is missing, each with a note saying why.
    assert set(methods.METHODS) == ran | set(skipped)
    notes = " ".join(meta["invocations"][-1]["notes"])
    for name in skipped:
        assert f"method {name}: skipped" in notes
    assert {"plain", "prediction", "prediction-openai", "prediction+lookup", "lookup", "draft-model", "ouroboros",
            "hf-plain", "hf-prompt-lookup", "hf-assisted", "plain-sampled", "lookup-sampled", "prediction-sampled",
            "draft-model-sampled"} <= ran
    per_workload = {w: {r["task"] for r in rows if r["workload"] == w} for w in workloads.WORKLOADS}
    # 2 tasks each, but for a prompt longer than the tiny model's 8192 positions: skipped with a note (test_fits)
    too_long = {w: {t.id for t in wl.load(data, 2) if f"{w}/{t.id}: skipped: the prompt has" in notes}
                for w, wl in workloads.WORKLOADS.items()}
    assert per_workload == {w: {t.id for t in wl.load(data, 2)} - too_long[w]
                            for w, wl in workloads.WORKLOADS.items()}, per_workload
    # Prediction methods only where there is a prediction.
    assert {r["workload"] for r in rows if r["method"].startswith("prediction")} == {
        "edit_eval", "refactor", "apply_edit_eval", "apply_refactor"}


def test_fits():
    """A task whose prompt leaves no room for max_new_tokens, or that the model refuses, is skipped with a note
    saying why (harness._loop then goes on with the next task)."""
    from types import SimpleNamespace

    from quickdraft.errors import QuickdraftError

    def refuse(messages):
        raise QuickdraftError("the prompt has 9000 tokens; the model's context is 8192")

    def session(prompt_ids):
        return SimpleNamespace(gen=SimpleNamespace(runner=SimpleNamespace(max_context=8192)), prompt_ids=prompt_ids)

    config, task, notes = SimpleNamespace(max_new_tokens=512), SimpleNamespace(id="t1", messages=[]), []
    assert harness._fits(session(lambda m: [1] * 7680), config, "refactor", task, notes.append)
    assert not harness._fits(session(lambda m: [1] * 7681), config, "refactor", task, notes.append)
    assert not harness._fits(session(refuse), config, "refactor", task, notes.append)
    assert notes == ["refactor/t1: skipped: the prompt has 7681 tokens and the model's context 8192, leaving no room "
                     "for 512 new tokens", "refactor/t1: skipped: the prompt has 9000 tokens; the model's context is 8192"]


def test_smoke_exact_methods_identical_to_plain(smoke_run):
    rows = harness.read_runs(smoke_run[0])
    exact = [r for r in rows if r["exact"] and (not r["sampled"] or methods.METHODS[r["method"]].same_draws)]
    assert exact and all(r["identical"] is True for r in exact), [
        (r["workload"], r["task"], r["method"]) for r in exact if not r["identical"]]
    # sampled with the target's own draws: checked against plain-sampled, drafts verified (not vacuous)
    same_draws = [r for r in rows if r["method"] in ("lookup-sampled", "prediction-sampled")]
    assert same_draws and {r["baseline"] for r in same_draws} == {"plain-sampled"}
    assert sum(r["draft_tokens"] for r in same_draws) > 0
    assert all(r["identical"] is None for r in rows if r["sampled"] and not methods.METHODS[r["method"]].same_draws)
    # each tool against its own plain decoding
    assert {r["baseline"] for r in rows if r["engine"] == "transformers"} == {"hf-plain"}
    assert {r["baseline"] for r in rows if r["engine"] == "quickdraft" and not r["sampled"]} == {"plain"}


def test_smoke_counts_add_up(smoke_run):
    rows = harness.read_runs(smoke_run[0])
    for r in rows:
        assert r["completion_tokens"] == sum(len(t) for t in r["output_tokens"])
        # greedy runs write something; a sampled one may draw EOS first (the tiny model's answers are random)
        assert r["completion_tokens"] > 0 or (r["sampled"] and r["finish_reason"][-1] == "stop")
        assert len(r["output_tokens"]) == r["turns"] == len(r["prompt_tokens"])
        assert r["peak_rss_mib"] > 0 and r["memory_measure"] in harness.MEMORY_MEASURES
        if r["accepted"] is not None:  # quickdraft, and transformers' derived counts
            assert r["accepted"] + r["rejected"] == r["draft_tokens"]
            assert r["accepted"] <= r["completion_tokens"]
        if r["method"] in ("plain", "hf-plain", "plain-sampled"):
            assert r["accepted"] == r["draft_tokens"] == 0 and r["draft_forwards"] == 0
    mt = [r for r in rows if r["workload"] == "mt_bench"]
    assert mt and all(r["turns"] == 2 for r in mt)  # MT-bench: the second turn follows the model's answer
    assert all(r["draft_forwards"] > 0 for r in rows if r["method"] in ("draft-model", "ouroboros", "hf-assisted"))
    pred = [r for r in rows if r["workload"] in ("edit_eval", "refactor")]
    assert all(0 <= r["output_from_prediction"] <= 1 and r["prediction_tokens"] > 0 for r in pred)


def test_smoke_rows_carry_quality_scores(smoke_run):
    """Workloads with a reference are scored (bench/scoring.py); the tiny model's answers are nonsense, so
    HumanEval's tests fail them (each ran in the sandbox) and the text scores are low but computed."""
    rows = [r for r in harness.read_runs(smoke_run[0]) if not r.get("error")]
    want = {"humaneval": {"pass@1"}, "translation": {"chrF", "BLEU"}, "summarization": {"ROUGE-L"},
            "math_reasoning": {"accuracy"}, "rag": {"ROUGE-L"}}
    for r in rows:
        if r["workload"] in want:
            assert set(r["scores"]) == want[r["workload"]], r["workload"]
            assert all(0 <= v <= 100 for v in r["scores"].values())
        else:
            assert "scores" not in r  # no reference: nothing to score against
    assert all(r["scores"]["pass@1"] == 0.0 for r in rows if r["workload"] == "humaneval")
    assert "## Quality of the answers" in (smoke_run[0] / report.REPORT_FILE).read_text()


def test_smoke_report_and_plots(smoke_run):
    out = smoke_run[0]
    text = (out / report.REPORT_FILE).read_text()
    for needle in ("## Setup", "SHA-256", "Peak memory", "## End-to-end speedup", "### refactor", "### mt_bench",
                   "hf-prompt-lookup", "ouroboros", "## Predictions", "quickdraft bench run",
                   "Exactness:", "## Head to head", "## Slower than plain decoding?"):
        assert needle in text, needle
    assert "FAILED" not in text
    rows = harness.read_runs(out)
    scored = sorted({r["workload"] for r in rows if r.get("scores")})
    mentored = [r for r in rows if report.kl_bound(r["method"]) is not None]
    assert scored and mentored  # the issue-21 plots below are drawn from this run
    for name in ("speedup.png", "accepted_per_pass.png", "prediction_survival.png", "kl_used.png",
                 *(f"pareto_{w}.png" for w in scored)):
        png = out / report.PLOTS_DIR / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"({report.PLOTS_DIR}/{name})" in text  # and the report shows it


def test_kl_bound_reads_the_mentored_methods_names():
    from quickdraft.bench.methods import mentored_method

    assert [report.kl_bound(mentored_method(d).name) for d in (0.01, 0.3, 1.0)] == [0.01, 0.3, 1.0]
    assert report.kl_bound("draft-model-sampled") is None and report.kl_bound("typical-sampled") is None


def test_quality_difference_is_paired_by_task_and_repeat():
    """A method that scores 5 points under its baseline on every task shows -5 with a tight interval even
    though the tasks' own scores spread over 0-90 (their unpaired intervals overlap widely); an exact method
    that scores as the baseline shows 0; rows without a baseline partner are left out of the pairs."""
    rows = []
    for i in range(12):
        for method, delta in (("plain-sampled", 0.0), ("lossy", -5.0), ("exact", 0.0)):
            rows.append({"workload": "w", "task": f"t{i}", "repeat": 0, "method": method, "baseline": "plain-sampled",
                         "scores": {"chrF": 10.0 + 7.0 * i + delta}, "speedup": 1.0})
    rows.append({"workload": "w", "task": "t99", "repeat": 0, "method": "lossy", "baseline": "plain-sampled",
                 "scores": {"chrF": 50.0}, "speedup": 1.0})
    table = {line.split(" | ")[1]: line.split(" | ") for line in report._quality_table(rows) if line.startswith("| w |")}
    assert table["lossy"][5] == "-5.0 [-5.0 to -5.0], 12"
    assert table["exact"][5] == "+0.0 [+0.0 to +0.0], 12"
    assert table["plain-sampled"][5] == ""  # the baseline is not paired with itself
    lo, hi = map(float, table["lossy"][4].split("[")[1].rstrip("]").split("-"))
    assert hi - lo > 20  # unpaired, the same 5-point drop is lost in the spread of the tasks


def test_quality_difference_with_repeats_resamples_tasks():
    """Four repeats of three tasks whose differences are -6, 0 and +6 on every repeat: 12 pairs, but only 3
    tasks' worth of evidence. The interval is the bootstrap of the 3 task means, wider than that of the 12
    pairs would be."""
    from quickdraft.bench.scoring import bootstrap

    rows = []
    for i, effect in enumerate((-6.0, 0.0, 6.0)):
        for repeat in range(4):
            for method, delta in (("plain-sampled", 0.0), ("exact", effect)):
                rows.append({"workload": "w", "task": f"t{i}", "repeat": repeat, "method": method,
                             "baseline": "plain-sampled", "scores": {"ROUGE-L": 20.0 + repeat + delta}, "speedup": 1.0})
    cell = {line.split(" | ")[1]: line.split(" | ")[5] for line in report._quality_table(rows) if line.startswith("| w |")}
    _, lo, hi = bootstrap([-6.0, 0.0, 6.0])
    assert cell["exact"] == f"+0.0 [{lo:+.1f} to {hi:+.1f}], 12 (3 tasks)"
    _, plo, phi = bootstrap([-6.0] * 4 + [0.0] * 4 + [6.0] * 4)
    assert hi - lo > phi - plo


def test_quality_difference_pairs_each_method_with_its_own_baseline():
    """Two baselines score the same tasks (transformers' hf-plain and quickdraft's plain): a method's difference is
    against its own, so transformers' drafted method scoring as hf-plain shows 0, not hf-plain's gap to plain."""
    rows = []
    for i in range(6):
        for method, baseline, score in (("hf-plain", "hf-plain", 40.0 + i), ("hf-prompt-lookup", "hf-plain", 40.0 + i),
                                        ("plain", "plain", 50.0)):
            rows.append({"workload": "w", "task": f"t{i}", "repeat": 0, "method": method, "baseline": baseline,
                         "scores": {"chrF": score}, "speedup": 1.0})
    cell = {line.split(" | ")[1]: line.split(" | ")[5] for line in report._quality_table(rows) if line.startswith("| w |")}
    assert cell["hf-prompt-lookup"] == "+0.0 [+0.0 to +0.0], 6"


def test_kl_used_is_shown_for_bounded_rules_only():
    """Typical and threshold acceptance spend KL nobody measures: their KL/token cell says so ("–") rather
    than 0, while a mentored method shows what it spent."""
    rows = [{"workload": "w", "task": "t0", "repeat": 0, "method": m, "baseline": "plain-sampled", "kl_per_token": kl,
             "identical": None, "sampled": True}
            for m, kl in (("plain-sampled", None), ("mentored-kl0.1", 0.05), ("typical-sampled", 0.0))]
    table = {line.split(" | ")[0]: line.split(" | ") for line in report._workload_tables(rows) if line.startswith("| ")}
    assert table["| mentored-kl0.1"][-1] == "0.0500 |"
    assert table["| typical-sampled"][-1] == "– |"
    assert table["| plain-sampled"][-1] == "– |"


def test_resume_adds_no_rows_and_report_rebuilds(smoke_run, bench_model, data, capsys):
    out = smoke_run[0]
    before = (out / harness.RUNS_FILE).read_text()
    with one_thread():
        code = cli.main([*SMOKE, "--model", str(bench_model), "--draft-model", str(bench_model), "--out", str(out),
                         "--data", str(data)])
    assert code == 0
    assert (out / harness.RUNS_FILE).read_text() == before
    assert "0 run(s) done" in capsys.readouterr().err
    (out / report.REPORT_FILE).unlink()
    assert cli.main(["bench", "report", str(out)]) == 0
    assert (out / report.REPORT_FILE).is_file()
    assert len(harness.read_meta(out)["invocations"]) == 2


def with_a_mismatch(smoke_run, tmp_path, method: str, at: int) -> tuple[Path, dict]:
    """A copy of the smoke run whose first row of `method` differs from its baseline at token `at`: (folder, row)."""
    out = tmp_path / "copy"
    shutil.copytree(smoke_run[0], out)
    rows = harness.read_runs(out)
    bad = next(r for r in rows if r["method"] == method)
    bad.update(identical=False, first_divergence=at)
    (out / harness.RUNS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out, bad


def test_a_mismatch_is_reported_as_a_failure(smoke_run, tmp_path):
    out, bad = with_a_mismatch(smoke_run, tmp_path, "lookup", 3)
    text = (report.build(out)).read_text()
    assert "FAILED: 1 run(s) of quickdraft methods differ" in text and "🔴" in text
    assert f"| {bad['workload']} | {bad['task']} | lookup |" in text
    assert "Exactness:" not in text and "other tools" not in text


def test_another_tools_mismatch_is_shown_apart_from_quickdrafts(smoke_run, tmp_path):
    """transformers' or llama.cpp's drafted output differing from their own plain output is shown in red, as
    theirs: quickdraft's exactness verdict still stands."""
    out, bad = with_a_mismatch(smoke_run, tmp_path, "hf-prompt-lookup", 5)
    rows = harness.read_runs(out)
    text = (report.build(out)).read_text()
    assert "FAILED: 1 run(s) of other tools' exact methods differ" in text
    assert f"| {bad['workload']} | {bad['task']} | hf-prompt-lookup | 0 | 5 |" in text
    assert "quickdraft methods differ" not in text
    n = sum(r["exact"] and r["engine"] == "quickdraft" and r.get("identical") is not None for r in rows)
    assert f"Exactness: {n}/{n} runs of quickdraft's exact methods" in text


def test_every_tools_methods_have_that_tools_plain_decoding_as_baseline():
    """transformers' and llama.cpp's methods are checked against their own plain decoding, never quickdraft's: a
    difference between two tools' plain decodings is not a failure of either one's drafting."""
    for m in methods.METHODS.values():
        base = methods.METHODS[m.baseline]
        assert base.engine == m.engine and base.baseline == base.name, m.name
    assert methods.METHODS["hf-prompt-lookup"].baseline == methods.METHODS["hf-assisted"].baseline == "hf-plain"
    assert methods.select("hf-prompt-lookup") == ["hf-plain", "hf-prompt-lookup"]
    peer = methods.Method("hf-lookup-4", "transformers", "prompt lookup, 4 tokens", options=(("prompt_lookup_num_tokens", 4),))
    with pytest.raises(ValueError, match="its baseline must be the plain method of the same tool"):
        methods.check_baselines({m.name: m for m in (methods.METHODS["plain"], peer)})  # baseline "plain": quickdraft's
    methods.check_baselines({m.name: m for m in (methods.METHODS["hf-plain"], dataclasses.replace(peer, baseline="hf-plain"))})


def test_a_method_list_with_another_tools_baseline_is_refused(bench_model, data, tmp_path):
    import quickdraft

    peer = methods.Method("hf-lookup-4", "transformers", "prompt lookup, 4 tokens", options=(("prompt_lookup_num_tokens", 4),),
                          needs=("transformers-runner",))
    config = harness.BenchConfig(model=str(bench_model), workloads=("summarization",), methods=("plain", peer.name),
                                 out=tmp_path / "ab", data=data, limit=1, max_new_tokens=4, repeats=1, progress=False)
    with pytest.raises(QuickdraftError, match="method hf-lookup-4 .transformers.: its baseline must be"):
        harness.run(config, quickdraft.load(str(bench_model), progress=False), methods=[methods.METHODS["plain"], peer])
    assert not (tmp_path / "ab" / harness.RUNS_FILE).exists()  # refused before anything ran


def _as_recorded_before_peer_baselines(rows: list[dict]) -> list[dict]:
    """The smoke rows as a run made before transformers' methods had their own baseline would hold them, on a machine
    where transformers' plain decoding differs from quickdraft's: every transformers row compared with quickdraft's
    plain (baseline "plain") and found different, though each drafted one wrote what hf-plain wrote."""
    out = []
    for r in rows:
        if r["engine"] == "transformers":
            tokens = [[t + 1 for t in turn] for turn in r["output_tokens"]]  # not quickdraft's plain output
            r = dict(r, baseline="plain", output_tokens=tokens, identical=False, first_divergence=0)
        out.append(r)
    return out


def test_a_tools_plain_decoding_differing_from_quickdrafts_is_no_failure(smoke_run, tmp_path):
    """The held-out refactor report said in red that transformers' exact methods differ from their own plain greedy
    decoding, hf-plain included, when what differed was transformers' plain decoding from quickdraft's. The report
    checks each tool's rows against that tool's own plain decoding, also in runs recorded before the bench did."""
    out = tmp_path / "copy"
    shutil.copytree(smoke_run[0], out)
    rows = _as_recorded_before_peer_baselines(harness.read_runs(out))
    (out / harness.RUNS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = report.build(out).read_text()
    assert "FAILED" not in text and "other tools" not in text
    n = sum(r["exact"] and r["engine"] == "quickdraft" and r.get("identical") is not None for r in rows)
    assert f"Exactness: {n}/{n} runs of quickdraft's exact methods" in text
    checked = [r for r in report.on_own_baselines(rows) if r["engine"] == "transformers"]
    assert checked and {r["baseline"] for r in checked} == {"hf-plain"}
    assert all(r["identical"] is True and r["first_divergence"] is None for r in checked)
    # across tools it is shown as what it is: plain and hf-plain never wrote the same tokens here
    w = rows[0]["workload"]
    line = next(x for x in text.splitlines() if x.startswith(f"| {w} | plain | hf-plain |"))
    assert line.endswith("| 0/2 |")


def test_a_tools_drafting_that_departs_from_its_own_plain_decoding_is_its_failure(smoke_run, tmp_path):
    """The same old-style rows, but hf-prompt-lookup's first run writes other tokens than hf-plain did: that is
    transformers' drafting changing transformers' output, reported in red as theirs."""
    out = tmp_path / "copy"
    shutil.copytree(smoke_run[0], out)
    rows = _as_recorded_before_peer_baselines(harness.read_runs(out))
    bad = next(r for r in rows if r["method"] == "hf-prompt-lookup" and len(r["output_tokens"][0]) > 3)
    first = bad["output_tokens"][0]
    bad["output_tokens"] = [[*first[:3], 999, *first[4:]], *bad["output_tokens"][1:]]
    (out / harness.RUNS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = report.build(out).read_text()
    assert "FAILED: 1 run(s) of other tools' exact methods differ" in text
    assert f"| {bad['workload']} | {bad['task']} | hf-prompt-lookup | 0 | 3 |" in text
    assert "quickdraft methods differ" not in text


def _rows_with_times(rows: list[dict], seconds: dict[str, float]) -> list[dict]:
    """Rows of the first smoke task with made-up times per method (tokens/s = tokens / seconds)."""
    first = (rows[0]["workload"], rows[0]["task"])
    out = []
    for r in rows:
        if (r["workload"], r["task"]) == first and r["method"] in seconds:
            r = dict(r, seconds=seconds[r["method"]], tokens_per_s=r["completion_tokens"] / seconds[r["method"]])
            out.append(r)
    return out


def test_head_to_head_pairs_each_method_with_its_rivals_task_by_task(smoke_run):
    rows = report.with_speedups(_rows_with_times(harness.read_runs(smoke_run[0]),
                                                 {"plain": 10.0, "hf-plain": 10.0, "lookup": 4.0,
                                                  "hf-prompt-lookup": 5.0, "draft-model": 6.0, "hf-assisted": 3.0}))
    w = rows[0]["workload"]
    text = "\n".join(report._head_to_head(rows, {"config": {"runner": "transformers"}}))
    assert "## Head to head" in text and "transformers runner" in text
    assert f"| {w} | lookup | hf-prompt-lookup | 1.25x | 1/1 |" in text  # same output in 4 s against 5 s
    assert f"| {w} | draft-model | hf-assisted | 0.50x | 0/1 |" in text
    assert f"| {w} | plain | hf-plain | 1.00x | 0/1 |" in text
    # whether both tools wrote the same tokens on this task: a column, not a verdict (transformers runs its own
    # layers and attention, so in bf16 its greedy output may differ from quickdraft's)
    tokens = {r["method"]: r["output_tokens"] for r in rows if r["method"] in ("plain", "hf-plain")}
    same = "1/1" if tokens["plain"] == tokens["hf-plain"] else "0/1"
    assert next(x for x in text.splitlines() if x.startswith(f"| {w} | plain | hf-plain |")).endswith(f"| {same} |")
    assert "llamacpp" not in text  # no llama.cpp rows among these: no pair, no line


def test_slower_than_plain_lists_the_methods_and_runs_below_1x(smoke_run):
    rows = report.with_speedups(_rows_with_times(harness.read_runs(smoke_run[0]),
                                                 {"plain": 10.0, "lookup": 12.5, "draft-model": 5.0}))
    w, task = rows[0]["workload"], rows[0]["task"]
    text = "\n".join(report._slower_than_plain(rows))
    assert f"| {w} | lookup | 0.80x | 1/1 |" in text
    assert "draft-model |" not in text
    assert f"Single runs below 1.00x: 1 of 2 (slowest: {w}/{task} lookup 0.80x)." in text
    fast = report.with_speedups(_rows_with_times(harness.read_runs(smoke_run[0]), {"plain": 10.0, "lookup": 5.0}))
    assert "No quickdraft method has a median end-to-end speedup below 1.00x" in "\n".join(report._slower_than_plain(fast))


@pytest.mark.parametrize("args,message", [
    (["--workloads", "nope"], "unknown workload 'nope'"),
    (["--methods", "magic"], "unknown method 'magic'"),
    (["--limit", "0"], "limit must be a positive integer"),
    (["--repeats", "-1"], "repeats must be a positive integer"),
    (["--max-new-tokens", "0"], "max-new-tokens must be a positive integer"),
    (["--data", "/nonexistent/data"], "benchmark data folder not found"),
    (["--methods", "draft-model"], "need a draft model"),
    (["--temperature", "0"], "temperature"),
    (["--skip", "-1"], "skip must be an integer >= 0"),
    (["--workloads", "qa", "--skip", "100000"], "--skip 100000 leaves no tasks of workload 'qa'"),
])
def test_bad_options_fail_before_any_model_loads(args, message, data, tmp_path, capsys, monkeypatch):
    def no_load(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("quickdraft.loading._Opened", no_load)
    base = ["bench", "run", "--model", "no-such-model", "--out", str(tmp_path / "o"), "--data", str(data)]
    assert cli.main(base + args) == 2
    assert message in capsys.readouterr().err


def test_a_broken_data_file_or_run_record_fails_before_any_model_loads(data, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("quickdraft.loading._Opened", lambda *a, **k: pytest.fail("a model was loaded"))
    broken = tmp_path / "data"
    (broken / "edit_eval").mkdir(parents=True)
    (broken / "edit_eval" / "edit_eval.jsonl").write_text('{"task_id": ')
    base = ["bench", "run", "--model", "no-such-model", "--methods", "plain"]
    assert cli.main(base + ["--workloads", "edit_eval", "--data", str(broken), "--out", str(tmp_path / "o")]) == 2
    assert "workload 'edit_eval': cannot read its tasks" in capsys.readouterr().err
    for record in ('{"config": ', "[1, 2]"):
        out = tmp_path / "old"
        out.mkdir(exist_ok=True)
        (out / "run.json").write_text(record)
        assert cli.main(base + ["--workloads", "qa", "--data", str(data), "--out", str(out)]) == 2
        assert "run.json" in capsys.readouterr().err
        assert cli.main(["bench", "report", str(out)]) == 2


def test_a_row_cut_short_by_a_crash_is_dropped_and_the_next_row_starts_a_line(smoke_run, tmp_path, capsys):
    out = tmp_path / "copy"
    shutil.copytree(smoke_run[0], out)
    text = (out / harness.RUNS_FILE).read_text()
    rows = text.splitlines()
    cut = "\n".join(rows[:3]) + "\n" + rows[3][:60]  # a crash in the middle of writing the fourth row
    (out / harness.RUNS_FILE).write_text(cut)
    assert len(harness.read_runs(out)) == 3 and "warning" not in capsys.readouterr().err
    harness.end_at_a_line(out)
    assert (out / harness.RUNS_FILE).read_text() == "\n".join(rows[:3]) + "\n"
    lines = [r.encode() for r in rows[:2]] + [b"[1, 2]", b'{"x": 1}', b"\xff\xfe"] + [r.encode() for r in rows[2:]]
    (out / harness.RUNS_FILE).write_bytes(b"\n".join(lines) + b"\n")
    assert harness.read_runs(out) == [json.loads(r) for r in rows]
    assert "line(s) 3, 4, 5 are not runs; skipped" in capsys.readouterr().err


def test_a_resumed_run_fails_on_an_earlier_invocations_mismatch(smoke_run, bench_model, data, tmp_path, capsys):
    out, bad = with_a_mismatch(smoke_run, tmp_path, "lookup", 3)
    with one_thread():
        code = cli.main([*SMOKE, "--model", str(bench_model), "--draft-model", str(bench_model), "--out", str(out),
                         "--data", str(data)])
    err = capsys.readouterr().err
    assert "0 run(s) done" in err and code == 3
    assert f"{bad['workload']}/{bad['task']} lookup r{bad['repeat']}" in err


def test_a_run_written_while_its_baseline_had_failed_is_compared_once_the_baseline_ran(smoke_run):
    rows = harness.read_runs(smoke_run[0])
    lookup = next(r for r in rows if r["method"] == "lookup" and r["identical"] is True)
    blind = dict(lookup, identical=None, first_divergence=None)
    wrong = dict(lookup, identical=None, first_divergence=None,
                 output_tokens=[t[:-1] + [t[-1] + 1] for t in lookup["output_tokens"]])
    out = rows_mod.on_own_baselines([r for r in rows if r is not lookup] + [blind])
    assert next(r for r in out if r["method"] == "lookup" and r["task"] == lookup["task"] and
                r["workload"] == lookup["workload"] and r["repeat"] == lookup["repeat"])["identical"] is True
    out = rows_mod.on_own_baselines([r for r in rows if r is not lookup] + [wrong])
    assert out[-1]["identical"] is False and out[-1]["first_divergence"] is not None


def test_resume_refuses_other_options(smoke_run, bench_model, data):
    with pytest.raises(QuickdraftError, match="max_new_tokens: 24 there, 32 now"):
        harness.prepare(str(bench_model), "qa", "plain", smoke_run[0], data=str(data), draft_model=str(bench_model),
                        max_new_tokens=32, repeats=1)
    with pytest.raises(QuickdraftError, match="kernels: 'auto' there, 'torch' now"):
        harness.prepare(str(bench_model), "qa", "plain", smoke_run[0], data=str(data), draft_model=str(bench_model),
                        max_new_tokens=24, repeats=1, kernels="torch")
    with pytest.raises(QuickdraftError, match="kernels must be one of auto, onednn, torch; got 'mkl'"):
        harness.prepare(str(bench_model), "qa", "plain", smoke_run[0], data=str(data), kernels="mkl")
    with pytest.raises(QuickdraftError, match="draft_runner: None there, 'llama.cpp' now"):
        harness.prepare(str(bench_model), "qa", "plain", smoke_run[0], data=str(data), draft_model=str(bench_model),
                        max_new_tokens=24, repeats=1, draft_runner="llama.cpp")
    with pytest.raises(QuickdraftError, match="draft_runner"):  # checked as the model options are, before any load
        harness.prepare(str(bench_model), "qa", "plain", smoke_run[0], data=str(data), draft_runner="vllm")


def test_resume_takes_a_path_however_written_and_any_temperature_where_nothing_samples(smoke_run, bench_model, data):
    assert any(r.get("sampled") for r in harness.read_runs(smoke_run[0]))
    kw = dict(data=str(data), draft_model=str(bench_model) + "/", max_new_tokens=24, repeats=1, temperature=0.5)
    harness.prepare(str(bench_model) + "/", "qa", "plain", smoke_run[0], **kw)  # accepted: nothing here samples
    with pytest.raises(QuickdraftError, match="temperature: 0.7 there, 0.5 now"):
        harness.prepare(str(bench_model), "qa", "plain,plain-sampled", smoke_run[0], **kw)


def test_the_report_names_a_draft_models_precision_only_where_one_ran_on_transformers():
    """The setup line's draft precision: int8 where the run took the default (recorded as None), what was asked
    otherwise, and nothing where no draft model ran or the draft model ran on llama.cpp (its GGUF as it is)."""
    draft = {"draft_model": "qwen2.5-coder-0.5b", "runner": "transformers"}
    assert report._draft_precision({**draft, "draft_precision": None}) == "draft precision int8, "
    assert report._draft_precision({**draft, "draft_precision": "fp32"}) == "draft precision fp32, "
    assert report._draft_precision({**draft, "draft_runner": "llama.cpp"}) == ""
    assert report._draft_precision({**draft, "runner": "llama.cpp"}) == ""  # the draft runner defaults to the target's
    assert report._draft_precision({"draft_model": None, "runner": "transformers"}) == ""


def test_selection_adds_baselines_and_expands_groups():
    assert methods.select("lookup") == ["plain", "lookup"]
    assert methods.select("mentored")[:1] == ["plain-sampled"]
    assert methods.select("llamacpp-prompt-lookup") == ["llamacpp-plain", "llamacpp-prompt-lookup"]
    assert workloads.select("spec_bench") == list(workloads.SPEC_BENCH_CATEGORIES)


def test_workload_prompts(data):
    (ee,) = workloads.edit_eval(data, 1)
    assert ee.prediction.startswith("```") and ee.prediction in ee.messages[0]["content"]
    (mt,) = workloads.spec_bench(data, "mt_bench", 1)
    assert len(mt.followups) == 1 and mt.id == "mt_bench-81"
    (rf,) = workloads.refactor(data, 1)
    assert rf.prediction in rf.messages[0]["content"]


def test_prediction_overlap_and_divergence():
    assert harness.prediction_overlap(list("abcdef"), list("abXdef")) == (5 / 6, 5 / 6)
    assert harness.first_divergence([[1, 2], [3]], [[1, 2], [4]]) == 2
    assert harness.first_divergence([[1]], [[1]]) is None


# -- the Predicted Outputs study -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def study_result(tmp_path_factory):
    return study.run_study(tmp_path_factory.mktemp("study"), n=120, position_step=7)


def test_study_openai_shape(study_result):
    o = study_result.summary["openai"]
    assert o["max_rejected_per_departure"] == 16  # at most one 16-token draft per departure
    assert o["resume_after_min"] == o["resume_after_max"] == 32  # drafting resumes after 32 agreeing tokens
    for r in study_result.rows:
        if r["policy"] == "openai":
            assert all(rej <= 16 for _, rej in r["departures"])
            assert max(r["drafts"]) <= 16


def test_study_default_recovers_sooner_with_fewer_passes(study_result):
    o, d = study_result.summary["openai"], study_result.summary["default"]
    # re-anchors after one agreeing token near where a same-length replacement leaves it, two anywhere: an insertion
    # of up to PredictionConfig().window tokens resumes after one, a longer one after two
    assert d["resume_after_max"] == 2
    window = PredictionConfig().window
    by_length = {r["length"]: r["resume_after"] for r in study_result.rows
                 if r["policy"] == "default" and r["experiment"] == "insertion_length"}
    assert {v for n, v in by_length.items() if n <= window} <= {0, 1}
    assert {v for n, v in by_length.items() if n > window} == {2}
    for e in ("insertion_position", "insertion_length"):
        assert d[f"{e}_accepted"] > o[f"{e}_accepted"] and d[f"{e}_passes"] < o[f"{e}_passes"]
    # Measured, not wished: its longer drafts (up to 64) cost more rejected tokens at a departure.
    assert d["max_rejected_per_departure"] > 16
    assert d["insertion_position_rejected"] >= o["insertion_position_rejected"]


def test_study_matches_the_hand_worked_cases():
    # tests/test_accounting.py: a right 58-token prediction, and 5 tokens replaced at token 23.
    s58 = list(range(1, 59))
    right = study.simulate(s58, s58, "openai")
    assert (right.accepted, right.rejected, right.passes) == (55, 0, 4)
    few = study.simulate(s58, s58[:22] + [study.WRONG + i for i in range(5)] + s58[27:], "openai")
    assert (few.accepted, few.rejected) == (21, 11)


def test_study_cli_writes_report_and_plots(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(study, "run_study", lambda out, **k: _small_study(out))
    assert cli.main(["bench", "predicted-outputs-study", "--out", str(tmp_path)]) == 0
    assert "openai policy: at most 16 rejected per departure" in capsys.readouterr().out
    assert "| most rejected tokens for one departure | 16 |" in (tmp_path / "study.md").read_text()
    for name in ("study_bifurcation.png", "study_insertion_position.png", "study_insertion_length.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:4] == b"\x89PNG"


_real_run_study = study.run_study


def _small_study(out):
    return _real_run_study(out, n=80, position_step=16)


def test_a_list_of_methods_is_an_ab_run(bench_model, data, tmp_path):
    """harness.run with Method objects: one drafter under two settings, run by the benchmark's own loop and
    checked against plain decoding (what docs/results/2026-11-25-draft-stop/ab_draft_sizing.py does); a list without its baseline is
    refused before anything runs."""
    import quickdraft
    from quickdraft.bench.methods import METHODS, Method

    a = Method("lookup-off", "quickdraft", "lookup, drafts as proposed", options=(("drafter", "lookup"), ("draft_sizing", "off")))
    b = Method("lookup-short", "quickdraft", "lookup, 2 tokens", options=(("drafter", "lookup"), ("draft_sizing", "off"),
                                                                          ("lookup", quickdraft.LookupConfig(num_tokens=2, growth=0, short_tokens=2))))
    config = harness.BenchConfig(model=str(bench_model), workloads=("summarization",), methods=("plain", a.name, b.name),
                                 out=tmp_path / "ab", data=data, limit=2, max_new_tokens=16, repeats=1, progress=False)
    gen = quickdraft.load(str(bench_model), progress=False)
    with one_thread():
        summary = harness.run(config, gen, methods=[METHODS["plain"], a, b])
    rows = harness.read_runs(config.out)
    assert sorted(r["method"] for r in rows) == sorted(["plain", "lookup-off", "lookup-short"] * 2)
    assert all(r["identical"] for r in rows) and not summary.mismatches
    assert max(r["draft_tokens"] / r["target_passes"] for r in rows if r["method"] == "lookup-short") <= 2
    assert "lookup-short" in report.build(config.out).read_text()
    with pytest.raises(QuickdraftError, match="baselines plain are not among the methods"):
        harness.run(config, gen, methods=[a])


def test_skip_runs_the_tasks_after_the_first_n(bench_model, data, tmp_path):
    """--skip 2 --limit 2: the workload's tasks 3 and 4 (held-out tasks), named so in the report."""
    import quickdraft

    config = harness.prepare(str(bench_model), "summarization", "plain", tmp_path / "held-out", data=str(data),
                             limit=2, skip=2, max_new_tokens=4, repeats=1, progress=False)
    with one_thread():
        harness.run(config, quickdraft.load(str(bench_model), progress=False))
    first_four = [t.id for t in workloads.WORKLOADS["summarization"].load(data, 4)]
    assert [r["task"] for r in harness.read_runs(config.out)] == first_four[2:]
    assert "limit 2 tasks per workload after the first 2" in report.build(config.out).read_text()


def test_the_settings_line_gives_every_invocations_limit():
    """A run resumed with a larger --limit holds the tasks of both: the report names both limits, not the last."""
    meta = {"config": {"max_new_tokens": 8, "data": "d"},
            "invocations": [{"argv": ["a"], "limit": 4, "skip": 0, "repeats": 1},
                            {"argv": ["b"], "limit": 8, "skip": 0, "repeats": 1}]}
    settings = next(line for line in report._setup(meta, []) if line.startswith("- Settings"))
    assert "limit 4, then 8 tasks per workload, repeats 1," in settings and "after the first" not in settings
    meta["invocations"] = meta["invocations"][1:]
    settings = next(line for line in report._setup(meta, []) if line.startswith("- Settings"))
    assert "limit 8 tasks per workload, repeats 1," in settings


def test_the_ouroboros_ablation_is_a_method_list(bench_model, data, tmp_path):
    """ouroboros_ablation.py (OUROBOROS_RESULTS): its rows are Method objects run by harness.run (no loop of its own): the
    cumulative rows end at the default configuration, and a few of them run exact against plain decoding."""
    import quickdraft
    from quickdraft.drafters.ouroboros import OuroborosConfig

    ablation = load_script("ouroboros_ablation", OUROBOROS_RESULTS)
    rows = ablation.methods()
    assert [m.name for m in rows[:2]] == ["plain", "draft-model"]
    default = rows[1 + len(ablation.STEPS)]
    assert dict(default.options)["ouroboros"] == OuroborosConfig() and len({m.name for m in rows}) == len(rows)
    chosen = [rows[0], rows[2], default]
    config = harness.BenchConfig(model=str(bench_model), workloads=("humaneval",), methods=tuple(m.name for m in chosen),
                                 out=tmp_path / "ablation", data=data, draft_model=str(bench_model), limit=2,
                                 max_new_tokens=16, repeats=1, progress=False)
    gen = quickdraft.load(str(bench_model), draft_model=str(bench_model), progress=False)
    with one_thread():
        summary = harness.run(config, gen, methods=chosen)
    rows_run = harness.read_runs(config.out)
    assert sorted(r["method"] for r in rows_run) == sorted([m.name for m in chosen] * 2)
    assert all(r["identical"] for r in rows_run) and not summary.mismatches


def test_the_report_names_the_runners_kernels_precision_invariance_and_row_blocks():
    """What a bench invocation recorded of the transformers runner, as the report's setup line gives it: the row
    blocks only where passes ran in them (bf16 with AMX: invariance.FixedRows); old runs without the fields read
    as what they were (torch's Linear, float32)."""
    amx = {"kernels": "onednn", "dtype": "bf16", "row_invariant": True, "row_block": 32}
    assert report._kernels(amx) == ("Linear kernels onednn, dtype bf16, row-invariant passes (checked at load), "
                                    "passes in 32-row blocks, ")
    assert "blocks" not in report._kernels({**amx, "row_block": None})
    assert report._kernels({}) == "Linear kernels torch, dtype fp32, "
    assert report._kernels({"kernels": None}) == ""  # a llama.cpp target


def test_transformers_baseline_is_stock_transformers(bench_model, tmp_path):
    """hf-plain runs transformers' own generate() as transformers loads the weights (its Linear layers and default
    attention, not the runner's packed or padded ones and its attention): its tokens are those of a stock load's
    generate(), and the runner's model is the runner's again after."""
    import quickdraft
    from transformers import AutoModelForCausalLM, GenerationConfig

    from quickdraft.bench.config import BenchConfig
    from quickdraft.bench.engines import run_transformers
    from quickdraft.bench.session import Session
    from quickdraft.runners.kernels import FixedRows, PackedLinear, RowPadded

    gen = quickdraft.load(str(bench_model), progress=False)
    config = BenchConfig(model=str(bench_model), workloads=("refactor",), methods=("hf-plain",), out=tmp_path,
                         data=tmp_path, max_new_tokens=24)
    session = Session(gen, config)
    model = gen.runner.model
    layers = [type(m) for m in model.modules()]
    attention = model.config._attn_implementation
    messages = [{"role": "user", "content": "def parse(line):\n    return line.split(',')\n"}]
    seen = []  # per forward call of generate(): the attention, and the runner's layers in the model
    ours = (FixedRows, RowPadded, PackedLinear)
    hook = model.register_forward_pre_hook(lambda m, _: seen.append(
        (m.config._attn_implementation, sum(isinstance(x, ours) for x in m.modules()))))
    with one_thread():
        try:
            turn = run_transformers(session, methods.METHODS["hf-plain"], messages, None, 0)
        finally:
            hook.remove()
        stock = AutoModelForCausalLM.from_pretrained(bench_model, dtype=model.dtype).eval()
        ids = torch.tensor([session.prompt_ids(messages)])
        eos = sorted(gen.tokenizer.eos_token_ids)
        greedy = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=24, eos_token_id=eos,
                                  pad_token_id=eos[0])
        with torch.inference_mode():
            want = stock.generate(ids, attention_mask=torch.ones_like(ids), generation_config=greedy)[0, ids.shape[1]:]
    want = want.tolist()
    want = want[: next((i for i, t in enumerate(want) if t in eos), len(want))]  # run_transformers drops the EOS
    assert turn.tokens == want and turn.counts["target_passes"] >= len(want)
    assert seen and set(seen) == {(stock.config._attn_implementation, 0)} != {(attention, 0)}
    assert [type(m) for m in model.modules()] == layers and model.config._attn_implementation == attention
