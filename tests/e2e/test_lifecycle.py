"""Model lifecycle against the real binary: versions appearing and leaving
under load, incomplete and broken versions, policies, labels, config files
and their reloads, retries, warmup, signals. Fixtures are copied into fresh
temporary directories and changed while the server runs."""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import BINARY, EXAMPLES, MODELS, Server, free_port

HP3 = os.path.join(MODELS, "half_plus_three_tf2")
V1 = os.path.join(HP3, "00000001")  # y = 0.5 x + 3
V2 = os.path.join(HP3, "00000002")  # y = 0.5 x + 4
BROKEN = os.path.join(MODELS, "missing_var", "00000001")
HALF_PLUS_TWO = os.path.join(EXAMPLES, "half_plus_two")
POLL = 0.2  # seconds; tensord accepts fractions of a second


class LifeServer(Server):
    """A Server started with arbitrary flags (a config file instead of a
    model name, for instance)."""

    def __init__(self, *flags, wait=True):
        self.grpc_port = free_port()
        self.rest_port = free_port()
        self.args = [BINARY, f"--port={self.grpc_port}", f"--rest_api_port={self.rest_port}",
                     *flags]
        self.log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                     f"tensord-life-{self.rest_port}.log"), "w+")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        if wait:
            self._wait_ready()


@pytest.fixture
def life():
    started = []

    def start(*flags, **kw):
        s = LifeServer(*flags, **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
        assert s.proc.returncode == 0, f"tensord did not exit cleanly:\n{s.output()}"


def predict(s, path="/v1/models/m", x=0.0, timeout=10):
    """Returns (HTTP status, y or the error)."""
    req = urllib.request.Request(f"http://127.0.0.1:{s.rest_port}{path}:predict",
                                 data=json.dumps({"instances": [x]}).encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())["predictions"][0]
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()).get("error")


def status(s, model="m"):
    code, out = s.json("GET", f"/v1/models/{model}")
    if code != 200:
        return {}
    return {int(v["version"]): v for v in out["model_version_status"]}


