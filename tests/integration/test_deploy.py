"""What can be checked of ``deploy/`` without a container runtime or a cluster.

The compose file through ``docker-compose config``, the Kubernetes manifests rendered by
``kubectl kustomize`` and checked against the Kubernetes schemas (``kubernetes-validate``,
offline, strict: an unknown field fails), the systemd units through ``systemd-analyze
verify``, the Prometheus config through ``promtool``. The commands the images run are tested
for real in ``tests/e2e/test_multihost.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import botocore.session
import kubernetes_validate
import pytest
import yaml

from crawlfleet.runtime.celery.app import TaskLimits
from crawlfleet.settings import MAX_STEP_S

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.32"
WARM_SHUTDOWN_S = TaskLimits().batch_s + MAX_STEP_S
"""The longest a worker's warm shutdown takes: its batch, then a page of at most max_step_s."""
CRAWLFLEET_ENV_SECRETS = ("CRAWLFLEET_REDIS_URL", "CRAWLFLEET_POSTGRES_DSN")


def tool(name: str) -> str:
    """The venv's own copy (kubectl comes as a wheel), else the one on the PATH."""
    in_venv = Path(sys.executable).parent / name
    path = str(in_venv) if in_venv.exists() else shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not found: scripts/bootstrap.sh --all installs it")
    return path


def run(*cmd: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    result = run(tool("docker-compose"), "-f", str(DEPLOY / "compose.yaml"), "config")
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = yaml.safe_load(result.stdout)
    return config


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    result = run(tool("kubectl"), "kustomize", str(DEPLOY / "k8s"))
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def crawlfleet_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in compose["services"].items()
        if str(service.get("image", "")).startswith("crawlfleet")
    }


