"""The Grafana dashboards under docs/grafana/ query only series the code really exports: each
panel's PromQL is parsed for `jobrouter_*` names, which must be series of the Prometheus
registry (scrape dashboard) or of its OTLP mirror as a Collector writes it to Prometheus
(OTLP dashboard: monotonic sums get `_total`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import jobrouter.leader  # these two register their metrics, as a running router does
import jobrouter.periodic  # noqa: F401
from jobrouter.metrics import REGISTRY
from jobrouter.telemetry import instruments_of

DOCS = Path(__file__).resolve().parents[2] / "docs" / "grafana"
NAME = re.compile(r"\bjobrouter_[a-z_]+\b")
BY = re.compile(r"\bby \(([^)]*)\)")
# What operators must see (issue 19), each a word of some panel's title.
TOPICS = [
    "Delivery outcomes",
    "Outbox depth",
    "Dead letters",
    "latency by provider",
    "Error rate by provider",
    "Circuits",
    "Certifications close to expiry",
    "Unknown jobs waiting",
    "Spend rate by task and provider",  # issue 29
    "Budget use",
]


def scrape_series() -> set[str]:
    series = set()
    for family in REGISTRY.collect():
        if family.type == "counter":
            series.add(family.name + "_total")
        elif family.type == "histogram":
            series.update(family.name + part for part in ("_bucket", "_sum", "_count"))
        else:
            series.add(family.name)
    return series


def otlp_series() -> set[str]:
    series = set()
    for family in REGISTRY.collect():
        for name, counter in instruments_of(family.name, family.type):
            series.add(name + "_total" if counter else name)
    return series


def label_names() -> set[str]:
    names = {"le", "instance", "job"}
    for family in REGISTRY.collect():
        labels = getattr(REGISTRY._names_to_collectors.get(family.name), "_labelnames", ())
        names.update(labels)
        if family.type == "stateset":
            names.add(family.name)
    return names


def panels(file: str) -> list[dict[str, Any]]:
    dashboard = json.loads((DOCS / file).read_text("utf-8"))
    found: list[dict[str, Any]] = dashboard["panels"]
    return found


@pytest.mark.parametrize(
    ("file", "series"),
    [("jobrouter-prometheus.json", scrape_series()), ("jobrouter-otlp.json", otlp_series())],
)
def test_every_query_names_exported_series_and_labels(file: str, series: set[str]) -> None:
    labels = label_names()
    for panel in panels(file):
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            names = set(NAME.findall(target["expr"]))
            assert names, f"{panel['title']}: {target['expr']} queries no jobrouter series"
            unknown = names - series - labels
            assert not unknown, f"{file}, panel {panel['title']!r}: not exported: {unknown}"
            for group in BY.findall(target["expr"]):
                grouped = {label.strip() for label in group.split(",")}
                assert grouped <= labels, f"{panel['title']!r}: unknown labels {grouped - labels}"


@pytest.mark.parametrize("file", ["jobrouter-prometheus.json", "jobrouter-otlp.json"])
def test_each_topic_has_a_panel(file: str) -> None:
    titles = [panel["title"] for panel in panels(file)]
    for topic in TOPICS:
        assert any(topic.lower() in title.lower() for title in titles), (topic, titles)


def test_the_check_catches_a_misnamed_series() -> None:
    """The name check is not vacuous: a counter queried without `_total` is not exported."""
    assert "jobrouter_attempts" not in scrape_series()
    assert "jobrouter_attempts_total" in scrape_series()
    assert "jobrouter_attempt_duration_seconds_bucket_total" in otlp_series()
    assert "jobrouter_attempt_duration_seconds_bucket" not in otlp_series()
