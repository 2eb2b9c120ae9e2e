"""`scaleout slides`: chapters as reveal.js decks (nbconvert's SlidesExporter), opened offline in headless Chromium."""
from __future__ import annotations

import io
import re
from html import unescape
from pathlib import Path

import nbformat
import pytest

from chromium import headless_chromium, needs_chromium
from scaleoutai.cli import main
from scaleoutai.errors import NotebookError
from scaleoutai.notebooks import find_repo_root, find_sources, read_notebook, run
from scaleoutai.notebooks.slides import count_slides, mark_slides, render_deck

REPO = find_repo_root(Path(__file__).parent)
H2 = re.compile(r"^## \S", re.M)

TINY = '''# %% [markdown]
# # Chapter 99. A tiny chapter
#
# Intro prose for the speaker.

# %% tags=["parameters"]
N = 10  # smoke: 2

# %% [markdown]
# ## 1. Motivation
#
# Why this matters, in prose, with the formula of the section:
#
# $$S_p = \\frac{T_1}{T_p}$$

# %%
from scaleoutai.notebooks import show
from scaleoutai.collectives import ring_allreduce
show(ring_allreduce)

# %%
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])

# %% [markdown]
# Prose between cells.
#
# ## 2. Overrides

# %% tags=["slide"]
print("a key result")

# %% tags=["slide-code"]
total = sum(range(N))

# %% [markdown] slideshow={"slide_type": "skip"}
# An aside nobody presents.

# %% [markdown] tags=["slide"]
# | K | time |
# |---|------|
# | 1 | 2.0  |

# %%
x = 1  # plain code: skipped
plt.show()  # plt.show is not the library's show
'''


def png_output() -> nbformat.NotebookNode:
    """A real PNG figure as a display_data output, as an executed figure cell holds one."""
    import base64

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 3, 2])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(buf.getvalue()).decode()})


def tiny_notebook(tmp_path: Path) -> Path:
    import jupytext

    nb = jupytext.reads(TINY, fmt="py:percent")
    nb.cells[4].outputs = [png_output()]  # the figure cell, as if executed
    path = tmp_path / "99-tiny.ipynb"
    nbformat.write(nb, str(path))
    return path


def kinds(nb) -> list[tuple[str, str]]:
    return [(c.metadata["slideshow"]["slide_type"], c.source.splitlines()[0] if c.source else "") for c in nb.cells]


def test_headings_are_slides_show_and_figure_cells_subslides_and_prose_notes(tmp_path):
    nb = mark_slides(nbformat.read(str(tiny_notebook(tmp_path)), as_version=4))
    got = kinds(nb)
    assert got[:6] == [("slide", "# Chapter 99. A tiny chapter"), ("notes", "Intro prose for the speaker."),
                       ("skip", "N = 10  # smoke: 2"), ("slide", "## 1. Motivation"),
                       ("notes", "Why this matters, in prose, with the formula of the section:"),
                       ("subslide", "from scaleoutai.notebooks import show")]
    assert nb.cells[3].source == "## 1. Motivation\n\n$$S_p = \\frac{T_1}{T_p}$$"  # its formula on the slide
    assert got[6] == ("subslide", "import matplotlib.pyplot as plt")  # the figure
    assert got[7:9] == [("notes", "Prose between cells."), ("slide", "## 2. Overrides")]  # cut at the heading
    hidden = [c.metadata.get("transient", {}).get("remove_source", False) for c in nb.cells if c.cell_type == "code"]
    assert hidden == [True, True, True, True, False, True]  # only the slide-code cell shows its code
    assert count_slides(nb) == 3


def test_chapter_metadata_overrides_the_defaults(tmp_path):
    nb = mark_slides(nbformat.read(str(tiny_notebook(tmp_path)), as_version=4))
    got = kinds(nb)
    assert got[9:] == [("subslide", 'print("a key result")'), ("subslide", "total = sum(range(N))"),
                       ("skip", "An aside nobody presents."), ("subslide", "| K | time |"),
                       ("skip", "x = 1  # plain code: skipped")]


def test_render_deck_writes_the_deck_and_its_offline_reveal_js_atomically(tmp_path):
    out = tmp_path / "slides"
    deck = render_deck(tiny_notebook(tmp_path), out)
    assert deck == out / "99-tiny.slides.html"
    html = deck.read_text()
    assert html.count('<aside class="notes">') == 3 and "Intro prose for the speaker." in html
    assert "data:image/png;base64," in html  # the figure, inline
    text = unescape(re.sub(r"<[^>]+>", "", html))
    assert "total = sum(range(N))" in text and 'print("a key result")' not in text  # only slide-code shows code
    loads = re.findall(r'(?:src|href)="((?!data:|#)[^"]*)"', html)
    assert sorted(loads) == ["reveal.js/dist/reveal.css", "reveal.js/dist/reveal.js", "reveal.js/dist/theme/white.css",
                             "reveal.js/plugin/math/math.js", "reveal.js/plugin/notes/notes.js"]
    assert all((out / p).is_file() for p in loads)  # nothing from a CDN: the deck works from file://
    assert '"reveal.js/mathjax/MathJax.js"' in html and (out / "reveal.js/mathjax/config/TeX-AMS-MML_HTMLorMML-full.js").is_file()
    assert not (out / "reveal.js/mathjax/extensions/a11y").exists()  # MathJax without its screen-reader extras
    slide = html.split("1. Motivation", 1)[1].split("</section>", 1)[0]
    assert "S_p = \\frac{T_1}{T_p}" in slide.split('<aside class="notes">')[0]  # the formula is on the slide
    assert sorted(p.name for p in out.iterdir()) == ["99-tiny.slides.html", "reveal.js"]  # no temp left
    again = render_deck(tiny_notebook(tmp_path), out, name="99-again")  # a second deck shares reveal.js
    assert again.read_text().count("<section") == html.count("<section")
    assert sorted(p.name for p in out.iterdir()) == ["99-again.slides.html", "99-tiny.slides.html", "reveal.js"]


