"""The deployment files (compose.yaml, deploy/compose/, deploy/kubernetes/), checked offline: each
valid against its schema, and doing what docs/deploying.md says — settings that exist, a drain
that fits in the time allowed, gRPC health probes, tokens from a secret, nothing insecure."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.support.repository import ROOT, run_tool
from turngate.service.auth.principals import TokensFileError, load_tokens
from turngate.service.config import Settings
from turngate.service.operate.operations import Target

COMPOSE = ROOT / "compose.yaml"
COMPOSE_FILES = ROOT / "deploy" / "compose"
KUBERNETES = ROOT / "deploy" / "kubernetes"
KUSTOMIZATION = KUBERNETES / "kustomization.yaml"
# kubernetes-validate's bundled schemas: a fixed, recent version, so the check needs no network.
KUBERNETES_VERSION = "1.35.0"
GRPC_PORT = 50051
UID = 10001
COMPOSE_REPLICAS = ("replica-a", "replica-b")
TURNGATE_VARIABLE = re.compile(r"\bTURNGATE_[A-Z0-9_]+")


def _yaml(path: Path) -> list[Any]:
    return [document for document in YAML(typ="safe").load_all(path.read_text()) if document is not None]


def _manifests() -> list[Path]:
    return sorted(path for path in KUBERNETES.glob("*.yaml") if path != KUSTOMIZATION)


def _resources() -> list[dict[str, Any]]:
    return [resource for path in _manifests() for resource in _yaml(path)]


def _named(kind: str, name: str) -> dict[str, Any]:
    found = [r for r in _resources() if r["kind"] == kind and r["metadata"]["name"] == name]
    assert len(found) == 1, f"one {kind} {name} in deploy/kubernetes"
    return found[0]


def _pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    for resource in _resources():
        if resource["kind"] in ("Deployment", "Job"):
            yield resource["metadata"]["name"], resource["spec"]["template"]["spec"]


def _replicas() -> dict[str, Any]:
    """The pod spec of the Deployment that runs `turngate serve`."""
    return dict(_pod_specs())["turngate"]


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = pod["containers"]
    (container,) = containers
    return container


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", [])}


def _compose_services() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = _yaml(COMPOSE)[0]["services"]
    return services


def _turngate_services() -> dict[str, dict[str, Any]]:
    return {name: s for name, s in _compose_services().items() if s["image"].startswith("turngate:")}


def _seconds(duration: str) -> float:
    """A compose duration such as `30s` or `1m30s`."""
    parts = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert duration, "an empty duration"
    assert parts is not None, f"not a duration: {duration!r}"
    minutes, seconds = (int(part or 0) for part in parts.groups())
    return minutes * 60.0 + seconds


def _deployment_files() -> list[Path]:
    return [COMPOSE, *sorted(COMPOSE_FILES.iterdir()), *sorted(KUBERNETES.iterdir())]


def test_compose_file_follows_the_compose_spec() -> None:
    run_tool("check-jsonschema", "--builtin-schema", "vendor.compose-spec", str(COMPOSE))


def test_kubernetes_manifests_validate_strictly() -> None:
    files = [str(path) for path in _manifests()]
    run_tool("kubernetes-validate", "--strict", "--quiet", "--kubernetes-version", KUBERNETES_VERSION, *files)


def test_kustomization_lists_every_manifest() -> None:
    (kustomization,) = _yaml(KUSTOMIZATION)
    assert sorted(kustomization["resources"]) == [path.name for path in _manifests()]


def test_every_turngate_variable_is_a_setting() -> None:
    known = {f"TURNGATE_{field.upper()}" for field in (*Settings.model_fields, *Target.model_fields)}
    named = {name for path in _deployment_files() for name in TURNGATE_VARIABLE.findall(path.read_text())}
    assert named, "the deployment files name TURNGATE_* settings"
    assert named - known == set()


def test_nothing_runs_insecure() -> None:
    for path in _deployment_files():
        text = path.read_text()
        assert "TURNGATE_INSECURE" not in text, path
        assert "--insecure" not in text, path


def test_placeholder_tokens_files_name_no_principal(tmp_path: Path) -> None:
    secret = _named("Secret", "turngate-tokens")
    (name, text), *_ = secret["stringData"].items()
    (tmp_path / name).write_text(text)
    for placeholder in (COMPOSE_FILES / "tokens.toml", tmp_path / name):
        with pytest.raises(TokensFileError, match="principals"):
            load_tokens(placeholder)


def test_kubernetes_replicas_outlast_their_drain() -> None:
    pod = _replicas()
    env = _env(_container(pod))
    drain = float(env["TURNGATE_DRAIN_DELAY"]) + float(env["TURNGATE_SHUTDOWN_GRACE"])
    assert pod["terminationGracePeriodSeconds"] > drain + 1


def test_compose_replicas_outlast_their_drain() -> None:
    for name in COMPOSE_REPLICAS:
        service = _compose_services()[name]
        env = service["environment"]
        drain = float(env["TURNGATE_DRAIN_DELAY"]) + float(env["TURNGATE_SHUTDOWN_GRACE"])
        assert _seconds(service["stop_grace_period"]) > drain + 1, name


def test_kubernetes_replicas_probe_grpc_health() -> None:
    container = _container(_replicas())
    assert _env(container)["TURNGATE_LISTEN"].endswith(f":{GRPC_PORT}")
    expected = {"readinessProbe": "", "livenessProbe": "liveness", "startupProbe": "liveness"}
    for probe, service in expected.items():
        assert container[probe]["grpc"] == {"port": GRPC_PORT, "service": service}, probe


def test_kubernetes_replicas_spread_connections_over_new_pods() -> None:
    assert float(_env(_container(_replicas()))["TURNGATE_MAX_CONNECTION_AGE"]) > 0


def test_compose_replicas_check_their_health_and_publish_their_own_ports() -> None:
    published = set()
    for name in COMPOSE_REPLICAS:
        service = _compose_services()[name]
        assert service["command"] == ["serve", "--no-projector"]
        assert service["healthcheck"]["test"][:3] == ["CMD", "turngate", "health"]
        (grpc,) = [port for port in service["ports"] if port.endswith(f":{GRPC_PORT}")]
        published.add(grpc)
    assert len(published) == len(COMPOSE_REPLICAS)


def test_compose_services_without_grpc_replace_the_images_health_check() -> None:
    services = _compose_services()
    assert services["migrate"]["healthcheck"] == {"disable": True}
    assert "/metrics" in " ".join(services["projector"]["healthcheck"]["test"])


def test_compose_services_start_once_their_backends_are_ready() -> None:
    services = _compose_services()
    backends = {"redis": "service_healthy", "postgres": "service_healthy"}
    migrated = {**backends, "migrate": "service_completed_successfully"}
    expected = {"migrate": backends, "projector": migrated} | dict.fromkeys(COMPOSE_REPLICAS, migrated)
    for name, conditions in expected.items():
        depends_on = services[name]["depends_on"]
        assert {dep: depends_on[dep]["condition"] for dep in conditions} == conditions, name
    for backend in backends:
        assert "healthcheck" in services[backend], backend


def test_compose_exports_traces_only_with_the_tracing_profile() -> None:
    services = _compose_services()
    for name in ("otel-collector", "jaeger"):
        assert services[name]["profiles"] == ["tracing"], name
    unless_asked = "${OTEL_EXPORTER_OTLP_ENDPOINT:-}"
    for name, service in _turngate_services().items():
        assert service["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == unless_asked, name
    (collector,) = _yaml(COMPOSE_FILES / "otel-collector.yaml")
    assert collector["service"]["pipelines"]["traces"]["receivers"] == ["otlp"]


def test_replicas_read_tokens_from_a_mounted_secret() -> None:
    compose = _yaml(COMPOSE)[0]
    for name in COMPOSE_REPLICAS:
        service = compose["services"][name]
        (secret,) = service["secrets"]
        assert service["environment"]["TURNGATE_AUTH_FILE"] == f"/run/secrets/{secret}", name
        assert (ROOT / compose["secrets"][secret]["file"]).is_file()
    pod = _replicas()
    auth_file = Path(_env(_container(pod))["TURNGATE_AUTH_FILE"])
    (mount,) = [m for m in _container(pod)["volumeMounts"] if Path(m["mountPath"]) == auth_file.parent]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    secret = _named("Secret", volume["secret"]["secretName"])
    assert auth_file.name in secret["stringData"]


def test_kubernetes_containers_run_as_non_root_and_locked_down() -> None:
    for name, pod in _pod_specs():
        assert pod["automountServiceAccountToken"] is False, name
        for container in pod["containers"]:
            context = pod.get("securityContext", {}) | container.get("securityContext", {})
            assert context["runAsNonRoot"] is True, name
            assert context["runAsUser"] == UID, name
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            assert context["seccompProfile"]["type"] == "RuntimeDefault", name


def test_compose_turngate_services_run_as_non_root_and_locked_down() -> None:
    for name, service in _turngate_services().items():
        assert service["user"] == f"{UID}:{UID}", name
        assert service["read_only"] is True, name
        assert service["cap_drop"] == ["ALL"], name


def test_kubernetes_containers_request_resources_and_cap_memory() -> None:
    for name, pod in _pod_specs():
        for container in pod["containers"]:
            resources = container["resources"]
            assert set(resources["requests"]) == {"cpu", "memory"}, name
            assert "memory" in resources["limits"], name


def test_kubernetes_processes_share_settings_and_backends() -> None:
    sources = {
        name: [next(iter(source.values()))["name"] for source in _container(pod)["envFrom"]]
        for name, pod in _pod_specs()
    }
    assert all(names == ["turngate-settings", "turngate-backends"] for names in sources.values()), sources


def test_kubernetes_services_name_the_grpc_port() -> None:
    replicas = _named("Deployment", "turngate")["spec"]["selector"]["matchLabels"]
    for name in ("turngate", "turngate-headless"):
        service = _named("Service", name)
        (grpc,) = [port for port in service["spec"]["ports"] if port["name"] == "grpc"]
        assert grpc["port"] == GRPC_PORT, name
        assert grpc["targetPort"] == "grpc", name
        assert grpc["appProtocol"], name
        assert service["spec"]["selector"] == replicas, name


def test_disruption_budget_covers_the_replicas() -> None:
    budget = _named("PodDisruptionBudget", "turngate")
    replicas = _named("Deployment", "turngate")
    assert budget["spec"]["selector"] == replicas["spec"]["selector"]
    assert replicas["spec"]["replicas"] > budget["spec"]["maxUnavailable"]


def test_kubernetes_replicas_run_a_worker_per_core_of_their_cpu_limit_each_with_a_metrics_port() -> None:
    """`--workers auto` sizes itself by the container's CPU limit (a cgroup quota): the replicas
    have one, and a metrics port for each worker it allows (worker i on 9464 + i)."""
    container = _container(_replicas())
    assert _env(container)["TURNGATE_WORKERS"] == "auto"
    workers = int(container["resources"]["limits"]["cpu"])
    metrics = sorted(
        port["containerPort"] for port in container["ports"] if port["name"].startswith("metrics")
    )
    assert metrics == [9464 + worker for worker in range(workers)]
    assert _env(container)["TURNGATE_METRICS_LISTEN"] == "0.0.0.0:9464"
