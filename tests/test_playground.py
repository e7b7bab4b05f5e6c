"""The playground page (server/playground.html) in a real headless Chromium (Debian's, driven by Playwright),
against a real server on loopback (uvicorn in a thread, as in test_server.py).

A scripted model writes SCRIPT whatever it is asked (one byte a token), so what the page must show is known:
the text, which part the prediction gave, the counts. The script holds HTML, which must appear as text.
"""

from __future__ import annotations

import shutil

import httpx
import pytest
from playwright.sync_api import expect

from test_server import scripted_generator, serving

from quickdraft import prompts

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCRIPT = 'def f(x):\n    return "<b>bold</b> & <script>alert(1)</script>"\n'
PREDICTION = 'def f(x):\n    return "<b>BOLD</b> & <script>alert(1)</script>"\n'  # right but for BOLD


@pytest.fixture(scope="module")
def browser():
    if not shutil.which(CHROMIUM):
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `bash scripts/setup.sh --with-browser` (Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def url():
    with serving(scripted_generator(script=SCRIPT, max_context=1024), model_name="scripted") as u:  # room for the page's 512 tokens
        yield u


@pytest.fixture
def page(browser, url):
    context = browser.new_context()
    external = []
    context.route("**/*", lambda route: (external.append(route.request.url), route.abort())
                  if not route.request.url.startswith(url) else route.continue_())
    p = context.new_page()
    errors = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.goto(url + "/")
    expect(p.locator("#model")).to_have_attribute("data-id", "scripted")  # (no eval: the page's CSP forbids it)
    yield p
    assert not external, f"the page reached outside the server: {external}"
    assert not errors, errors
    context.close()


def prompt_mode(page, prediction: str | None, drafter: str = "prediction") -> None:
    page.select_option("#mode", "prompt")
    page.fill("#prompt", "hi")
    page.fill("#prediction", prediction or "")
    page.select_option("#drafter", drafter)


def test_the_page_is_served_with_a_strict_policy_and_can_be_turned_off(url):
    r = httpx.get(url + "/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert "http://" not in r.text.replace("http://127.0.0.1", "") and "https://" not in r.text  # no CDN
    with serving(scripted_generator(), playground=False) as off:
        assert httpx.get(off + "/").status_code == 404


def test_a_request_streams_with_the_draft_coloured_and_counted(page):
    prompt_mode(page, PREDICTION)
    page.click("#go")
    page.wait_for_selector("#out[data-done='1']")
    assert page.text_content("#out") == SCRIPT  # the HTML in it is text: no element was made from it
    assert page.eval_on_selector("#out", "o => o.querySelectorAll('b, script').length") == 0
    spans = page.eval_on_selector_all("#out span", "spans => spans.map(s => [s.textContent, s.className])")
    first, kind = spans[0]
    assert kind == "draft" and len(first) >= 8 and SCRIPT.startswith(first)  # the first pass's draft, kept
    drafted = "".join(text for text, kind in spans if kind == "draft")
    assert any(kind != "draft" for _, kind in spans) and not any(c in drafted for c in "BOLD")  # what differed
    stats = page.text_content("#stats")
    assert f"{len(SCRIPT.encode())} tokens" in stats and "tok/s" in stats
    accepted = len(drafted.encode())
    assert f"accepted_prediction_tokens {accepted}" in stats and "rejected_prediction_tokens" in stats
    assert "prompt tokens, 0 of them cached from an earlier request" in stats  # the scripted runner keeps nothing


def test_the_race_finishes_with_identical_text(page):
    prompt_mode(page, PREDICTION)
    sent = []
    page.on("request", lambda r: sent.append(r.post_data_json) if r.method == "POST" else None)
    page.click("#race")
    page.wait_for_selector("#verdict[data-same]", timeout=30_000)
    # each pays its own prefill: the second must not take the first one's prompt from the server's prefix cache
    assert [b["quickdraft"]["prefix_reuse"] for b in sent] == [False, False]
    assert page.get_attribute("#verdict", "data-same") == "1"
    assert "identical text" in page.text_content("#verdict") and " s against " in page.text_content("#verdict")
    assert page.text_content("#out-drafted") == page.text_content("#out-plain") == SCRIPT
    assert page.eval_on_selector("#out-plain", "o => o.querySelectorAll('.draft').length") == 0
    assert page.eval_on_selector("#out-drafted", "o => o.querySelectorAll('.draft').length") > 0


def test_a_bad_input_shows_the_servers_error(page):
    prompt_mode(page, None, "none")
    page.fill("#max-tokens", "0")
    page.click("#go")
    expect(page.locator("#error")).to_contain_text("max_tokens")
    page.fill("#max-tokens", "50")  # the page recovers: the server stayed up
    page.select_option("#mode", "edit")  # a chat request; the scripted tokenizer has no chat template
    page.fill("#file", "x = 1\n")
    page.fill("#instruction", "rename x")
    page.click("#go")
    expect(page.locator("#error")).to_contain_text("chat template")


def test_the_edit_request_is_the_clis(page):
    """The page builds an edit's message and prediction as quickdraft.prompts.edit_request does."""
    code, instruction = "def parse_line(s):\n    return s.split(',')\n\n\n", "  Rename parse_line.  "
    for filename in ("inventory.py", "notes.md", "Makefile"):
        got = page.evaluate("([i, c, f]) => editRequest(i, c, f)", [instruction, code, filename])
        assert tuple(got) == prompts.edit_request(instruction, code, filename)


def test_the_drafter_menu_lists_every_drafter(page):
    from quickdraft.drafters.build import DRAFTER_NAMES

    assert page.eval_on_selector_all("#drafter option", "os => os.map(o => o.value)") == list(DRAFTER_NAMES)


def test_an_edit_sends_the_file_as_prediction_only_to_drafters_that_take_one(page):
    """lookup, draft-model and ouroboros refuse a prediction (drafters/build.check_drafter): an edit with them drafts
    from the file in the prompt instead of failing."""
    from quickdraft.drafters.build import DRAFTER_NAMES, NEEDS_PREDICTION

    assert page.evaluate("() => TAKES_PREDICTION") == [n for n in DRAFTER_NAMES if n == "auto" or n in NEEDS_PREDICTION]
    page.select_option("#mode", "edit")
    page.fill("#file", "x = 1\n")
    page.fill("#instruction", "rename x")
    for drafter, predicted in (("lookup", False), ("auto", True), ("ouroboros", False), ("prediction+lookup", True)):
        page.select_option("#drafter", drafter)
        with page.expect_request(lambda r: r.method == "POST") as sent:
            page.click("#go")
        assert ("prediction" in sent.value.post_data_json) == predicted, drafter
        expect(page.locator("#go")).to_be_enabled()


def test_a_failed_request_says_so_where_it_said_waiting(page):
    prompt_mode(page, None, "none")
    page.fill("#max-tokens", "0")
    page.click("#go")
    expect(page.locator("#error")).to_contain_text("max_tokens")
    expect(page.locator("#stats")).to_have_text("failed (the error is above)")
    page.fill("#max-tokens", "1.5")  # sent as typed, refused by the server, not cut to 1
    page.click("#go")
    expect(page.locator("#error")).to_contain_text("max_tokens")


def test_the_rate_leaves_out_the_first_steps_tokens(page):
    """An answer drafted whole arrives in one engine step: no rate follows from it (the page once divided every token
    by the time since that step arrived: 128,000 tokens a second for 128 tokens). The stream here is canned: one step
    of 5 tokens, then the finish and the usage."""
    import json

    chunks = [{"choices": [{"index": 0, "text": "abcde", "finish_reason": None}],
               "quickdraft": {"segments": [["abcde", True]], "tokens": 5, "drafted": 4, "accepted": 4}},
              {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]},
              {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 5, "total_tokens": 7}}]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    page.route("**/v1/completions", lambda route: route.fulfill(status=200, body=body,
                                                                 headers={"Content-Type": "text/event-stream"}))
    prompt_mode(page, None, "lookup")
    page.click("#go")
    page.wait_for_selector("#out[data-done='1']")
    stats = page.text_content("#stats")
    assert stats.startswith("5 tokens in ") and "(all in the first step)" in stats and "finish: length" in stats, stats


