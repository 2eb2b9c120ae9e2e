"""Hourly prices for cost curves, read from the dated, sourced ``capstone/prices.yaml`` (Chapters 5, 41).

The cost of a run is C = price_per_hour * instances * T / 3600 (``scaleoutai.perf.run_cost``). No price
lives in code: every figure comes from the YAML file, and each run logs the price with its source and
date so a report can say what it priced at. ``SCALEOUT_PRICES`` points at another file.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CapstoneError

DEFAULT_INSTANCE_TYPE = "local-laptop"


def default_prices_path() -> Path:
    """``$SCALEOUT_PRICES`` if set, else ``capstone/prices.yaml`` at the root of the repository."""
    env = os.environ.get("SCALEOUT_PRICES")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for folder in here.parents:
        candidate = folder / "capstone" / "prices.yaml"
        if candidate.is_file():
            return candidate
    return Path.cwd() / "capstone" / "prices.yaml"


@dataclass(frozen=True)
class Price:
    """One instance type: USD per instance-hour and what one instance holds."""

    instance_type: str
    price_per_hour: float
    vcpus: int | None
    gpus: int
    gpu: str | None
    source: str
    date: str


@dataclass(frozen=True)
class PriceTable:
    """The whole file: its date and source, and one Price per instance type."""

    path: Path
    date: str
    source: str
    currency: str
    instances: dict[str, Price]

    def lookup(self, instance_type: str) -> Price:
        if instance_type not in self.instances:
            known = ", ".join(sorted(self.instances))
            raise CapstoneError(f"unknown instance type {instance_type!r} in {self.path}; "
                                f"known: {known} (add it to the file with its price, source and date)")
        return self.instances[instance_type]


def _field(entry: dict, key: str, name: str, path: Path, kind: type | tuple, optional: bool = False) -> Any:
    if key not in entry:
        raise CapstoneError(f"{path}: instance type {name!r} has no {key!r}; every entry needs "
                            "price_per_hour, vcpus, gpus, gpu, source and date")
    value = entry[key]
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, kind):
        raise CapstoneError(f"{path}: {name}.{key} = {value!r} has the wrong type")
    return value


def load_prices(path: str | os.PathLike | None = None) -> PriceTable:
    """Read and validate a prices file; any problem is one readable CapstoneError line."""
    import yaml

    path = Path(path) if path is not None else default_prices_path()
    if not path.is_file():
        raise CapstoneError(f"no prices file at {path}; pass the path of a prices.yaml "
                            "(see capstone/prices.yaml) or set SCALEOUT_PRICES")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CapstoneError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("instances"), dict) or not data["instances"]:
        raise CapstoneError(f"{path} must hold date, source and a non-empty 'instances' mapping")
    for key in ("date", "source"):
        if not data.get(key):
            raise CapstoneError(f"{path} has no top-level {key!r}: a price without its {key} cannot be cited")
    table: dict[str, Price] = {}
    for name, entry in data["instances"].items():
        if not isinstance(entry, dict):
            raise CapstoneError(f"{path}: instance type {name!r} must be a mapping of fields")
        price = _field(entry, "price_per_hour", name, path, (int, float))
        if price < 0:
            raise CapstoneError(f"{path}: {name}.price_per_hour = {price} is negative")
        gpus = _field(entry, "gpus", name, path, int)
        table[str(name)] = Price(
            instance_type=str(name), price_per_hour=float(price),
            vcpus=_field(entry, "vcpus", name, path, int, optional=True), gpus=gpus,
            gpu=_field(entry, "gpu", name, path, str, optional=True),
            source=str(_field(entry, "source", name, path, str)),
            date=str(_field(entry, "date", name, path, (str, datetime.date))))
    return PriceTable(path=path, date=str(data["date"]), source=str(data["source"]),
                      currency=str(data.get("currency", "USD")), instances=table)


def lookup(instance_type: str, path: str | os.PathLike | None = None) -> Price:
    """The Price of ``instance_type``; an unknown type names the known ones."""
    return load_prices(path).lookup(instance_type)
