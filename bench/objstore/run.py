#!/usr/bin/env python3
"""Object-storage benchmark (issue: cold start and poll cost).

Cold start: time from starting build/tensord to the version being AVAILABLE,
for the zoo MLP and MobileNetV2, from s3:// on a local moto server (IAM
authentication on, so every request is signed and checked) and from local
disk; plus the raw transfer time of the same objects with curl (--aws-sigv4,
one connection) from the same emulator. Ratio = s3 / (local + curl), the
median of ROUNDS interleaved rounds.

Poll cost: a prefix holding 100 versions (half_plus_two copies), polled
every 0.1 s; the daemon's CPU time (utime + stime from /proc) over a window,
minus the same daemon's CPU over an equal window serving a local base path
(so threads idling cost nothing here), divided by the number of polls.

Usage: python3 bench/objstore/run.py   (needs scripts/deps.d/objstore.sh)"""
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "tensord")
ZOO = os.path.join(ROOT, "tests", "fixtures", "models", "zoo")
HP2 = os.path.join(ROOT, "tests", "fixtures", "models", "half_plus_two_tf1", "00000123")
ROUNDS = int(os.environ.get("ROUNDS", "5"))
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"port {port}")


def start_moto(tmp):
    import boto3
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], env=dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3"),
                            stdout=open(os.path.join(tmp, "moto.log"), "w"),
                            stderr=subprocess.STDOUT)
    wait_port(port)
    ep = f"http://127.0.0.1:{port}"
    iam = boto3.client("iam", endpoint_url=ep, region_name="us-east-1",
                       aws_access_key_id="setup", aws_secret_access_key="setup")
    iam.create_user(UserName="b")
    key = iam.create_access_key(UserName="b")["AccessKey"]
    iam.put_user_policy(UserName="b", PolicyName="all", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*",
                                                  "Resource": "*"}]}))
    s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1",
                      aws_access_key_id=key["AccessKeyId"],
                      aws_secret_access_key=key["SecretAccessKey"])
    s3.create_bucket(Bucket="bench")
    return proc, port, key["AccessKeyId"], key["SecretAccessKey"], s3


def upload(s3, src, prefix):
    keys = []
    for d, _, files in os.walk(src):
        for f in sorted(files):
            p = os.path.join(d, f)
            k = f"{prefix}/{os.path.relpath(p, src)}"
            s3.upload_file(p, "bench", k)
            keys.append(k)
    return keys


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK


class Daemon:
    def __init__(self, base, env, extra=()):
        self.rest = free_port()
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [BIN, f"--port={free_port()}", f"--rest_api_port={self.rest}", "--model_name=m",
             f"--model_base_path={base}", *extra], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)

    def wait_available(self, timeout=120):
        end = time.time() + timeout
        while time.time() < end:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.rest}/v1/models/m",
                                            timeout=2) as r:
                    st = json.loads(r.read())["model_version_status"]
                    if any(v["state"] == "AVAILABLE" for v in st):
                        return time.perf_counter() - self.t0
            except Exception:
                pass
            time.sleep(0.005)
        raise RuntimeError("not AVAILABLE")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def main():
    tmp = tempfile.mkdtemp(prefix="objstore-bench-")
    moto, port, kid, sec, s3 = start_moto(tmp)
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID=kid,
               AWS_SECRET_ACCESS_KEY=sec, AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    try:
        print(f"machine: {os.cpu_count()} CPUs, shared and noisy; {ROUNDS} interleaved rounds, "
              "medians")
        for model in ("mlp", "mobilenet_v2"):
            keys = upload(s3, os.path.join(ZOO, model, "1"), f"{model}/1")
            nbytes = sum(os.path.getsize(os.path.join(ZOO, model, "1", k.split("/", 2)[2]))
                         for k in keys)
            urls = [f"http://127.0.0.1:{port}/bench/{k}" for k in keys]
            t_local, t_s3, t_curl = [], [], []
            for r in range(ROUNDS):
                d = Daemon(os.path.join(ZOO, model), env)
                t_local.append(d.wait_available())
                d.stop()
                cache = os.path.join(tmp, f"cache-{model}-{r}")
                d = Daemon(f"s3://bench/{model}", env, [f"--tensord_object_cache_dir={cache}"])
                t_s3.append(d.wait_available())
                d.stop()
                t = time.perf_counter()
                args = ["curl", "-sf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        f"{kid}:{sec}", "-H", "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8"
                        "996fb92427ae41e4649b934ca495991b7852b855"]
                for u in urls:
                    args += [u, "-o", "/dev/null"]
                subprocess.run(args, check=True)
                t_curl.append(time.perf_counter() - t)
            ml, ms, mc = (statistics.median(x) for x in (t_local, t_s3, t_curl))
            print(f"cold start {model} ({nbytes / 1e6:.1f} MB): local {ml * 1e3:.0f} ms, "
                  f"s3 {ms * 1e3:.0f} ms, curl {mc * 1e3:.0f} ms; "
                  f"ratio s3 / (local + curl) = {ms / (ml + mc):.2f}")

        # Poll cost with 100 versions in the prefix.
        for v in range(1, 101):
            upload(s3, HP2, f"many/{v}")
        window, poll = 10.0, 0.1
        flags = [f"--file_system_poll_wait_seconds={poll}"]
        d = Daemon("s3://bench/many", env, flags + [f"--tensord_object_cache_dir={tmp}/c"])
        d.wait_available()
        time.sleep(1.0)
        c0 = cpu_s(d.proc.pid)
        time.sleep(window)
        remote = cpu_s(d.proc.pid) - c0
        d.stop()
        d = Daemon(HP2.rsplit("/", 1)[0], env, flags)
        d.wait_available()
        time.sleep(1.0)
        c0 = cpu_s(d.proc.pid)
        time.sleep(window)
        local = cpu_s(d.proc.pid) - c0
        d.stop()
        polls = window / poll
        print(f"poll cost, 100 versions (300 objects) in the prefix: "
              f"{(remote - local) / polls * 1e3:.2f} ms CPU per poll "
              f"(daemon {remote:.2f} s CPU over {window:.0f} s polling s3 vs {local:.2f} s "
              f"polling a local path; {polls:.0f} polls; /proc ticks are 10 ms, so this is "
              f"an average)")
    finally:
        moto.terminate()
        moto.wait()


if __name__ == "__main__":
    main()
