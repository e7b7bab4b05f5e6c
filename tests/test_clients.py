"""Clients people reach OpenAI-compatible servers through, against a real `quickdraft serve` on loopback
(uvicorn in a thread, as in test_server.py): LangChain's ChatOpenAI and LiteLLM's completion pass OpenAI's
`prediction` through.

Ground truth: the same tiny model loaded beside the server (test_server's fixtures); the text must be plain
decoding's, and the counts in the response what the library reports for the same request (draft sizing off
on both sides, so that the counts do not depend on timing).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM would fetch its price list at import

import litellm  # noqa: E402
import openai  # noqa: E402
import pytest  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

from test_server import chat_folder, reference, tiny_url  # noqa: F401 (fixtures)

PROMPT = "hello there"
MAX = 40


def chat_model(url: str) -> ChatOpenAI:
    return ChatOpenAI(base_url=url + "/v1", api_key="unused", model="tiny", temperature=0, max_tokens=MAX, max_retries=0,
                      extra_body={"quickdraft": {"draft_sizing": "off"}})


def expected(reference, prediction: str):  # noqa: F811
    plain = reference.generate([{"role": "user", "content": PROMPT}], max_new_tokens=MAX, drafter="none")
    drafted = reference.generate([{"role": "user", "content": PROMPT}], max_new_tokens=MAX, prediction=prediction,
                                 draft_sizing="off")
    assert drafted.text == plain.text
    return plain.text, drafted.stats


@pytest.mark.parametrize("kind", ["right", "partly right"])
def test_langchain_invoke_passes_the_prediction_and_returns_the_counts(tiny_url, reference, kind):  # noqa: F811
    plain = reference.generate([{"role": "user", "content": PROMPT}], max_new_tokens=MAX, drafter="none").text
    prediction = plain if kind == "right" else plain[:10] + "#####" + plain[15:]
    text, stats = expected(reference, prediction)
    message = chat_model(tiny_url).invoke(PROMPT, prediction={"type": "content", "content": prediction})
    assert message.content == text
    details = message.response_metadata["token_usage"]["completion_tokens_details"]
    assert (details["accepted_prediction_tokens"], details["rejected_prediction_tokens"]) == (
        stats.accepted_prediction_tokens, stats.rejected_prediction_tokens)
    assert details["accepted_prediction_tokens"] > 0


def test_langchain_stream_gives_the_same_text(tiny_url, reference):  # noqa: F811
    """Streamed through LangChain: the same text and token usage. LangChain's usage_metadata has no field for
    the prediction counts, so a streaming LangChain caller does not see them (invoke does, above)."""
    plain = reference.generate([{"role": "user", "content": PROMPT}], max_new_tokens=MAX, drafter="none")
    chunks = list(chat_model(tiny_url).stream(PROMPT, prediction={"type": "content", "content": plain.text},
                                              stream_usage=True))
    assert len(chunks) > 2  # streamed, not one piece
    whole = chunks[0]
    for c in chunks[1:]:
        whole = whole + c
    assert whole.content == plain.text
    assert whole.usage_metadata["output_tokens"] == len(plain.token_ids)


def test_langchain_shows_the_servers_error(tiny_url):  # noqa: F811
    with pytest.raises(openai.BadRequestError) as e:
        chat_model(tiny_url).invoke(PROMPT, prediction={"type": "content", "content": "x"}, n=2)
    assert e.value.status_code == 400 and e.value.body["param"] == "n" and "Predicted Outputs" in e.value.body["message"]


# -- LiteLLM ------------------------------------------------------------------------------------------


def litellm_call(url: str, **kw):
    return litellm.completion(model="openai/tiny", api_base=url + "/v1", api_key="unused", temperature=0,
                              max_tokens=MAX, messages=[{"role": "user", "content": PROMPT}], num_retries=0,
                              extra_body={"quickdraft": {"draft_sizing": "off"}}, **kw)


@pytest.mark.parametrize("kind", ["right", "partly right"])
def test_litellm_completion_passes_the_prediction_and_returns_the_counts(tiny_url, reference, kind):  # noqa: F811
    plain = reference.generate([{"role": "user", "content": PROMPT}], max_new_tokens=MAX, drafter="none").text
    prediction = plain if kind == "right" else plain[:10] + "#####" + plain[15:]
    text, stats = expected(reference, prediction)
    r = litellm_call(tiny_url, prediction={"type": "content", "content": prediction})
    assert r.choices[0].message.content == text
    d = r.usage.completion_tokens_details
    assert (d.accepted_prediction_tokens, d.rejected_prediction_tokens) == (
        stats.accepted_prediction_tokens, stats.rejected_prediction_tokens)
    assert d.accepted_prediction_tokens > 0


def test_litellm_stream_gives_the_same_text_and_the_counts(tiny_url, reference):  # noqa: F811
    text, stats = expected(reference, reference.generate([{"role": "user", "content": PROMPT}], max_new_tokens=MAX,
                                                         drafter="none").text)
    chunks = list(litellm_call(tiny_url, prediction={"type": "content", "content": text}, stream=True,
                               stream_options={"include_usage": True}))
    assert len(chunks) > 2
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    usage = [c.usage for c in chunks if getattr(c, "usage", None)][-1]
    d = usage.completion_tokens_details
    assert (d.accepted_prediction_tokens, d.rejected_prediction_tokens) == (
        stats.accepted_prediction_tokens, stats.rejected_prediction_tokens)


def test_litellm_shows_the_servers_error(tiny_url):  # noqa: F811
    with pytest.raises(litellm.BadRequestError, match="Predicted Outputs"):
        litellm_call(tiny_url, prediction={"type": "content", "content": "x"}, n=2)
