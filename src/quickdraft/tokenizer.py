"""Text <-> token ids for the Generator (the engine itself never sees text)."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from .errors import QuickdraftError


class Tokenizer(Protocol):
    eos_token_ids: frozenset[int]
    # decode(a + b) == decode(a) + decode(b)[...] beyond a few tokens of context (text.py): streaming
    # text is then decoded a step at a time; False (a decoder that cleans up spaces around punctuation,
    # so a later token changes earlier text): the whole output is decoded again each step
    decodes_locally: bool

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    @property
    def has_chat_template(self) -> bool: ...

    def encode_chat(self, messages: list[dict[str, str]]) -> list[int]: ...


class HFTokenizer:
    """Wraps a transformers tokenizer; EOS ids come from the tokenizer and the generation config."""

    def __init__(self, tokenizer: Any, extra_eos: Sequence[int] = ()):
        self.tok = tokenizer
        eos = set(extra_eos)
        if tokenizer.eos_token_id is not None:
            eos.add(tokenizer.eos_token_id)
        self.eos_token_ids = frozenset(eos)
        self.decodes_locally = not getattr(tokenizer, "clean_up_tokenization_spaces", False)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=add_special_tokens))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tok, "chat_template", None))

    def encode_chat(self, messages: list[dict[str, str]]) -> list[int]:
        if not self.has_chat_template:
            raise QuickdraftError("this model's tokenizer has no chat template: pass the prompt as a plain string")
        from jinja2 import TemplateError
        try:
            ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        except TemplateError as e:
            raise QuickdraftError(f"the model's chat template refused these messages: {e}") from None
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # BatchEncoding in some versions
            ids = ids["input_ids"]
        return list(ids)


class ByteTokenizer:
    """UTF-8 bytes as tokens 0..255, EOS = 256. For scripted models and tests."""

    vocab_size = 257
    eos = 256
    decodes_locally = True

    def __init__(self) -> None:
        self.eos_token_ids = frozenset({self.eos})

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(t for t in ids if t < 256).decode("utf-8", errors="replace")

    @property
    def has_chat_template(self) -> bool:
        return False

    def encode_chat(self, messages: list[dict[str, str]]) -> list[int]:
        raise QuickdraftError("the byte tokenizer has no chat template: pass the prompt as a plain string")


def render_chat_template(template: str, messages: list[dict[str, str]], **special_tokens: str) -> str:
    """A chat template (Jinja) rendered the way transformers' apply_chat_template renders it.

    Same environment (sandboxed, trim_blocks, lstrip_blocks, loop controls), the same `tojson`,
    `raise_exception` and `strftime_now`, the generation prompt added; special_tokens are the names a
    template may use (bos_token, eos_token). Used for GGUF models run without transformers.
    """
    import json
    from datetime import datetime

    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(template).render(messages=messages, add_generation_prompt=True, **special_tokens)
    except TemplateError as e:
        raise QuickdraftError(f"the model's chat template refused these messages: {e}") from None
