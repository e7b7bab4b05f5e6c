"""The output's text a step at a time (text.py): equal to decoding the whole output after every step, for
byte-level, SentencePiece-style and space-cleaning tokenizers, characters split across tokens included; and
a cost per step that does not grow with the output (counted in tokens decoded, not timed)."""

from __future__ import annotations

import random

import pytest

from quickdraft import models
from quickdraft.api import Generator
from quickdraft.runners.scripted import ScriptedRunner
from quickdraft.stopping import StopStrings
from quickdraft.text import IncrementalText
from quickdraft.tokenizer import ByteTokenizer, HFTokenizer

TEXT = ("def café(x):\n    return x ** 2  # naïve 中文 日本語 🙂🚀\n\n"
        "Hello, world. It's   spaced ,odd . text\t\r\n\u00a0\u200b end")


def metaspace_tokenizer(cleanup: bool):
    """A SentencePiece-style word-level tokenizer (▁ for a leading space, dropped at the start of a text),
    optionally cleaning up spaces before punctuation as some transformers tokenizers do."""
    from tokenizers import Tokenizer, decoders, models as tk_models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["▁hello", "hello", "▁world", "world", ",", ".", "▁", "▁,", "▁.", "!", "▁it", "'s", "▁fine", "[UNK]"]
    tk = Tokenizer(tk_models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Metaspace()
    tk.decoder = decoders.Metaspace()
    return HFTokenizer(PreTrainedTokenizerFast(tokenizer_object=tk, clean_up_tokenization_spaces=cleanup))


def check_steps(decode, tokens, local, seed):
    """Feed tokens in random step sizes; after each step the text is decode(tokens so far)."""
    rng = random.Random(seed)
    t, i = IncrementalText(decode, local), 0
    while i < len(tokens):
        n = 1 if seed == "one at a time" else rng.choice([1, 1, 1, 2, 3, 7, 33])
        t.extend(tokens[i : i + n])
        i += n
        whole = decode(tokens[:i])
        assert t.text == whole, (i, t.text[-40:], whole[-40:])
        assert len(t) == len(whole)
        start = rng.randrange(len(whole) + 1)
        assert t.since(start) == whole[start:]


@pytest.mark.parametrize("seed", range(5))
def test_bytes_split_anywhere(seed):
    tok = ByteTokenizer()
    check_steps(tok.decode, tok.encode(TEXT), True, seed)
    rng = random.Random(seed)  # invalid UTF-8 too: lone continuation bytes, truncated characters
    check_steps(tok.decode, [rng.randrange(256) for _ in range(300)], True, seed)


@pytest.mark.parametrize("cleanup", [False, True])
def test_sentencepiece_style_leading_spaces_and_space_cleanup(cleanup):
    tok = metaspace_tokenizer(cleanup)
    assert tok.decodes_locally is not cleanup
    ids = [tok.tok.convert_tokens_to_ids(w) for w in
           ["▁hello", "▁world", ",", "▁", ",", "▁hello", "▁.", "▁it", "'s", "▁fine", "!", "▁", ".", "▁world"] * 3]
    for seed in range(8):
        check_steps(tok.decode, ids, tok.decodes_locally, seed)
    if cleanup:  # the case that needs the whole text: a later token removes a space already seen ...
        assert tok.decode(ids[:4]).endswith(" ") and not tok.decode(ids[:5]).endswith(" ,")
        with pytest.raises(AssertionError):  # ... which a window of a few tokens gets wrong
            check_steps(lambda i: tok.decode(i), ids, True, "one at a time")


@pytest.mark.real_model
def test_a_real_byte_level_tokenizer():
    from transformers import AutoTokenizer

    tok = HFTokenizer(AutoTokenizer.from_pretrained(models.resolve("smollm2-135m", progress=False)))
    ids = tok.encode(TEXT * 3, add_special_tokens=False)
    for seed in range(4):
        check_steps(tok.decode, ids, tok.decodes_locally, seed)


class CountingDecode:
    def __init__(self, decode):
        self.decode, self.tokens = decode, 0

    def __call__(self, ids):
        self.tokens += len(ids)
        return self.decode(ids)


def test_streaming_decodes_a_bounded_window_per_step():
    """Plain decoding of a 3,000-token output with a stop string: the tokens decoded per step stay a few,
    where decoding the whole output each step (as before) would decode millions."""
    tok = ByteTokenizer()
    script = tok.encode((TEXT + "\n") * 30)[:3000]
    counting = CountingDecode(tok.decode)
    tok.decode = counting  # the Stream, its stop strings and its segments all decode through it
    gen = Generator(ScriptedRunner(script, tok.vocab_size, tok.eos), tok)
    result = gen.generate("x", max_new_tokens=len(script), stop="never appears", drafter="none")
    assert result.token_ids == script and result.text == counting.decode(script)
    # per step: the stream's window and context, the stop strings' the same (a few tokens each), then the
    # whole output once for the result
    assert counting.tokens < 20 * len(script) + 3 * len(script), counting.tokens
    chunks = "".join(c.text for c in gen.stream("x", max_new_tokens=len(script), drafter="none"))
    assert chunks == result.text


def test_stop_strings_follow_a_new_output():
    """One StopStrings given a different output list starts over (the engine passes one list per run)."""
    tok = ByteTokenizer()
    stops = StopStrings(["END"], tok.decode)
    first = list(b"abc EN")
    assert stops(first, len(first)) is None
    second = list(b"xyz")
    assert stops(second, 3) is None
    second += list(b"END")
    assert stops(second, 3) == 6
    third = list(b"ab") + list(b"END")  # same length as the first would have been: still its own text
    assert stops(third[:2], 2) is None and stops(third, 3) == 5


@pytest.mark.parametrize("drafter", ["none", "lookup"])
def test_a_stream_never_sends_the_start_of_a_stop_string(drafter):
    """Every stop string of 1-3 characters cut from a text with characters of 2-4 bytes (one byte a token, so a
    character's first bytes arrive before its last): the chunks join to the result, which ends before the stop."""
    tok = ByteTokenizer()
    out = "héllo wörld 中文, a🙂b héllo"
    gen = Generator(ScriptedRunner(tok.encode(out), tok.vocab_size, tok.eos), tok)
    for i in range(len(out)):
        for n in (1, 2, 3):
            stop = out[i: i + n]
            stream = gen.stream("x", max_new_tokens=len(out.encode()), stop=stop, drafter=drafter)
            streamed = "".join(c.text for c in stream)
            assert streamed == stream.result.text == out[: out.index(stop)], (stop, streamed)


@pytest.mark.parametrize("drafter", ["none", "lookup"])
def test_a_stream_adds_up_where_a_later_token_cleans_up_earlier_spaces(drafter):
    """A tokenizer that drops the space before punctuation changes text already decoded when the punctuation
    comes: the stream holds back the last space, so its chunks still join to the result."""
    from tokenizers import Tokenizer, decoders, models as tk_models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = "<abcdefghijklmnopqrstuvwxyz .,!?'"  # one character a token, the space one of them; 0 is EOS
    tk = Tokenizer(tk_models.WordLevel({c: i for i, c in enumerate(chars)}, unk_token="<"))
    tk.pre_tokenizer, tk.decoder = pre_tokenizers.Split("", "isolated"), decoders.Fuse()
    tok = HFTokenizer(PreTrainedTokenizerFast(tokenizer_object=tk, clean_up_tokenization_spaces=True))
    assert not tok.decodes_locally
    ids = tok.encode("ok , done . yes ! it 's ok , done .", add_special_tokens=False)
    out = tok.decode(ids)
    assert out == "ok, done. yes! it's ok, done."  # cleaned up
    gen = Generator(ScriptedRunner(ids, len(chars), 0), tok)
    for stop in (None, "done", ".", ",", "yes", "! i", "'s"):
        stream = gen.stream("hello", max_new_tokens=len(ids), stop=stop, drafter=drafter)
        chunks = [c.text for c in stream]
        assert "".join(chunks) == stream.result.text == (out if stop is None else out[: out.index(stop)]), chunks


@pytest.mark.parametrize("stop", [None, "gain"])
def test_streamed_segments_colour_what_the_draft_gave(stop):
    tok = ByteTokenizer()
    out = "hello wörld, hello again and again"
    gen = Generator(ScriptedRunner(tok.encode(out), tok.vocab_size, tok.eos), tok)
    stream = gen.stream("x", prediction="hello wörld, HELLO again and", max_new_tokens=len(out.encode()), stop=stop)
    chunks = list(stream)
    result = stream.result
    for c in chunks:
        assert "".join(t for t, _ in c.segments) == c.text
        assert c.drafted >= sum(c.from_draft)
    assert "".join(c.text for c in chunks) == result.text == (out if stop is None else out[: out.index(stop)])
    assert "".join(t for t, _ in result.segments) == result.text
    assert sum(c.drafted for c in chunks) == result.stats.draft_tokens
    from_draft = "".join(t for c in chunks for t, f in c.segments if f)
    ours = "".join(t for c in chunks for t, f in c.segments if not f)
    assert from_draft.startswith("hello wörld, ") and "H" not in from_draft and "h" in ours  # h where HELLO was
    if stop is None:  # one byte a token here (ö within a run): what the draft gave is the accepted count
        assert len(from_draft.encode()) == result.stats.accepted_prediction_tokens
        assert "".join(t for t, f in result.segments if f) == from_draft


def byte_fallback_tokenizer():
    """A SentencePiece-style byte-fallback tokenizer (Llama, Mistral, Gemma): characters outside its vocabulary are
    their UTF-8 bytes, each decoded as a U+FFFD of its own until the character is whole, so the text of a prefix of
    the output can be longer than the whole output's text at that place."""
    from tokenizers import Tokenizer, decoders, models as tk_models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<eos>": 0, **{c: i + 1 for i, c in enumerate("abcdefghijklmnopqrstuvwxyz ,.")}}
    vocab.update({f"<0x{b:02X}>": len(vocab) + b for b in range(256)})
    tk = Tokenizer(tk_models.WordLevel(vocab, unk_token="<eos>"))
    tk.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])

    class ByteFallback(HFTokenizer):
        def encode(self, text, add_special_tokens=True):
            return [x for ch in text for x in ([vocab[ch]] if ch in vocab else
                                               [vocab[f"<0x{b:02X}>"] for b in ch.encode()])]

    return ByteFallback(PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<eos>"))


def cleanup_tokenizer():
    """One character a token, with clean_up_tokenization_spaces: " ," becomes "," once the comma comes."""
    from tokenizers import Tokenizer, decoders, models as tk_models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(tk_models.WordLevel({c: i for i, c in enumerate("<abcdefghijklmnopqrstuvwxyz .,!?'")}, unk_token="<"))
    tk.pre_tokenizer, tk.decoder = pre_tokenizers.Split("", "isolated"), decoders.Fuse()
    return HFTokenizer(PreTrainedTokenizerFast(tokenizer_object=tk, clean_up_tokenization_spaces=True))


@pytest.mark.parametrize("kind", ["bytes", "byte fallback", "clean-up"])
def test_stop_strings_fire_where_plain_decoding_fires_whatever_the_tokens_text_on_the_way(kind):
    """Drafted output equals plain decoding's with every stop string of 1-3 characters cut from the text (and ones
    holding U+FFFD), on tokenizers whose text of a prefix is not a prefix of the text: a character's bytes arriving
    one a token (shown as U+FFFD each, with byte fallback), a space a clean-up drops once punctuation follows."""
    if kind == "bytes":
        tok, out = ByteTokenizer(), "xa€ hé , b😀b and more"
    elif kind == "byte fallback":
        tok, out = byte_fallback_tokenizer(), "xa€ hé , b😀b and more"
    else:
        tok, out = cleanup_tokenizer(), "hi a , b c . d e ! f"
    ids = tok.encode(out, add_special_tokens=False)
    eos = tok.eos if kind == "bytes" else 0
    gen = Generator(ScriptedRunner(ids, 300, eos), tok)
    stops = {out[i: i + n] for i in range(len(out)) for n in (1, 2, 3)} | {"\ufffd", "a\ufffd", "\ufffd\ufffd"}
    for stop in sorted(stops):
        plain = gen.generate("x", drafter="none", stop=stop, max_new_tokens=len(ids))
        for options in ({"prediction": out, "policy": "openai"}, {"prediction": out}, {"drafter": "lookup"}):
            stream = gen.stream("x", stop=stop, max_new_tokens=len(ids), **options)
            streamed = "".join(c.text for c in stream)
            r = stream.result
            assert (r.token_ids, r.finish_reason, r.text) == (plain.token_ids, plain.finish_reason, plain.text), \
                (stop, options)
            assert streamed == r.text, (stop, options, streamed)
