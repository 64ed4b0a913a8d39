"""The explorer in a real browser: headless Chromium driven by Selenium with the OS chromedriver.

Load the page, turn three knobs, and check that the numbers it shows are those of
:func:`inferlab.estimate` for the same inputs, that the charts were drawn again, that the URL
carries the configuration, and that the console stayed clean. A screenshot is kept as an
artifact (``$INFERLAB_TEST_ARTIFACTS``, else the test's temporary directory).

Skipped, with the reason, where selenium or the OS's chromium and chromedriver are missing
(CI installs them: ``.ci/run``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import inferlab
from inferlab.serving.curve import load_sweep

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra)")

CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not (os.path.exists(CHROMEDRIVER) and os.path.exists(CHROMIUM)):
    pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
                allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CHARTS = ("chart-roofline", "chart-memory", "chart-ttft", "chart-tpot", "chart-throughput")


@pytest.fixture(scope="module")
def server():
    from inferlab.explore.server import start

    srv = start(0)
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1500,1250"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _artifacts(tmp_path: Path) -> Path:
    path = Path(os.environ.get("INFERLAB_TEST_ARTIFACTS") or tmp_path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _value(driver, cell_id: str) -> float | None:
    raw = driver.find_element(By.ID, cell_id).get_attribute("data-value")
    return float(raw) if raw else None


def _wait_for(driver, cell_id: str, expected: float, timeout: float = 20.0) -> None:
    def close(d):
        v = _value(d, cell_id)
        return v is not None and abs(v - expected) <= 1e-9 * abs(expected)

    WebDriverWait(driver, timeout).until(close, message=f"{cell_id} never showed {expected!r}")


def _renders(driver) -> dict[str, int]:
    return {c: int(driver.find_element(By.ID, c).get_attribute("data-renders") or 0) for c in CHARTS}


def _set_number(driver, element_id: str, value: int) -> None:
    box = driver.find_element(By.ID, element_id)
    box.clear()
    box.send_keys(str(value))


def _severe(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def test_three_knobs_move_the_numbers_to_the_library_s(server, browser, tmp_path):
    browser.get(server.url)
    first = inferlab.estimate("llama-3.1-8b", "h100-sxm", engine="vllm", batch_size=8, isl=1024, osl=256)
    _wait_for(browser, "a-ttft", float(first.ttft_s))
    before = _renders(browser)
    curve_before = browser.find_element(By.CSS_SELECTOR, "#chart-tpot polyline").get_attribute("points")

    Select(browser.find_element(By.ID, "a-gpu")).select_by_value("h200-sxm")
    Select(browser.find_element(By.ID, "a-kv")).select_by_value("fp8")
    _set_number(browser, "a-batch", 64)

    est = inferlab.estimate("llama-3.1-8b", "h200-sxm", engine="vllm", batch_size=64, isl=1024, osl=256,
                            precision={"kv_cache": "fp8"})
    _wait_for(browser, "a-ttft", float(est.ttft_s))
    _wait_for(browser, "a-tpot", float(est.tpot_s))
    shown = {key: _value(browser, f"a-{key}") for key in ("throughput", "memory", "max-seqs", "usd-out")}
    assert shown["throughput"] == pytest.approx(float(est.output_tokens_per_s), rel=1e-12)
    assert shown["memory"] == pytest.approx(float(est.memory.used), rel=1e-12)
    assert shown["max-seqs"] == pytest.approx(float(est.memory.max_sequences), rel=1e-12)
    assert shown["usd-out"] == pytest.approx(float(est.cost.usd_per_million_output), rel=1e-12)
    assert browser.find_element(By.ID, "a-ttft").text == f"{float(est.ttft_s) * 1e3:.1f}"
    assert browser.find_element(By.ID, "a-tpot").text == f"{float(est.tpot_s) * 1e3:.2f}"
    assert est.explain().splitlines()[0] in browser.find_element(By.ID, "explain-a").text

    after = _renders(browser)
    assert all(after[c] > before[c] for c in CHARTS), (before, after)
    assert browser.find_element(By.CSS_SELECTOR, "#chart-tpot polyline").get_attribute("points") != curve_before
    assert len(browser.find_elements(By.CSS_SELECTOR, "#chart-roofline circle")) >= 10

    for part in ("gpu=h200-sxm", "kv=fp8", "batch=64"):
        assert part in browser.current_url
    browser.save_screenshot(str(_artifacts(tmp_path) / "explorer.png"))
    assert _severe(browser) == []


def test_a_shared_url_reopens_the_configuration_and_compares_two(server, browser):
    browser.get(server.url + "?model=qwen3-8b&tp=2&compare=1&b_gpu=l40s&b_tp=2")
    a = inferlab.estimate("qwen3-8b", "h100-sxm", tp=2, engine="vllm", batch_size=8, isl=1024, osl=256)
    b = inferlab.estimate("qwen3-8b", "l40s", tp=2, engine="vllm", batch_size=8, isl=1024, osl=256)
    _wait_for(browser, "a-tpot", float(a.tpot_s))
    _wait_for(browser, "b-tpot", float(b.tpot_s))
    assert browser.find_element(By.ID, "b-model").get_attribute("value") == "qwen3-8b"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#chart-ttft polyline")) == 2
    assert _severe(browser) == []


def test_a_bad_knob_shows_one_line_and_no_console_error(server, browser):
    browser.get(server.url + "?model=llama-3.1-70b")
    WebDriverWait(browser, 20).until(lambda d: d.find_element(By.ID, "error").text)
    assert "does not fit" in browser.find_element(By.ID, "error").text
    assert _severe(browser) == []


def test_the_serving_tab_runs_a_sweep_with_progress(server, browser):
    browser.get(server.url + "?tab=serve&loads=1,4&requests=40")
    browser.find_element(By.ID, "serve-run").click()
    WebDriverWait(browser, 60).until(lambda d: d.find_element(By.ID, "serve-text").text)
    progress = browser.find_element(By.ID, "serve-progress")
    assert progress.get_attribute("value") == progress.get_attribute("max") == "2"
    curve = load_sweep("llama-3.1-8b", "h100-sxm", concurrencies=[1, 4], engine="vllm",
                       isl=1024, osl=256, num_requests=40, ttft_slo_s=1.0, tpot_slo_s=0.05)
    shown = browser.find_element(By.ID, "serve-text").text
    assert [line.rstrip() for line in shown.splitlines()] == [line.rstrip() for line in str(curve).splitlines()]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#chart-curve polyline")) == 2
    assert _severe(browser) == []
