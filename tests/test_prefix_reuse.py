"""Prefix reuse (runners/hf.HFRunner): a new sequence takes the cache rows of the whole prefill chunks it shares with
the sequence before, and gets the bits a prefill from nothing gives, so its output never depends on what ran before."""

from __future__ import annotations

import json
import random

import httpx
import pytest
import torch

import quickdraft
from quickdraft.runners.base import reusable_prefix
from quickdraft.runners.hf import HFRunner

from conftest import VOCAB, needs_sliding_rollback, save_char_model, tiny_model

CHUNK = 8  # prefill passes of 8 tokens in these tests: several chunk boundaries in short prompts


def runner_for(model, reuse: bool = True) -> HFRunner:
    runner = HFRunner(model, reuse_prefix=reuse)
    runner.prefill_chunk = CHUNK
    return runner


def cache_rows(runner: HFRunner) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(layer.keys.clone(), layer.values.clone()) for layer in runner.cache.layers]


def assert_same_bits(a: HFRunner, b: HFRunner) -> None:
    assert a.length == b.length
    for (ka, va), (kb, vb) in zip(cache_rows(a), cache_rows(b)):
        assert torch.equal(ka, kb) and torch.equal(va, vb)


def test_reusable_prefix_is_the_common_prefix_in_whole_chunks():
    assert reusable_prefix([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 9, 9, 9], 4) == 4
    assert reusable_prefix([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8, 9], 4) == 8
    assert reusable_prefix([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3], 4) == 0
    assert reusable_prefix([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6, 7, 8], 4) == 4  # chunked: cut where a rollback cut
    assert reusable_prefix([], [1, 2], 4) == 0
    assert reusable_prefix([2, 2, 3, 4], [1, 2, 3, 4], 4) == 0


def _tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(VOCAB) for _ in range(n)]


@pytest.mark.parametrize("shared, second", [
    (27, 45),  # a new prompt that shares 27 tokens: 3 whole chunks taken
    (40, 53),  # the first prompt and more (a chat's next turn): all of its 5 whole chunks
    (40, 36),  # a shorter prompt, all of it shared: 4 chunks
    (5, 30),  # less than a chunk shared: nothing taken
])
def test_a_reused_prefix_gives_the_bits_of_a_prefill_from_nothing(tiny, shared, second):
    rng = random.Random(shared * 100 + second)
    first = _tokens(rng, 43)
    prompt = (first[:shared] + _tokens(rng, max(second - shared, 0)))[:second]
    if shared < len(first) and shared < second:
        prompt[shared] = (first[shared] + 1) % VOCAB  # they part exactly there
    reusing, fresh = runner_for(tiny), runner_for(tiny, reuse=False)
    assert reusing.prefill(first) == 0
    reusing.forward(_tokens(rng, 6))  # decoding after the first prompt, a rollback, a tree pass kept
    reusing.rollback(len(first) + 2)
    if reusing.supports_trees:
        reusing.forward_tree(_tokens(rng, 4), (-1, 0, 0))  # root, a, then b and c after a
        reusing.keep(len(first) + 2, (0, 1, 3))  # the path root, a, c
    reusing.reset()
    assert reusing.length == 0
    taken = reusing.prefill(prompt)
    assert taken == min(shared, second, 40) // CHUNK * CHUNK
    assert fresh.prefill(prompt) == 0
    assert_same_bits(reusing, fresh)
    following = _tokens(rng, 5)
    assert torch.equal(reusing.forward(following), fresh.forward(following))
    assert_same_bits(reusing, fresh)


def test_rows_cut_away_are_never_reused(tiny):
    """A rollback into the prompt or a kept tree path below it drops the chunks it cut."""
    rng = random.Random(7)
    prompt = _tokens(rng, 32)
    reusing, fresh = runner_for(tiny), runner_for(tiny, reuse=False)
    reusing.prefill(prompt)
    reusing.rollback(20)  # rows 20.. rewritten below: chunks 0 and 1 stay whole
    reusing.forward(_tokens(rng, 4))
    reusing.reset()
    assert reusing.prefill(prompt) == 16
    fresh.prefill(prompt)
    assert_same_bits(reusing, fresh)


