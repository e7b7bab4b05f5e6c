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
