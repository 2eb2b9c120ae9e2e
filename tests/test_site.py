"""`scaleout site build` (issue 36): term links, the cache, the answer check, bad input, and the built site
opened in a headless Chromium from file:// (part menu, search, formula, figure, glossary link)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat
import pytest

from chromium import headless_chromium, needs_chromium
from scaleoutai.cli import main
from scaleoutai.errors import UserError
from scaleoutai.notebooks import site
from scaleoutai.notebooks.site_pages import link_terms, term_names
from scaleoutai.notebooks.glossary import Term
from scaleoutai.notebooks.solutions import all_secret_lines

ROOT = Path(__file__).resolve().parents[1]
TERMS = [Term("All-reduce", "A collective that leaves the sum on every rank of the group.", 4, ("allreduce",)),
         Term("Ring all-reduce", "An all-reduce in 2(K-1) steps around a ring of ranks.", 4),
         Term("Shard", "One of the K parts that data or a model is split into.", 1)]


def test_the_first_mention_of_each_term_links_and_the_longest_name_wins():
    done: set[str] = set()
    text = link_terms("A ring all-reduce sums shards; an all-reduce again; shards.", term_names(TERMS), done)
    assert text == ("A {term}`ring all-reduce <Ring all-reduce>` sums {term}`shards <Shard>`; "
                    "an {term}`all-reduce <All-reduce>` again; shards.")
    assert done == {"All-reduce", "Ring all-reduce", "Shard"}
    assert link_terms("all-reduce and shard", term_names(TERMS), done) == "all-reduce and shard"  # once a chapter


@pytest.mark.parametrize("text", ["`all-reduce` in code", "$\\text{all-reduce}$", "[all-reduce](x.md)",
                                  "## All-reduce heading", "```\nall-reduce\n```", "<b title='all-reduce'>",
                                  "an allreducer", "pre-all-reduce"])
def test_terms_in_code_math_links_headings_html_or_inside_words_stay_as_they_are(text):
    assert link_terms(text, term_names(TERMS), set()) == text


def test_the_cache_key_follows_the_chapter_folder_the_library_and_the_size(tmp_path):
    chapter = tmp_path / "chapters" / "01-x"
    chapter.mkdir(parents=True)
    (chapter / "01-x.py").write_text("# %%\nx = 1\n")
    key = site.cache_key(chapter / "01-x.py", True, "lib1")
    assert key == site.cache_key(chapter / "01-x.py", True, "lib1")
    assert len({key, site.cache_key(chapter / "01-x.py", False, "lib1"), site.cache_key(chapter / "01-x.py", True, "lib2")}) == 3
    (chapter / "_helper.py").write_text("Y = 2\n")  # a helper module beside the source counts too
    assert site.cache_key(chapter / "01-x.py", True, "lib1") != key


def test_a_cached_chapter_is_reused_and_an_edited_one_runs_again(tmp_path):
    chapter = tmp_path / "chapters" / "01-x"
    chapter.mkdir(parents=True)
    source = chapter / "01-x.py"
    source.write_text('# %% [markdown]\n# # Chapter 1. X\n\n# %% tags=["parameters"]\nN = 3  # smoke: 2\n\n# %%\nprint(N * 7)\n')
    cache = tmp_path / "cache"
    first = site.execute_chapters([source], cache, True, 120, progress=False)
    assert [r.status for r in first] == ["ok"]
    nb = nbformat.read(first[0].output, as_version=4)
    assert "14" in json.dumps(nb.cells[-1].outputs)  # the smoke size ran
    assert [r.status for r in site.execute_chapters([source], cache, True, 120, progress=False)] == ["cached"]
    source.write_text(source.read_text().replace("N * 7", "N * 8"))
    again = site.execute_chapters([source], cache, True, 120, progress=False)
    assert [r.status for r in again] == ["ok"] and again[0].output != first[0].output


def test_a_chapter_that_failed_is_not_reused_and_runs_again(tmp_path):
    chapter = tmp_path / "chapters" / "01-x"
    chapter.mkdir(parents=True)
    source = chapter / "01-x.py"
    flag = tmp_path / "broken"
    flag.write_text("")
    source.write_text('# %% [markdown]\n# # Chapter 1. X\n\n# %% tags=["parameters"]\nN = 3  # smoke: 2\n\n# %%\n'
                      f'import os\nassert not os.path.exists({str(flag)!r}), "a start-up that failed"\n')
    cache = tmp_path / "cache"
    first = site.execute_chapters([source], cache, True, 120, progress=False)
    assert [r.status for r in first] == ["failed"] and first[0].output.name.endswith(".failed.ipynb")
    flag.unlink()  # the same source, the same library: only the outcome differs
    assert [r.status for r in site.execute_chapters([source], cache, True, 120, progress=False)] == ["ok"]


def test_a_page_holding_a_line_of_the_solutions_manual_is_refused(tmp_path):
    line = sorted(all_secret_lines(ROOT), key=len)[-1]
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "x.md").write_text(f"# x\n\n{line}\n")
    with pytest.raises(UserError, match="refusing to build the site: chapters/x.md contains a solution from solutions/"):
        site.check_no_answers(tmp_path, ROOT)
    (tmp_path / "chapters" / "x.md").write_text("# x\n\nnothing secret\n")
    site.check_no_answers(tmp_path, ROOT)


@pytest.mark.parametrize("argv, message", [
    (["--chapters", "no-such-chapter"], "no notebook matches 'no-such-chapter'"),
    (["--path", "no-such-path"], "no-such-path"),
])
def test_bad_site_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    assert main(["site", "build", "--out", str(tmp_path / "site"), "--cache", str(tmp_path / "c"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scaleout: error:") and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "site").exists()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Chapter 1 and Appendix C at smoke size, with every lab statement, path, glossary and notation page."""
    tmp = tmp_path_factory.mktemp("site")
    start = time.perf_counter()
    out = site.build_site(tmp / "site", smoke=True, patterns=["01-", "appendix-c"], cache=tmp / "cache", progress=False)
    print(f"site of 2 chapters built in {time.perf_counter() - start:.1f} s")
    return out


