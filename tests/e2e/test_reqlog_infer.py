"""Request logging and metrics of Classify, Regress and MultiInference, REST
and gRPC: sampled requests land as PredictionLog classify_log / regress_log
/ multi_inference_log records (read with TF Serving's own Python protos and
TensorFlow's TFRecord reader), replay as warmup, and MultiInference counts in
the request metrics under API "MultiInference". Also the logging config's
per_task_sampling_configs: parsed, checked, named as having no effect."""
import glob
import json
import re
import shutil
import subprocess

import grpc
import tensorflow as tf
from tensorflow_serving.apis import (classification_pb2, inference_pb2, prediction_log_pb2,
                                     prediction_service_pb2_grpc, regression_pb2)

from conftest import BINARY, MODELS, Server, free_port

TF1 = f"{MODELS}/half_plus_two_tf1/00000123"  # classify_x_to_y / regress_x_to_y: y = 0.5 x + 2


def start(cfg, tmp_path, *flags):
    s = Server.__new__(Server)  # the config file names the model
    s.grpc_port, s.rest_port = free_port(), free_port()
    s.args = [BINARY, f"--port={s.grpc_port}", f"--rest_api_port={s.rest_port}",
              f"--model_config_file={cfg}", *flags]
    s.log = open(tmp_path / f"tensord-{s.rest_port}.log", "w+")
    s.proc = subprocess.Popen(s.args, stdout=s.log, stderr=subprocess.STDOUT)
    s._wait_ready()
    return s


def config(tmp_path, base, logging=""):
    f = tmp_path / "models.config"
    f.write_text("model_config_list { config { name: 'm' base_path: '%s' "
                 "model_platform: 'tensorflow' %s } }\n" % (base, logging))
    return f


def example(**features):
    ex = tf.train.Example()
    for k, v in features.items():
        ex.features.feature[k].float_list.value.append(v)
    return ex


def fill(inp, xs, context=None):
    if context is not None:
        inp.example_list_with_context.context.CopyFrom(context)
        inp.example_list_with_context.examples.extend(example(x=x) for x in xs)
    else:
        inp.example_list.examples.extend(example(x=x) for x in xs)


def req(cls, sig, xs, context=None):
    r = cls()
    r.model_spec.name = "m"
    r.model_spec.signature_name = sig
    fill(r.input, xs, context)
    return r


def scrape_value(text, name, **labels):
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.match(r"^([^{ ]+)\{(.*)\} (\S+)$", line)
        if m and m.group(1) == name and ",".join(sorted(m.group(2).split(","))) == want:
            return float(m.group(3))
    return None


