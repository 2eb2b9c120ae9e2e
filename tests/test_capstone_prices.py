"""capstone.prices: the shipped prices file is valid, and every bad file or type is one readable line."""
from __future__ import annotations

import pytest

from scaleoutai.capstone import CapstoneError, load_prices, lookup
from scaleoutai.cli import UserError

GOOD_ENTRY = """  box:
    price_per_hour: 1.5
    vcpus: 4
    gpus: 0
    gpu: null
    source: "made up for a test"
    date: "2024-01-01"
"""


def write(tmp_path, text):
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    return path


def test_shipped_prices_are_dated_sourced_and_cover_laptop_and_cloud():
    table = load_prices()
    assert table.path.parent.name == "capstone"
    assert table.date and table.source
    assert {"local-laptop", "aws-c7i.xlarge", "aws-g5.xlarge", "aws-p5.48xlarge", "gcp-n2-standard-8",
            "gcp-a3-highgpu-8g"} <= set(table.instances)
    for price in table.instances.values():
        assert price.price_per_hour >= 0 and price.source and price.date
        assert (price.gpus == 0) == (price.gpu is None)
    assert "assumption" in lookup("local-laptop").source
    assert lookup("aws-p5.48xlarge").gpus == 8


def test_unknown_instance_type_names_the_known_ones(tmp_path):
    path = write(tmp_path, 'date: "2024-01-01"\nsource: "test"\ninstances:\n' + GOOD_ENTRY)
    assert lookup("box", path).price_per_hour == 1.5
    with pytest.raises(CapstoneError, match=r"unknown instance type 'tiny'.*known: box") as err:
        lookup("tiny", path)
    assert isinstance(err.value, UserError) and "\n" not in str(err.value)


@pytest.mark.parametrize("text, message", [
    ('source: "x"\ninstances:\n' + GOOD_ENTRY, "no top-level 'date'"),
    ('date: "2024-01-01"\ninstances:\n' + GOOD_ENTRY, "no top-level 'source'"),
    ('date: "2024-01-01"\nsource: "x"\ninstances: {}\n', "non-empty 'instances'"),
    ('date: "2024-01-01"\nsource: "x"\ninstances:\n' + GOOD_ENTRY.replace("    date: \"2024-01-01\"\n", ""),
     "has no 'date'"),
    ('date: "2024-01-01"\nsource: "x"\ninstances:\n' + GOOD_ENTRY.replace("1.5", "-1"), "negative"),
    ('date: "2024-01-01"\nsource: "x"\ninstances:\n' + GOOD_ENTRY.replace("1.5", '"cheap"'), "wrong type"),
    ("date: [unclosed\n", "not valid YAML"),
])
def test_malformed_prices_file_is_one_readable_line(tmp_path, text, message):
    with pytest.raises(CapstoneError, match=message) as err:
        load_prices(write(tmp_path, text))
    assert "\n" not in str(err.value)


def test_missing_prices_file_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEOUT_PRICES", str(tmp_path / "nope.yaml"))
    with pytest.raises(CapstoneError, match="no prices file at .*nope.yaml"):
        load_prices()