def test_the_site_has_every_page_and_no_answer(built):
    pages = {p.relative_to(built).as_posix() for p in built.rglob("*.html")}
    assert {"index.html", "glossary.html", "notation.html", "search.html", "chapters/01-why-scale-out.html",
            "chapters/appendix-c-notation-glossary.html", "paths/distributed-ml.html",
            "labs/lab25-sharded-topk-merge.html"} <= pages
    assert len([p for p in pages if p.startswith("labs/")]) == len(list((ROOT / "labs").glob("lab*/")))
    lab = (built / "labs" / "lab25-sharded-topk-merge.html").read_text()
    assert "NotImplementedError" in lab and "BEGIN SOLUTION" not in lab
    chapter = (built / "chapters" / "01-why-scale-out.html").read_text()
    assert 'href="../glossary.html#term-' in chapter and 'class="xref download' in chapter
    assert "lab/tree/chapters/01-why-scale-out/01-why-scale-out.ipynb" in chapter
    assert list((built / "_downloads").rglob("01-why-scale-out.ipynb"))
    assert (built / "_static" / "mathjax" / "MathJax.js").is_file()
    assert "https://cdn" not in chapter and "googleapis" not in chapter  # nothing fetched when viewed


@needs_chromium
def test_a_reader_navigates_searches_and_sees_math_figures_and_glossary_links_offline(built, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with headless_chromium(tmp_path / "profile") as d:
        wait = WebDriverWait(d, 60)
        d.get((built / "index.html").as_uri())
        menu = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "nav.bd-links"))
        assert "Part I. Foundations" in menu.text and "Course paths" in menu.text
        menu.find_element(By.PARTIAL_LINK_TEXT, "Chapter 1.").click()
        wait.until(lambda d: "Chapter 1." in d.title)
        # a formula typeset by the bundled MathJax, and a figure from an executed cell
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "span.math .MathJax"))
        assert d.find_elements(By.CSS_SELECTOR, ".cell_output img")
        term = d.find_element(By.CSS_SELECTOR, "a[href*='glossary.html#term-']")
        anchor = term.get_attribute("href").split("#")[1]
        d.execute_script("arguments[0].click();", term)
        wait.until(lambda d: d.current_url.endswith("glossary.html#" + anchor))
        assert d.find_element(By.ID, anchor).text
        d.get((built / "search.html").as_uri() + "?q=all-reduce")
        hits = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#search-results li a"))
        assert any("glossary" in h.get_attribute("href") or "chapters/" in h.get_attribute("href") for h in hits)
        # no file the site needs is missing (from file:// the search may not fetch page summaries: not an error)
        missing = [e["message"] for e in d.get_log("browser") if "ERR_FILE_NOT_FOUND" in e["message"]]
        assert not missing, missing
