"""deploy/observability/: the Grafana dashboard parses and each panel queries Prometheus; the alert
rules follow Prometheus's rule file format (a schema of ours, checked with check-jsonschema:
promtool is not installable with pip) and alert on what the issue names; and every metric either
file queries is one that a real `turngate serve --metrics-listen` exposes (redis mode, so the
projector's metrics are there too), after a turn, a refusal, a queued turn and a Stop."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.support.calls import admit, complete, enqueue, refused, stop
from tests.support.processes import free_port, spawn_server
from tests.support.repository import ROOT, run_tool
from tests.support.shared_redis import REDIS_SERVER, delete_keyspace, unique_keyspace
from tests.support.waiting import eventually
from turngate.v1 import turngate_pb2 as pb

OBSERVABILITY = ROOT / "deploy" / "observability"
DASHBOARD = OBSERVABILITY / "grafana-dashboard.json"
RULES = OBSERVABILITY / "alert-rules.yaml"
RULES_SCHEMA = Path(__file__).with_name("prometheus-rules.schema.json")
SESSION = pb.SessionRef(project_id="p-observability", session_id="s-1")
# PromQL words that are not metric names.
_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool"}


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def rules() -> list[dict[str, Any]]:
    loaded = YAML(typ="safe").load(RULES)
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: what is left once strings, label matchers,
    ranges, grouping clauses, function calls, keywords and numbers are taken out."""
    bare = re.sub(r'"[^"]*"', "", expr)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", bare)
    bare = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", bare)
    bare = re.sub(r"[a-zA-Z_]+\s*\(", "(", bare)
    words = set(re.findall(r"(?<![\w.$])[a-zA-Z_:][a-zA-Z0-9_:]*", bare))
    return words - _KEYWORDS


def exposed(text: str) -> set[str]:
    """The sample names of Prometheus text."""
    return set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.MULTILINE))


def test_metric_names_are_read_from_promql() -> None:
    expr = 'histogram_quantile(0.99, sum by (le, m) (rate(a_bucket{x="y z"}[$__rate_interval]))) and b > 2'
    assert metric_names(expr) == {"a_bucket", "b"}


def test_the_dashboard_parses_and_has_the_panels_an_operator_needs() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "turngate"
    titles = " | ".join(panel["title"] for panel in dashboard["panels"])
    for needed in (
        "Busy sessions",
        "Admissions by result",
        "Refusals by reason",
        "Settlements by outcome and settled_by",
        "Stop to settle",
        "RPC latency by method",
        "Projector lag",
        "Dead letters",
        "loop restarts",
        "Queue depth",
        "Queue wait",
    ):
        assert needed in titles
    for panel in dashboard["panels"]:
        assert panel["targets"]
        assert all(target["expr"] for target in panel["targets"])
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}


def test_the_alert_rules_follow_the_prometheus_rule_file_format() -> None:
    run_tool("check-jsonschema", "--schemafile", str(RULES_SCHEMA), str(RULES))
    alerts = {rule["alert"]: rule for rule in rules()}
    assert set(alerts) >= {
        "TurngateStuckBusySessions",
        "TurngateProjectorLag",
        "TurngateDeadLetters",
        "TurngateLoopRestarting",
        "TurngateNotReady",
    }
    for rule in alerts.values():
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"]


@pytest.mark.redis
async def test_every_metric_the_dashboard_and_rules_query_is_exposed_by_a_real_server(tmp_path: Path) -> None:
    queries = [*dashboard_queries(), *(rule["expr"] for rule in rules())]
    queried = {name for expr in queries for name in metric_names(expr)}
    assert {"turngate_turns_active", "rpc_server_call_duration_seconds_bucket", "turngate_ready"} <= queried
    keys = unique_keyspace()
    address = f"127.0.0.1:{free_port()}"
    ledger = f"sqlite+aiosqlite:///{tmp_path / 'ledger.db'}"
    env = {"TURNGATE_REDIS_PREFIX": keys.prefix, "TURNGATE_REDIS_BUCKETS": str(keys.buckets)}
    args = ("--store", REDIS_SERVER, "--ledger", ledger, "--metrics-listen", address)
    try:
        async with spawn_server(tmp_path, *args, env=env) as served:
            client = served.client
            first = await admit(client, SESSION, "t1")
            await refused(admit(client, SESSION, "t-refused"))
            await enqueue(client, SESSION, "t2", runner_id="r1")
            await complete(client, first.lease)
            await stop(client, SESSION, "t2", force=True)

            async def all_exposed() -> bool:
                text = await asyncio.to_thread(_scrape, address)
                return queried <= exposed(text)

            await eventually(all_exposed)
    finally:
        delete_keyspace(REDIS_SERVER, keys)


def _scrape(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
        return str(response.read().decode())
