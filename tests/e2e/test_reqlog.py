"""Request logging (ModelConfig.logging_config): sampled Predict requests
over REST and gRPC land as PredictionLog records in TFRecord files that
TensorFlow reads, and such a file copied into a new version's assets.extra
replays as its warmup."""
import glob
import os
import shutil
import subprocess

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2, prediction_service_pb2_grpc

from conftest import BINARY, MODELS, Server, free_port

HP3 = os.path.join(MODELS, "half_plus_three_tf2")
V1 = os.path.join(HP3, "00000001")  # y = 0.5 x + 3
V2 = os.path.join(HP3, "00000002")  # y = 0.5 x + 4


def start(config_path, tmp_path, *flags):
    s = Server.__new__(Server)  # the config file names the models
    s.grpc_port, s.rest_port = free_port(), free_port()
    s.args = [BINARY, f"--port={s.grpc_port}", f"--rest_api_port={s.rest_port}",
              f"--model_config_file={config_path}", *flags]
    s.log = open(tmp_path / f"tensord-{s.rest_port}.log", "w+")
    s.proc = subprocess.Popen(s.args, stdout=s.log, stderr=subprocess.STDOUT)
    s._wait_ready()
    return s


def config(tmp_path, base, logging):
    f = tmp_path / "models.config"
    f.write_text("model_config_list { config { name: 'm' base_path: '%s' "
                 "model_platform: 'tensorflow' %s } }\n" % (base, logging))
    return f


def grpc_predict(port, values):
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        req = predict_pb2.PredictRequest()
        req.model_spec.name = "m"
        req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array(values, np.float32)))
        return prediction_service_pb2_grpc.PredictionServiceStub(ch).Predict(req, timeout=10)


def read_logs(pattern):
    files = sorted(glob.glob(pattern))
    assert files, pattern
    out = []
    for f in files:
        for raw in tf.data.TFRecordDataset(f):  # TensorFlow checks the framing and CRCs
            log = prediction_log_pb2.PredictionLog()
            log.ParseFromString(raw.numpy())
            out.append(log)
    return files, out


def test_log_then_replay_as_warmup(tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    logs = tmp_path / "logs"
    logs.mkdir()
    prefix = logs / "m"
    cfg = config(tmp_path, base,
                 "logging_config { sampling_config { sampling_rate: 1.0 } "
                 "log_collector_config { type: 'tfrecord' filename_prefix: '%s' } }" % prefix)
    s = start(cfg, tmp_path, "--file_system_poll_wait_seconds=0")
    try:
        status, out = s.json("POST", "/v1/models/m:predict", '{"instances": [1.0, 2.0]}')
        assert status == 200 and out["predictions"] == [3.5, 4.0], out
        status, out = s.json("POST", "/v1/models/m:predict", '{"inputs": {"x": [6.0]}}')
        assert status == 200, out
        assert list(grpc_predict(s.grpc_port, [4.0, 8.0, 10.0]).outputs["y"].float_val) == \
            [5.0, 7.0, 8.0]
        # Failed requests are not logged.
        assert s.json("POST", "/v1/models/m:predict", '{"instances": ["a"]}')[0] == 400
    finally:
        s.stop()
    assert s.proc.returncode == 0, s.output()

    files, records = read_logs(f"{prefix}.*.tfrecord")
    assert len(files) == 1 and files[0].endswith(f".{s.proc.pid}.0.tfrecord"), files
    assert len(records) == 3
    got = []
    for log in records:
        assert log.WhichOneof("log_type") == "predict_log"
        assert log.log_metadata.model_spec.name == "m"
        assert log.log_metadata.model_spec.version.value == 1
        req, resp = log.predict_log.request, log.predict_log.response
        assert req.model_spec.signature_name == "serving_default"
        x = tf.make_ndarray(req.inputs["x"]).tolist()
        y = tf.make_ndarray(resp.outputs["y"]).tolist()
        assert y == [0.5 * v + 3 for v in x]
        got.append(x)
    assert sorted(got) == [[1.0, 2.0], [4.0, 8.0, 10.0], [6.0]]

    # The log, copied in as version 2's warmup file, replays at its load.
    shutil.copytree(V2, base / "2")
    extra = base / "2" / "assets.extra"
    extra.mkdir()
    shutil.copy(files[0], extra / "tf_serving_warmup_requests")
    s2 = start(config(tmp_path, base, ""), tmp_path, "--file_system_poll_wait_seconds=0")
    try:
        status, out = s2.json("POST", "/v1/models/m:predict", '{"instances": [2.0]}')
        assert status == 200 and out["predictions"] == [5.0], out
        assert "Number of warmup records read: 3" in s2.output(), s2.output()
    finally:
        s2.stop()
    assert s2.proc.returncode == 0


def test_rate_zero_and_no_config_log_nothing(tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    prefix = tmp_path / "z"
    cfg = config(tmp_path, base,
                 "logging_config { sampling_config { sampling_rate: 0 } "
                 "log_collector_config { filename_prefix: '%s' } }" % prefix)
    s = start(cfg, tmp_path)
    try:
        assert s.json("POST", "/v1/models/m:predict", '{"instances": [1.0]}')[0] == 200
    finally:
        s.stop()
    assert not glob.glob(f"{prefix}*")


def test_bad_logging_config_is_refused(tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    for logging, msg in [
        ("logging_config { sampling_config { sampling_rate: 1.5 } }",
         "sampling_rate 1.5 is not in [0, 1]"),
        ("logging_config { sampling_config { sampling_rate: 1 } "
         "log_collector_config { type: 'kafka' filename_prefix: '/tmp/x' } }",
         "log_collector_config.type 'kafka' is not supported"),
        ("logging_config { sampling_config { sampling_rate: 1 } }",
         "filename_prefix is empty"),
        ("logging_config { sampling_config { sampling_rat: 1 } }", "line 1 column"),
    ]:
        cfg = config(tmp_path, base, logging)
        r = subprocess.run([BINARY, f"--model_config_file={cfg}", "--port=0",
                            "--grpc_socket_path=" + str(tmp_path / "sock")],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, r.stderr
        assert msg in r.stderr, r.stderr


def test_no_effect_fields_warn(tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(V1, base / "1")
    cfg = config(tmp_path, base,
                 "logging_config { sampling_config { sampling_rate: 0 attributes: 1 } }")
    s = start(cfg, tmp_path)
    try:
        assert s.json("POST", "/v1/models/m:predict", '{"instances": [1.0]}')[0] == 200
        line = [l for l in s.output().splitlines() if "no effect" in l]
        assert len(line) == 1 and "m: logging_config.sampling_config.attributes" in line[0], line
    finally:
        s.stop()
