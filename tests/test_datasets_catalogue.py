"""Appendix D: chapters load data only through scaleoutai.datasets, the catalogue matches the chapters both
ways, and every loader is a pure function of its seed that returns the sizes the catalogue states."""
from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import re
from pathlib import Path

import pytest

from scaleoutai import datasets
from scaleoutai.datasets import audit, catalogue
from scaleoutai.notebooks.sources import is_notebook_source

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for p in sorted(ROOT.glob("chapters/*/*.py")) if is_notebook_source(p, ROOT)]
USES = [(d, u) for d in catalogue.CATALOGUE for u in d.uses]


def test_every_chapter_loads_its_data_only_through_the_catalogued_loaders_and_the_catalogue_matches_both_ways():
    assert len(SOURCES) >= 39
    assert audit.check_catalogue(SOURCES) == []


def test_every_public_name_of_datasets_is_a_catalogued_loader_or_a_named_helper():
    loaders = {d.loader for d in catalogue.CATALOGUE}
    assert len(loaders) == len(catalogue.CATALOGUE), "one entry per loader"
    assert set(datasets.__all__) == loaders | catalogue.HELPERS
    assert set(catalogue.LOADERS) == loaders


@pytest.mark.parametrize("entry", catalogue.CATALOGUE, ids=lambda d: d.loader)
def test_every_loader_is_a_pure_function_of_its_seed(entry):
    assert entry.uses, f"{entry.loader} is catalogued but no chapter uses it"
    a, b = catalogue.load(entry.loader), catalogue.load(entry.loader)
    c = catalogue.load(entry.loader, seed=12345) if entry.seed else b
    assert catalogue.digest(a) == catalogue.digest(b)
    if entry.seed:
        assert catalogue.digest(a) != catalogue.digest(c)
        assert entry.seed in inspect.signature(catalogue.LOADERS[entry.loader]).parameters


@pytest.mark.parametrize("entry, use", USES, ids=[f"{d.loader}-ch{u.chapter}" for d, u in USES])
def test_every_loader_returns_the_sizes_the_catalogue_states_at_smoke_and_full_size(entry, use):
    for size, shape in (("smoke", use.smoke_shape), ("full", use.full_shape)):
        rows, cols, nbytes = catalogue.measure(catalogue.LOADERS[entry.loader](**getattr(use, size)))
        assert (rows, cols) == shape, (size, rows, cols)
        assert nbytes >= rows * cols > 0


def test_each_generator_is_defined_once_in_datasets_and_gone_from_the_part_it_left():
    for name in catalogue.LOADERS:
        assert inspect.getmodule(getattr(datasets, name)).__name__.startswith("scaleoutai.datasets."), name
    for (module, old), new in catalogue.MOVED.items():
        part = importlib.import_module(module)
        # gone, or a plain import the part's own code needs (the same object, no wrapper)
        assert not hasattr(part, old) or getattr(part, old) is getattr(datasets, new), (module, old)
        assert old not in getattr(part, "__all__", ()), (module, old)


def test_the_checker_reports_each_kind_of_planted_violation(tmp_path):
    bad = tmp_path / "chapters" / "99-planted" / "99-planted.py"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "# %%\nimport pandas as pd\nimport sklearn\nfrom sklearn.datasets import make_blobs\n"
        "from scaleoutai import datasets\nfrom scaleoutai.serving import llm\nimport urllib.request\n"
        "X, y = make_blobs(100)\n"                              # (a) a sklearn generator
        "Z = datasets.blobs(10, 2)\n"                            # (b) catalogued, but not for chapter 99
        "T = llm.make_trace(4, 0.5)\n"                           # (c) through the part it left
        "df = pd.read_csv('https://example.org/data.csv')\n"     # (a) a reader of a URL
        "sklearn.datasets.fetch_openml('mnist_784')\n"          # (a) a download
        "W = datasets.web_corpus_not_there(3)\n")                # (b) not in the catalogue
    found = audit.check_chapter(bad)
    text = "\n".join(found)
    assert "99-planted.py:4: uses sklearn.datasets" in text
    assert "99-planted.py:7: uses urllib.request" in text
    assert "99-planted.py:9: calls datasets.blobs, but its catalogue entry does not list chapter 99" in text
    assert "99-planted.py:10: scaleoutai.serving.llm.make_trace moved to scaleoutai.datasets: call " \
           "datasets.request_trace" in text
    assert "99-planted.py:11: read_csv(...) of a URL downloads data" in text
    assert "99-planted.py:12: calls sklearn.datasets.fetch_openml, which downloads data" in text
    assert "99-planted.py:13: datasets.web_corpus_not_there is not in the catalogue" in text
    assert len(found) == 7, found


def test_a_planted_chapter_that_calls_only_its_catalogued_loaders_passes(tmp_path):
    ok = tmp_path / "chapters" / "12-planted" / "12-planted.py"
    ok.parent.mkdir(parents=True)
    ok.write_text("# %%\nfrom scaleoutai.datasets import blobs\nimport scaleoutai.datasets as ds\n"
                  "from scaleoutai.datasets import catalogue\n"
                  "X, _, _ = blobs(40, 3)\nXl, yl, _ = ds.linear_regression(40, 2)\nprint(catalogue.CATALOGUE[0])\n")
    assert audit.check_chapter(ok) == []


def test_the_catalogue_direction_reports_a_listed_chapter_that_does_not_call_its_loader(tmp_path):
    fake = tmp_path / "chapters" / "12-planted" / "12-planted.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("# %%\nfrom scaleoutai import datasets\nX, y, _ = datasets.linear_regression(40, 2)\n")
    others = [p for p in SOURCES if audit.chapter_id(p) != 12]
    baseline = set(audit.check_catalogue(SOURCES))  # what the real course reports (nothing, once catalogued)
    found = set(audit.check_catalogue([*others, fake])) - baseline
    assert found == {"catalogue: blobs lists chapter 12, which never calls it: drop that Use"}
    found = set(audit.check_catalogue([p for p in others if audit.chapter_id(p) != 33])) - baseline
    assert any("job_trace lists chapter 33, which has no source here" in f for f in found)


def test_every_benchmark_script_is_listed_with_its_quick_flag():
    scripts = audit.benchmark_scripts(ROOT)
    assert set(scripts) == {b.script for b in catalogue.BENCHMARKS}
    for b in catalogue.BENCHMARKS:
        assert b.quick == ("--quick" in scripts[b.script].read_text()), b.script


def test_shipped_data_comes_in_packages_pinned_at_the_stated_versions():
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "environments" / "constraints.txt").read_text(), re.M))
    for s in catalogue.SHIPPED:
        assert pins.get(s.package) == s.version, s.package
        assert importlib.metadata.version(s.package) == s.version


def test_instance_constructors_exist_where_the_catalogue_says():
    for inst in catalogue.INSTANCES:
        module, name = inst.constructor.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name)), inst.constructor


def test_load_refuses_what_it_cannot_do_with_one_clear_line():
    with pytest.raises(ValueError, match="not in the catalogue"):
        catalogue.load("mnist")
    with pytest.raises(ValueError, match="'smoke' or 'full'"):
        catalogue.load("blobs", "huge")
    with pytest.raises(ValueError, match="takes no seed"):
        catalogue.load("ring_graph", seed=3)
    with pytest.raises(ValueError, match="lists no use in chapter 40"):
        catalogue.load("blobs", chapter=40)
