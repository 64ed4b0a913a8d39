"""The explorer's speed: start-up, and a knob change to a redrawn view.

Run with ``python benchmarks/bench_explore.py [--repeat N]`` (``make bench`` runs it). Asserts
nothing; prints each figure in ms and as a multiple of a reference measured in the same run:

- start-up: ``inferlab explore --no-browser --port 0`` until it prints its address, and until
  it answers ``/api/catalog``, against ``python -c "import numpy"`` (target: under 3 s);
- a knob change through the JSON API: ``/api/estimate`` with a new batch size each time
  (everything a view draws: two estimates, the op tables, ``explain()``), against one
  ``inferlab.estimate()`` with a new batch in this process (target: under 150 ms);
- in headless Chromium, when the OS's ``chromium`` and ``chromedriver`` and selenium are
  installed: from changing the batch knob to the page having redrawn every chart (the
  page's own ``performance.now()`` timing).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from urllib.request import urlopen

TARGET_STARTUP_S, TARGET_REDRAW_S = 3.0, 0.150


def _fresh(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *argv], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def startup(repeat: int) -> tuple[float, float]:
    """Median seconds until ``inferlab explore`` prints its URL, and until it answers."""
    printed, answered = [], []
    code = "from inferlab.cli.main import main; raise SystemExit(main())"
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", code, "explore", "--no-browser", "--port", "0"],
                                stdout=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            printed.append(time.perf_counter() - start)
            url = line.split(" at ", 1)[1].split()[0]
            with urlopen(url + "api/catalog", timeout=30) as r:
                r.read()
            answered.append(time.perf_counter() - start)
        finally:
            proc.terminate()
            proc.wait()
    return statistics.median(printed), statistics.median(answered)


def api_redraw(repeat: int) -> tuple[float, float]:
    """Median seconds of ``/api/estimate`` with a new batch, and of one ``estimate()`` with one."""
    import inferlab
    from inferlab.explore.server import start

    server = start(0)
    try:
        with urlopen(server.url + "api/estimate", timeout=60) as r:  # warm: specs, memos
            r.read()
        api, ref = [], []
        for i in range(repeat):
            batch = 3 + i  # a batch not seen before: nothing comes from a memo
            start = time.perf_counter()
            with urlopen(server.url + f"api/estimate?batch={batch}", timeout=60) as r:
                r.read()
            api.append(time.perf_counter() - start)
            start = time.perf_counter()
            inferlab.estimate("llama-3.1-8b", "h100-sxm", engine="vllm", batch_size=100 + batch, isl=1024, osl=256)
            ref.append(time.perf_counter() - start)
        return statistics.median(api), statistics.median(ref)
    finally:
        server.shutdown()
        server.server_close()


def browser_redraw(repeat: int) -> float | None:
    """Median seconds from a batch change to every chart redrawn, in headless Chromium."""
    driver_path, chromium = shutil.which("chromedriver"), shutil.which("chromium")
    try:
        from selenium import webdriver
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait
    except ImportError:
        return None
    if not (driver_path and chromium):
        return None
    from inferlab.explore.server import start

    server = start(0)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver_path), options=options)
    try:
        driver.get(server.url)
        WebDriverWait(driver, 60).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-updates"))
        times = []
        for i in range(repeat):
            updates = int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-updates"))
            # the page times itself: from the new value to the last chart drawn (refresh() is what
            # a knob's event handler calls, without the typing debounce)
            driver.execute_script("document.getElementById('a-batch').value = arguments[0];"
                                  "window.__t0 = performance.now(); window.__t1 = undefined;"
                                  "refresh().then(() => { window.__t1 = performance.now(); });", 5 + i)
            WebDriverWait(driver, 60).until(
                lambda d: int(d.find_element(By.TAG_NAME, "body").get_attribute("data-updates")) > updates
                and d.execute_script("return window.__t1 !== undefined && window.__t1 > window.__t0"))
            times.append(driver.execute_script("return (window.__t1 - window.__t0) / 1000;"))
        return statistics.median(times)
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median)")
    repeat = parser.parse_args().repeat
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    reference = statistics.median(_fresh(["-c", "import numpy"]) for _ in range(repeat))
    printed, answered = startup(repeat)
    print(f"reference: python -c 'import numpy'        {reference * 1e3:7.1f} ms")
    print(f"inferlab explore: address printed          {printed * 1e3:7.1f} ms  {printed / reference:5.1f}x")
    print(f"inferlab explore: answers /api/catalog     {answered * 1e3:7.1f} ms  {answered / reference:5.1f}x"
          f"  (target {TARGET_STARTUP_S:g} s: {'met' if answered < TARGET_STARTUP_S else 'MISSED'})")
    api, ref = api_redraw(repeat * 4)
    print(f"reference: one estimate() with a new batch  {ref * 1e3:7.1f} ms")
    print(f"/api/estimate with a new batch             {api * 1e3:7.1f} ms  {api / ref:5.1f}x"
          f"  (target {TARGET_REDRAW_S * 1e3:g} ms: {'met' if api < TARGET_REDRAW_S else 'MISSED'})")
    redraw = browser_redraw(repeat * 2)
    if redraw is None:
        print("browser redraw: skipped (needs selenium and the OS's chromium and chromedriver)")
    else:
        print(f"knob change to charts redrawn (Chromium)   {redraw * 1e3:7.1f} ms  {redraw / ref:5.1f}x"
              f"  (target {TARGET_REDRAW_S * 1e3:g} ms: {'met' if redraw < TARGET_REDRAW_S else 'MISSED'})")


if __name__ == "__main__":
    main()
