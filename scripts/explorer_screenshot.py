"""Regenerate ``docs/explorer.png``, the README's screenshot of the explorer.

    python scripts/explorer_screenshot.py [--out docs/explorer.png]

Starts the explorer on 127.0.0.1, opens it in headless Chromium (the OS's ``chromium`` and
``chromedriver``, driven by selenium from the ``test`` extra) on the configuration in
:data:`QUERY` (Llama-3.1-70B in FP8 on four H100s against four H200s), waits until both
configurations are drawn, and saves the window.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

#: The page's URL query: configuration A, and B (``b_``) where it differs.
QUERY = ("model=llama-3.1-70b&tp=4&weights=fp8&activations=fp8&kv=fp8&batch=32&isl=2048&osl=512&engine=trtllm"
         "&compare=1&b_gpu=h200-sxm")


def main() -> None:
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from inferlab.explore.server import start

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/explorer.png", help="where to write the PNG")
    out = Path(parser.parse_args().out)
    driver_path, chromium = shutil.which("chromedriver"), shutil.which("chromium")
    if not (driver_path and chromium):
        raise SystemExit("needs chromium and chromedriver: apt-get install chromium chromium-driver")
    server = start(0)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1500,1300", "--hide-scrollbars"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver_path), options=options)
    try:
        driver.get(server.url + "?" + QUERY)
        WebDriverWait(driver, 60).until(lambda d: d.find_element(By.ID, "b-ttft").get_attribute("data-value"))
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))
        print(f"wrote {out}")
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
