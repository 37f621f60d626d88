#!/usr/bin/env python3
"""Regenerate tensord's SavedModel test fixtures with real TensorFlow, plus the
reference outputs TensorFlow itself computes for them.

Run from the repo root:  python3 scripts/make_fixtures.py

Writes (after deleting any previous copy):
  examples/half_plus_two/00000123/                   TF2 tf.Module export (resource vars)
  tests/fixtures/models/half_plus_two_tf1/00000123/  TF1 graph export (ref vars, Saver V2)
  tests/fixtures/models/missing_var/00000001/        as TF1, but checkpoint lacks "b"
  tests/fixtures/models/half_plus_three_tf2/0000000{1,2}/  TF2, b=3 and b=4
  tests/fixtures/reference.json                      TF's own outputs for fixed inputs

The summary at the end reads the files back with the standalone readers in
/work/shared/reference/tools (imported from there, not copied into the repo).
"""
import json
import os
import random
import shutil
import sys

# Quiet TF's C++ logging so the summary stays readable.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

PINNED_TF = "2.19.1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF_TOOLS = "/work/shared/reference/tools"

TF2_DIR = "examples/half_plus_two/00000123"
TF1_DIR = "tests/fixtures/models/half_plus_two_tf1/00000123"
MISSING_DIR = "tests/fixtures/models/missing_var/00000001"
THREE_DIRS = {"tests/fixtures/models/half_plus_three_tf2/00000001": 3.0,
              "tests/fixtures/models/half_plus_three_tf2/00000002": 4.0}
# Model roots (not version dirs) are wiped so stale versions cannot linger.
WIPE = ["examples/half_plus_two", "tests/fixtures/models/half_plus_two_tf1",
        "tests/fixtures/models/missing_var", "tests/fixtures/models/half_plus_three_tf2"]
REF_JSON = "tests/fixtures/reference.json"


def check_version():
    # The fixtures are committed; a different TF may emit different graphs
    # (op versions, default attrs, compression), so insist on the pinned one.
    if tf.__version__ != PINNED_TF:
        sys.exit("make_fixtures.py: need tensorflow==%s (pip install tensorflow-cpu==%s), "
                 "found %s" % (PINNED_TF, PINNED_TF, tf.__version__))


def seed_everything():
    random.seed(0)
    np.random.seed(0)
    tf.random.set_seed(0)


def p(rel):
    return os.path.join(ROOT, rel)


# ---------------------------------------------------------------- exports

class HalfPlus(tf.Module):
    """y = a*x + b with resource variables (VarHandleOp/ReadVariableOp)."""

    def __init__(self, a, b):
        super().__init__()
        self.a = tf.Variable(a, dtype=tf.float32, name="a")
        self.b = tf.Variable(b, dtype=tf.float32, name="b")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def serve(self, x):
        return {"y": self.a * x + self.b}


def export_tf2(rel, a, b):
    m = HalfPlus(a, b)
    tf.saved_model.save(m, p(rel), signatures={"serving_default": m.serve})


def build_tf1_graph():
    """TF Serving's half_plus_two shape: tf.Example string in, parsed "x", ref vars.
    Returns (x, y) tensors; must be called inside a graph context."""
    v1 = tf.compat.v1
    a = v1.Variable(0.5, dtype=tf.float32, name="a", use_resource=False)
    b = v1.Variable(2.0, dtype=tf.float32, name="b", use_resource=False)
    serialized = v1.placeholder(tf.string, name="tf_example")
    parsed = v1.parse_example(serialized, {"x": v1.FixedLenFeature([1], tf.float32)})
    x = tf.identity(parsed["x"], name="x")
    # raw_ops so the graph holds the TF1 "Add" op rather than AddV2.
    y = tf.raw_ops.Add(x=tf.raw_ops.Mul(x=a, y=x), y=b, name="y")
    return x, y


def export_tf1(rel):
    v1 = tf.compat.v1
    with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
        x, y = build_tf1_graph()
        sess.run(v1.global_variables_initializer())
        sig = v1.saved_model.signature_def_utils.predict_signature_def(
            inputs={"x": x}, outputs={"y": y})
        builder = v1.saved_model.Builder(p(rel))
        builder.add_meta_graph_and_variables(
            sess, [v1.saved_model.tag_constants.SERVING],
            signature_def_map={"serving_default": sig})
        builder.save()


def export_missing_var(rel):
    # Start from a valid TF1 export, then swap in a checkpoint that has only
    # "a": the graph's save/RestoreV2 still asks for "b", so loading must fail.
    export_tf1(rel)
    vdir = p(os.path.join(rel, "variables"))
    shutil.rmtree(vdir)
    os.makedirs(vdir)
    v1 = tf.compat.v1
    with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
        a = v1.Variable(0.5, dtype=tf.float32, name="a", use_resource=False)
        sess.run(v1.global_variables_initializer())
        v1.train.Saver(var_list=[a]).save(
            sess, os.path.join(vdir, "variables"), write_meta_graph=False, write_state=False)
    # Only variables.index / variables.data-* may remain, as in a real export.
    state = os.path.join(vdir, "checkpoint")
    if os.path.exists(state):
        os.remove(state)


# ---------------------------------------------------------------- reference outputs

def inputs():
    f32 = lambda v: np.asarray(v, dtype=np.float32)
    return [f32([1.0, 2.0, 5.0]), f32([0.0]), f32([-3.25, 1e-7, 123456.789, 7.0]),
            f32(np.random.default_rng(0).standard_normal(16))]


def floats(arr):
    # float32 -> python float is exact; json then keeps every digit (repr).
    return [float(v) for v in np.asarray(arr, dtype=np.float32).reshape(-1)]


