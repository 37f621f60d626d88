"""The device flags, black-box: --device, --per_process_gpu_memory_fraction.

The zoo runs through the GPU executor on the reference device (host memory,
the same code path as CUDA apart from the primitives) and must give
TensorFlow's numbers. With TENSORD_E2E_DEVICE=gpu (the GPU machine's check,
scripts/gpu-check.sh) the same cases run on the real GPU instead.

On a machine without a usable GPU, --device=gpu refuses to start and says
why, and --device=auto serves on the CPU with one log line saying why."""
import json
import os
import subprocess

import pytest

from conftest import BINARY, EXAMPLES, ROOT
from test_zoo import CASES, ZOO, check_outputs, zoo_input

DEVICE = os.environ.get("TENSORD_E2E_DEVICE", "reference")


_GPU = []


def gpu_usable():
    """Whether --device=gpu starts here: without a GPU it exits at once
    saying why; with one it would go on serving, so it is stopped."""
    if not _GPU:
        p = subprocess.Popen([BINARY, "--device=gpu", "--model_base_path=/nonexistent",
                              "--port=0", "--rest_api_port=0"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, err = p.communicate(timeout=10)
            _GPU.append("no usable GPU" not in err)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            _GPU.append(True)
    return _GPU[0]


@pytest.mark.parametrize("model,batch", CASES)
def test_zoo_on_device_matches_tensorflow(serve, model, batch):
    entry = ZOO[model]
    s = serve(model, os.path.dirname(os.path.join(ROOT, entry["dir"])), f"--device={DEVICE}")
    assert "device: " in s.output()
    inputs = {alias: zoo_input(spec, batch) for alias, spec in entry["inputs"].items()}
    status, out = s.json("POST", f"/v1/models/{model}:predict", json.dumps({"inputs": inputs}))
    assert status == 200, out
    check_outputs(entry, out["outputs"], batch)


def test_device_bad_input_is_a_clean_error(serve):
    # A feature count the first MatMul cannot take: 400 from the device path.
    entry = ZOO["two_io"]
    s = serve("m", os.path.dirname(os.path.join(ROOT, entry["dir"])), f"--device={DEVICE}")
    body = {"inputs": {"features": [[1.0] * 5], "category": [[1]]}}
    status, out = s.json("POST", "/v1/models/m:predict", json.dumps(body))
    assert status == 400, out
    status, out = s.json("POST", "/v1/models/m:predict", json.dumps(
        {"inputs": {"features": [[0.5] * 8], "category": [[1]]}}))
    assert status in (200, 400), out


@pytest.mark.skipif(DEVICE == "gpu", reason="this machine has a GPU")
def test_gpu_without_a_gpu_refuses_to_start(tmp_path):
    if gpu_usable():
        pytest.skip("a GPU is usable here")
    out = subprocess.run([BINARY, "--device=gpu", f"--model_base_path={EXAMPLES}/half_plus_two"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "--device=gpu: no usable GPU: " in out.stderr


def test_auto_without_a_gpu_serves_on_cpu_and_says_why(serve):
    if gpu_usable():
        pytest.skip("a GPU is usable here")
    s = serve("half", os.path.join(EXAMPLES, "half_plus_two"), "--device=auto")
    lines = [l for l in s.output().splitlines() if "device: CPU (no usable GPU: " in l]
    assert len(lines) == 1, s.output()
    status, out = s.json("POST", "/v1/models/half:predict", '{"instances": [1.0, 2.0]}')
    assert status == 200 and out["predictions"] == [2.5, 3.0], out


def test_bad_device_flags_exit_2(tmp_path):
    for flag, msg in [("--device=tpu", "--device must be auto, cpu, gpu or reference"),
                      ("--per_process_gpu_memory_fraction=1.5",
                       "--per_process_gpu_memory_fraction must be between 0 and 1")]:
        out = subprocess.run([BINARY, flag, f"--model_base_path={tmp_path}"], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 2, out.stderr
        assert msg in out.stderr


@pytest.mark.skipif(DEVICE == "gpu", reason="sizes are for the reference device's 16 GiB")
def test_version_too_big_for_the_gpu_share_fails_others_serve(serve, tmp_path):
    # The reference device reports 16 GiB; 1e-4 of it (1.7 MiB) holds
    # half_plus_two but not the MLP's 2.6 MiB of weights. The MLP's version
    # fails to load with the sizes; half_plus_two keeps serving.
    mlp = os.path.dirname(os.path.join(ROOT, ZOO["mlp"]["dir"]))
    cfg = tmp_path / "models.config"
    cfg.write_text(
        'model_config_list {\n'
        f'  config {{ name: "half" base_path: "{EXAMPLES}/half_plus_two" model_platform: "tensorflow" }}\n'
        f'  config {{ name: "mlp" base_path: "{mlp}" model_platform: "tensorflow" }}\n'
        '}\n')
    s = serve("unused", "/unused", f"--model_config_file={cfg}", "--device=reference",
              "--per_process_gpu_memory_fraction=0.0001", "--max_num_load_retries=0")
    status, out = s.json("POST", "/v1/models/half:predict", '{"instances": [1.0, 2.0]}')
    assert status == 200 and out["predictions"] == [2.5, 3.0], out
    import time
    deadline = time.time() + 60
    while time.time() < deadline:
        status, out = s.json("GET", "/v1/models/mlp")
        states = out.get("model_version_status", [{}])
        if states and states[0].get("state") == "END":
            break
        time.sleep(0.2)
    st = out["model_version_status"][0]
    assert st["state"] == "END", out
    msg = st["status"]["error_message"]
    assert "MiB of GPU memory" in msg and "allowed" in msg, msg
    status, out = s.json("POST", "/v1/models/mlp:predict", json.dumps(
        {"instances": zoo_input(ZOO["mlp"]["inputs"]["x"], 1)}))
    assert status in (404, 503), out
    status, out = s.json("POST", "/v1/models/half:predict", '{"instances": [5.0]}')
    assert status == 200 and out["predictions"] == [4.5], out