def test_the_page_fits_a_narrow_screen_and_long_lines_scroll(page, url):
    assert httpx.get(url + "/favicon.ico").status_code == 204  # asked by every browser: no 404 in its console
    page.set_viewport_size({"width": 375, "height": 700})
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 375
    page.set_viewport_size({"width": 1200, "height": 700})
    page.evaluate("""() => { document.getElementById('race-view').hidden = false;
                             document.getElementById('out-plain').textContent = '0123456789'.repeat(300); }""")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1200


def test_a_key_typed_just_before_generate_is_waited_for(browser):
    """With --api-key the page learns the model's id only once the key is typed (GET /v1/models on the field's
    change, as it loses focus); a click straight after must send that id, not an empty one."""
    with serving(scripted_generator(script=SCRIPT, max_context=1024), model_name="keyed", api_key="s3cret") as keyed:
        context = browser.new_context()
        p = context.new_page()
        p.goto(keyed + "/")
        expect(p.locator("#model")).to_contain_text("needs its API key")
        prompt_mode(p, None, "none")
        p.fill("#max-tokens", "8")
        p.fill("#api-key", "s3cret")
        with p.expect_request(lambda r: r.method == "POST") as sent:
            p.click("#go")  # the key field's change fires here, as it loses focus
        assert sent.value.post_data_json["model"] == "keyed"
        p.wait_for_selector("#out[data-done='1']")
        assert p.text_content("#out") == SCRIPT[:8]
        context.close()
