"""The web console in a real headless browser (Debian's chromium + chromedriver, driven by
Selenium) against an embedded stack running ops, whose console process is the one `paperworks up`
starts. A person's path through it: log in by pasting a token (a wrong one is refused on the
field), submit an ops digest from the form generated from the job schema (an invalid field comes
back from the server next to that field), watch the progress bar reach 100% from the live event
stream, read the result (checked against an independent recomputation of the chain), download an
artifact and see a picture artifact rendered; then tenant isolation (bob sees none of alice's jobs,
and alice's job and artifact URLs are not found for him), cancelling, an expired token, and a
service that is down. Accessibility basics are checked on every page visited: every control has a
label, pictures have alt text, text contrast is at least 4.5:1, and the log-in and submit forms
work from the keyboard alone.

ops writes no picture, so the picture artifact is attached to a finished ops job the way a job
attaches one (artifact store + job_artifacts row), then served by the console through GetArtifact.

Screenshots for docs/console/: PAPERWORKS_CONSOLE_SCREENSHOTS=1 writes them there.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support import TOKENS, chain, start_stack

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SECRET = "console-test-secret"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"

pytestmark = pytest.mark.timeout(120)


def _browser_available() -> None:
    if os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER):
        return
    message = "chromium and chromium-driver are not installed (apt-get install -y chromium chromium-driver)"
    if os.environ.get("PAPERWORKS_REQUIRE_SYSTEM_SERVICES") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = start_stack(tmp_path_factory.mktemp("console-stack"), services=("ops",),
                    PAPERWORKS_CONSOLE_SECRET=SECRET)
    yield s
    s.down()


@pytest.fixture(scope="module")
def url(stack) -> str:
    comp = stack.state.components.get("console")
    assert comp is not None, "the embedded stack started no console process"
    return f"http://127.0.0.1:{comp.port}"


@pytest.fixture(scope="module")
def browser():
    _browser_available()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def wait_for(predicate, timeout: float = 30, what: str = "condition"):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except (NoSuchElementException, StaleElementReferenceException):  # a page still loading
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def find(browser, css):
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, css)


def find_all(browser, css):
    from selenium.webdriver.common.by import By

    return browser.find_elements(By.CSS_SELECTOR, css)


# contrast of every element that draws its own text, against the first opaque background behind it
CONTRAST_JS = """
function rgb(s) { const m = s.match(/[\\d.]+/g).map(Number); return m.length > 3 ? m : m.concat([1]); }
function lum(c) {
  const v = c.slice(0, 3).map(x => {
    x /= 255;
    return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4);
  });
  return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
}
function background(el) {
  for (; el; el = el.parentElement) {
    const c = rgb(getComputedStyle(el).backgroundColor);
    if (c[3] > 0.99) return c;
  }
  return [255, 255, 255, 1];
}
const bad = [];
for (const el of document.querySelectorAll('body *')) {
  const own = Array.from(el.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
  const style = getComputedStyle(el);
  const hidden = style.visibility === 'hidden' || style.display === 'none'
    || (el.offsetParent === null && style.position !== 'fixed');
  if (!own || hidden) continue;
  const fg = lum(rgb(style.color)), bg = lum(background(el));
  const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
  if (ratio < 4.5) bad.push(el.tagName + ' "' + el.textContent.trim().slice(0, 30) + '" '
                            + ratio.toFixed(2));
}
return bad;
"""

LABELS_JS = """
const bad = [];
for (const el of document.querySelectorAll('input, select, textarea, progress')) {
  if (el.type === 'hidden') continue;
  const label = el.id && document.querySelector('label[for="' + el.id + '"]');
  const text = (label && label.textContent.trim()) || el.getAttribute('aria-label') || '';
  if (!text) bad.push(el.outerHTML.slice(0, 80));
}
for (const img of document.querySelectorAll('img')) {
  if (!img.getAttribute('alt')) bad.push(img.outerHTML.slice(0, 80));
}
for (const b of document.querySelectorAll('button, a')) {
  if (!b.textContent.trim() && !b.getAttribute('aria-label')) bad.push(b.outerHTML.slice(0, 80));
}
if (document.documentElement.lang !== 'en') bad.push('html lang');
if (document.querySelectorAll('h1').length !== 1) bad.push('one h1');
return bad;
"""


def accessible(browser) -> None:
    """Labels, alt text, one heading, language, and 4.5:1 text contrast on the current page."""
    assert browser.execute_script(LABELS_JS) == [], browser.current_url
    assert browser.execute_script(CONTRAST_JS) == [], browser.current_url


def tab_order(browser, presses: int) -> list[str]:
    """What keyboard focus visits, pressing Tab `presses` times from the top of the page."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.get(browser.current_url)  # a fresh load: focus starts at the top
    seen = []
    for _ in range(presses):
        ActionChains(browser).send_keys(Keys.TAB).perform()
        seen.append(browser.execute_script(
            "const e = document.activeElement; return e.id || e.name || e.textContent.trim();"))
    return seen


def log_in(browser, url: str, token: str) -> None:
    browser.delete_all_cookies()
    browser.get(f"{url}/login")
    field = find(browser, "#token")
    field.clear()
    field.send_keys(token)
    find(browser, "#login").click()
    wait_for(lambda: "/login" not in browser.current_url, what="the log-in")


def submit_digest(browser, url: str, **values) -> None:
    browser.get(f"{url}/services/ops/submit/digest")
    for name, value in values.items():
        field = find(browser, f"#p-{name}")
        field.clear()
        field.send_keys(str(value))
    find(browser, "#submit").click()


def job_id_of(browser) -> str:
    """The job a job page shows (waits out the reload the page does itself when the job ends)."""
    return wait_for(lambda: find(browser, "#status").get_attribute("data-job"), what="the job's id")


def screenshot(browser, name: str) -> None:
    """The whole page (the window stretched to its height) into docs/console/, on request."""
    if os.environ.get("PAPERWORKS_CONSOLE_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        size = browser.get_window_size()
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(size["width"], max(600, min(height + 120, 2400)))
        browser.save_screenshot(str(DOCS / name))
        browser.set_window_size(size["width"], size["height"])


def attach(stack, job_id: str, name: str, data: bytes, media_type: str) -> None:
    """An artifact attached to a finished job as a job's put_artifact attaches one."""
    from paperworks.shared.artifacts import ArtifactStore
    from paperworks.shared.config import Settings
    from paperworks.shared.db.engine import Database
    from paperworks.shared.db.jobs import ARTIFACTS, JOB_ARTIFACTS

    sha = ArtifactStore(Settings(state_dir=stack.settings.state_dir).artifacts_dir).put(data)
    with Database(stack.database_url).write() as conn:
        conn.execute(ARTIFACTS.insert().values(sha256=sha, size_bytes=len(data),
                                               created_at=datetime.now(UTC)))
        conn.execute(JOB_ARTIFACTS.insert().values(job_id=job_id, name=name, sha256=sha,
                                                   media_type=media_type, size_bytes=len(data)))


def picture_volume_and_tensor() -> list[tuple[str, bytes, str]]:
    """A 96x64 PNG, a 4x5x6 NIfTI volume (gzipped) and a 3x4 .npy tensor."""
    import gzip

    import nibabel as nib
    import numpy as np
    from PIL import Image

    image = Image.new("RGB", (96, 64))
    image.putdata([((x * 8) % 256, (y * 12) % 256, 128) for y in range(64) for x in range(96)])
    png = io.BytesIO()
    image.save(png, format="PNG")
    volume = nib.Nifti1Image(np.arange(120, dtype=np.float32).reshape(4, 5, 6), np.diag([2.0, 2.0, 3.0, 1.0]))
    tensor = io.BytesIO()
    np.save(tensor, np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    return [("pattern.png", png.getvalue(), "image/png"),
            ("volume.nii.gz", gzip.compress(volume.to_bytes()), "application/gzip"),
            ("weights.npy", tensor.getvalue(), "application/octet-stream")]


def test_log_in_refuses_a_wrong_token_on_its_field_and_works_from_the_keyboard(browser, url):
    from selenium.webdriver.common.keys import Keys

    browser.delete_all_cookies()
    browser.get(f"{url}/services/ops/jobs")
    assert browser.current_url.startswith(f"{url}/login")  # no session: log in first
    accessible(browser)
    order = tab_order(browser, 4)
    assert order == ["Skip to content", "paperworks console", "token", "login"], order

    find(browser, "#token").send_keys("not-a-token", Keys.ENTER)
    wait_for(lambda: find_all(browser, "#token-error"), what="the token error")
    assert "refused" in find(browser, "#token-error").text
    assert find(browser, "#token").get_attribute("aria-invalid") == "true"
    assert not browser.get_cookies()
    accessible(browser)

    field = find(browser, "#token")
    field.send_keys(TOKENS["alice"], Keys.ENTER)  # keyboard only; back to the page asked for
    wait_for(lambda: browser.current_url.endswith("/services/ops/jobs"), what="the job list")
    [cookie] = browser.get_cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    browser.get(url)
    row = find(browser, "table.grid tbody tr")
    assert "ops" in row.text and "up" in row.text and "digest" in row.text
    accessible(browser)


def test_submit_from_the_form_watch_progress_and_see_the_result_and_pictures(browser, url, stack):
    log_in(browser, url, TOKENS["alice"])
    browser.get(f"{url}/services/ops/submit/digest")
    accessible(browser)
    order = tab_order(browser, 12)
    controls = ["p-seed", "p-steps", "p-rounds_per_step", "p-fail_once_at_step", "submit"]
    assert [o for o in order if o in controls] == controls, order  # every control, in order

    submit_digest(browser, url, seed=7, steps=0, rounds_per_step=2000)  # steps >= 1: refused
    error = wait_for(lambda: find_all(browser, "#p-steps-error"), what="the field error")[0]
    assert "greater than or equal to 1" in error.text
    assert find(browser, "#p-steps").get_attribute("aria-invalid") == "true"
    assert "p-steps-error" in find(browser, "#p-steps").get_attribute("aria-describedby")
    assert not find_all(browser, "#p-seed-error")  # only the field the server named
    assert find(browser, "#p-seed").get_attribute("value") == "7"  # what was typed stays
    accessible(browser)

    steps, rounds = 40, 10_000
    submit_digest(browser, url, seed=7, steps=steps, rounds_per_step=rounds)
    wait_for(lambda: "/jobs/ops-" in browser.current_url, what="the job page")
    job_id = job_id_of(browser)
    first_state = find(browser, "#status").get_attribute("data-state")
    assert first_state in ("QUEUED", "RUNNING")  # the page follows the job from here on its own
    wait_for(lambda: find(browser, "#status").get_attribute("data-state") == "SUCCEEDED"
             and find(browser, "#progress").get_attribute("value") == "100", timeout=60,
             what="the progress bar at 100% and the job succeeded")
    assert find(browser, "#percent").text == "100%"
    wait_for(lambda: len(find_all(browser, "#timeline li")) > 2, what="the event timeline")
    kinds = [li.get_attribute("data-type") for li in find_all(browser, "#timeline li")]
    assert "PROGRESS" in kinds and kinds.count("STATE_CHANGED") >= 2
    assert any(f"step {steps}/{steps}" in li.text for li in find_all(browser, "#timeline li"))
    result = find(browser, "#result").text
    assert chain(7, steps, rounds)[-1] in result  # the result table, checked independently
    accessible(browser)

    [link] = [a for a in find_all(browser, ".artifacts a") if a.text == "checkpoints.json"]
    href = link.get_attribute("href")
    body = browser.execute_async_script(
        "const done = arguments[1]; fetch(arguments[0]).then(r => r.text()).then(done);", href)
    assert json.loads(body) == {"seed": 7, "checkpoints": chain(7, steps, rounds)}

    for name, data, media in picture_volume_and_tensor():
        attach(stack, job_id, name, data, media)
    browser.refresh()
    [img] = wait_for(lambda: find_all(browser, "img.artifact-image"), what="the picture")
    wait_for(lambda: browser.execute_script("return arguments[0].complete", img), what="the picture loaded")
    size = browser.execute_script("return [arguments[0].naturalWidth, arguments[0].naturalHeight]", img)
    assert size == [96, 64]  # decoded by the browser: the PNG's own size
    summaries = [ul.text for ul in find_all(browser, ".artifacts .summary")]
    assert any("shape (4, 5, 6), float32, min 0, max 119" in t and "voxel size (2, 2, 3)" in t
               for t in summaries), summaries
    assert any("shape (3, 4), float32, min -1, max 1" in t for t in summaries), summaries
    accessible(browser)
    screenshot(browser, "job.png")

    browser.get(f"{url}/services/ops/jobs")
    assert job_id in find(browser, "#jobs").text
    accessible(browser)
    browser.get(f"{url}/services/ops/jobs?state=FAILED")
    assert job_id not in browser.page_source  # the state filter
    browser.get(f"{url}/services/ops/jobs?state=SUCCEEDED&since=1h&kind=digest")
    assert job_id in find(browser, "#jobs").text


def test_pages_split_the_list_and_tenants_never_see_each_others_jobs(browser, url, stack):
    from paperworks.shared.sdk.client import Client

    with Client(endpoints={n: f"127.0.0.1:{s['port']}" for n, s in stack.state.services.items()},
                token=TOKENS["alice"]) as alice:
        for seed in range(11):
            alice.submit("ops", "digest", seed=seed, steps=1, rounds_per_step=1)
        mine, _ = alice.list("ops", page_size=100)
    log_in(browser, url, TOKENS["alice"])
    browser.get(f"{url}/services/ops/jobs?page_size=10")
    first = [a.text for a in find_all(browser, "#jobs tbody th a")]
    assert len(first) == 10
    browser.get(find(browser, "a[rel=next]").get_attribute("href"))
    second = [a.text for a in find_all(browser, "#jobs tbody th a")]
    assert second and not set(first) & set(second)
    assert first + second == [j.id for j in mine][:len(first) + len(second)]  # newest first, no gaps

    alices = mine[0]
    log_in(browser, url, TOKENS["bob"])
    browser.get(f"{url}/services/ops/jobs?page_size=100")
    assert not set(j.id for j in mine) & {a.text for a in find_all(browser, "#jobs tbody th a")}
    browser.get(f"{url}/jobs/{alices.id}")
    assert find(browser, "h1").text == "Not found"
    browser.get(f"{url}/jobs/{alices.id}/artifacts/{'0' * 64}")
    assert find(browser, "h1").text == "Not found"
    submit_digest(browser, url, seed=99, steps=1, rounds_per_step=1)
    wait_for(lambda: "/jobs/ops-" in browser.current_url, what="bob's job page")
    bobs = job_id_of(browser)
    log_in(browser, url, TOKENS["alice"])
    browser.get(f"{url}/jobs/{bobs}")
    assert find(browser, "h1").text == "Not found"


def test_cancel_from_the_job_page(browser, url):
    log_in(browser, url, TOKENS["alice"])
    submit_digest(browser, url, seed=3, steps=5000, rounds_per_step=100_000)
    wait_for(lambda: find_all(browser, "#cancel"), what="the cancel button")
    find(browser, "#cancel").click()
    # the page follows the job live and reloads once it is over
    wait_for(lambda: find(browser, "#status").get_attribute("data-state") == "CANCELLED",
             timeout=60, what="the job cancelled")
    assert not find_all(browser, "#cancel")
    browser.get(f"{url}/services/ops/jobs?page_size=10")
    assert "cancelled" in find(browser, "#jobs tbody tr").text
    accessible(browser)
    screenshot(browser, "jobs.png")


def test_an_expired_token_sends_back_to_log_in(browser, url):
    from itsdangerous import URLSafeTimedSerializer

    log_in(browser, url, TOKENS["alice"])
    forged = URLSafeTimedSerializer(SECRET, salt="paperworks-console-session").dumps({"token": "revoked"})
    browser.add_cookie({"name": "paperworks_console", "value": forged, "path": "/"})
    browser.get(f"{url}/services/ops/jobs")
    assert browser.current_url.startswith(f"{url}/login")
    assert "refused" in find(browser, "#token-error").text


def test_a_service_that_is_down_shows_as_down(browser, url, stack):
    log_in(browser, url, TOKENS["alice"])
    stack.stop("servers", sig=signal.SIGKILL)  # last test of the module: the stack goes down next
    browser.get(url)
    row = find(browser, "table.grid tbody tr")
    assert "down" in row.text and "UNAVAILABLE" in row.text
    browser.get(f"{url}/services/ops/jobs")
    assert find(browser, "h1").text == "Service ops is down"
    accessible(browser)


def test_forms_follow_the_schema_and_place_the_servers_violations():
    """Without a browser: the generated form's widgets, its type checks, and where the server's
    field violations land (a nested path on its top-level field, an unknown one above the form)."""
    from paperworks.services.ops.spec import DigestParams
    from paperworks.shared.console import forms
    from pydantic import BaseModel, Field

    class Nested(BaseModel):
        steps: int = Field(ge=1)
        mode: str = Field(default="a", pattern="^(a|b)$")
        source: dict
        fast: bool = False

    ops = forms.fields_of(DigestParams.model_json_schema())
    assert [(f.name, f.widget, f.required) for f in ops] == [
        ("seed", "integer", True), ("steps", "integer", True), ("rounds_per_step", "integer", True),
        ("fail_once_at_step", "integer", False)]
    assert ops[1].attrs == {"min": 1, "max": 10_000}
    fields = forms.fields_of(Nested.model_json_schema())
    params, errors, raw = forms.parse(fields, {"steps": "x", "source": "{bad", "fast": "true"})
    assert errors == {"steps": "must be a whole number", "source": "must be JSON"}
    assert params == {"fast": True}  # an empty optional field is left to the server's default
    assert raw["steps"] == "x"  # shown again as typed
    placed, rest = forms.field_errors([("source.path", "outside the data root"), ("steps", "low"),
                                       ("request", "too big")], [f.name for f in fields])
    assert placed == {"source": "path: outside the data root", "steps": "low"}
    assert rest == ["request: too big"]


def test_only_pictures_are_served_inline():
    from paperworks.shared.console import summaries

    assert summaries.image_type("a.png", "") == "image/png"
    assert summaries.image_type("a.bin", "image/gif") == "image/gif"
    assert summaries.image_type("a.svg", "image/svg+xml") is None  # SVG can carry script
    assert summaries.image_type("page.html", "text/html") is None
