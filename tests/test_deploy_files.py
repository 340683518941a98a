"""deploy/: Prometheus config checked by promtool; compose, Alertmanager and Grafana files parsed
and cross-checked (Docker is not run here: the files are validated by parsing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_agenteval.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
PROM_DIR = DEPLOY / "prometheus"


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return _yaml(DEPLOY / "compose.yaml")


def _service_args(compose: dict[str, Any], name: str) -> list[str]:
    command = compose["services"][name]["command"]
    assert isinstance(command, list), f"{name}: command as a list, not a shell string"
    return [str(c) for c in command]


def _mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for v in service.get("volumes", []):
        source, target, *_ = v.split(":")
        out.append((source, target))
    return out


def test_promtool_check_config() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool not found on PATH under CI: .ci/install-tools.sh should have installed it")
        pytest.skip("promtool not installed")
    out = subprocess.run([promtool, "check", "config", "prometheus.yml"], cwd=PROM_DIR, capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 1 rule files found" in out.stdout


def test_prometheus_config_loads_only_the_rules() -> None:
    config = _yaml(PROM_DIR / "prometheus.yml")
    assert config["rule_files"] == ["rules/agenteval.rules.yml"]  # not the promtool unit tests beside it
    assert (PROM_DIR / "rules" / "agenteval.rules.yml").is_file()
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert "agenteval" in jobs  # the alert rules and the dashboard name this job


def test_compose_services_and_mounted_files_exist(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"demo", "prometheus", "alertmanager", "grafana", "agenteval-serve-a",
                             "agenteval-serve-b", "collector", "agent-app"}
    for name, service in services.items():
        for source, target in _mounts(service):
            if source.startswith((".", "/")):
                assert (DEPLOY / source).exists(), f"{name}: mounted {source} does not exist"
                assert target.startswith("/"), f"{name}: mount target {target}"
            else:
                assert source in compose["volumes"], f"{name}: named volume {source} not declared"
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name}: publish {port} on loopback only"
        for dep in service.get("depends_on", []):
            assert dep in services


def test_demo_runs_forever_at_a_rate_and_prometheus_scrapes_it(compose: dict[str, Any]) -> None:
    demo = compose["services"]["demo"]
    build = demo["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
    args = build_parser().parse_args(_service_args(compose, "demo"))
    assert args.command == "demo" and args.forever and args.rate == 2 and args.addr == "0.0.0.0"
    targets = [t for j in _yaml(PROM_DIR / "prometheus.yml")["scrape_configs"] if j["job_name"] == "agenteval"
               for sc in j["static_configs"] for t in sc["targets"]]
    assert targets == [f"demo:{args.port}"]


def test_prometheus_service_uses_the_shipped_config_with_exemplars(compose: dict[str, Any]) -> None:
    prom = compose["services"]["prometheus"]
    args = _service_args(compose, "prometheus")
    assert "--enable-feature=exemplar-storage" in args
    [config] = [a.split("=", 1)[1] for a in args if a.startswith("--config.file=")]
    mounts = {t: s for s, t in _mounts(prom)}
    assert mounts[config] == "./prometheus/prometheus.yml"
    # rule_files are relative to the config file: the rules must be mounted beside it
    config_dir = config.rsplit("/", 1)[0]
    for rule_file in _yaml(PROM_DIR / "prometheus.yml")["rule_files"]:
        assert mounts[f"{config_dir}/{rule_file}"] == f"./prometheus/{rule_file}"
    alertmanagers = _yaml(PROM_DIR / "prometheus.yml")["alerting"]["alertmanagers"]
    assert alertmanagers[0]["static_configs"][0]["targets"] == ["alertmanager:9093"]


def test_alertmanager_config(compose: dict[str, Any]) -> None:
    am = compose["services"]["alertmanager"]
    args = _service_args(compose, "alertmanager")
    [config] = [a.split("=", 1)[1] for a in args if a.startswith("--config.file=")]
    assert {t: s for s, t in _mounts(am)}[config] == "./alertmanager/alertmanager.yml"
    cfg = _yaml(DEPLOY / "alertmanager" / "alertmanager.yml")
    receivers = {r["name"] for r in cfg["receivers"]}
    routes = [cfg["route"], *cfg["route"].get("routes", [])]
    assert {r["receiver"] for r in routes} <= receivers
    alerts = {r["alert"] for g in _yaml(PROM_DIR / "rules" / "agenteval.rules.yml")["groups"] for r in g["rules"]}
    for rule in cfg["inhibit_rules"]:
        names = set()
        for matcher in rule["source_matchers"] + rule["target_matchers"]:
            m = re.fullmatch(r'alertname=~?"([^"]+)"', matcher)
            assert m, matcher
            names |= set(m.group(1).split("|"))
        assert names <= alerts, names - alerts


def test_grafana_provisioning_points_at_prometheus_and_the_dashboard(compose: dict[str, Any]) -> None:
    grafana = compose["services"]["grafana"]
    assert grafana["image"].startswith("grafana/grafana:11.6")  # the SDK's types release
    mounts = {t: s for s, t in _mounts(grafana)}
    ds_dir = DEPLOY / mounts["/etc/grafana/provisioning/datasources"]
    [ds] = _yaml(next(ds_dir.glob("*.yaml")))["datasources"]
    assert ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090" and ds["isDefault"]
    assert [d["name"] for d in ds["jsonData"]["exemplarTraceIdDestinations"]] == ["trace_id"]  # metrics.py label
    db_dir = DEPLOY / mounts["/etc/grafana/provisioning/dashboards"]
    [provider] = _yaml(next(db_dir.glob("*.yaml")))["providers"]
    path = provider["options"]["path"]
    dashboards = {t: s for t, s in mounts.items() if t.startswith(path + "/")}
    assert dashboards, f"nothing mounted under {path}"
    for target, source in dashboards.items():
        board = json.loads((DEPLOY / source).read_text())
        assert board["uid"] and target.endswith(".json")
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home in dashboards


def test_dockerfile_copies_what_exists_and_runs_the_demo() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.1[0-9]", text, re.MULTILINE)
    for line in re.findall(r"^COPY (.+)$", text, re.MULTILINE):
        *sources, _dest = line.split()
        for source in sources:
            assert (ROOT / source).exists(), source
            ignore = (DEPLOY / "Dockerfile.dockerignore").read_text()
            assert f"!{source.rstrip('/')}" in ignore, f"{source} excluded from the build context"
    [entrypoint] = re.findall(r"^ENTRYPOINT (.+)$", text, re.MULTILINE)
    [cmd] = re.findall(r"^CMD (.+)$", text, re.MULTILINE)
    assert json.loads(entrypoint) == ["otel-agenteval"]
    args = build_parser().parse_args(json.loads(cmd))
    assert args.command == "demo" and args.forever and args.addr == "0.0.0.0"


# --- collector-side: serve replicas behind the Collector (docs/serve.md) ---------------------------
COLLECTOR = DEPLOY / "collector"
KUBE = DEPLOY / "kubernetes"
SERVE_DEFAULTS = build_parser().parse_args(["serve"])


def _serve_args(argv: list[str]) -> Any:
    args = build_parser().parse_args(argv)
    assert args.command == "serve"
    return args


def _lb(config: dict[str, Any]) -> dict[str, Any]:
    lb = config["exporters"]["load_balancing"]  # the name the pinned release gives it (not the old alias)
    assert lb["routing_key"] == "traceID"
    assert lb["sending_queue"]["enabled"] and lb["retry_on_failure"]["enabled"]
    otlp = lb["protocol"]["otlp"]
    assert otlp["sending_queue"]["enabled"] and otlp["retry_on_failure"]["enabled"]
    assert otlp["headers"]["authorization"] == "Bearer ${env:AGENTEVAL_TOKEN}"
    assert config["service"]["pipelines"]["traces"]["exporters"] == ["load_balancing"]
    return lb


def test_compose_collector_shards_across_the_serve_replicas(compose: dict[str, Any]) -> None:
    services = compose["services"]
    replicas = sorted(n for n in services if n.startswith("agenteval-serve-"))
    assert len(replicas) == 2
    for name in replicas:
        args = _serve_args(_service_args(compose, name))
        assert args.addr == "0.0.0.0" and args.token_env == "AGENTEVAL_TOKEN"
        assert "AGENTEVAL_TOKEN" in services[name]["environment"]
        assert dict(_mounts(services[name]))["../examples/policies/support-agent.yaml"] == args.policy
    (config_src,) = [src for src, dst in _mounts(services["collector"]) if dst == "/etc/otelcol/config.yaml"]
    lb = _lb(_yaml(DEPLOY / config_src))
    assert lb["resolver"]["static"]["hostnames"] == [f"{n}:{SERVE_DEFAULTS.grpc_port}" for n in replicas]
    assert "AGENTEVAL_TOKEN" in services["collector"]["environment"]
    app = services["agent-app"]
    assert (DEPLOY / dict((t, s) for s, t in _mounts(app))["/app/agent_app.py"]).is_file()
    assert app["command"][app["command"].index("--endpoint") + 1] == "http://collector:4318"
    jobs = {j["job_name"]: j for j in _yaml(PROM_DIR / "prometheus.yml")["scrape_configs"]}
    assert jobs["agenteval-serve"]["static_configs"][0]["targets"] == \
        [f"{n}:{SERVE_DEFAULTS.metrics_port}" for n in replicas]


def _kube_docs() -> list[dict[str, Any]]:
    kustomization = _yaml(KUBE / "kustomization.yaml")
    docs = []
    for name in kustomization["resources"]:
        docs.extend(d for d in yaml.safe_load_all((KUBE / name).read_text()) if d)
    return docs


def test_kubernetes_manifests_validate_against_the_schemas() -> None:
    import kubernetes_validate

    for doc in _kube_docs():
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: its schema is not in kubernetes-validate (checked by hand below)
        kubernetes_validate.validate(doc, "1.30", strict=True)


def test_kubernetes_names_ports_and_probes_agree() -> None:
    docs = {(d["kind"], d["metadata"]["name"]): d for d in _kube_docs()}
    assert {d["metadata"].get("namespace", d["metadata"]["name"]) for d in docs.values()} == {"observability"}
    serve = docs[("StatefulSet", "agenteval-serve")]
    pod = serve["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    args = _serve_args(container["args"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"otlp-grpc": args.grpc_port, "otlp-http": args.http_port, "metrics": args.metrics_port}
    assert args.addr == "0.0.0.0" and args.token_env == "AGENTEVAL_TOKEN"
    assert {e["name"] for e in container["env"]} == {"AGENTEVAL_TOKEN"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    # SIGTERM: the shutdown delay and the drain fit in the grace period
    assert args.shutdown_delay + args.drain_timeout < pod["spec"]["terminationGracePeriodSeconds"]
    assert serve["spec"]["replicas"] >= 2
    (mount,) = [m for m in container["volumeMounts"] if m["name"] != "wal"]
    assert args.policy.startswith(mount["mountPath"] + "/")
    (volume,) = pod["spec"]["volumes"]
    policy_map = docs[("ConfigMap", volume["configMap"]["name"])]
    from otel_agenteval import Policy

    Policy.from_yaml(policy_map["data"][args.policy.rsplit("/", 1)[1]], "configmap")  # a valid policy
    labels = pod["metadata"]["labels"]
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(args.metrics_port)
    headless = docs[("Service", "agenteval-serve-headless")]
    assert serve["spec"]["serviceName"] == headless["metadata"]["name"]
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["selector"] == labels
    assert headless["spec"]["publishNotReadyAddresses"] is False
    assert {p["targetPort"] for p in headless["spec"]["ports"]} <= set(ports)
    pdb = docs[("PodDisruptionBudget", "agenteval-serve")]
    assert pdb["spec"]["selector"]["matchLabels"] == labels and pdb["spec"]["maxUnavailable"] == 1
    monitor = docs[("ServiceMonitor", "agenteval-serve")]
    assert monitor["spec"]["selector"]["matchLabels"] == headless["metadata"]["labels"]
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    # the Collector: its config is the file in deploy/collector, its DNS resolver the headless Service
    collector_map = docs[("ConfigMap", "otel-collector-config")]
    config = yaml.safe_load(collector_map["data"]["config.yaml"])
    assert config == _yaml(COLLECTOR / "otelcol-kubernetes.yaml")
    dns = _lb(config)["resolver"]["dns"]
    assert dns["hostname"] == "agenteval-serve-headless.observability.svc.cluster.local"
    assert dns["port"] == str(args.grpc_port)  # a string: the Collector refuses an int (tests/test_collector.py)
    collector = docs[("Deployment", "otel-collector")]["spec"]["template"]["spec"]
    assert collector["volumes"][0]["configMap"]["name"] == "otel-collector-config"
    secret_refs = {e["valueFrom"]["secretKeyRef"]["name"] for c in (container, collector["containers"][0])
                   for e in c["env"]}
    assert secret_refs == {"agenteval-token"}


# --- every replica keeps a write-ahead log on a volume of its own (docs/serve.md#durability) ----------
def test_every_compose_replica_logs_to_a_volume_of_its_own(compose: dict[str, Any]) -> None:
    services = compose["services"]
    replicas = sorted(n for n in services if n.startswith("agenteval-serve-"))
    volumes = []
    for name in replicas:
        args = _serve_args(_service_args(compose, name))
        assert args.wal_dir, f"{name}: serve without --wal-dir loses what it acknowledged when killed"
        (source,) = [s for s, t in _mounts(services[name]) if t == args.wal_dir]
        assert source in compose["volumes"], f"{name}: --wal-dir {args.wal_dir} is not on a named volume"
        volumes.append(source)
    assert len(set(volumes)) == len(replicas) == 2  # one writer per log


def test_every_kubernetes_replica_logs_to_a_volume_of_its_own() -> None:
    docs = {(d["kind"], d["metadata"]["name"]): d for d in _kube_docs()}
    serve = docs[("StatefulSet", "agenteval-serve")]
    (container,) = serve["spec"]["template"]["spec"]["containers"]
    args = _serve_args(container["args"])
    assert args.wal_dir, "serve without --wal-dir loses what it acknowledged when killed"
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == args.wal_dir]
    assert not mount.get("readOnly")
    (claim,) = [c for c in serve["spec"]["volumeClaimTemplates"] if c["metadata"]["name"] == mount["name"]]
    size = claim["spec"]["resources"]["requests"]["storage"]
    assert size.endswith("Gi") and int(size[:-2]) * 2**30 >= args.wal_max_bytes + 16 * 2**20  # plus a segment
    assert serve["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 65534  # writable by the user
    assert "Deployment" not in {kind for kind, name in docs if name == "agenteval-serve"}


# --- the Collector release: pinned once, where CI builds it ------------------------------------------
def _pinned_collector_release() -> str:
    config = _yaml(ROOT / ".ci" / "collector" / "builder-config.yaml")
    release: str = config["dist"]["version"].removesuffix("-agenteval")
    assert re.fullmatch(r"\d+\.\d+\.\d+", release), release
    return release


def test_deploy_runs_the_collector_release_ci_builds_and_validates() -> None:
    release = _pinned_collector_release()
    images = []
    for path in sorted(DEPLOY.rglob("*.y*ml")):
        for m in re.finditer(r"image:\s*(otel/opentelemetry-collector[\w-]*):(\S+)", path.read_text()):
            images.append((path.relative_to(ROOT).as_posix(), m.group(1), m.group(2)))
    assert {p for p, *_ in images} == {"deploy/compose.yaml", "deploy/kubernetes/collector.yaml"}
    assert [(p, tag) for p, _, tag in images if tag != release] == [], \
        f"the Collector in deploy/ must be {release}, the release .ci/collector/builder-config.yaml pins"
    for path in sorted((DEPLOY / "collector").glob("*.yaml")):  # the builder config: every module at it
        assert "loadbalancing:" not in path.read_text(), f"{path.name}: the {release} name is load_balancing"
    builder = (ROOT / ".ci" / "collector" / "builder-config.yaml").read_text()
    contrib = re.findall(r"opentelemetry-collector-contrib/\S+ v(\S+)", builder)
    assert contrib and set(contrib) == {release}