def test_a_notebook_without_slides_is_a_clear_error_and_writes_nothing(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_markdown_cell("prose")])
    path = tmp_path / "empty.ipynb"
    nbformat.write(nb, str(path))
    with pytest.raises(NotebookError, match="the deck has no slides"):
        render_deck(path, tmp_path / "slides")
    assert not (tmp_path / "slides").exists()


def test_unknown_chapter_and_missing_executed_copy_are_one_line_errors(capsys, tmp_path):
    assert main(["slides", "no-such-chapter", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scaleout: error: no notebook matches 'no-such-chapter'") and "\n" not in err
    assert main(["slides", "01-why", "--executed", str(tmp_path / "nope.ipynb"), "--out", str(tmp_path)]) == 2
    assert "--executed" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


CHAPTERS = find_sources(REPO)


def count_headings(nb) -> int:
    return sum(len(H2.findall(c.source)) for c in nb.cells if c.cell_type == "markdown")


def test_every_chapter_gives_a_deck_with_a_slide_per_heading():
    """The structure of every chapter's deck (from its source; the smoke test renders each chapter's papermill copy)."""
    for source in CHAPTERS:
        nb = read_notebook(source)
        assert count_slides(mark_slides(nb)) == 1 + count_headings(nb), source.stem


# ---------------------------------------------------------------- a real deck in a real browser


def non_blank(png: Path) -> float:
    """The pixel standard deviation of a screenshot: about 0 for a blank page."""
    from PIL import Image, ImageStat

    return max(ImageStat.Stat(Image.open(png).convert("L")).stddev)


@pytest.mark.timeout(240)
@needs_chromium
def test_a_part_one_deck_opens_offline_in_headless_chromium(tmp_path, capsys):
    from selenium.webdriver.support.ui import WebDriverWait

    [source] = find_sources(REPO, "01-why-scale-out")
    [record] = run([source], smoke=True, timeout=180, out_dir=tmp_path / "executed", progress=False)
    assert record.status == "ok", record.error
    assert main(["slides", "01-why-scale-out", "--executed", str(record.output), "--out", str(tmp_path / "d")]) == 0
    deck = Path(capsys.readouterr().out.strip())
    assert deck == tmp_path / "d" / "01-why-scale-out.slides.html"
    headings = count_headings(read_notebook(source))

    with headless_chromium(tmp_path / "chromium-profile", window=(1280, 800), page_timeout=60) as driver:
        driver.get(deck.as_uri())
        WebDriverWait(driver, 60, poll_frequency=0.25).until(
            lambda d: d.execute_script("return typeof Reveal !== 'undefined' && Reveal.isReady()"))
        assert driver.execute_script("return Reveal.getHorizontalSlides().length") == 1 + headings
        title = driver.execute_script("return Reveal.getCurrentSlide().textContent")
        assert "Chapter 1. Why scale out" in title
        driver.save_screenshot(str(tmp_path / "title.png"))
        # the first sub-slide holding a figure, and the figure decoded
        h, v = driver.execute_script("""
            const img = document.querySelector('.reveal .slides img[src^="data:image/png"]');
            const at = Reveal.getIndices(img.closest('section')); return [at.h, at.v];""")
        driver.execute_script(f"Reveal.slide({h}, {v})")
        WebDriverWait(driver, 20, poll_frequency=0.25).until(lambda d: d.execute_script(
            "const i = Reveal.getCurrentSlide().querySelector('img'); return i && i.complete && i.naturalWidth > 0"))
        driver.save_screenshot(str(tmp_path / "figure.png"))
        # the section's display formula, typeset offline by MathJax from the copy beside the deck
        WebDriverWait(driver, 60, poll_frequency=0.25).until(lambda d: d.execute_script(
            "return document.querySelectorAll('.reveal .slides .MathJax_Display, .reveal .slides .MathJax').length > 0"))
        loaded = driver.execute_script(
            "return [...document.querySelectorAll('script[src], link[href]')].map(e => e.src || e.href)")
        font = driver.execute_script("return getComputedStyle(document.querySelector('.reveal')).fontFamily")
    assert v > 0  # a figure is a sub-slide under its section
    assert len(loaded) >= 5 and all(url.startswith("file://") for url in loaded), loaded  # no network
    assert "Source Sans Pro" in font  # the reveal.js theme loaded from the copy beside the deck
    assert non_blank(tmp_path / "title.png") > 5 and non_blank(tmp_path / "figure.png") > 5