def test_clients_taking_turns_each_find_their_prefix_until_it_is_pushed_out(tiny):
    """The last kept_prefixes sequences are kept: prompts A, B, A, B each take their own earlier chunks (the longest
    match of any kept one), the bits of a prefill from nothing; with room for 2, A is gone after B and C."""
    rng = random.Random(11)
    a, b, c = _tokens(rng, 35), _tokens(rng, 29), _tokens(rng, 20)
    b[0] = (a[0] + 1) % VOCAB  # nothing shared between them
    c[0] = (a[0] + 2) % VOCAB if (a[0] + 2) % VOCAB != b[0] else (a[0] + 3) % VOCAB
    reusing, fresh = runner_for(tiny), runner_for(tiny, reuse=False)
    reusing.kept_prefixes = 2
    taken = []
    for prompt in (a, b, a + [1, 2], b, c, b, a):
        reusing.reset()
        taken.append(reusing.prefill(prompt))
        fresh.reset()
        fresh.prefill(prompt)
        assert_same_bits(reusing, fresh)
        answer = _tokens(rng, 3)  # decoding after it, whose rows are not kept
        assert torch.equal(reusing.forward(answer), fresh.forward(answer))
    assert taken == [0, 0, 32, 24, 0, 24, 0]


def test_reset_then_forward_without_prefill_starts_from_nothing(tiny):
    rng = random.Random(3)
    reusing, fresh = runner_for(tiny), runner_for(tiny, reuse=False)
    reusing.prefill(_tokens(rng, 24))
    reusing.reset()
    tokens = _tokens(rng, 4)
    assert torch.equal(reusing.forward(tokens), fresh.forward(tokens))
    reusing.reset()  # the cache of that forward was no whole prefill chunk: nothing to take
    assert reusing.prefill(tokens + _tokens(rng, 10)) == 0


@needs_sliding_rollback
def test_reuse_off_and_sliding_window_models_never_reuse():
    rng = random.Random(1)
    prompt = _tokens(rng, 24)
    for runner in (runner_for(tiny_model("llama"), reuse=False), runner_for(tiny_model("gemma3"))):
        runner.prefill(prompt)
        runner.reset()
        assert runner.prefill(prompt) == 0
    assert not runner.reuse_prefix  # gemma3: sliding-window layers keep no whole past to cut back


@pytest.fixture(scope="module")
def chat_folder(tmp_path_factory):
    chars = [chr(c) for c in range(32, 127)] + ["\n"]
    template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    return save_char_model(tmp_path_factory.mktemp("tiny-chat-model"), chars, chat_template=template, decoder=True,
                           max_positions=2048)


def test_a_request_gets_the_same_output_and_counts_whatever_ran_before(chat_folder):
    """Through the library: requests after others (sharing a system prompt, a next turn, a prediction) give what
    they give on a freshly loaded model; cached_tokens says how many prompt tokens were taken."""
    system = {"role": "system", "content": "You rewrite code. Keep names, keep the layout, answer with code only. " * 2}
    turn1 = [system, {"role": "user", "content": "def area(w, h): return w * h"}]
    gen = quickdraft.load(str(chat_folder), progress=False)
    gen.runner.prefill_chunk = CHUNK
    first = gen.generate(turn1, drafter="none", max_new_tokens=16)
    assert first.stats.cached_tokens == 0
    turn2 = turn1 + [{"role": "assistant", "content": first.text}, {"role": "user", "content": "Now add a docstring."}]
    other = [system, {"role": "user", "content": "def perimeter(w, h): return 2 * (w + h)"}]
    for messages, prediction in ((turn2, None), (other, "def perimeter(w, h):\n    return 2 * (w + h)\n"), (turn1, None)):
        fresh = quickdraft.load(str(chat_folder), progress=False)
        fresh.runner.prefill_chunk = CHUNK
        expected = fresh.generate(messages, prediction=prediction, max_new_tokens=24, draft_sizing="off")
        got = gen.generate(messages, prediction=prediction, max_new_tokens=24, draft_sizing="off")
        assert got.text == expected.text and got.token_ids == expected.token_ids
        assert got.stats.accepted_prediction_tokens == expected.stats.accepted_prediction_tokens
        assert expected.stats.cached_tokens == 0
        shared = len(gen.tokenizer.encode_chat([system]))  # at least the system prompt's tokens are shared
        assert shared // CHUNK * CHUNK <= got.stats.cached_tokens < got.stats.prompt_tokens
        assert got.stats.cached_tokens % CHUNK == 0


