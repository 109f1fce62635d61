"""``streams:`` and ``defaults:``: one poller per stream, named ``<connector>.<stream>``, each
its own entry merged over the defaults; errors name where the bad key was written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.declarative.helpers import API, WHERE, Driver
from watukuy import ConfigError, Partition, Poller
from watukuy.core.poller import StreamOf
from watukuy.core.transforms import TransformContext
from watukuy.declarative import compile_connector_entry
from watukuy.declarative.errors import StatusFailed
from watukuy.declarative.request import parse_request
from watukuy.declarative.templates import Scope, compile_template
from watukuy.options.flat import flatten, unflatten
from watukuy.options.secrets import resolve_references

TENANTS = {"static": [{"key": "acme", "data": {"slug": "acme", "token": "tok-acme"}}]}


def tracker(**overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": "tracker",
        "partitions": TENANTS,
        "defaults": {
            "request": {
                "base": API + "/{partition.data.slug}/",
                "headers": {"Accept": "application/json"},
                "auth": {"bearer": "{partition.data.token}"},
            },
            "records": "data",
            "identity": "id",
            "schedule": {"min": "1m", "max": "10m"},
        },
        "streams": [
            {"name": "projects", "request": {"path": "/projects"}},
            {
                "name": "users",
                "request": {"path": "users", "headers": {"X-Team": "core"}},
                "identity": "login",
                "schedule": {"min": "5m"},
                "publish": False,
            },
        ],
    }
    entry.update(overrides)
    return entry


def compiled(entry: dict[str, Any], **kw: Any) -> list[Poller]:
    return compile_connector_entry(entry, where=WHERE, base_dir=Path("."), **kw)


def error_of(entry: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        compiled(entry)
    return str(caught.value)


def test_each_stream_is_a_poller_named_connector_dot_stream() -> None:
    projects, users = compiled(tracker())
    assert [p.name for p in (projects, users)] == ["tracker.projects", "tracker.users"]
    assert projects.stream_of == StreamOf("tracker", "projects")
    assert users.stream_of == StreamOf("tracker", "users")
    # No topic of their own: each publishes to <prefix>.events.tracker.<stream>.
    assert (projects.topic, users.topic) == (None, None)
    assert projects.partitioned and users.partitioned
    assert projects.extra.get("publish", True) is True
    assert users.extra["publish"] is False


def test_an_entry_without_streams_is_one_poller_as_before() -> None:
    [poller] = compiled(
        {"name": "tickets", "request": {"url": f"{API}/t"}, "records": "", "identity": "id"}
    )
    assert (poller.name, poller.stream_of) == ("tickets", None)


def test_defaults_are_deep_merged_and_the_stream_wins() -> None:
    projects, users = compiled(tracker())
    assert (projects.schedule.min, projects.schedule.max) == (60, 600)
    assert (users.schedule.min, users.schedule.max) == (300, 600)  # min its own, max inherited
    assert users.identity({"login": "ann", "id": 7}) == "ann"
    assert projects.identity({"login": "ann", "id": 7}) == 7


async def test_path_is_joined_to_base_and_headers_merge() -> None:
    projects, users = compiled(tracker())
    tenant = Partition(key="acme", data={"slug": "acme", "token": "tok-acme"})
    for poller, items in ((projects, [{"id": 1}]), (users, [{"login": "ann"}])):
        driver = Driver(poller, partition=tenant)
        path = "projects" if poller is projects else "users"
        driver.transport.add("GET", f"{API}/acme/{path}", json={"data": items})
        assert await driver.poll() == items
        [request] = driver.transport.requests
        assert str(request.url) == f"{API}/acme/{path}"  # one slash, whatever was written
        assert request.headers["Authorization"] == "Bearer tok-acme"
        assert request.headers["Accept"] == "application/json"
        assert request.headers.get("X-Team") == ("core" if poller is users else None)


def test_a_stream_may_choose_another_auth_or_a_whole_url() -> None:
    stream = {
        "name": "audit",
        "request": {
            "url": "https://audit.test/log",
            "auth": {"api_key": {"header": "K", "value": "v"}},
        },
    }
    [audit] = compiled(tracker(streams=[stream]))  # no "url and base", no "two auths"
    assert audit.name == "tracker.audit"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"defaults": {"schedule": {"mni": "1s"}}},
            "pollers[0].defaults.schedule.mni: unknown key; did you mean 'min'?",
        ),
        (
            {"streams": [{"name": "a", "request": {"pth": "/x"}}]},
            "pollers[0].streams[0].request.pth: unknown key; did you mean 'path'?",
        ),
        (
            {"defaults": {"identity": "id", "request": {"base": API}, "schedule": {"min": "soon"}}},
            "pollers[0].defaults.schedule.min: expected a duration",
        ),
        (
            {"streams": [{"name": "a", "request": {"path": "/a"}, "schedule": {"min": "soon"}}]},
            "pollers[0].streams[0].schedule.min: expected a duration",
        ),
        (
            {"streams": [{"name": "a", "request": {"path": "/a", "url": f"{API}/a"}}]},
            "pollers[0].streams[0].request: set url, or base and path; not url and path",
        ),
        (
            {"streams": [{"name": "a", "partitions": TENANTS}]},
            "pollers[0].streams[0].partitions: unknown key",
        ),
        (
            {"streams": [{"name": "a.b", "request": {"path": "/a"}}]},
            "pollers[0].streams[0].name: must match [A-Za-z0-9_-]+ (no dot), got 'a.b'",
        ),
        (
            {"streams": [{"name": "a", "request": {"path": "/a"}}, {"name": "a"}]},
            "pollers[0].streams[1]: duplicate stream name 'a' (also streams[0])",
        ),
        (
            {"streams": [{"name": "a", "request": {"path": "/a"}, "publish": "no"}]},
            "pollers[0].streams[0].publish: must be true or false, got 'no'",
        ),
        ({"streams": []}, "pollers[0]: must be a non-empty list of streams"),
        (
            {"streams": [{"name": "a"}], "defaults": {}},
            "pollers[0].streams[0].request: is required",
        ),
        (
            {"streams": [{"name": "a", "request": {"url": API}}], "defaults": {}},
            "pollers[0].streams[0].identity: is required",
        ),
        ({"budget": "vendor"}, "pollers[0].budget: unknown key; expected one of: name, partitions"),
        (
            {"defaults": {"request": {"base": "ftp://x"}, "identity": "id"}},
            "pollers[0].defaults.request.base: must be an absolute http:// or https:// URL",
        ),
    ],
)
def test_errors_name_where_the_bad_key_was_written(change: dict[str, Any], expected: str) -> None:
    assert error_of(tracker(**change)).startswith(expected)


def test_base_and_path_alone_and_on_a_single_poller() -> None:
    single = {"name": "t", "records": "", "identity": "id"}
    assert error_of({**single, "request": {"path": "/x"}}).startswith(
        "pollers[0].request.base: is required with request.path"
    )
    assert error_of({**single, "request": {}}).startswith(
        "pollers[0].request.url: is required: set url, or base and path"
    )
    [poller] = compiled({**single, "request": {"base": API, "path": "x"}})
    assert poller.name == "t"
    assert error_of({**single, "request": {"url": API}, "publish": False}).startswith(
        "pollers[0].publish: only a stream"
    )
    assert error_of({**single, "request": {"url": API}, "defaults": {}}).startswith(
        "pollers[0].defaults: only an entry with streams"
    )


async def test_a_secret_in_defaults_is_shown_as_its_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VENDOR_URL", "https://s3cret-host.test/v1")
    entry = tracker(defaults={"request": {"base": "${env:VENDOR_URL}"}, "identity": "id"})
    resolved, secrets = resolve_references({"pollers": [entry]}, Path("."))
    projects, _ = compiled(resolved["pollers"][0], written=secrets.written)
    driver = Driver(projects, partition=Partition(key="acme"))
    driver.transport.add("GET", "https://s3cret-host.test/v1/projects", status=403)
    with pytest.raises(StatusFailed) as caught:
        await driver.poll()
    assert str(caught.value) == "GET ${env:VENDOR_URL}/projects -> 403 (check the credentials)"


def test_streams_and_defaults_round_trip_through_connects_flat_form() -> None:
    config = {key: value for key, value in tracker().items() if key != "name"}
    flat = flatten(config, "http")
    assert set(flat) >= {"connector.class", "streams", "defaults"}
    assert all(isinstance(value, str) for value in flat.values())
    assert unflatten(flat) == ("http", config)
    one_key = {**config, "defaults": {"budget": "vendor"}}
    flat = flatten(one_key, "http")
    assert flat["defaults.budget"] == "vendor"
    assert unflatten(flat) == ("http", one_key)


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        (f"{API}/v1", "items", f"{API}/v1/items"),
        (f"{API}/v1/", "/items", f"{API}/v1/items"),
        (f"{API}/v1//", "//items?x=1", f"{API}/v1/items?x=1"),
        ("{partition.data.host}", "/items/{partition.key}", "https://h.test/items/acme"),
        (f"{API}/{{partition.key}}", "{partition.key}", f"{API}/acme/acme"),
    ],
)
def test_path_joins_base_with_one_slash(base: str, path: str, url: str) -> None:
    def compile_value(raw: object, at: str) -> Any:
        return compile_template(raw, at, partitioned=True, cursor=False)

    spec = parse_request({"base": base, "path": path}, "request", "r", compile_value)
    tenant = Partition(key="acme", data={"host": "https://h.test"})
    assert spec.render(Scope(partition=tenant)).url == url
    assert spec.url.where == "r.path"  # a render error names the path, which the stream wrote


def test_a_transform_in_defaults_reaches_every_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PII_KEY", "k3y-material")
    defaults = tracker()["defaults"] | {
        "transform": {"mask": {"email": {"hmac": "${env:PII_KEY}"}}, "drop": ["note"]}
    }
    entry = tracker(defaults=defaults)
    entry["streams"][1]["transform"] = {"drop": ["secret"]}  # merged: its own drop, the mask
    resolved, secrets = resolve_references({"pollers": [entry]}, Path("."))
    projects, users = compiled(resolved["pollers"][0], written=secrets.written)
    item = {"id": 1, "login": "ann", "email": "a@x.test", "note": "n", "secret": "s"}
    published = []
    for poller in (projects, users):
        assert poller.transform is not None
        published.append(poller.transform.apply(item, TransformContext("acme")))
    assert published[0] is not None and "note" not in published[0] and "secret" in published[0]
    assert published[1] is not None and "note" in published[1] and "secret" not in published[1]
    assert published[0]["email"] == published[1]["email"] != "a@x.test"


def with_child(parent: dict[str, Any], key: str) -> dict[str, Any]:
    child = {"name": "issues", "parent": {"stream": "projects", "key": key}}
    child["request"] = {"path": "/projects/{parent.key}/issues"}
    return tracker(streams=[{"name": "projects", "request": {"path": "/p"}, **parent}, child])


@pytest.mark.parametrize(
    ("parent", "why"),
    [
        ({"reconcile": "1d"}, "reconciles"),
        ({"transform": {"filter": {"path": "a", "exists": True}}}, "filters"),
    ],
)
def test_a_child_of_a_parent_that_deletes_without_the_item_is_keyed_by_its_identity(
    parent: dict[str, Any], why: str
) -> None:
    # Such a deletion names its item by identity alone: a child keyed by another path could
    # not be found, and would go on polling a deleted parent.
    assert error_of(with_child(parent, "slug")) == (
        f"pollers[0].streams[1].parent.key: must be the identity path of stream 'projects' "
        f"('id') since it {why}: a deletion it finds carries only the item's identity, which "
        f"is how stream 'issues' finds the child partition to pause"
    )
    names = [p.name for p in compiled(with_child(parent, "id"))]
    assert names == ["tracker.projects", "tracker.issues"]


def test_a_child_of_a_parent_that_never_deletes_without_the_item_may_use_any_key() -> None:
    assert len(compiled(with_child({}, "slug"))) == 2
