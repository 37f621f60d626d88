"""Moving a TF Serving 2.20 deployment over: its full command line and a
config file using every field start tensord; unknown flags warn and go on;
TF_CPP_* verbosity and JSON log lines."""
import json
import os
import shutil
import socket
import subprocess
import time

from conftest import BINARY, MODELS, free_port

HP3 = os.path.join(MODELS, "half_plus_three_tf2")
V1 = os.path.join(HP3, "00000001")  # y = 0.5 x + 3
HALF = os.path.join(MODELS, "half_plus_two_tf1")


class Proc:
    """tensord with an arbitrary command line and environment."""

    def __init__(self, tmp_path, flags, env=None, rest=True):
        self.rest_port = free_port()
        self.grpc_port = free_port()
        args = [BINARY, f"--port={self.grpc_port}"]
        if rest:
            args.append(f"--rest_api_port={self.rest_port}")
        self.log = open(tmp_path / f"tensord-{self.rest_port}.log", "w+")
        self.proc = subprocess.Popen(args + list(flags), stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})
        deadline = time.time() + 120
        while time.time() < deadline:
            assert self.proc.poll() is None, self.output()
            try:
                with socket.create_connection(("127.0.0.1", self.rest_port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(self.output())

    def output(self):
        if self.log.closed:
            return self.final
        with open(self.log.name, errors="replace") as f:  # see conftest.Server.output
            return f.read()

    def predict(self, model, body):
        import urllib.request
        req = urllib.request.Request(f"http://127.0.0.1:{self.rest_port}/v1/models/{model}:predict",
                                     data=body.encode(), method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.final = self.output()
        self.log.close()
        assert self.proc.returncode == 0


def model_dir(tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    return base


def test_tf_serving_2_20_command_line_starts(tmp_path):
    base = model_dir(tmp_path)
    mon = tmp_path / "monitoring.txt"
    mon.write_text('prometheus_config { enable: true path: "/metrics" }\n')
    batching = tmp_path / "batching.txt"
    batching.write_text("max_batch_size { value: 8 } batch_timeout_micros { value: 0 } "
                        "max_enqueued_batches { value: 100 } num_batch_threads { value: 2 } "
                        "thread_pool_name { value: 'pool' } allowed_batch_sizes: [4, 8] "
                        "pad_variable_length_inputs: false "
                        "enable_large_batch_splitting { value: false } "
                        "max_execution_batch_size { value: 8 }\n")
    flags = [
        "--grpc_socket_path=", "--rest_api_num_threads=2", "--rest_api_timeout_in_ms=30000",
        "--rest_api_enable_cors_support=false", "--enable_batching=true",
        "--allow_version_labels_for_unavailable_models=false",
        f"--batching_parameters_file={batching}", "--enable_per_model_batching_parameters=false",
        "--model_config_file=", "--model_config_file_poll_wait_seconds=0", "--model_name=m",
        f"--model_base_path={base}", "--num_load_threads=0", "--num_unload_threads=0",
        "--max_num_load_retries=5", "--load_retry_interval_micros=60000000",
        "--file_system_poll_wait_seconds=1", "--flush_filesystem_caches=true",
        "--tensorflow_session_parallelism=0", "--tensorflow_session_config_file=",
        "--tensorflow_intra_op_parallelism=0", "--tensorflow_inter_op_parallelism=2",
        "--use_alts_credentials=false", "--ssl_config_file=", "--platform_config_file=",
        "--per_process_gpu_memory_fraction=0", "--saved_model_tags=serve",
        "--grpc_channel_arguments=", "--grpc_max_threads=2", "--enable_model_warmup=true",
        "--num_request_iterations_for_warmup=0", "--version=false",
        f"--monitoring_config_file={mon}", "--remove_unused_fields_from_bundle_metagraph=true",
        "--prefer_tflite_model=false", "--num_tflite_pools=2",
        "--num_tflite_interpreters_per_pool=1", "--enable_signature_method_name_check=false",
        "--xla_cpu_compilation_enabled=false", "--xla_gpu_compilation_enabled=false",
        "--enable_profiler=true", "--thread_pool_factory_config_file=", "--mixed_precision=",
        "--skip_initialize_tpu=false", "--enable_grpc_healthcheck_service=true",
        "--enable_serialization_as_tensor_content=false", "--device=cpu",
        # A flag of a release newer than 2.20, and a stray word.
        "--some_flag_of_a_newer_release=7", "stray",
    ]
    s = Proc(tmp_path, flags)
    try:
        assert s.predict("m", '{"instances": [1.0, 2.0]}')["predictions"] == [3.5, 4.0]
        out = s.output()
        assert "unknown argument: --some_flag_of_a_newer_release=7 (ignored)" in out
        assert "unknown argument: stray (ignored)" in out
        noeff = [l for l in out.splitlines() if "flags with no effect" in l]
        assert len(noeff) == 1, noeff
        for f in ("prefer_tflite_model", "num_tflite_pools", "xla_cpu_compilation_enabled",
                  "enable_profiler", "use_alts_credentials", "mixed_precision",
                  "skip_initialize_tpu"):
            assert "--" + f in noeff[0], (f, noeff)
    finally:
        s.stop()


def test_malformed_values_exit_2(tmp_path):
    for bad in ("--num_tflite_pools=lots", "--flush_filesystem_caches=maybe",
                "--tensorflow_inter_op_parallelism=x", "--enable_profiler=2"):
        r = subprocess.run([BINARY, f"--model_base_path={HALF}", bad], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 2 and "usage:" in r.stderr, (bad, r.stderr)


def test_config_file_with_every_field(tmp_path):
    base = model_dir(tmp_path)
    base2 = tmp_path / "m2"
    shutil.copytree(base, base2)
    logs = tmp_path / "logs"
    cfg = tmp_path / "models.config"
    cfg.write_text(f"""
model_config_list {{
  config {{
    name: "m"
    base_path: "{base}"
    model_platform: "tensorflow"
    model_version_policy {{ specific {{ versions: 1 }} }}
    version_labels {{ key: "stable" value: 1 }}
    logging_config {{
      log_collector_config {{ type: "tfrecord" filename_prefix: "{logs}/m" }}
      sampling_config {{ sampling_rate: 0.5 attributes: 0 }}
    }}
  }}
  config {{
    name: "legacy"
    base_path: "{base2}"
    model_type: TENSORFLOW
    model_version_policy {{ latest {{ num_versions: 1 }} }}
  }}
  config {{
    name: "all"
    base_path: "{base2}"
    model_platform: "tensorflow"
    model_version_policy {{ all {{ }} }}
  }}
}}
""")
    os.makedirs(logs)
    s = Proc(tmp_path, [f"--model_config_file={cfg}"])
    try:
        for m in ("m", "legacy", "all"):
            assert s.predict(m, '{"instances": [2.0]}')["predictions"] == [4.0]
        assert s.predict("m/labels/stable", '{"instances": [2.0]}')["predictions"] == [4.0]
    finally:
        s.stop()


def test_json_log_lines(tmp_path):
    s = Proc(tmp_path, ["--model_name=half", f"--model_base_path={HALF}", "--tensord_log_json",
                        "--unknown_one=1"])
    try:
        s.predict("half", '{"instances": [1.0]}')
    finally:
        s.stop()
    lines = [json.loads(l) for l in s.output().splitlines() if l.strip()]
    assert all(set(l) >= {"time", "level", "message"} for l in lines), lines
    assert any(l["level"] == "WARNING" and "--unknown_one=1" in l["message"] for l in lines)
    loaded = [l for l in lines if l["message"].startswith("Successfully loaded")]
    assert loaded and loaded[0]["model"] == "half" and loaded[0]["version"] == 123, lines
    assert all(l["time"].endswith("Z") and "T" in l["time"] for l in lines)


def test_tf_cpp_log_levels(tmp_path):
    # VLOG 1: one line per request.
    s = Proc(tmp_path, ["--model_name=half", f"--model_base_path={HALF}"],
             env={"TF_CPP_MAX_VLOG_LEVEL": "1"})
    s.predict("half", '{"instances": [1.0]}')
    s.stop()
    assert "REST request: model half, Predict: OK in" in s.output()
    # VMODULE picks modules: the gRPC transport's lines only.
    s = Proc(tmp_path, ["--model_name=half", f"--model_base_path={HALF}"],
             env={"TF_CPP_VMODULE": "srv_grpc=1,ldr_*=0"})
    s.predict("half", '{"instances": [1.0]}')
    s.stop()
    assert "REST request" not in s.output()
    # MIN_LOG_LEVEL 1 hides INFO lines, keeps warnings.
    s = Proc(tmp_path, ["--model_name=half", f"--model_base_path={HALF}", "--bogus_flag"],
             env={"TF_CPP_MIN_LOG_LEVEL": "1", "TF_CPP_MAX_VLOG_LEVEL": "1"})
    s.predict("half", '{"instances": [1.0]}')
    s.stop()
    out = s.output()
    assert "Successfully loaded" not in out and "REST request" not in out
    assert "unknown argument: --bogus_flag" in out
    # 3: nothing at all.
    s = Proc(tmp_path, ["--model_name=half", f"--model_base_path={HALF}", "--bogus_flag"],
             env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    s.stop()
    assert s.output() == ""


def test_signature_method_name_check(tmp_path):
    import urllib.error
    import urllib.request

    def post(s, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{s.rest_port}{path}", data=body.encode(),
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    body = '{"signature_name": "regress_x_to_y", "instances": [1.0]}'
    s = Proc(tmp_path, ["--model_name=half", f"--model_base_path={HALF}",
                        "--enable_signature_method_name_check"])
    try:
        status, out = post(s, "/v1/models/half:predict", body)
        assert status == 400, out
        assert out["error"] == ("Expected prediction signature method_name to be "
                                "tensorflow/serving/predict. Was: tensorflow/serving/regress")
        status, out = post(s, "/v1/models/half:classify",
                           '{"signature_name": "serving_default", "examples": [{"x": 1.0}]}')
        assert status == 400 and out["error"].startswith(
            "Expected classification signature method_name to be tensorflow/serving/classify. "
            "Was: tensorflow/serving/predict"), out
        assert post(s, "/v1/models/half:predict", '{"instances": [1.0]}')[0] == 200
    finally:
        s.stop()
    # Off (the default): the method name is not looked at.
    s = Proc(tmp_path, ["--model_name=half", f"--model_base_path={HALF}"])
    try:
        status, out = post(s, "/v1/models/half:predict", body)
        assert "method_name" not in out.get("error", ""), out
    finally:
        s.stop()


def test_session_config_file_thread_counts(tmp_path):
    cfg = tmp_path / "session.txt"
    cfg.write_text("intra_op_parallelism_threads: 1\ninter_op_parallelism_threads: 3\n"
                   "gpu_options { allow_growth: true }\n")
    s = Proc(tmp_path, ["--model_name=half", f"--model_base_path={HALF}",
                        f"--tensorflow_session_config_file={cfg}"])
    try:
        assert s.predict("half", '{"instances": [1.0]}')["predictions"] == [2.5]
    finally:
        s.stop()
    assert "Engine: 3 worker threads (runs at once), 1 threads per op" in s.output()
    # The flags win over the file.
    s = Proc(tmp_path, ["--model_name=half", f"--model_base_path={HALF}",
                        f"--tensorflow_session_config_file={cfg}",
                        "--tensorflow_inter_op_parallelism=2"])
    s.stop()
    assert "Engine: 2 worker threads" in s.output()
    cfg.write_text("intra_op_parallelism_threads: 1\ngpu_options { allow_growth: true\n")
    r = subprocess.run([BINARY, f"--model_base_path={HALF}",
                        f"--tensorflow_session_config_file={cfg}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "ConfigProto" in r.stderr and "line 3" in r.stderr, r.stderr


def test_per_model_batching_parameters(tmp_path):
    import urllib.error
    import urllib.request
    base = model_dir(tmp_path)
    (base / "1" / "batching_params.pbtxt").write_text("max_batch_size { value: 4 }\n")
    glob_cfg = tmp_path / "batching.txt"
    glob_cfg.write_text("max_batch_size { value: 100 }\n")
    five = '{"instances": [1.0, 2.0, 3.0, 4.0, 5.0]}'

    def predict(s):
        req = urllib.request.Request(f"http://127.0.0.1:{s.rest_port}/v1/models/m:predict",
                                     data=five.encode(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    common = ["--model_name=m", f"--model_base_path={base}", "--enable_batching",
              f"--batching_parameters_file={glob_cfg}"]
    s = Proc(tmp_path, common + ["--enable_per_model_batching_parameters"])
    try:
        assert predict(s) == (400, {"error": "Task size 5 is larger than maximum input batch "
                                             "size 4"})
    finally:
        s.stop()
    s = Proc(tmp_path, common)  # without the flag the file is not read
    try:
        assert predict(s)[0] == 200
    finally:
        s.stop()
    # A malformed file fails the version's load, with the parser's position.
    (base / "1" / "batching_params.pbtxt").write_text("max_batch_size { valu: 4 }\n")
    s = Proc(tmp_path, common + ["--enable_per_model_batching_parameters",
                                 "--max_num_load_retries=0"])
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{s.rest_port}/v1/models/m", timeout=30) as r:
            st = json.loads(r.read())["model_version_status"][0]
        assert st["state"] == "END", st
        assert "batching_params.pbtxt" in st["status"]["error_message"], st
        assert "line 1 column" in st["status"]["error_message"], st
    finally:
        s.stop()


def cached_pages(path):
    out = subprocess.run(["fincore", "--noheadings", "--raw", "--output", "PAGES", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def test_flush_filesystem_caches(tmp_path):
    base = model_dir(tmp_path)
    pb = base / "1" / "saved_model.pb"
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(pb)], capture_output=True,
                        text=True).stdout.strip()
    os.sync()  # dirty pages are never dropped
    s = Proc(tmp_path, ["--model_name=m", f"--model_base_path={base}"])  # default: true
    try:
        assert s.predict("m", '{"instances": [2.0]}')["predictions"] == [4.0]
        after_flush = cached_pages(pb)
    finally:
        s.stop()
    s = Proc(tmp_path, ["--model_name=m", f"--model_base_path={base}",
                        "--flush_filesystem_caches=false"])
    try:
        kept = cached_pages(pb)
    finally:
        s.stop()
    if fs != "tmpfs":  # tmpfs pages are the file itself: nothing to drop
        assert after_flush == 0 and kept > 0, (fs, after_flush, kept)


PLATFORM = """
platform_configs {
  key: "tensorflow"
  value {
    source_adapter_config {
      [type.googleapis.com/tensorflow.serving.SavedModelBundleSourceAdapterConfig] {
        legacy_config {
          session_config {
            intra_op_parallelism_threads: 1
            inter_op_parallelism_threads: 3
            gpu_options { allow_growth: true }
          }
          batching_parameters { max_batch_size { value: 4 } batch_timeout_micros { value: 0 } }
          %s
        }
      }
    }
  }
}
platform_configs { key: "other" value { } }
"""


def test_platform_config_file(tmp_path):
    import urllib.error
    import urllib.request
    cfg = tmp_path / "platform.txt"
    cfg.write_text(PLATFORM % "")
    s = Proc(tmp_path, ["--model_name=half", f"--model_base_path={HALF}",
                        f"--platform_config_file={cfg}"])
    try:
        assert s.predict("half", '{"instances": [1.0, 2.0]}')["predictions"] == [2.5, 3.0]
        req = urllib.request.Request(
            f"http://127.0.0.1:{s.rest_port}/v1/models/half:predict",
            data=b'{"instances": [1.0, 2.0, 3.0, 4.0, 5.0]}', method="POST")
        try:
            urllib.request.urlopen(req, timeout=30)
            raise AssertionError("batching from the platform config is not on")
        except urllib.error.HTTPError as e:
            assert json.loads(e.read())["error"] == \
                "Task size 5 is larger than maximum input batch size 4"
    finally:
        s.stop()
    out = s.output()
    assert "Engine: 3 worker threads (runs at once), 1 threads per op" in out
    assert "Batching: max_batch_size 4" in out
    assert "platform 'other'" in out and "no effect" in out
    # Unknown fields and types still fail, with line and column.
    for text, msg in [(PLATFORM % "session_targt: 'x'", "has no field named \"session_targt\""),
                      (PLATFORM.replace("SavedModelBundleSourceAdapterConfig", "NoSuchConfig"),
                       "unknown type 'type.googleapis.com/tensorflow.serving.NoSuchConfig'")]:
        cfg.write_text(text)
        r = subprocess.run([BINARY, f"--model_base_path={HALF}", f"--platform_config_file={cfg}"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and msg in r.stderr and "line " in r.stderr, r.stderr
