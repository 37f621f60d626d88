"""--platform_config_file with every field of TF Serving 2.20's
SessionBundleConfig: it starts and serves, what maps is taken (thread
counts, batching, warmup, saved_model_tags) and the rest is named in one
warning line. As in TF Serving, a platform config replaces the flags it
covers: warmup runs only when it says enable_model_warmup."""
import os
import shutil
import time

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

from conftest import MODELS

TF1 = os.path.join(MODELS, "half_plus_two_tf1", "00000123")

CONFIG = """
platform_configs {
  key: "tensorflow"
  value {
    source_adapter_config {
      [type.googleapis.com/tensorflow.serving.SavedModelBundleSourceAdapterConfig] {
        legacy_config {
          session_target: ""
          session_config { intra_op_parallelism_threads: 1 inter_op_parallelism_threads: 2 }
          batching_parameters { max_batch_size { value: 8 } batch_timeout_micros { value: 0 } }
          session_run_load_threadpool_index { value: 0 }
          experimental_transient_ram_bytes_during_load: 4096
          saved_model_tags: "%s"
          experimental_fixed_input_tensors { name: "k" tensor { dtype: DT_FLOAT } }
          %s
          model_warmup_options { num_request_iterations { value: 2 } }
          enable_session_metadata: true
          remove_unused_fields_from_bundle_metagraph: true
          prefer_tflite_model: false
          num_tflite_interpreters: 0
          num_tflite_interpreters_per_pool: 1
          num_tflite_pools: 2
          wrap_session_with_no_threading_params: false
          enable_per_model_batching_params: false
          resource_estimation_uses_validation_result: false
          mixed_precision: "bfloat16"
        }
      }
    }
  }
}
"""


def with_warmup(tmp_path):
    base = tmp_path / "m"
    shutil.copytree(TF1, base / "123")
    extra = base / "123" / "assets.extra"
    extra.mkdir()
    log = prediction_log_pb2.PredictionLog()
    req = log.predict_log.request
    req.model_spec.name = "m"
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([1.0], np.float32)))
    with tf.io.TFRecordWriter(str(extra / "tf_serving_warmup_requests")) as w:
        w.write(log.SerializeToString())
    return base


def test_every_field_starts_and_what_maps_is_taken(serve, tmp_path):
    base = with_warmup(tmp_path)
    cfg = tmp_path / "platform.txt"
    cfg.write_text(CONFIG % ("serve", "enable_model_warmup: true"))
    s = serve("m", str(base), f"--platform_config_file={cfg}")
    status, out = s.json("POST", "/v1/models/m:predict", '{"instances": [1.0, 2.0]}')
    assert status == 200 and out["predictions"] == [2.5, 3.0], out
    log = s.output()
    assert "Engine: 2 worker threads (runs at once), 1 threads per op" in log, log
    assert "Batching: max_batch_size 8" in log, log
    assert "Number of warmup records read: 1" in log, log
    warn = [l for l in log.splitlines() if "platform config fields with no effect" in l]
    assert len(warn) == 1, log
    for f in ("session_run_load_threadpool_index", "experimental_transient_ram_bytes_during_load",
              "experimental_fixed_input_tensors", "enable_session_metadata",
              "num_tflite_interpreters_per_pool", "num_tflite_pools", "mixed_precision"):
        assert f in warn[0], (f, warn[0])
    # Fields that hold or map are not named.
    for f in ("remove_unused_fields_from_bundle_metagraph", "saved_model_tags",
              "enable_model_warmup", "num_request_iterations"):
        assert f not in warn[0], (f, warn[0])


def test_platform_config_decides_warmup_and_tags(serve, tmp_path):
    base = with_warmup(tmp_path)
    cfg = tmp_path / "platform.txt"
    # No enable_model_warmup: off, as TF Serving with a platform config,
    # even though --enable_model_warmup defaults to true.
    cfg.write_text(CONFIG % ("serve", ""))
    s = serve("m", str(base), f"--platform_config_file={cfg}")
    assert s.json("POST", "/v1/models/m:predict", '{"instances": [1.0]}')[0] == 200
    assert "warmup records read" not in s.output(), s.output()
    # saved_model_tags from the platform config: a tag the SavedModel lacks
    # fails the load, as --saved_model_tags would.
    cfg.write_text(CONFIG % ("no_such_tag", ""))
    s2 = serve("m", str(base), f"--platform_config_file={cfg}")
    deadline = time.time() + 60  # the load's failure is logged when it is tried
    while "no_such_tag" not in s2.output() and time.time() < deadline:
        time.sleep(0.1)
    assert "no_such_tag" in s2.output(), s2.output()
    status, out = s2.json("POST", "/v1/models/m:predict", '{"instances": [1.0]}')
    assert status != 200, out
