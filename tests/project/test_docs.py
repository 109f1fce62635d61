"""The docs under docs/ hold to the code: the REST route table is the server's, links resolve,
the alert rules name series a runner serves, every runbook has commands a test runs, and the
concepts name every topic watukuy writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.runbooks_doc import blocks
from watukuy.observe.metrics import PrometheusObserver
from watukuy.rest.reference import END, START, embed, routes_markdown
from watukuy.rest.routes import ROUTES
from watukuy.store.kafka.topics import TopicLayout

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = (
    "concepts.md",
    "configuration.md",
    "operating.md",
    "rest.md",
    "runbooks.md",
    "status.md",
    "testing.md",
    "comparison.md",
    "architecture.md",
)
# Written on another branch of issue 21 (the config helper's): links to it are checked once it
# is here, so that this branch's tests hold before and after the merge.
ELSEWHERE = {DOCS / "architecture.md"}
RUNBOOKS = (
    "Add a tenant",
    "Remove a tenant for good",
    "Replay a tenant from a date",
    "Triage and retry parked items from the DLQ",
    "Scale out and in",
    "Rolling upgrade",
    "The local state store",
    "What to alert on",
)
ALERTS = REPO / "integration" / "compose" / "alerts.yml"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def test_the_rest_reference_carries_the_generated_routes() -> None:
    text = (DOCS / "rest.md").read_text(encoding="utf-8")
    assert START in text and END in text
    assert embed(text, routes_markdown()) == text, (
        "docs/rest.md is stale: run python -m watukuy.rest.reference --write docs/rest.md"
    )


def test_every_route_the_server_serves_is_in_the_reference() -> None:
    table = routes_markdown()
    for method, path, _ in ROUTES:
        assert f"| `{method} {path}` |" in table, (method, path)
    assert "/openapi.json" in (DOCS / "rest.md").read_text()


def test_the_readme_links_every_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in PAGES:
        assert f"](docs/{page})" in readme, page


@pytest.mark.parametrize("page", [REPO / "README.md", *sorted(DOCS.glob("*.md"))], ids=str)
def test_links_resolve(page: Path) -> None:
    """Every relative link of the README and of every page under docs/ names a file that
    exists and, with an #anchor, a heading of that file."""
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://")):
            continue
        file, _, anchor = target.partition("#")
        resolved = (page.parent / file).resolve() if file else page
        if resolved in ELSEWHERE and not resolved.exists():
            continue
        assert resolved.exists(), f"{page.name}: {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: {target}"


def served_metrics() -> set[str]:
    text = PrometheusObserver().render()[0].decode()
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}


def series_of(expr: str) -> set[str]:
    """The metric families an expression reads (``_bucket`` of a histogram is its family)."""
    names = set(re.findall(r"\bwatukuy_[a-z_]+", expr))
    return {re.sub(r"_(bucket|sum|count)$", "", name) for name in names}


def test_alert_rules_read_series_a_runner_serves() -> None:
    rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
    served = served_metrics()
    read: set[str] = set()
    for rule in rules:
        read |= series_of(rule["expr"])
    assert read and read <= served, read - served


def test_the_runbook_explains_every_alert_rule() -> None:
    rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
    text = (DOCS / "runbooks.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `(Watukuy\w+)` \|", text, re.M))
    assert table == {rule["alert"] for rule in rules}
    for series in re.findall(r"\bwatukuy_[a-z_]+", text):
        assert re.sub(r"_(bucket|sum|count)$", "", series) in served_metrics(), series


def test_every_runbook_has_commands_the_tests_run() -> None:
    found = blocks()
    sections = {b.section for b in found if b.run}
    assert set(RUNBOOKS) <= sections
    text = (DOCS / "runbooks.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert set(headings) - {"Before you start"} <= sections  # no runbook without a run block


def test_blocks_not_run_say_why_and_their_watukuy_commands_run_elsewhere() -> None:
    found = blocks()
    ran = {m for b in found if b.run for m in re.findall(r"watukuy-source (\w+)", b.text)}
    ran |= {"run"} if any("watukuy-source --config" in b.text for b in found if b.run) else set()
    for block in found:
        if not block.run:
            assert len(block.reason) > 10, block.text
            for sub in re.findall(r"watukuy-source (\w+)", block.text):
                assert sub in ran, sub


def test_concepts_name_every_topic_and_concept() -> None:
    text = (DOCS / "concepts.md").read_text(encoding="utf-8")
    layout = TopicLayout("<prefix>", 1, 1)
    for topic in [*layout.internal(), layout.events("<poller>"), layout.dlq("<poller>")]:
        assert f"`{topic}`" in text, topic
    headings = set(re.findall(r"^## (.+)$", text, re.M))
    concepts = {"Poller", "Partition", "Lane", "Budget", "Snapshot", "Parked item", "Owner"}
    assert concepts <= headings


def test_the_fault_suite_docs_list_every_scenario_and_results_hold_a_row_of_each() -> None:
    from integration.faults.scenarios import SCENARIOS

    names = [module.NAME for module in SCENARIOS]
    text = (DOCS / "testing.md").read_text(encoding="utf-8")
    suite = text[text.index("## Fault suite") :]
    listed = re.findall(r"^\| `([a-z-]+)` \|", suite, re.M)
    assert listed == names  # every scenario, in the order the suite runs them
    results = (REPO / "integration" / "faults" / "RESULTS.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| ([a-z-]+) +\|", results, re.M))
    assert set(names) <= rows, set(names) - rows