def test_classify_regress_multi_are_logged_counted_and_replay(tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(TF1, base / "123")
    prefix = tmp_path / "logs" / "m"
    prefix.parent.mkdir()
    cfg = config(tmp_path, base,
                 "logging_config { sampling_config { sampling_rate: 1.0 "
                 "per_task_sampling_configs { dc: 'xx' task_index: 2 sampling_rate: 0.25 } } "
                 "log_collector_config { type: 'tfrecord' filename_prefix: '%s' } }" % prefix)
    mon = tmp_path / "monitoring.txt"
    mon.write_text("prometheus_config { enable: true }\n")
    s = start(cfg, tmp_path, "--file_system_poll_wait_seconds=0",
              f"--monitoring_config_file={mon}")
    answers = {}
    try:
        warn = [l for l in s.output().splitlines() if "no effect" in l]
        assert len(warn) == 1 and \
            "m: logging_config.sampling_config.per_task_sampling_configs" in warn[0], warn
        with grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}") as ch:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
            r = stub.Classify(req(classification_pb2.ClassificationRequest, "classify_x_to_y",
                                  [2.0, 4.0], context=example(ctx=7.0)), timeout=30)
            answers["classify"] = [c.classes[0].score for c in r.result.classifications]
            r = stub.Regress(req(regression_pb2.RegressionRequest, "regress_x_to_y", [6.0]),
                             timeout=30)
            answers["regress"] = [v.value for v in r.result.regressions]
            m = inference_pb2.MultiInferenceRequest()
            for sig, method in (("regress_x_to_y", "tensorflow/serving/regress"),
                                ("classify_x_to_y", "tensorflow/serving/classify")):
                t = m.tasks.add()
                t.model_spec.name = "m"
                t.model_spec.signature_name = sig
                t.method_name = method
            fill(m.input, [8.0])
            r = stub.MultiInference(m, timeout=30)
            assert len(r.results) == 2
        status, out = s.json("POST", "/v1/models/m:classify", json.dumps(
            {"signature_name": "classify_x_to_y", "examples": [{"x": 10.0}]}))
        assert status == 200 and out["results"] == [[["", 7.0]]], out
        status, out = s.json("POST", "/v1/models/m:regress", json.dumps(
            {"signature_name": "regress_x_to_y", "examples": [{"x": 12.0}, {"x": 14.0}]}))
        assert status == 200 and out["results"] == [8.0, 9.0], out
        # A failed request is neither logged nor counted as OK.
        status, _ = s.json("POST", "/v1/models/m:regress", json.dumps(
            {"signature_name": "nope", "examples": [{"x": 1.0}]}))
        assert status == 400

        # Counted when the client has its answer: read at once.
        status, _, body = s.request("GET", "/monitoring/prometheus/metrics")
        text = body.decode()
        lat = ":tensorflow:serving:request_latency_count"
        assert scrape_value(text, lat, model_name="m", API="MultiInference",
                            entrypoint="GRPC") == 1
        assert scrape_value(text, lat, model_name="m", API="Classify", entrypoint="GRPC") == 1
        assert scrape_value(text, lat, model_name="m", API="Regress", entrypoint="REST") == 1
        assert scrape_value(text, ":tensorflow:serving:request_count", model_name="m",
                            status="OK") == 5
        # Examples: 2 + 1 + 1 (MultiInference) over gRPC, 1 + 2 over REST.
        assert scrape_value(text, ":tensorflow:serving:request_example_count_total",
                            model="m") == 7
    finally:
        s.stop()
    assert s.proc.returncode == 0, s.output()
    assert answers == {"classify": [3.0, 4.0], "regress": [5.0]}

    files = sorted(glob.glob(f"{prefix}.*.tfrecord"))
    assert len(files) == 1, files
    logs = []
    for raw in tf.data.TFRecordDataset(files[0]):  # TensorFlow checks framing and CRCs
        log = prediction_log_pb2.PredictionLog()
        log.ParseFromString(raw.numpy())
        logs.append(log)
    kinds = [log.WhichOneof("log_type") for log in logs]
    assert sorted(kinds) == ["classify_log", "classify_log", "multi_inference_log",
                             "regress_log", "regress_log"], kinds
    for log in logs:
        assert log.log_metadata.model_spec.name == "m"
        assert log.log_metadata.model_spec.version.value == 123

    def xs(inp):
        return [e.features.feature["x"].float_list.value[0] for e in inp.example_list.examples]

    cls = [log.classify_log for log in logs if log.HasField("classify_log")]
    by_x = {tuple(xs(c.request.input)): c for c in cls}
    assert set(by_x) == {(2.0, 4.0), (10.0,)}
    c = by_x[(2.0, 4.0)]
    assert c.request.model_spec.signature_name == "classify_x_to_y"
    # The context is merged into each example, as the model was fed.
    for e in c.request.input.example_list.examples:
        assert e.features.feature["ctx"].float_list.value[0] == 7.0
    assert [k.classes[0].score for k in c.response.result.classifications] == [3.0, 4.0]
    assert c.response.model_spec.version.value == 123
    reg = {tuple(xs(r.request.input)): r for r in
           (log.regress_log for log in logs if log.HasField("regress_log"))}
    assert [v.value for v in reg[(6.0,)].response.result.regressions] == [5.0]
    assert [v.value for v in reg[(12.0, 14.0)].response.result.regressions] == [8.0, 9.0]
    (mi,) = [log.multi_inference_log for log in logs if log.HasField("multi_inference_log")]
    assert [(t.model_spec.signature_name, t.method_name) for t in mi.request.tasks] == [
        ("regress_x_to_y", "tensorflow/serving/regress"),
        ("classify_x_to_y", "tensorflow/serving/classify")]
    assert xs(mi.request.input) == [8.0]
    assert [v.value for v in mi.response.results[0].regression_result.regressions] == [6.0]
    assert mi.response.results[1].classification_result.classifications[0].classes[0].score \
        == 6.0

    # The log, copied in as a new version's warmup file, replays at its load.
    shutil.copytree(TF1, base / "124")
    extra = base / "124" / "assets.extra"
    extra.mkdir()
    shutil.copy(files[0], extra / "tf_serving_warmup_requests")
    shutil.rmtree(base / "123")
    s2 = start(config(tmp_path, base), tmp_path, "--file_system_poll_wait_seconds=0")
    try:
        assert "Number of warmup records read: 5" in s2.output(), s2.output()
        status, out = s2.json("POST", "/v1/models/m:regress", json.dumps(
            {"signature_name": "regress_x_to_y", "examples": [{"x": 2.0}]}))
        assert status == 200 and out["results"] == [3.0], out
    finally:
        s2.stop()
    assert s2.proc.returncode == 0, s2.output()


def test_bad_per_task_rate_is_refused(tmp_path):
    cfg = config(tmp_path, f"{MODELS}/half_plus_two_tf1",
                 "logging_config { sampling_config { sampling_rate: 1 "
                 "per_task_sampling_configs { dc: 'a' sampling_rate: 2 } } "
                 "log_collector_config { filename_prefix: '/tmp/x' } }")
    r = subprocess.run([BINARY, f"--model_config_file={cfg}", "--port=0",
                        "--grpc_socket_path=" + str(tmp_path / "sock")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert "per_task_sampling_configs[0].sampling_rate 2 is not in [0, 1]" in r.stderr, r.stderr