def test_the_server_reports_cached_tokens(chat_folder):
    from test_server import client, serving

    gen = quickdraft.load(str(chat_folder), progress=False)
    gen.runner.prefill_chunk = CHUNK
    messages = [{"role": "system", "content": "Answer in one short line of plain text, no code. " * 2},
                {"role": "user", "content": "hello"}]
    with serving(gen) as url:
        c = client(url)
        first = c.chat.completions.create(model="tiny", messages=messages, max_completion_tokens=4, temperature=0)
        second = c.chat.completions.create(model="tiny", messages=messages, max_completion_tokens=4, temperature=0)
        metrics = httpx.get(url + "/metrics").text
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert f"quickdraft_cached_tokens_total {second.usage.prompt_tokens_details.cached_tokens}" in metrics
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached == (second.usage.prompt_tokens - 1) // CHUNK * CHUNK > 0  # all but the last token: prefill's share
    assert second.choices[0].message.content == first.choices[0].message.content


def test_a_request_can_take_nothing_kept_and_later_ones_still_reuse(chat_folder):
    """prefix_reuse False (DecodeOptions, the server's quickdraft.prefix_reuse, the CLI's timed runs): the request
    prefills its whole prompt; what was kept stays kept, and its own chunks are kept too."""
    from quickdraft.errors import QuickdraftError
    from quickdraft.options import DecodeOptions

    with pytest.raises(QuickdraftError, match="prefix_reuse must be True or False"):
        DecodeOptions(prefix_reuse="no")
    gen = quickdraft.load(str(chat_folder), progress=False)
    gen.runner.prefill_chunk = CHUNK
    messages = [{"role": "user", "content": "Repeat after me: the quick brown fox jumps over the lazy dog. " * 2}]
    first = gen.generate(messages, drafter="none", max_new_tokens=8)
    alone = gen.generate(messages, drafter="none", max_new_tokens=8, prefix_reuse=False)
    assert alone.stats.cached_tokens == 0 and alone.token_ids == first.token_ids
    assert gen.runner.take_prefix is True  # back on after the request
    again = gen.generate(messages, drafter="none", max_new_tokens=8)
    assert again.stats.cached_tokens == (again.stats.prompt_tokens - 1) // CHUNK * CHUNK > 0
    assert again.token_ids == first.token_ids
    from test_server import client, serving

    with serving(gen) as url:
        r = client(url).chat.completions.create(model="tiny", messages=messages, max_completion_tokens=8, temperature=0,
                                                extra_body={"quickdraft": {"prefix_reuse": False}})
    assert r.usage.prompt_tokens_details.cached_tokens == 0


def test_cli_generate_times_its_runs_without_taking_the_warm_ups_prompt(chat_folder, capsys):
    from quickdraft.cli import main

    prompt = "Repeat after me: the quick brown fox jumps over the lazy dog. " * 10  # over 512 tokens: a whole chunk
    code = main(["generate", "--model", str(chat_folder), "--max-new-tokens", "8", "--json", "--compare", prompt])
    out = capsys.readouterr().out
    assert code == 0
    doc = json.loads(out)
    assert doc["stats"]["prompt_tokens"] > 512 and doc["stats"]["cached_tokens"] == 0