def run_tf2(rel):
    fn = tf.saved_model.load(p(rel)).signatures["serving_default"]
    return [{"x": floats(x), "y": floats(fn(x=tf.constant(x))["y"].numpy())} for x in inputs()]


def run_tf1(rel):
    v1 = tf.compat.v1
    with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
        mg = v1.saved_model.loader.load(sess, ["serve"], p(rel))
        sig = mg.signature_def["serving_default"]
        xin, yout = sig.inputs["x"].name, sig.outputs["y"].name
        # x:0 has static shape [?,1] (FixedLenFeature([1])) and the Python
        # Session refuses a rank-1 feed, so feed [N,1]; y is flattened back.
        return [{"x": floats(x), "y": floats(sess.run(yout, {xin: x.reshape(-1, 1)}))}
                for x in inputs()]


def tf1_load_error(rel):
    v1 = tf.compat.v1
    try:
        with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
            v1.saved_model.loader.load(sess, ["serve"], p(rel))
    except Exception as e:  # noqa: BLE001 - we record whatever TF raises
        # Drop the absolute checkout path so the file is the same on every machine.
        return "%s: %s" % (type(e).__name__, str(e).replace(ROOT + os.sep, ""))
    sys.exit("make_fixtures.py: %s unexpectedly loaded" % rel)


def write_reference():
    models = {}
    entry = lambda cases: {"signature": "serving_default", "input": "x", "output": "y",
                           "cases": cases}
    models[TF2_DIR] = entry(run_tf2(TF2_DIR))
    for rel in THREE_DIRS:
        models[rel] = entry(run_tf2(rel))
    models[TF1_DIR] = entry(run_tf1(TF1_DIR))
    models[TF1_DIR]["tf_feed_shape"] = [-1, 1]  # see run_tf1
    models[MISSING_DIR] = {"signature": "serving_default", "input": "x", "output": "y",
                           "tf_error": tf1_load_error(MISSING_DIR)}
    with open(p(REF_JSON), "w") as f:
        json.dump({"models": models}, f, indent=1, sort_keys=True)
        f.write("\n")


# ---------------------------------------------------------------- summary

def block_types(index_path):
    """Compression type byte (0 raw, 1 snappy) of each data block and of the index block."""
    import tf_bundle  # reference reader, imported from REF_TOOLS
    f = open(index_path, "rb").read()
    foot = f[-48:]
    _mo, q = tf_bundle.varint(foot, 0)
    _ms, q = tf_bundle.varint(foot, q)
    io, q = tf_bundle.varint(foot, q)
    isz, q = tf_bundle.varint(foot, q)
    data = []
    for _key, handle in tf_bundle.block_entries(tf_bundle.read_block(f, io, isz)):
        bo, r = tf_bundle.varint(handle, 0)
        bs, r = tf_bundle.varint(handle, r)
        tf_bundle.read_block(f, bo, bs)  # verifies CRC (and decompresses)
        data.append(f[bo + bs])
    return data, f[io + isz]


def summarize():
    from tensorflow.core.protobuf import saved_model_pb2
    sys.path.insert(0, REF_TOOLS)
    name = {0: "raw", 1: "snappy"}
    for rel in [TF2_DIR, *THREE_DIRS, TF1_DIR, MISSING_DIR]:
        print("==", rel)
        for dirpath, _dirs, files in sorted(os.walk(p(rel))):
            for fn in sorted(files):
                full = os.path.join(dirpath, fn)
                print("   %-40s %6d" % (os.path.relpath(full, p(rel)), os.path.getsize(full)))
        data, idx = block_types(p(os.path.join(rel, "variables/variables.index")))
        print("   variables.index data blocks:", [name.get(t, t) for t in data],
              "index block:", name.get(idx, idx))
        sm = saved_model_pb2.SavedModel()
        sm.ParseFromString(open(p(os.path.join(rel, "saved_model.pb")), "rb").read())
        for mg in sm.meta_graphs:
            print("   tags", list(mg.meta_info_def.tags),
                  "stripped_default_attrs", mg.meta_info_def.stripped_default_attrs)
            sd = mg.saver_def
            print("   saver_def restore_op=%s filename_tensor=%s save_tensor=%s" % (
                sd.restore_op_name, sd.filename_tensor_name, sd.save_tensor_name))
            for k, s in sorted(mg.signature_def.items()):
                print("   signature %s method=%s %s -> %s" % (
                    k, s.method_name, {i: t.name for i, t in s.inputs.items()},
                    {o: t.name for o, t in s.outputs.items()}))
            for key in ("saved_model_main_op", "legacy_init_op"):
                if key in mg.collection_def:
                    print("   init collection %s: %s" % (
                        key, list(mg.collection_def[key].node_list.value)))
            print("   graph ops:", sorted({n.op for n in mg.graph_def.node}))
            lib = sorted({n.op for f in mg.graph_def.library.function for n in f.node_def})
            print("   function ops:", lib)
            print("   functions:", sorted(f.signature.name for f in mg.graph_def.library.function))


def main():
    check_version()
    seed_everything()
    for rel in WIPE + [REF_JSON]:
        if os.path.isdir(p(rel)):
            shutil.rmtree(p(rel))
        elif os.path.exists(p(rel)):
            os.remove(p(rel))
    os.makedirs(p("tests/fixtures/models"), exist_ok=True)
    export_tf2(TF2_DIR, 0.5, 2.0)
    for rel, b in THREE_DIRS.items():
        export_tf2(rel, 0.5, b)
    export_tf1(TF1_DIR)
    export_missing_var(MISSING_DIR)
    write_reference()
    summarize()


if __name__ == "__main__":
    main()