def test_compose_runs_every_role_with_secrets_from_files(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {
        "redis", "postgres", "minio", "minio-bucket", "migrate", "worker", "browser-worker",
        "dashboard", "prometheus",
    }  # fmt: skip
    assert services["migrate"]["command"] == ["db", "migrate"]
    assert services["worker"]["command"][:3] == ["worker", "--queues", "http"]
    assert services["browser-worker"]["command"][:3] == ["worker", "--queues", "browser"]
    assert services["browser-worker"]["build"]["target"] == "browser"
    assert services["worker"]["deploy"]["replicas"] == 2
    for name in ("worker", "browser-worker", "dashboard"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully"
    redis_command = " ".join(services["redis"]["command"])
    for setting in ("--appendonly yes", "--maxmemory-policy noeviction"):
        assert setting in redis_command
    assert "POSTGRES_PASSWORD" not in services["postgres"]["environment"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"].startswith("/run/secrets/")
    for name, service in crawlfleet_services(compose).items():
        env = service["environment"]
        for variable in CRAWLFLEET_ENV_SECRETS:
            assert variable not in env, name
            assert env[f"{variable}_FILE"].startswith("/run/secrets/"), name
        assert {"redis_url", "postgres_dsn"} <= {s["source"] for s in service["secrets"]}, name
    for secret in compose["secrets"].values():
        assert Path(secret["file"]).parent == DEPLOY / "secrets"


def test_compose_archives_to_minio_with_credentials_from_files(compose: dict[str, Any]) -> None:
    services = compose["services"]
    minio = services["minio"]
    assert not {"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"} & set(minio["environment"])
    assert {s["source"] for s in minio["secrets"]} == {"minio_root_user", "minio_root_password"}
    bucket = services["minio-bucket"]
    assert "mc mb --ignore-existing crawlfleet/crawls" in " ".join(bucket["entrypoint"])
    assert bucket["depends_on"]["minio"]["condition"] == "service_healthy"
    for name in ("worker", "browser-worker"):
        env = services[name]["environment"]
        assert env["AWS_ENDPOINT_URL"] == "http://minio:9000", name
        assert env["AWS_SHARED_CREDENTIALS_FILE"] == "/run/secrets/s3_credentials", name
        assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & set(env), name
        assert "s3_credentials" in {s["source"] for s in services[name]["secrets"]}, name
        after = services[name]["depends_on"]["minio-bucket"]["condition"]
        assert after == "service_completed_successfully", name
    assert "--archive s3://crawls/" in (DEPLOY / "compose.yaml").read_text()


def test_make_secrets_writes_the_credentials_file_boto3_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "deploy" / "secrets").mkdir(parents=True)
    script = tmp_path / "deploy" / "make-secrets.sh"
    shutil.copy(DEPLOY / "make-secrets.sh", script)
    assert run("bash", str(script), cwd=tmp_path).returncode == 0
    secrets = tmp_path / "deploy" / "secrets"
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(secrets / "s3_credentials"))
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    credentials = botocore.session.Session().get_credentials()
    assert credentials is not None
    assert credentials.access_key == (secrets / "minio_root_user").read_text().strip()
    assert credentials.secret_key == (secrets / "minio_root_password").read_text().strip()


def test_compose_gives_workers_time_for_a_warm_shutdown(compose: dict[str, Any]) -> None:
    for name in ("worker", "browser-worker"):
        grace = compose["services"][name]["stop_grace_period"]
        assert grace.endswith("s")
        assert float(grace[:-1]) > WARM_SHUTDOWN_S


def test_secret_files_are_never_committed() -> None:
    ignore = (DEPLOY / "secrets" / ".gitignore").read_text().split()
    assert "*" in ignore
    tracked = run("git", "ls-files", "deploy/secrets").stdout.split()
    assert tracked in ([], ["deploy/secrets/.gitignore"])  # [] outside a git checkout


def test_prometheus_config_for_compose_is_valid() -> None:
    result = run(tool("promtool"), "check", "config", str(DEPLOY / "prometheus" / "compose.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_k8s_manifests_pass_the_kubernetes_schemas(manifests: list[dict[str, Any]]) -> None:
    kinds = sorted(f"{doc['kind']}/{doc['metadata']['name']}" for doc in manifests)
    assert [re.sub(r"-[a-z0-9]{10}$", "", kind) for kind in kinds] == [
        "ConfigMap/crawlfleet-config",
        "Deployment/crawlfleet-dashboard",
        "Deployment/crawlfleet-worker-browser",
        "Deployment/crawlfleet-worker-http",
        "HorizontalPodAutoscaler/crawlfleet-worker-http",
        "Job/crawlfleet-db-migrate",
        "Namespace/crawlfleet",
        "Service/crawlfleet-dashboard",
    ]
    for doc in manifests:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_schema_check_refuses_an_unknown_field(manifests: list[dict[str, Any]]) -> None:
    deployment = next(doc for doc in manifests if doc["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def pod_specs(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["name"]: doc["spec"]["template"]["spec"]
        for doc in manifests
        if doc["kind"] in ("Deployment", "Job")
    }


def test_k8s_pods_are_bounded_unprivileged_and_read_secrets_from_files(
    manifests: list[dict[str, Any]],
) -> None:
    config = next(doc for doc in manifests if doc["kind"] == "ConfigMap")["data"]
    for variable in CRAWLFLEET_ENV_SECRETS:
        assert variable not in config
        assert config[f"{variable}_FILE"].startswith("/run/secrets/crawlfleet/")
    for name, spec in pod_specs(manifests).items():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        (secret,) = [v for v in spec["volumes"] if "secret" in v]
        assert secret["secret"]["secretName"] == "crawlfleet-secrets", name
        # uid 10001 reads the Secret's root-owned files through their group
        assert spec["securityContext"]["fsGroup"] == 10001, name
        assert secret["secret"]["defaultMode"] == 0o440, name
        for container in spec["containers"]:
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), name
            assert {"cpu", "memory"} <= set(container["resources"]["limits"]), name
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert container["image"].startswith("registry.example.com/crawlfleet"), name


def test_k8s_workers_outlive_their_warm_shutdown_and_probe_their_heartbeat(
    manifests: list[dict[str, Any]],
) -> None:
    workers = {n: s for n, s in pod_specs(manifests).items() if "worker" in n}
    assert set(workers) == {"crawlfleet-worker-http", "crawlfleet-worker-browser"}
    for name, spec in workers.items():
        assert spec["terminationGracePeriodSeconds"] > WARM_SHUTDOWN_S, name
        (container,) = spec["containers"]
        kind = name.removeprefix("crawlfleet-worker-")
        assert container["args"][:3] == ["worker", "--queues", kind]
        probe = container["livenessProbe"]["exec"]["command"]
        assert probe == ["crawlfleet", "worker", "--health"]


def test_the_hpa_scales_on_the_metric_the_adapter_rule_serves(
    manifests: list[dict[str, Any]],
) -> None:
    hpa = next(doc for doc in manifests if doc["kind"] == "HorizontalPodAutoscaler")
    (metric,) = hpa["spec"]["metrics"]
    name = metric["external"]["metric"]["name"]
    values = yaml.safe_load((DEPLOY / "k8s" / "prometheus-adapter.yaml").read_text())
    (rule,) = values["rules"]["external"]
    assert rule["name"]["as"] == name
    family = rule["seriesQuery"].partition("{")[0]
    assert family == "crawlfleet_queued_requests"
    metrics_source = (ROOT / "src" / "crawlfleet" / "monitoring" / "metric_families.py").read_text()
    assert f'"{family}"' in metrics_source
    assert "max by (namespace, crawl, domain)" in rule["metricsQuery"]  # each crawl counted once


def test_systemd_units_verify(tmp_path: Path) -> None:
    analyze = tool("systemd-analyze")
    crawlfleet = str(Path(sys.executable).parent / "crawlfleet")
    units = []
    for unit in sorted((DEPLOY / "systemd").glob("*.service")):
        text = unit.read_text()
        assert "/opt/crawlfleet/venv/bin/crawlfleet " in text, unit.name
        name = unit.name.replace("@.", "@9411.") if "worker@" in unit.name else unit.name
        name = name.replace("@.", "@shop.")
        (tmp_path / name).write_text(
            text.replace("/opt/crawlfleet/venv/bin/crawlfleet", crawlfleet)
        )
        units.append(name)
    result = run(analyze, "verify", "--man=no", *units, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr  # an unknown key is only a warning
    worker = (DEPLOY / "systemd" / "crawlfleet-worker@.service").read_text()
    timeout_s = float(re.search(r"^TimeoutStopSec=(\d+)$", worker, re.M).group(1))  # type: ignore[union-attr]
    assert timeout_s > WARM_SHUTDOWN_S
    assert "%d/redis_url" in worker
    assert "%d/postgres_dsn" in worker


def test_dockerfile_builds_slim_non_root_images_with_the_pinned_extras() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in dockerfile
    assert 'ENTRYPOINT ["crawlfleet"]' in dockerfile
    assert 'CMD ["crawlfleet", "worker", "--health"]' in dockerfile
    stages = re.findall(r"^FROM \S+ AS (\w+)$", dockerfile, re.M)
    assert stages == ["build", "base", "browser", "worker"]  # the last one is the default
    for stage in ("browser", "worker"):
        body = dockerfile.split(f" AS {stage}\n", 1)[1].split("\nFROM ", 1)[0]
        assert "USER 10001:10001" in body, stage
    build = dockerfile.split(" AS build\n", 1)[1].split("\nFROM ", 1)[0]
    assert "--no-install-recommends gcc libc6-dev" in build  # the C of the nesting scan
    browser = dockerfile.split(" AS browser\n", 1)[1].split("\nFROM ", 1)[0]
    assert "install -y --no-install-recommends chromium" in browser
    assert '"crawlfleet[distributed,dashboard,browser,archive]"' in browser
    worker = dockerfile.split(" AS worker\n", 1)[1]
    # http workers impersonate too; every worker archives (boto3 for s3:// targets)
    assert '"crawlfleet[distributed,dashboard,stealth,archive]"' in worker
    with (ROOT / "pyproject.toml").open("rb") as handle:
        extras = tomllib.load(handle)["project"]["optional-dependencies"]
    assert {"distributed", "dashboard", "stealth", "browser", "archive"} <= set(extras)
    lines = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    ignore = [line for line in lines if line and not line.startswith("#")]
    assert ignore[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!src/"} <= set(ignore)
