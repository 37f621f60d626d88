"""deploy/ checked without a cluster: every Kubernetes object (base, and each
overlay rendered by a small strategic-merge of its patches) against the
Kubernetes schemas with kubernetes-validate; the KServe objects against the
shapes of KServe's CRDs (written here: no schema ships for them); and the
image name, ports and shutdown timing against docker/Dockerfile and the
flags tensord is given."""
import copy
import os
import re

import kubernetes_validate
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy")
K8S_VERSION = "1.31.0"


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def merge(base, patch):
    """Strategic-merge as kustomize applies our patches: maps merge, null
    deletes a key, lists of named maps (containers, volumes, ports) merge by
    name, other lists are replaced."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif (isinstance(v, list) and isinstance(out.get(k), list) and v
              and all(isinstance(x, dict) and "name" in x for x in v + out[k])):
            merged = {x["name"]: x for x in out[k]}
            for x in v:
                merged[x["name"]] = merge(merged.get(x["name"], {}), x)
            out[k] = list(merged.values())
        else:
            out[k] = merge(out.get(k), v)
    return out


def json6902(obj, ops):
    obj = copy.deepcopy(obj)
    for op in ops:
        assert op["op"] == "remove", op  # the only kind deploy/ uses
        *parents, last = op["path"].strip("/").split("/")
        node = obj
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        del node[int(last) if isinstance(node, list) else last]
    return obj


def render(directory):
    """The objects `kubectl apply -k directory` would create."""
    kust = load_all(os.path.join(directory, "kustomization.yaml"))[0]
    objs = []
    for r in kust.get("resources", []):
        p = os.path.join(directory, r)
        objs += render(p) if os.path.isdir(p) else load_all(p)
    for g in kust.get("configMapGenerator", []):
        data = {}
        for f in g["files"]:
            with open(os.path.join(directory, f)) as fh:
                data[os.path.basename(f)] = fh.read()
        objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": g["name"]},
                     "data": data})
    for p in kust.get("patches", []):
        if "path" in p:
            patch = load_all(os.path.join(directory, p["path"]))[0]
            target = {"kind": patch["kind"], "name": patch["metadata"]["name"]}
        else:
            patch, target = yaml.safe_load(p["patch"]), p["target"]
        hits = [i for i, o in enumerate(objs)
                if o["kind"] == target["kind"] and o["metadata"]["name"] == target["name"]]
        assert len(hits) == 1, (directory, p)
        i = hits[0]
        objs[i] = json6902(objs[i], patch) if isinstance(patch, list) else merge(objs[i], patch)
    for img in kust.get("images", []):
        for o in objs:
            for c in containers(o):
                if c["image"].split(":")[0] == img["name"]:
                    c["image"] = f"{img.get('newName', img['name'])}:{img['newTag']}"
    return objs


def containers(obj):
    spec = obj.get("spec", {})
    if obj["kind"] == "Deployment":
        return spec["template"]["spec"]["containers"]
    if obj["kind"] == "ClusterServingRuntime":
        return spec["containers"]
    return []


def flag(args, name):
    for a in args:
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
    return None


def dockerfile():
    with open(os.path.join(ROOT, "docker", "Dockerfile")) as f:
        return f.read()


KUSTOMIZATIONS = ["base", "overlays/custom-metrics", "overlays/grpc-only"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_kubernetes_schemas(name):
    objs = render(os.path.join(DEPLOY, name))
    assert objs
    for o in objs:
        kubernetes_validate.validate(o, K8S_VERSION, strict=True)


def test_schema_check_can_fail():
    d = next(o for o in render(os.path.join(DEPLOY, "base")) if o["kind"] == "Deployment")
    d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "8500"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_image_ports_and_shutdown_match(name):
    objs = render(os.path.join(DEPLOY, name))
    exposed = set(map(int, re.search(r"^EXPOSE (.*)$", dockerfile(), re.M).group(1).split()))
    assert exposed == {8500, 8501}
    dep = next(o for o in objs if o["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"].split(":")[0] == "tensord"  # the README's `docker build -t tensord`
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert set(ports.values()) <= exposed and ports["grpc"] == 8500
    svc = next(o for o in objs if o["kind"] == "Service")
    for p in svc["spec"]["ports"]:
        assert p["targetPort"] in ports
    rest_off = flag(c["args"], "rest_api_port") == "0"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        pr = c[probe]
        if rest_off:
            assert pr["grpc"]["port"] == 8500 and "httpGet" not in pr
        else:
            want = "/healthz" if probe == "livenessProbe" else "/readyz"
            assert pr["httpGet"] == {"path": want, "port": "http"}
    # The pod's grace covers preStop + drain + in-flight grace.
    pre = c["lifecycle"]["preStop"]["exec"]["command"]
    assert pre[0] == "/bin/sleep"
    budget = (float(pre[1]) + float(flag(c["args"], "tensord_drain_seconds"))
              + float(flag(c["args"], "tensord_shutdown_grace_seconds")))
    assert pod["terminationGracePeriodSeconds"] >= budget + 2
    # The security context matches the image's user.
    assert pod["securityContext"]["runAsUser"] == 1000 and "USER 1000:1000" in dockerfile()
    # Mounted files exist: the config file named in the args is a ConfigMap key.
    cfg_path = flag(c["args"], "model_config_file")
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    cms = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ConfigMap"}
    for path in filter(None, [cfg_path, flag(c["args"], "monitoring_config_file")]):
        vol = next(n for n, m in mounts.items() if path.startswith(m + "/"))
        assert os.path.basename(path) in cms[vols[vol]["configMap"]["name"]]["data"]
    # Every selector matches the pod template.
    labels = dep["spec"]["template"]["metadata"]["labels"]
    for o in objs:
        sel = o.get("spec", {}).get("selector")
        if o["kind"] in ("Service",):
            assert sel.items() <= labels.items()
        elif o["kind"] in ("Deployment", "PodDisruptionBudget"):
            assert sel["matchLabels"].items() <= labels.items()
        elif o["kind"] == "HorizontalPodAutoscaler":
            assert o["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]


def test_custom_metrics_use_exported_names():
    objs = render(os.path.join(DEPLOY, "overlays/custom-metrics"))
    hpa = next(o for o in objs if o["kind"] == "HorizontalPodAutoscaler")
    names = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"}
    rules = yaml.safe_load(next(o for o in objs if o["metadata"]["name"] ==
                                "tensord-prometheus-adapter-rules")["data"]["rules.yaml"])
    assert names == {r["name"]["as"] for r in rules["rules"]}
    queries = " ".join(r["seriesQuery"] + r["metricsQuery"] for r in rules["rules"])
    assert "tensord_queue_depth" in queries and ":tensorflow:serving:request_count" in queries
    assert any(m["type"] == "Resource" and m["resource"]["name"] == "cpu"
               for m in hpa["spec"]["metrics"])


# --- KServe: the CRD shapes (serving.kserve.io), checked by hand ----------------

def check_shape(obj, shape, where="$"):
    """shape: a type, a {key: shape} map (keys ending in '?' optional; no
    other keys allowed unless '...' is a key), or [shape] for a list."""
    if isinstance(shape, dict):
        assert isinstance(obj, dict), f"{where}: expected a map"
        known = {k.rstrip("?") for k in shape if k != "..."}
        for k, sub in shape.items():
            if k == "...":
                continue
            key = k.rstrip("?")
            if key in obj:
                check_shape(obj[key], sub, f"{where}.{key}")
            else:
                assert k.endswith("?"), f"{where}: missing {key}"
        if "..." not in shape:
            extra = set(obj) - known
            assert not extra, f"{where}: unknown fields {sorted(extra)}"
    elif isinstance(shape, list):
        assert isinstance(obj, list) and obj, f"{where}: expected a non-empty list"
        for i, x in enumerate(obj):
            check_shape(x, shape[0], f"{where}[{i}]")
    else:
        assert isinstance(obj, shape), f"{where}: expected {shape.__name__}"


METADATA = {"name": str, "annotations?": {"...": None}, "labels?": {"...": None},
            "namespace?": str}
RESOURCES = {"requests?": {"...": None}, "limits?": {"...": None}}
SERVING_RUNTIME = {
    "apiVersion": str, "kind": str, "metadata": METADATA,
    "spec": {"annotations?": {"...": None}, "supportedModelFormats": [
        {"name": str, "version?": str, "autoSelect?": bool, "priority?": int}],
        "protocolVersions?": [str], "multiModel?": bool, "disabled?": bool,
        "containers": [{"name": str, "image": str, "command?": [str], "args?": [str],
                        "env?": [{"...": None}], "ports?": [{"containerPort": int,
                                                             "protocol?": str, "name?": str}],
                        "resources?": RESOURCES, "securityContext?": {"...": None}}]},
}
INFERENCE_SERVICE = {
    "apiVersion": str, "kind": str, "metadata": METADATA,
    "spec": {"predictor": {"minReplicas?": int, "maxReplicas?": int, "model": {
        "modelFormat": {"name": str, "version?": str}, "runtime?": str, "storageUri": str,
        "resources?": RESOURCES, "args?": [str], "env?": [{"...": None}]}}},
}


def kserve(name):
    (obj,) = load_all(os.path.join(DEPLOY, "kserve", name))
    return obj


def test_kserve_cluster_serving_runtime():
    rt = kserve("cluster-serving-runtime.yaml")
    check_shape(rt, SERVING_RUNTIME)
    assert rt["apiVersion"] == "serving.kserve.io/v1alpha1"
    assert rt["kind"] == "ClusterServingRuntime"
    assert {f["name"] for f in rt["spec"]["supportedModelFormats"]} == {"tensorflow"}
    assert set(rt["spec"]["protocolVersions"]) == {"v1", "grpc-v1"}
    (c,) = rt["spec"]["containers"]
    assert c["name"] == "kserve-container"  # the name KServe's controller looks for
    assert c["image"].split(":")[0] == "tensord"
    # KServe's TF Serving contract: this executable, its ports and /mnt/models.
    assert c["command"] == ["/usr/bin/tensorflow_model_server"]
    assert "ln -s tensord $r/usr/bin/tensorflow_model_server" in dockerfile()
    assert flag(c["args"], "model_base_path") == "/mnt/models"
    assert flag(c["args"], "model_name") == "{{.Name}}"
    assert flag(c["args"], "port") == "9000" and flag(c["args"], "rest_api_port") == "8080"
    assert [p["containerPort"] for p in c["ports"]] == [8080]
    assert rt["spec"]["annotations"]["prometheus.kserve.io/port"] == "8080"
    assert c["securityContext"]["runAsUser"] == 1000


def test_kserve_inference_service():
    isvc = kserve("inference-service.yaml")
    check_shape(isvc, INFERENCE_SERVICE)
    assert isvc["apiVersion"] == "serving.kserve.io/v1beta1"
    assert isvc["kind"] == "InferenceService"
    m = isvc["spec"]["predictor"]["model"]
    rt = kserve("cluster-serving-runtime.yaml")
    assert m["runtime"] == rt["metadata"]["name"]
    assert m["modelFormat"]["name"] in {f["name"] for f in rt["spec"]["supportedModelFormats"]}
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", isvc["metadata"]["name"])


def test_shape_check_can_fail():
    rt = kserve("cluster-serving-runtime.yaml")
    rt["spec"]["containers"][0]["argz"] = []
    with pytest.raises(AssertionError, match="unknown fields"):
        check_shape(rt, SERVING_RUNTIME)
