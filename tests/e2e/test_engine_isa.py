"""The TENSORD_ENGINE_ISA cap on the real daemon: started with the kernels
capped at AVX2 (or generic), tensord says so in its start-up log and serves
the zoo within the zoo's own bound (test_zoo.check: relative error 1e-4,
1e-2 floor), so an AVX-512 machine covers the kernels an AVX2-only CPU
runs. An unknown value is logged once and ignored."""
import json
import os

import pytest

from conftest import ROOT
from test_zoo import ZOO, check_outputs, zoo_input


def cpu_best():
    """The best instruction set the kernels can use here, from the kernel's
    view of CPUID (the engine checks the same flags)."""
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags and "fma" in flags:
        return "avx2"
    return "generic"


ORDER = ["generic", "avx2", "avx512"]


def expected(cap):
    best = cpu_best()
    return cap if ORDER.index(cap) <= ORDER.index(best) else best


def predict(s, model, batch):
    entry = ZOO[model]
    inputs = {alias: zoo_input(spec, batch) for alias, spec in entry["inputs"].items()}
    status, out = s.json("POST", f"/v1/models/{model}:predict", json.dumps({"inputs": inputs}))
    assert status == 200, out
    check_outputs(entry, out["outputs"], batch)


def start(serve, model):
    return serve(model, os.path.dirname(os.path.join(ROOT, ZOO[model]["dir"])))


# The convolutional models take the packed-GEMM, depthwise and pooling
# kernels; the transformer the run-time products and the vector math.
@pytest.mark.parametrize("model,batch", [("mobilenet_v2", 1), ("cnn", 8), ("transformer", 8),
                                         ("mlp", 8)])
def test_avx2_cap_serves_the_zoo(serve, monkeypatch, model, batch):
    monkeypatch.setenv("TENSORD_ENGINE_ISA", "avx2")
    s = start(serve, model)
    # Logged before the REST port opens, so final once the server is up.
    assert f"Engine kernels: {expected('avx2')} " in s.output(), s.output()
    predict(s, model, batch)


def test_generic_cap_serves_the_zoo(serve, monkeypatch):
    monkeypatch.setenv("TENSORD_ENGINE_ISA", "generic")
    s = start(serve, "cnn")
    assert "Engine kernels: generic " in s.output(), s.output()
    predict(s, "cnn", 8)


def test_unknown_value_is_logged_and_ignored(serve, monkeypatch):
    monkeypatch.setenv("TENSORD_ENGINE_ISA", "sse9")
    s = start(serve, "mlp")
    log = s.output()
    assert log.count("TENSORD_ENGINE_ISA=sse9 is not one of avx512, avx2, generic") == 1, log
    assert f"Engine kernels: {cpu_best()} (the CPU's best)" in log, log
    predict(s, "mlp", 8)
