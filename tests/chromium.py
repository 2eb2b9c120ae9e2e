"""Debian's headless Chromium driven by Selenium, for the tests that look at the course in a real browser
(`scaleout lab`, slide decks). environments/local/install-ci-browser.sh installs chromium and its driver."""
from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver "
                                    "(environments/local/install-ci-browser.sh installs them)")


@contextmanager
def headless_chromium(profile: Path, window: tuple[int, int] = (1400, 1000), page_timeout: float = 90) -> Iterator[Any]:
    """A fresh headless Chromium with its own profile folder, quit on the way out whatever happens."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--window-size={window[0]},{window[1]}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(page_timeout)
    try:
        yield driver
    finally:
        driver.quit()