def wait_for(cond, timeout=60.0, step=0.02):
    """cond()'s first true value, polled for up to `timeout` s (generous: a
    loaded box is slow; a test never bounds how fast a change is seen)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


def stage(base, version, src, change=None):
    """Builds a version in a staging directory, applies change(dir), and
    renames it into place, so that no scan sees it half-made."""
    tmp = base.parent / f".staging-{base.name}-{version}"
    shutil.copytree(src, tmp)
    if change:
        change(tmp)
    os.rename(tmp, base / str(version))


def config_text(models):
    """models: [(name, base, policy text or "", {label: version})]."""
    out = ["model_config_list {"]
    for name, base, policy, labels in models:
        out.append(f"  config {{ name: '{name}' base_path: '{base}' model_platform: 'tensorflow'")
        if policy:
            out.append(f"    model_version_policy {{ {policy} }}")
        for k, v in labels.items():
            out.append(f"    version_labels {{ key: '{k}' value: {v} }}")
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def write_config(path, models):
    tmp = str(path) + ".tmp"
    with open(tmp, "w") as f:
        f.write(config_text(models))
    os.replace(tmp, path)  # a poll never sees half a file


class Client(threading.Thread):
    """Predicts at a steady rate and records every answer."""

    def __init__(self, server, path="/v1/models/m", rate=100):
        super().__init__(daemon=True)
        self.server, self.path, self.period = server, path, 1.0 / rate
        self.results = []  # (time, status, y)
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            t = time.time()
            try:
                code, y = predict(self.server, self.path)
            except Exception as e:  # a dropped connection counts as a failure
                code, y = -1, repr(e)
            self.results.append((t, code, y))
            time.sleep(max(0.0, self.period - (time.time() - t)))

    def stop(self):
        self.halt.set()
        self.join(10)

    def failures(self):
        return [r for r in self.results if r[1] != 200]

    def first_since(self, t0, value):
        for t, code, y in self.results:
            if t >= t0 and code == 200 and y == value:
                return t
        return None


# --- swaps under load -----------------------------------------------------------


def test_canary_under_load(life, tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    cfg = tmp_path / "models.config"
    write_config(cfg, [("m", base, "", {})])
    s = life(f"--model_config_file={cfg}", f"--model_config_file_poll_wait_seconds={POLL}",
             f"--file_system_poll_wait_seconds={POLL}")
    c = Client(s)
    c.start()
    try:
        assert wait_for(lambda: len(c.results) >= 20), c.results[-3:]
        # Drop version 2 in (a plain, non-atomic copy): traffic moves to it.
        shutil.copytree(V2, base / "2")
        t0 = time.time()  # the version is all there from now on
        assert wait_for(lambda: c.first_since(t0, 4.0)), c.results[-3:]
        time.sleep(0.3)
        assert c.results[-1][2] == 4.0
        assert wait_for(lambda: status(s).get(1, {}).get("state") == "END"), status(s)

        # Remove it: traffic rolls back to 1.
        t0 = time.time()
        shutil.rmtree(base / "2")
        assert wait_for(lambda: c.first_since(t0, 3.0)), c.results[-3:]
        time.sleep(0.3)
        assert c.results[-1][2] == 3.0

        # Canary: serve 1 and 2, stable on 1, canary on 2; then move canary.
        shutil.copytree(V2, base / "2")
        write_config(cfg, [("m", base, "specific { versions: 1 versions: 2 }",
                            {"stable": 1, "canary": 2})])
        assert wait_for(lambda: predict(s, "/v1/models/m/labels/canary") == (200, 4.0))
        assert predict(s, "/v1/models/m/labels/stable") == (200, 3.0)
        canary = Client(s, "/v1/models/m/labels/canary", rate=50)
        canary.start()
        time.sleep(0.2)
        t0 = time.time()
        write_config(cfg, [("m", base, "specific { versions: 1 versions: 2 }",
                            {"stable": 1, "canary": 1})])
        assert wait_for(lambda: canary.first_since(t0, 3.0))
        time.sleep(0.2)
        canary.stop()
        assert canary.failures() == []
        assert canary.results[-1][2] == 3.0
    finally:
        c.stop()
    assert len(c.results) > 20
    assert c.failures() == [], c.failures()[:5]


def test_memory_returns_after_swaps(life, tmp_path):
    """Each swap frees the old version; the process does not grow."""
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    s = life("--model_name=m", f"--model_base_path={base}",
             f"--file_system_poll_wait_seconds={POLL}")

    def rss_kb():
        with open(f"/proc/{s.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])

    sizes = []
    for i in range(2, 12):
        shutil.copytree(V2 if i % 2 else V1, base / str(i))
        assert wait_for(lambda: status(s).get(i, {}).get("state") == "AVAILABLE"), status(s)
        assert wait_for(lambda: status(s).get(i - 1, {}).get("state") == "END"), status(s)
        shutil.rmtree(base / str(i - 1))
        sizes.append(rss_kb())
    assert max(sizes[3:]) <= sizes[2] * 1.05 + 512, sizes


def test_inotify_hints_and_rearm_after_base_path_deleted(life, tmp_path):
    """With polling every hour, only inotify can pick changes up in time:
    a version renamed in, and a base path deleted and re-created."""
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    s = life("--model_name=m", f"--model_base_path={base}",
             "--file_system_poll_wait_seconds=3600")
    assert predict(s) == (200, 3.0)
    stage(base, 2, V2)
    assert wait_for(lambda: predict(s) == (200, 4.0))
    # The whole base path goes (moved away at once; deleting it file by
    # file would first empty it, which unloads everything as in TF
    # Serving): a base path that cannot be read changes nothing.
    os.rename(base, tmp_path / "old")
    time.sleep(0.3)
    assert predict(s) == (200, 4.0)
    # It comes back (renamed in whole) with version 3: the dead watch is
    # re-armed and the path rescanned without waiting for the next poll.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copytree(V1, fresh / "3")
    os.rename(fresh, base)
    assert wait_for(lambda: predict(s) == (200, 3.0)), status(s)
    assert wait_for(lambda: status(s).get(2, {}).get("state") == "END"), status(s)
    # And the new watch works: version 4 is picked up at once too.
    stage(base, 4, V2)
    assert wait_for(lambda: predict(s) == (200, 4.0)), status(s)


# --- versions that must not be served ---------------------------------------------


def test_incomplete_corrupt_and_unreadable_versions(life, tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    s = life("--model_name=m", f"--model_base_path={base}",
             f"--file_system_poll_wait_seconds={POLL}", "--max_num_load_retries=0")
    assert predict(s) == (200, 3.0)
    # 2: still being copied (no checkpoint yet).
    (base / "2").mkdir()
    shutil.copy(os.path.join(V2, "saved_model.pb"), base / "2")
    # 3: saved_model.pb cut short.
    def cut(d):
        pb = d / "saved_model.pb"
        pb.write_bytes(pb.read_bytes()[:200])

    stage(base, 3, V2, cut)

    # 4: unreadable saved_model.pb (a directory when running as root, where
    # permissions do not stop reads).
    def unreadable(d):
        pb = d / "saved_model.pb"
        if os.geteuid() == 0:
            pb.unlink()
            pb.mkdir()
        else:
            pb.chmod(0)

    stage(base, 4, V2, unreadable)
    st = wait_for(lambda: (lambda v: v if {2, 3, 4} <= set(v) else None)(status(s)))
    assert st, status(s)
    for v, what in ((2, "variables.index"), (3, "saved_model.pb"), (4, "saved_model.pb")):
        assert st[v]["state"] == "START", st[v]
        assert st[v]["status"]["error_code"] != "OK", st[v]
        assert what in st[v]["status"]["error_message"], st[v]
    assert st[1]["state"] == "AVAILABLE"
    for _ in range(5):
        assert predict(s) == (200, 3.0)
    assert predict(s, "/v1/models/m/versions/3")[0] == 404
    # 5: complete on disk but its checkpoint is corrupt: the load fails.
    def bad_crc(d):
        data = d / "variables" / "variables.data-00000-of-00001"
        raw = bytearray(data.read_bytes())
        raw[-1] ^= 0xFF
        data.write_bytes(bytes(raw))

    stage(base, 5, V2, bad_crc)
    assert wait_for(lambda: status(s).get(5, {}).get("state") == "END"), status(s)
    v5 = status(s)[5]
    assert v5["status"]["error_code"] != "OK" and "variables.data" in v5["status"]["error_message"]
    assert predict(s) == (200, 3.0)
    # Finishing the copy of 2 does not make it the latest (5 is higher and
    # aspired); fixing 3 by copying it anew does nothing either while 5
    # fails. A good 6 takes over.
    shutil.copytree(V2, base / "6")
    assert wait_for(lambda: predict(s) == (200, 4.0))
    if os.geteuid() != 0:
        (base / "4" / "saved_model.pb").chmod(0o644)


def test_load_retries_then_end(life, tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    s = life("--model_name=m", f"--model_base_path={base}",
             f"--file_system_poll_wait_seconds={POLL}", "--max_num_load_retries=2",
             "--load_retry_interval_micros=2500000")  # a wide window to see it retrying
    # Staged: a plain copy can be scanned with its data shard still empty,
    # and that first load would fail for that reason instead of the key.
    stage(base, 2, BROKEN)
    v = wait_for(lambda: status(s).get(2))
    v = wait_for(lambda: (lambda x: x if x and x["status"]["error_code"] != "OK" else None)(
        status(s).get(2)))
    assert v["state"] == "LOADING", v  # retrying, with the error visible
    assert "Key b not found in checkpoint" in v["status"]["error_message"]
    assert predict(s) == (200, 3.0)
    assert wait_for(lambda: status(s)[2]["state"] == "END"), status(s)
    assert status(s)[2]["status"]["error_code"] == "NOT_FOUND"
    assert predict(s) == (200, 3.0)
    out = s.output()
    assert "Retrying (1 of 2)" in out and "Retrying (2 of 2)" in out
    assert "Retrying (3 of 2)" not in out


# --- policies and labels ---------------------------------------------------------


def two_versions(tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    shutil.copytree(V2, base / "2")
    return base


def test_policies(life, tmp_path):
    base = two_versions(tmp_path)
    cfg = tmp_path / "c"
    write_config(cfg, [("m", base, "all {}", {})])
    s = life(f"--model_config_file={cfg}", "--file_system_poll_wait_seconds=0")
    assert predict(s, "/v1/models/m/versions/1") == (200, 3.0)
    assert predict(s, "/v1/models/m/versions/2") == (200, 4.0)
    assert predict(s) == (200, 4.0)
    s.stop()
    write_config(cfg, [("m", base, "specific { versions: 1 }", {})])
    s = life(f"--model_config_file={cfg}", "--file_system_poll_wait_seconds=0")
    assert predict(s) == (200, 3.0)
    assert predict(s, "/v1/models/m/versions/2")[0] == 404
    assert set(status(s)) == {1}


def test_labels(life, tmp_path):
    base = two_versions(tmp_path)
    cfg = tmp_path / "c"
    write_config(cfg, [("m", base, "specific { versions: 1 versions: 2 }",
                        {"stable": 1, "canary": 2})])
    s = life(f"--model_config_file={cfg}")
    assert predict(s, "/v1/models/m/labels/stable") == (200, 3.0)
    assert predict(s, "/v1/models/m/labels/canary") == (200, 4.0)
    code, msg = predict(s, "/v1/models/m/labels/beta")
    assert code == 400 and msg == "Unrecognized servable version label: beta"


def test_label_on_unavailable_version(life, tmp_path):
    base = two_versions(tmp_path)
    cfg = tmp_path / "c"
    write_config(cfg, [("m", base, "", {"stable": 1})])  # latest 1 serves only 2
    r = subprocess.run([BINARY, f"--port={free_port()}", f"--rest_api_port={free_port()}",
                        f"--model_config_file={cfg}"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert ("Request to assign label to version 1 of model m, which is not currently available "
            "for inference") in r.stderr
    s = life(f"--model_config_file={cfg}", "--allow_version_labels_for_unavailable_models")
    code, msg = predict(s, "/v1/models/m/labels/stable")
    assert code == 404 and msg == "Servable not found for request: Specific(m, 1)"


# --- config files -----------------------------------------------------------------


def test_config_reload_adds_and_removes_models(life, tmp_path):
    cfg = tmp_path / "c"
    write_config(cfg, [("half_plus_two", HALF_PLUS_TWO, "", {})])
    s = life(f"--model_config_file={cfg}", f"--model_config_file_poll_wait_seconds={POLL}")
    assert predict(s, "/v1/models/half_plus_two", 2.0) == (200, 3.0)
    write_config(cfg, [("half_plus_two", HALF_PLUS_TWO, "", {}), ("half_plus_three", HP3, "", {})])
    assert wait_for(lambda: predict(s, "/v1/models/half_plus_three", 2.0) == (200, 5.0))
    assert predict(s, "/v1/models/half_plus_two", 2.0) == (200, 3.0)
    write_config(cfg, [("half_plus_three", HP3, "", {})])
    assert wait_for(lambda: predict(s, "/v1/models/half_plus_two", 2.0)[0] == 404)
    assert predict(s, "/v1/models/half_plus_three", 2.0) == (200, 5.0)
    # A malformed rewrite is refused with its line and column; the models in
    # force stay.
    cfg.write_text("model_config_list {\n  config { name: 'x' base_path: }\n")
    assert wait_for(lambda: "line 2 column" in s.output()), s.output()[-2000:]
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig" in s.output()
    assert predict(s, "/v1/models/half_plus_three", 2.0) == (200, 5.0)


def test_zero_poll_period_keeps_config_until_sighup(life, tmp_path):
    cfg = tmp_path / "c"
    write_config(cfg, [("half_plus_two", HALF_PLUS_TWO, "", {})])
    s = life(f"--model_config_file={cfg}")
    write_config(cfg, [("half_plus_three", HP3, "", {})])
    time.sleep(1.2)
    assert predict(s, "/v1/models/half_plus_two", 2.0) == (200, 3.0)
    s.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: predict(s, "/v1/models/half_plus_three", 2.0) == (200, 5.0))
    assert wait_for(lambda: predict(s, "/v1/models/half_plus_two", 2.0)[0] == 404)


@pytest.mark.parametrize("text,where", [
    ("improperly formatted file", "line 1 column"),
    ("model_config_list {\n  config { name: 'm' base_path: '/x' model_platform: 'tensorflow' }\n"
     "  config { nme: 'y' }\n}\n", "line 3 column 12"),
])
def test_malformed_config_file_is_refused(tmp_path, text, where):
    cfg = tmp_path / "bad.config"
    cfg.write_text(text)
    r = subprocess.run([BINARY, f"--port={free_port()}", f"--rest_api_port={free_port()}",
                        f"--model_config_file={cfg}"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "Error parsing text-format tensorflow.serving.ModelServerConfig" in r.stderr
    assert where in r.stderr, r.stderr


def test_duplicate_model_in_config_is_refused(tmp_path):
    cfg = tmp_path / "dup.config"
    write_config(cfg, [("m", HP3, "", {}), ("m", HP3, "", {})])
    r = subprocess.run([BINARY, f"--port={free_port()}", f"--model_config_file={cfg}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "Illegal to list model m multiple times in config list" in r.stderr


# --- warmup -------------------------------------------------------------------------


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc32c_table()


def masked_crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, payload):  # length-delimited
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def prediction_log(alias="x", value=2.0, signature=""):
    """A tensorflow.serving.PredictionLog holding one PredictRequest."""
    shape = field(2, field(2, varint(1 << 3) + varint(1)))  # dim { size: 1 }
    tensor = varint(1 << 3) + varint(1) + shape + field(5, struct.pack("<f", value))  # DT_FLOAT
    spec = field(1, b"m") + (field(3, signature.encode()) if signature else b"")
    entry = field(1, alias.encode()) + field(2, tensor)
    request = field(1, spec) + field(2, entry)
    return field(6, field(1, request))  # predict_log { request }


def write_warmup(version_dir, records):
    extra = os.path.join(version_dir, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    with open(os.path.join(extra, "tf_serving_warmup_requests"), "wb") as f:
        for rec in records:
            n = struct.pack("<Q", len(rec))
            f.write(n + struct.pack("<I", masked_crc32c(n)) + rec +
                    struct.pack("<I", masked_crc32c(rec)))


def test_warmup(life, tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    write_warmup(base / "1", [prediction_log(value=v) for v in (1.0, 2.0, 3.0)])
    s = life("--model_name=m", f"--model_base_path={base}",
             f"--file_system_poll_wait_seconds={POLL}", "--max_num_load_retries=0")
    assert predict(s) == (200, 3.0)
    assert "Number of warmup records read: 3" in s.output()
    # A warmup record the model cannot run fails that version's load.
    stage(base, 2, V2, lambda d: write_warmup(d, [prediction_log(alias="nope")]))
    assert wait_for(lambda: status(s).get(2, {}).get("state") == "END"), status(s)
    msg = status(s)[2]["status"]["error_message"]
    assert "warmup" in msg and "nope" in msg, msg
    assert predict(s) == (200, 3.0)
    s.stop()
    # With warmup off, the same version loads.
    s = life("--model_name=m", f"--model_base_path={base}", "--enable_model_warmup=false")
    assert predict(s) == (200, 4.0)


def infer_logs():
    """classify_log, regress_log (with a context) and multi_inference_log
    records for the TF1 fixture's classify/regress signatures, written with
    the stock tensorflow-serving-api messages."""
    from tensorflow.core.example import example_pb2
    from tensorflow_serving.apis import prediction_log_pb2

    def ex(v):
        e = example_pb2.Example()
        e.features.feature["x"].float_list.value.append(v)
        return e

    def log(kind, signature, context=False):
        rec = prediction_log_pb2.PredictionLog()
        req = getattr(rec, kind).request
        if kind == "multi_inference_log":
            for sig, method in (("classify_x_to_y", "classify"), ("regress_x_to_y", "regress")):
                t = req.tasks.add()
                t.model_spec.name = "m"
                t.model_spec.signature_name = sig
                t.method_name = "tensorflow/serving/" + method
        else:
            req.model_spec.name = "m"
            req.model_spec.signature_name = signature
        if context:
            req.input.example_list_with_context.context.CopyFrom(ex(1.0))
            req.input.example_list_with_context.examples.extend([ex(2.0), ex(3.0)])
        else:
            req.input.example_list.examples.extend([ex(2.0), ex(5.0)])
        return rec.SerializeToString()

    return log


def test_warmup_classify_regress_multi_inference(life, tmp_path):
    # TF Serving replays every log type a warmup file may hold; a record
    # that names a signature the model lacks fails that version's load.
    log = infer_logs()
    tf1 = os.path.join(MODELS, "half_plus_two_tf1", "00000123")
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(tf1, base / "1")
    write_warmup(base / "1", [log("classify_log", "classify_x_to_y"),
                              log("regress_log", "regress_x_to_y", context=True),
                              log("multi_inference_log", None)])
    s = life("--model_name=m", f"--model_base_path={base}",
             f"--file_system_poll_wait_seconds={POLL}", "--max_num_load_retries=0")
    assert "Number of warmup records read: 3" in s.output()
    assert status(s)[1]["state"] == "AVAILABLE"
    shutil.copytree(tf1, base / ".v2")
    write_warmup(base / ".v2", [log("classify_log", "no_such_signature")])
    os.rename(base / ".v2", base / "2")
    assert wait_for(lambda: status(s).get(2, {}).get("state") == "END"), status(s)
    msg = status(s)[2]["status"]["error_message"]
    assert "classify_log" in msg and "no_such_signature" in msg, msg


def test_warmup_corrupt_file_fails_load(life, tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    write_warmup(base / "1", [prediction_log()])
    w = base / "1" / "assets.extra" / "tf_serving_warmup_requests"
    raw = bytearray(w.read_bytes())
    raw[14] ^= 1
    w.write_bytes(bytes(raw))
    s = life("--model_name=m", f"--model_base_path={base}", "--max_num_load_retries=0")
    v = status(s)[1]
    assert v["state"] == "END" and v["status"]["error_code"] == "DATA_LOSS", v
    assert "Please verify your warmup data is in TFRecord format." in v["status"]["error_message"]


# --- signals ---------------------------------------------------------------------------


def test_sigterm_during_load_exits_cleanly(tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    # A long warmup keeps the load busy for a while.
    write_warmup(base / "1", [prediction_log()] * 1000)
    rest = free_port()
    p = subprocess.Popen([BINARY, "--port=0", f"--rest_api_port={rest}", "--model_name=m",
                          f"--model_base_path={base}", "--num_request_iterations_for_warmup=300"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    head = []
    for line in p.stdout:  # wait until the load has begun
        head.append(line)
        if "Loading servable" in line:
            break
    p.send_signal(signal.SIGTERM)
    try:
        # A load cannot be interrupted: the stop waits up to the shutdown
        # grace (10 s) for it, then exits.
        out, _ = p.communicate(timeout=60)
        out = "".join(head) + out
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        pytest.fail("tensord did not stop after SIGTERM during a load:\n" + out)
    assert p.returncode == 0, out
    assert "received signal 15" in out
    assert "Exporting HTTP/REST API" not in out  # it stopped before opening its ports


def test_sigterm_finishes_requests_in_flight(life, tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    s = life("--model_name=m", f"--model_base_path={base}")
    c = Client(s, rate=200)
    c.start()
    assert wait_for(lambda: any(r[1] == 200 for r in c.results)), c.results[-3:]
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(15) == 0
    c.stop()
    ok = [r for r in c.results if r[1] == 200]
    assert ok and all(r[2] == 3.0 for r in ok)
    # After the signal a request is refused (503 or a closed port), never
    # answered with a wrong or cut body.
    assert all(r[1] in (200, 503, -1) for r in c.results), c.failures()[:5]
    assert "Done unloading servable version {name: m version: 1}" in s.output()
