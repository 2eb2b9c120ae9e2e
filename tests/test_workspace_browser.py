"""A student's first look, in a real headless browser: `scaleout lab` lands on the course index, and a
chapter renders with its markdown and code cells (Debian's Chromium driven by Selenium)."""
from __future__ import annotations

from pathlib import Path

import pytest

from chromium import headless_chromium, needs_chromium
from lab_server import TOKEN, lab_server
from scaleoutai.notebooks.sources import find_repo_root

REPO = find_repo_root(Path(__file__).parent)
pytestmark = [pytest.mark.timeout(240), needs_chromium]


@pytest.fixture
def browser(tmp_path):
    with headless_chromium(tmp_path / "chromium-profile") as driver:
        yield driver


def _wait_for(driver, css: str, text: str | None = None, timeout: float = 90):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def found(d):
        hits = d.find_elements(By.CSS_SELECTOR, css)
        return [h for h in hits if text is None or text in h.text] or False

    return WebDriverWait(driver, timeout, poll_frequency=0.5).until(found)


def test_the_lab_lands_on_the_course_index_and_a_chapter_renders(tmp_path, browser):
    with lab_server(REPO, tmp_path, tmp_path / "workspace") as (base, _):
        browser.get(f"{base}/?token={TOKEN}")  # the server's own landing page
        index = _wait_for(browser, ".jp-MarkdownCell", "Scaling Out AI: the course")
        assert browser.current_url.split("?")[0].endswith("/lab/tree/index.ipynb")
        text = index[0].text  # the index names chapters and labs by their titles, not their folder slugs
        assert "Part I: Foundations" in text and "Lab 4: " in text and "lab04-ring-allreduce" not in text
        browser.save_screenshot(str(tmp_path / "index.png"))
        chapter = "chapters/04-communication-primitives/04-communication-primitives.ipynb"
        browser.get(f"{base}/lab/tree/{chapter}?token={TOKEN}")
        _wait_for(browser, ".jp-CodeCell")
        markdown = _wait_for(browser, ".jp-MarkdownCell")
        assert any("Communication primitives" in m.text or "communication" in m.text.lower() for m in markdown)
        browser.save_screenshot(str(tmp_path / "chapter.png"))
        # Opening changes nothing: once the kernel has started and reported its language_info, the
        # untouched copy is not marked modified (closing it must not ask to save)
        _wait_for(browser, ".jp-StatusBar-Widget", "Idle")
        import time

        time.sleep(2)
        dirty = browser.find_elements("css selector", ".lm-TabBar-tab.jp-mod-dirty")
        assert not dirty, f"an untouched chapter opened as modified: {[d.text for d in dirty]}"
        # and no pop-up asks to fetch news from a website (the course runs offline)
        assert "Jupyter news" not in browser.find_element("css selector", "body").text
