#!/usr/bin/env python3
"""Writes tests/engine/op_cases.inc: small test vectors for every computing op
of the engine's table, with the expected outputs computed by TensorFlow
itself (tf.raw_ops, CPU). Run by hand after adding a case:
    python3 tests/engine/make_op_cases.py
test_eng_op.c includes the file and runs each case through the op table."""
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
import numpy as np
import tensorflow as tf

R = tf.raw_ops
f32, i32, i64, b8 = np.float32, np.int32, np.int64, np.bool_
DT = {np.dtype(f32): "ENG_DT_FLOAT", np.dtype(i32): "ENG_DT_INT32",
      np.dtype(i64): "ENG_DT_INT64", np.dtype(b8): "ENG_DT_BOOL",
      np.dtype(np.float64): "ENG_DT_DOUBLE", np.dtype(np.complex64): "ENG_DT_COMPLEX64",
      np.dtype(np.complex128): "ENG_DT_COMPLEX128"}
TFDT = {"float32": 1, "int32": 3, "int64": 9, "bool": 10, "float64": 2, "complex64": 8,
        "complex128": 18}
cases = []


def a(*v, dt=f32):
    return np.array(v, dtype=dt)


def sc(v, dt=f32):
    return np.array(v, dtype=dt)


def r(shape, seed, dt=f32, lo=-2, hi=2):
    g = np.random.default_rng(seed)
    if dt == f32:
        return np.round(g.uniform(lo, hi, shape), 2).astype(f32)
    return g.integers(lo, hi, shape).astype(dt)


def attr_str(attrs):
    out = []
    for k, v in attrs.items():
        if isinstance(v, bool):
            out.append("%s=b:%d" % (k, v))
        elif isinstance(v, int):
            out.append("%s=i:%d" % (k, v))
        elif isinstance(v, float):
            out.append("%s=f:%r" % (k, v))
        elif isinstance(v, str):
            out.append("%s=s:%s" % (k, v))
        elif isinstance(v, list) and any(isinstance(x, float) for x in v):
            out.append("%s=lf:%s" % (k, ",".join(repr(float(x)) for x in v)))
        elif isinstance(v, list):
            out.append("%s=li:%s" % (k, ",".join(str(x) for x in v)))
        elif isinstance(v, tf.DType):
            out.append("%s=t:%d" % (k, TFDT[v.name]))
    return ";".join(out)


def case(op, inputs, attrs=None, n_out=1, call=None, tf_attrs=None, note=""):
    """inputs: list of np arrays; attrs: the node attrs the engine reads;
    call: how to run it in TF (defaults to tf.raw_ops.<op>(positional names))."""
    attrs = attrs or {}
    res = call(*[tf.constant(x) for x in inputs])
    if not isinstance(res, (list, tuple)):
        res = [res]
    res = [np.asarray(t) for t in res][:n_out]
    cases.append((op, attr_str(attrs), inputs, res, note))


def tensor_lit(x):
    x = np.asarray(x)
    dims = ",".join(str(d) for d in x.shape) or "0"
    def lit(v):
        if x.dtype.kind not in "fc":
            return str(int(v))
        if np.isnan(v):
            return "NAN"
        if np.isinf(v):
            return "INFINITY" if v > 0 else "-INFINITY"
        return "%.9g" % float(v)
    flat = x.reshape(-1)
    if x.dtype.kind == "c":  # (real, imaginary) pairs, as the tensor stores them
        flat = np.stack([flat.real, flat.imag], axis=-1).reshape(-1)
    vals = ",".join(lit(v) for v in flat)
    return "{%s, %d, {%s}, %d, (const double[]){%s}}" % (
        DT[x.dtype], x.ndim, dims, flat.size, vals or "0")


X4 = a(-2.5, -0.5, 0.0, 1.5)
XP = a(0.25, 1.0, 2.0, 9.0)
for op in ["Abs", "Ceil", "Cos", "Elu", "Erf", "Erfc", "Exp", "Expm1", "Floor", "Neg",
           "Relu", "Relu6", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Softplus", "Softsign",
           "Square", "Tanh"]:
    case(op, [a(-7.5, -2.5, -0.5, 0.0, 0.5, 1.5, 2.5, 7.0)], call=lambda x, op=op: getattr(R, op)(x=x) if op not in ("Softplus", "Softsign", "Relu", "Relu6", "Elu", "Selu") else getattr(R, op)(features=x))
for op in ["Log", "Log1p", "Reciprocal", "Rsqrt", "Sqrt"]:
    case(op, [XP], call=lambda x, op=op: getattr(R, op)(x=x))
case("Neg", [a(3, -4, 0, dt=i32)], call=lambda x: R.Neg(x=x))
case("Abs", [a(3, -4, 0, dt=i64)], call=lambda x: R.Abs(x=x))
case("Square", [a(3, -4, 0, dt=i32)], call=lambda x: R.Square(x=x))
case("LeakyRelu", [X4], {"alpha": 0.1}, call=lambda x: R.LeakyRelu(features=x, alpha=0.1))
case("LogicalNot", [a(True, False, dt=b8)], call=lambda x: R.LogicalNot(x=x))
case("Cast", [a(-1.7, 0.0, 2.9)], {"DstT": tf.int32}, call=lambda x: R.Cast(x=x, DstT=tf.int32))
case("Cast", [a(1, 0, 5, dt=i32)], {"DstT": tf.bool}, call=lambda x: R.Cast(x=x, DstT=tf.bool))
case("Cast", [a(True, False, dt=b8)], {"DstT": tf.float32}, call=lambda x: R.Cast(x=x, DstT=tf.float32))
case("Cast", [a(7, -3, dt=i64)], {"DstT": tf.float32}, call=lambda x: R.Cast(x=x, DstT=tf.float32))
case("ZerosLike", [r([2, 2], 1)], call=lambda x: R.ZerosLike(x=x))
case("OnesLike", [a(4, 5, dt=i32)], call=lambda x: R.OnesLike(x=x))
for op in ["CheckNumerics", "EnsureShape", "PreventGradient"]:
    pass  # identities: checked in C directly

# --- broadcasting binaries, comparisons, logic, select
A23, B3 = r([2, 3], 2), r([3], 3)
for op in ["Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"]:
    case(op, [A23, a(B3[0], A23[0, 1], B3[2])], call=lambda x, y, op=op: getattr(R, op)(x=x, y=y))
case("Less", [a(1, 5, dt=i32), a(3, dt=i32)], call=lambda x, y: R.Less(x=x, y=y))
case("Equal", [a(True, False, dt=b8), a(True, True, dt=b8)], call=lambda x, y: R.Equal(x=x, y=y))
case("LogicalAnd", [a([True], [False], dt=b8), a(True, False, True, dt=b8)], call=lambda x, y: R.LogicalAnd(x=x, y=y))
case("LogicalOr", [a([True], [False], dt=b8), a(True, False, True, dt=b8)], call=lambda x, y: R.LogicalOr(x=x, y=y))
case("SelectV2", [a([True], [False], dt=b8), A23, sc(9.0)], call=lambda c, t, e: R.SelectV2(condition=c, t=t, e=e))
# SelectV2 rows where each operand is contiguous or one repeated element (a
# mask over scores and a constant, each way round, all three contiguous, the
# condition repeated along the row), float and double, and a mix the
# strided loop takes (the condition contiguous, then and else repeated).
SM, ST3, SE3 = r([2, 1, 19], 120, dt=b8, lo=0, hi=2), r([2, 3, 19], 121), r([2, 3, 19], 122)
for c_, t_, e_ in [(SM, ST3, sc(-1e9)), (SM, sc(0.0), SE3), (r([2, 3, 19], 123, dt=b8, lo=0, hi=2), ST3, SE3),
                   (r([2, 3, 1], 124, dt=b8, lo=0, hi=2), ST3, SE3), (SM, ST3.astype(np.float64), sc(-1e9, np.float64)),
                   (SM, r([2, 3, 1], 125), sc(5.0))]:
    case("SelectV2", [c_, t_, e_], call=lambda c, t, e: R.SelectV2(condition=c, t=t, e=e))
case("Select", [a(False, True, dt=b8), A23, r([2, 3], 4)], call=lambda c, t, e: R.Select(condition=c, x=t, y=e))
case("Pow", [XP, a(0.5, 2.0, -1.0, 3.0)], call=lambda x, y: R.Pow(x=x, y=y))
case("Pow", [a(2, 3, dt=i32), a(3, dt=i32)], call=lambda x, y: R.Pow(x=x, y=y))
case("SquaredDifference", [A23, B3], call=lambda x, y: R.SquaredDifference(x=x, y=y))
case("AddN", [A23, A23 * 2, r([2, 3], 5)], call=lambda *x: R.AddN(inputs=list(x)))
case("BiasAdd", [r([2, 2, 3], 6), B3], call=lambda x, b: R.BiasAdd(value=x, bias=b))
case("BiasAdd", [r([1, 3, 2, 2], 7), B3], {"data_format": "NCHW"}, call=lambda x, b: R.BiasAdd(value=x, bias=b, data_format="NCHW"))
case("Add", [A23, B3], call=lambda x, y: R.Add(x=x, y=y))
case("AddV2", [a(1, 2, dt=i64), a(5, dt=i64)], call=lambda x, y: R.AddV2(x=x, y=y))
case("Sub", [A23, B3], call=lambda x, y: R.Sub(x=x, y=y))
case("Mul", [A23, B3], call=lambda x, y: R.Mul(x=x, y=y))
case("RealDiv", [A23, B3 + 3], call=lambda x, y: R.RealDiv(x=x, y=y))
case("Maximum", [A23, B3], call=lambda x, y: R.Maximum(x=x, y=y))
case("Minimum", [A23, B3], call=lambda x, y: R.Minimum(x=x, y=y))

# --- shape ops
X234 = r([2, 3, 4], 8)
case("Reshape", [X234, a(4, -1, dt=i32)], call=lambda x, s: R.Reshape(tensor=x, shape=s))
case("Shape", [X234], {"out_type": tf.int64}, call=lambda x: R.Shape(input=x, out_type=tf.int64))
case("Squeeze", [r([1, 3, 1], 9)], {"squeeze_dims": [-1]}, call=lambda x: R.Squeeze(input=x, axis=[-1]))
case("Squeeze", [r([1, 3, 1], 9)], call=lambda x: R.Squeeze(input=x))
case("ExpandDims", [A23, sc(-1, i32)], call=lambda x, d: R.ExpandDims(input=x, axis=d))
case("Fill", [a(2, 3, dt=i32), sc(1.5)], call=lambda d, v: R.Fill(dims=d, value=v))
case("Range", [sc(3, i32), sc(-4, i32), sc(-2, i32)], call=lambda s, l, d: R.Range(start=s, limit=l, delta=d))
case("Range", [sc(0.5), sc(2.0), sc(0.4)], call=lambda s, l, d: R.Range(start=s, limit=l, delta=d))
case("BroadcastTo", [B3, a(2, 3, dt=i32)], call=lambda x, s: R.BroadcastTo(input=x, shape=s))

# --- array ops
def ss(x, b, e, s, **m):
    case("StridedSlice", [x, a(*b, dt=i32), a(*e, dt=i32), a(*s, dt=i32)], m,
         call=lambda x, b, e, s: R.StridedSlice(input=x, begin=b, end=e, strides=s, **m))
ss(X234, [0, 1], [2, 3], [1, 1])
ss(X234, [1, -1, 0], [2, -4, 4], [1, -1, 2], shrink_axis_mask=1)
ss(X234, [0, 0], [0, 2], [1, 1], begin_mask=1, end_mask=1, new_axis_mask=2)
ss(X234, [0, 1], [0, 2], [1, 1], ellipsis_mask=1, shrink_axis_mask=2)
ss(a(4, 5, 6, dt=i32), [1], [2], [1], shrink_axis_mask=1)
ss(X234, [0, 10], [0, -10], [1, -1], begin_mask=1, end_mask=1)
case("Slice", [X234, a(1, 0, 1, dt=i32), a(1, -1, 2, dt=i32)], call=lambda x, b, s: R.Slice(input=x, begin=b, size=s))
case("Pack", [B3, B3 * 2], {"axis": 1}, call=lambda *x: R.Pack(values=list(x), axis=1))
case("Pack", [a(1, dt=i32), a(2, dt=i32)], call=lambda *x: R.Pack(values=list(x)))
case("Unpack", [A23], {"num": 3, "axis": -1}, n_out=3, call=lambda x: R.Unpack(value=x, num=3, axis=-1))
case("ConcatV2", [A23, r([2, 1], 10), sc(-1, i32)], call=lambda x, y, ax: R.ConcatV2(values=[x, y], axis=ax))
case("GatherV2", [r([4, 2], 11), a([3, 0], [1, 1], dt=i32), sc(0, i32)], call=lambda p, i, ax: R.GatherV2(params=p, indices=i, axis=ax))
case("GatherV2", [X234, a(2, 0, dt=i64), sc(-1, i32)], call=lambda p, i, ax: R.GatherV2(params=p, indices=i, axis=ax))
case("GatherV2", [A23, a([2], [0], dt=i32), sc(1, i32)], {"batch_dims": 1}, call=lambda p, i, ax: R.GatherV2(params=p, indices=i, axis=ax, batch_dims=1))
case("Transpose", [X234, a(2, 0, 1, dt=i32)], call=lambda x, p: R.Transpose(x=x, perm=p))
case("Pad", [A23, a([1, 0], [0, 2], dt=i32)], call=lambda x, p: R.Pad(input=x, paddings=p))
case("PadV2", [A23, a([0, 1], [2, 0], dt=i32), sc(-1.0)], call=lambda x, p, v: R.PadV2(input=x, paddings=p, constant_values=v))
case("Tile", [A23, a(2, 2, dt=i32)], call=lambda x, m: R.Tile(input=x, multiples=m))

case("Split", [sc(1, i32), r([2, 6], 40)], {"num_split": 3}, n_out=3,
     call=lambda ax, x: R.Split(axis=ax, value=x, num_split=3))
case("SplitV", [r([5, 2], 41), a(1, -1, 2, dt=i32), sc(0, i32)], n_out=3,
     call=lambda x, s, ax: R.SplitV(value=x, size_splits=s, axis=ax, num_split=3))
case("OneHot", [a([0, 2], [3, 1], dt=i32), sc(3, i32), sc(5.0), sc(-1.0)], {"axis": 1},
     call=lambda i, d, on, off: R.OneHot(indices=i, depth=d, on_value=on, off_value=off, axis=1))
case("MirrorPad", [A23, a([1, 1], [2, 1], dt=i32)], {"mode": "REFLECT"},
     call=lambda x, p: R.MirrorPad(input=x, paddings=p, mode="REFLECT"))
case("MirrorPad", [A23, a([2, 0], [0, 3], dt=i32)], {"mode": "SYMMETRIC"},
     call=lambda x, p: R.MirrorPad(input=x, paddings=p, mode="SYMMETRIC"))
case("Cumsum", [X234, sc(1, i32)], call=lambda x, ax: R.Cumsum(x=x, axis=ax))
case("Cumsum", [a([1, 2, 3], [4, 5, 6], dt=i32), sc(-1, i32)], {"exclusive": True, "reverse": True},
     call=lambda x, ax: R.Cumsum(x=x, axis=ax, exclusive=True, reverse=True))

# --- reductions
for op in ["Sum", "Mean", "Max", "Min", "Prod"]:
    case(op, [X234, a(0, -1, dt=i32)], call=lambda x, ax, op=op: getattr(R, op)(input=x, axis=ax))
    case(op, [X234, a(1, dt=i32)], {"keep_dims": True}, call=lambda x, ax, op=op: getattr(R, op)(input=x, axis=ax, keep_dims=True))
case("Sum", [a([1, 2], [3, 4], dt=i32), a(0, dt=i32)], call=lambda x, ax: R.Sum(input=x, axis=ax))
case("All", [a([True, False], [True, True], dt=b8), a(1, dt=i32)], call=lambda x, ax: R.All(input=x, axis=ax))
case("Any", [a([True, False], [False, False], dt=b8), a(1, dt=i32)], call=lambda x, ax: R.Any(input=x, axis=ax))

# --- matmul family
case("MatMul", [A23, r([3, 2], 12)], call=lambda x, y: R.MatMul(a=x, b=y))
case("MatMul", [r([3, 2], 13), r([4, 3], 14)], {"transpose_a": True, "transpose_b": True},
     call=lambda x, y: R.MatMul(a=x, b=y, transpose_a=True, transpose_b=True))
case("MatMul", [r([1, 3], 15), r([2, 3], 16)], {"transpose_b": True}, call=lambda x, y: R.MatMul(a=x, b=y, transpose_b=True))
case("MatMul", [r([1, 3], 15), r([3, 2], 16)], call=lambda x, y: R.MatMul(a=x, b=y))
case("BatchMatMulV2", [r([2, 1, 2, 3], 17), r([3, 3, 2], 18)], call=lambda x, y: R.BatchMatMulV2(x=x, y=y))
case("BatchMatMulV3", [r([2, 3, 2], 19), r([2, 4, 3], 20)], {"adj_x": True, "adj_y": True},
     call=lambda x, y: R.BatchMatMulV3(x=x, y=y, Tout=tf.float32, adj_x=True, adj_y=True))
case("BatchMatMul", [r([2, 2, 3], 21), r([2, 3, 2], 22)], call=lambda x, y: R.BatchMatMul(x=x, y=y))
case("Einsum", [r([2, 3, 2, 2], 23), r([2, 4, 2, 2], 24)], {"equation": "BTNH,BSNH->BNTS"},
     call=lambda x, y: R.Einsum(inputs=[x, y], equation="BTNH,BSNH->BNTS"))
case("Einsum", [r([2, 2, 3, 4], 25), r([2, 4, 2, 2], 26)], {"equation": "BNTS,BSNH->BTNH"},
     call=lambda x, y: R.Einsum(inputs=[x, y], equation="BNTS,BSNH->BTNH"))
case("Einsum", [r([2, 3, 4], 27), r([4, 2, 2], 28)], {"equation": "abc,cde->abde"},
     call=lambda x, y: R.Einsum(inputs=[x, y], equation="abc,cde->abde"))
case("Einsum", [r([2, 3, 2, 3], 42), r([3, 2], 43)], {"equation": "...ij,jk->...ik"},
     call=lambda x, y: R.Einsum(inputs=[x, y], equation="...ij,jk->...ik"))
case("Einsum", [r([2, 2, 3], 44), r([2, 3, 2], 45)], {"equation": "...ij,...jk->...ik"},
     call=lambda x, y: R.Einsum(inputs=[x, y], equation="...ij,...jk->...ik"))
case("Einsum", [r([3, 2, 2], 46), r([3, 4], 47)], {"equation": "i...,ij->...j"},
     call=lambda x, y: R.Einsum(inputs=[x, y], equation="i...,ij->...j"))

# --- nn
IMG = r([2, 5, 5, 3], 30)
def conv(op, x, f, **at):
    at.setdefault("strides", [1, 1, 1, 1])
    case(op, [x, f], at, call=lambda x, f: getattr(R, op)(input=x, filter=f, **at))
conv("Conv2D", IMG, r([3, 3, 3, 2], 31), padding="SAME")
conv("Conv2D", IMG, r([2, 3, 3, 4], 32), padding="VALID", strides=[1, 2, 1, 1])
conv("Conv2D", IMG, r([3, 2, 3, 2], 33), padding="SAME", strides=[1, 2, 2, 1], dilations=[1, 1, 2, 1])
conv("Conv2D", IMG, r([1, 1, 3, 2], 34), padding="VALID")
conv("Conv2D", IMG, r([2, 2, 3, 2], 35), padding="EXPLICIT", explicit_paddings=[0, 0, 1, 0, 0, 2, 0, 0])
# grouped: the filter's depth divides the input's (Keras Conv2D(groups=...))
conv("Conv2D", r([2, 4, 4, 4], 39), r([3, 3, 2, 6], 40), padding="SAME")
conv("Conv2D", IMG, r([2, 2, 1, 3], 41), padding="VALID", strides=[1, 2, 2, 1])
conv("DepthwiseConv2dNative", IMG, r([3, 3, 3, 1], 36), padding="SAME", strides=[1, 2, 2, 1])
conv("DepthwiseConv2dNative", IMG, r([2, 2, 3, 2], 37), padding="VALID")
for op in ["MaxPool", "AvgPool"]:
    for pad, k, s in [("SAME", 3, 2), ("VALID", 2, 2), ("SAME", 2, 1)]:
        at = {"ksize": [1, k, k, 1], "strides": [1, s, s, 1], "padding": pad}
        case(op, [IMG], at, call=lambda x, op=op, at=at: getattr(R, op)(value=x, **at) if op == "AvgPool" else getattr(R, op)(input=x, **at))
# 19 channels: two whole AVX2 vectors and a masked one per pixel, edges included
IMG19 = r([1, 7, 6, 19], 80)
for op in ["MaxPool", "AvgPool"]:
    for pad, k, s in [("SAME", 3, 2), ("VALID", 2, 2)]:
        at = {"ksize": [1, k, k, 1], "strides": [1, s, s, 1], "padding": pad}
        case(op, [IMG19], at, call=lambda x, op=op, at=at: getattr(R, op)(value=x, **at) if op == "AvgPool" else getattr(R, op)(input=x, **at))
X4D = r([2, 2, 2, 3], 38)
sc, of, mu, va = a(1.0, 0.5, 2.0), a(0.1, -0.2, 0.0), a(0.3, -0.1, 0.2), a(0.5, 1.5, 2.0)
case("FusedBatchNormV3", [X4D, sc, of, mu, va], {"is_training": False, "epsilon": 0.001},
     call=lambda x, s, o, m, v: R.FusedBatchNormV3(x=x, scale=s, offset=o, mean=m, variance=v, epsilon=0.001, is_training=False)[0])
case("FusedBatchNormV3", [X4D, sc, of, a(0.0, 0.0, 0.0), a(1.0, 1.0, 1.0)], {"epsilon": 0.001},
     call=lambda x, s, o, m, v: R.FusedBatchNormV3(x=x, scale=s, offset=o, mean=m, variance=v, epsilon=0.001, is_training=True)[0],
     note="training")
case("Softmax", [A23], call=lambda x: R.Softmax(logits=x))
case("LogSoftmax", [A23], call=lambda x: R.LogSoftmax(logits=x))

# --- the long tail of real exports (issue: model coverage)
def scalar(v, dt=f32):  # (sc is rebound above, to batch-norm scales)
    return np.array(v, dtype=dt)


XI = a([7, -7, 6], [-6, 1, -1], dt=i32)
YI = a(2, -3, 4, dt=i32)
for op in ["FloorDiv", "FloorMod"]:
    case(op, [XI, YI], call=lambda x, y, op=op: getattr(R, op)(x=x, y=y))
    case(op, [XI.astype(i64), scalar(-4, i64)], call=lambda x, y, op=op: getattr(R, op)(x=x, y=y))
    case(op, [a([7.5, -7.5, 0.5], [-2.25, 3.0, -0.0]), a(2.0, -3.0, 0.75)],
         call=lambda x, y, op=op: getattr(R, op)(x=x, y=y))
case("Atan2", [A23, a([1.0], [-2.0])], call=lambda y, x: R.Atan2(y=y, x=x))
case("IsFinite", [a(1.0, np.inf, -np.inf, np.nan, 0.0)], call=lambda x: R.IsFinite(x=x))
case("Bucketize", [a([-1.0, 0.0, 0.5], [2.0, 3.5, 9.0])], {"boundaries": [0.0, 2.0, 3.5]},
     call=lambda x: R.Bucketize(input=x, boundaries=[0.0, 2.0, 3.5]))
case("Bucketize", [a(-3, 0, 1, 5, 10, dt=i64)], {"boundaries": [0.0, 5.0]},
     call=lambda x: R.Bucketize(input=x, boundaries=[0.0, 5.0]))
case("Cumprod", [X234, scalar(1, i32)], call=lambda x, ax: R.Cumprod(x=x, axis=ax))
case("Cumprod", [a([1, 2, 3], [4, 5, 6], dt=i64), scalar(-1, i32)], {"exclusive": True, "reverse": True},
     call=lambda x, ax: R.Cumprod(x=x, axis=ax, exclusive=True, reverse=True))
TIES = a([1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 0.5, 2.0], [-4.0, -5.0, -4.0, -5.0])
case("ArgMax", [TIES, scalar(1, i32)], call=lambda x, d: R.ArgMax(input=x, dimension=d))
case("ArgMax", [X234, scalar(0, i32)], {"output_type": tf.int32},
     call=lambda x, d: R.ArgMax(input=x, dimension=d, output_type=tf.int32))
case("ArgMin", [TIES, scalar(-1, i64)], call=lambda x, d: R.ArgMin(input=x, dimension=d))
case("ArgMax", [a([3, 9, 9], [1, 0, 2], dt=i32), scalar(0, i32)], call=lambda x, d: R.ArgMax(input=x, dimension=d))
case("TopKV2", [TIES, scalar(3, i32)], n_out=2, call=lambda x, k: R.TopKV2(input=x, k=k))
case("TopKV2", [r([2, 2, 5], 48), scalar(2, i32)], n_out=2, call=lambda x, k: R.TopKV2(input=x, k=k))
case("TopKV2", [a(5, 1, 5, 2, dt=i32), scalar(4, i32)], n_out=2, call=lambda x, k: R.TopKV2(input=x, k=k))
case("Where", [a([True, False, True], [False, False, True], dt=b8)], call=lambda x: R.Where(condition=x))
case("Where", [a([0.0, 1.5], [-2.0, 0.0])], call=lambda x: R.Where(condition=x))
case("GatherNd", [X234, a([1, 2], [0, 0], dt=i32)], call=lambda p, i: R.GatherNd(params=p, indices=i))
case("GatherNd", [X234, a([[1, 2, 3]], [[0, 1, 0]], dt=i64)], call=lambda p, i: R.GatherNd(params=p, indices=i))
case("GatherNd", [a([1, 2], [3, 4], dt=i32), a([1], [0], [1], dt=i32)], call=lambda p, i: R.GatherNd(params=p, indices=i))
case("ReverseV2", [X234, a(0, 2, dt=i32)], call=lambda x, ax: R.ReverseV2(tensor=x, axis=ax))
case("ReverseV2", [a([1, 2, 3], [4, 5, 6], dt=i64), a(-1, dt=i64)], call=lambda x, ax: R.ReverseV2(tensor=x, axis=ax))
case("Roll", [X234, a(1, -5, dt=i32), a(0, 2, dt=i32)], call=lambda x, s, ax: R.Roll(input=x, shift=s, axis=ax))
case("Roll", [a(1, 2, 3, 4, 5, dt=i32), scalar(2, i32), scalar(0, i32)], call=lambda x, s, ax: R.Roll(input=x, shift=s, axis=ax))
case("Roll", [A23, a(1, 1, dt=i32), a(1, 1, dt=i32)], call=lambda x, s, ax: R.Roll(input=x, shift=s, axis=ax))
case("MatrixBandPart", [r([2, 3, 4], 49), scalar(-1, i64), scalar(0, i64)],
     call=lambda x, lo, up: R.MatrixBandPart(input=x, num_lower=lo, num_upper=up))
case("MatrixBandPart", [r([4, 4], 50), scalar(1, i32), scalar(2, i32)],
     call=lambda x, lo, up: R.MatrixBandPart(input=x, num_lower=lo, num_upper=up))
case("MatrixBandPart", [a([True, True], [True, True], dt=b8), scalar(0, i64), scalar(-1, i64)],
     call=lambda x, lo, up: R.MatrixBandPart(input=x, num_lower=lo, num_upper=up))

case("SpaceToBatchND", [r([2, 5, 4, 3], 51), a(2, 2, dt=i32), a([1, 0], [0, 0], dt=i32)],
     call=lambda x, b, p: R.SpaceToBatchND(input=x, block_shape=b, paddings=p))
case("SpaceToBatchND", [r([1, 3, 3], 52), a(3, dt=i64), a([2, 1], dt=i64)],
     call=lambda x, b, p: R.SpaceToBatchND(input=x, block_shape=b, paddings=p))
case("BatchToSpaceND", [r([8, 3, 2, 2], 53), a(2, 2, dt=i32), a([1, 0], [0, 1], dt=i32)],
     call=lambda x, b, c: R.BatchToSpaceND(input=x, block_shape=b, crops=c))
case("BatchToSpaceND", [a([[1], [2]], [[3], [4]], [[5], [6]], dt=i32), a(3, dt=i32), a([1, 2], dt=i32)],
     call=lambda x, b, c: R.BatchToSpaceND(input=x, block_shape=b, crops=c))

SMALL = r([2, 3, 4, 2], 54)
for op in ["ResizeBilinear", "ResizeNearestNeighbor"]:
    for size, ac, hp in [((5, 7), False, False), ((5, 7), True, False), ((5, 7), False, True),
                         ((2, 3), False, False), ((2, 3), True, False), ((2, 3), False, True),
                         ((1, 1), True, False), ((6, 8), False, True)]:
        at = {"align_corners": ac, "half_pixel_centers": hp}
        case(op, [SMALL, a(*size, dt=i32)], at,
             call=lambda x, s, op=op, at=at: getattr(R, op)(images=x, size=s, **at))
case("ResizeBilinear", [r([1, 2, 3, 1], 55, dt=i32, lo=0, hi=200), a(3, 5, dt=i32)], {"half_pixel_centers": True},
     call=lambda x, s: R.ResizeBilinear(images=x, size=s, half_pixel_centers=True))
case("ResizeNearestNeighbor", [r([1, 2, 3, 1], 56, dt=i32, lo=0, hi=200), a(4, 4, dt=i32)], {"half_pixel_centers": True},
     call=lambda x, s: R.ResizeNearestNeighbor(images=x, size=s, half_pixel_centers=True))

case("Size", [X234], {"out_type": tf.int64}, call=lambda x: R.Size(input=x, out_type=tf.int64))
case("Size", [a([True], [False], dt=b8)], call=lambda x: R.Size(input=x))
case("DenseBincount", [a([0, 2, 2, 7], [1, 1, 3, 0], dt=i32), scalar(4, i32), np.zeros([0], f32)],
     call=lambda x, n, w: R.DenseBincount(input=x, size=n, weights=w))
case("DenseBincount", [a(0, 2, 2, 5, dt=i64), scalar(3, i64), a(0.5, 1.0, 2.0, 4.0)],
     call=lambda x, n, w: R.DenseBincount(input=x, size=n, weights=w))
case("DenseBincount", [a([0, 2, 2], [1, 1, 3], dt=i64), scalar(4, i64), np.zeros([0], np.int64)],
     {"binary_output": True}, call=lambda x, n, w: R.DenseBincount(input=x, size=n, weights=w, binary_output=True))


# --- volumetric and transposed convolutions, 3-D pools (eng_kernels_conv3d.c)
X5 = r([2, 4, 5, 4, 2], 60)
for st, pad in [([1, 1, 1, 1, 1], "SAME"), ([1, 2, 1, 2, 1], "VALID"), ([1, 1, 2, 2, 1], "SAME")]:
    case("Conv3D", [X5, r([2, 3, 2, 2, 3], 61)], {"strides": st, "padding": pad},
         call=lambda x, f, st=st, pad=pad: R.Conv3D(input=x, filter=f, strides=st, padding=pad))
for isz, fs, st, pad in [([2, 5, 6, 3], [3, 3, 3, 4], [1, 2, 2, 1], "SAME"),
                         ([1, 4, 4, 2], [2, 3, 2, 3], [1, 1, 1, 1], "VALID"),
                         ([1, 7, 6, 2], [3, 3, 2, 2], [1, 2, 3, 1], "VALID"),
                         ([2, 6, 6, 1], [2, 2, 1, 3], [1, 2, 2, 1], "SAME")]:
    fwd = tf.nn.conv2d(tf.zeros(isz), tf.zeros(fs), st, pad)
    case("Conv2DBackpropInput", [a(*isz, dt=i32), r(fs, 62), r(fwd.shape.as_list(), 63)],
         {"strides": st, "padding": pad},
         call=lambda s, f, dy, st=st, pad=pad: R.Conv2DBackpropInput(
             input_sizes=s, filter=f, out_backprop=dy, strides=st, padding=pad))
for isz, fs, st, pad in [([1, 3, 4, 5, 2], [2, 2, 3, 2, 3], [1, 1, 2, 2, 1], "SAME"),
                         ([2, 4, 3, 3, 1], [3, 2, 2, 1, 2], [1, 1, 1, 1, 1], "VALID")]:
    fwd = tf.nn.conv3d(tf.zeros(isz), tf.zeros(fs), st, pad)
    case("Conv3DBackpropInputV2", [a(*isz, dt=i64), r(fs, 64), r(fwd.shape.as_list(), 65)],
         {"strides": st, "padding": pad},
         call=lambda s, f, dy, st=st, pad=pad: R.Conv3DBackpropInputV2(
             input_sizes=s, filter=f, out_backprop=dy, strides=st, padding=pad))
for op in ["MaxPool3D", "AvgPool3D"]:
    for ks, st, pad in [([1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "VALID"),
                        ([1, 3, 2, 3, 1], [1, 2, 1, 2, 1], "SAME")]:
        case(op, [X5], {"ksize": ks, "strides": st, "padding": pad},
             call=lambda x, op=op, ks=ks, st=st, pad=pad: getattr(R, op)(
                 input=x, ksize=ks, strides=st, padding=pad))


# --- image ops (eng_kernels_image.c)
IMG = r([2, 4, 5, 3], 66, lo=0, hi=1)
for size, ac, hp in [((7, 9), False, False), ((7, 9), True, False), ((7, 9), False, True),
                     ((3, 2), False, False), ((3, 2), False, True), ((1, 1), True, False)]:
    at = {"align_corners": ac, "half_pixel_centers": hp}
    case("ResizeBicubic", [IMG, a(*size, dt=i32)], at,
         call=lambda x, s, at=at: R.ResizeBicubic(images=x, size=s, **at))
case("ResizeBicubic", [r([1, 3, 3, 1], 67, dt=i32, lo=0, hi=255), a(5, 4, dt=i32)], {"half_pixel_centers": True},
     call=lambda x, s: R.ResizeBicubic(images=x, size=s, half_pixel_centers=True))
for size, ac in [((2, 2), False), ((3, 4), False), ((7, 9), False), ((3, 4), True), ((1, 1), False)]:
    case("ResizeArea", [IMG, a(*size, dt=i32)], {"align_corners": ac},
         call=lambda x, s, ac=ac: R.ResizeArea(images=x, size=s, align_corners=ac))
case("ResizeArea", [r([1, 4, 4, 1], 68, dt=i32, lo=0, hi=255), a(3, 3, dt=i32)],
     call=lambda x, s: R.ResizeArea(images=x, size=s))
BOXES = a([0.0, 0.0, 1.0, 1.0], [0.1, 0.2, 0.7, 0.9], [-0.2, 0.3, 0.6, 1.3], [0.9, 0.8, 0.2, 0.1],
          [0.5, 0.5, 0.5, 0.5])
for method, size, ex in [("bilinear", (3, 4), 0.0), ("nearest", (3, 4), 0.0), ("bilinear", (1, 1), 0.0),
                         ("bilinear", (4, 3), -1.5), ("nearest", (2, 5), 2.0)]:
    at = {"method": method, "extrapolation_value": ex}
    case("CropAndResize", [IMG, BOXES, a(0, 1, 1, 0, 1, dt=i32), a(*size, dt=i32)], at,
         call=lambda x, b, i, s, at=at: R.CropAndResize(image=x, boxes=b, box_ind=i, crop_size=s, **at))
case("CropAndResize", [r([1, 3, 3, 1], 69, dt=i32, lo=0, hi=255), a([0.0, 0.0, 0.8, 1.0]), a(0, dt=i32),
                       a(2, 3, dt=i32)], call=lambda x, b, i, s: R.CropAndResize(image=x, boxes=b, box_ind=i, crop_size=s))
RGB = np.concatenate([IMG.reshape(-1, 3), a([0.5, 0.5, 0.5], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0],
                                          [0.2, 0.9, 0.2], [0.1, 0.3, 0.8], [0.9, 0.1, 0.6])]).reshape(-1, 2, 3)
case("RGBToHSV", [RGB], call=lambda x: R.RGBToHSV(images=x))
HSV = np.asarray(R.RGBToHSV(images=tf.constant(RGB)))
case("HSVToRGB", [HSV], call=lambda x: R.HSVToRGB(images=x))
case("HSVToRGB", [a([0.0, 1.0, 1.0], [0.999, 0.5, 0.25], [0.3333, 0.0, 0.7], [0.75, 0.2, 1.0])],
     call=lambda x: R.HSVToRGB(images=x))
for k in [0.0, 0.5, 1.7]:
    case("AdjustSaturation", [RGB, np.array(k, f32)], call=lambda x, s: R.AdjustSaturation(images=x, scale=s))
for k in [0.0, 0.3, -0.45, 0.9]:
    case("AdjustHue", [RGB, np.array(k, f32)], call=lambda x, d: R.AdjustHue(images=x, delta=d))
for k in [0.5, 2.0, -1.0]:
    case("AdjustContrastv2", [IMG, np.array(k, f32)],
         call=lambda x, f: R.AdjustContrastv2(images=x, contrast_factor=f))
case("AdjustContrastv2", [r([2, 2, 3, 3, 2], 70), np.array(1.5, f32)],
     call=lambda x, f: R.AdjustContrastv2(images=x, contrast_factor=f))


# --- scatters, segments, unique, checks (eng_kernels_scatter.c, _unique.c, _assert.c)
case("ScatterNd", [a([1], [3], [1], dt=i32), a(9.5, -2.0, 0.25), a(5, dt=i32)],
     call=lambda i, u, s: R.ScatterNd(indices=i, updates=u, shape=s))
case("ScatterNd", [a([0, 1], [2, 0], dt=i64), a([1, 2, 3], [4, 5, 6], dt=i32), a(3, 2, 3, dt=i64)],
     call=lambda i, u, s: R.ScatterNd(indices=i, updates=u, shape=s))
case("ScatterNd", [a([[2]], [[0]], dt=i32), r([2, 1, 4], 71), a(3, 4, dt=i32)],
     call=lambda i, u, s: R.ScatterNd(indices=i, updates=u, shape=s))
TS = r([4, 3], 72)
for op in ["TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub", "TensorScatterMax",
           "TensorScatterMin"]:
    case(op, [TS, a([2], [0], dt=i32), r([2, 3], 73)],
         call=lambda t, i, u, op=op: getattr(R, op)(tensor=t, indices=i, updates=u))
    dup = op != "TensorScatterUpdate"  # duplicates combine, except for Update (undefined order)
    case(op, [a([1, 2], [3, 4], dt=i64), a([0, 1], [1, 0], [0, 1], dt=i64)[:3 if dup else 2],
              a(10, -5, 7, dt=i64)[:3 if dup else 2]],
         call=lambda t, i, u, op=op: getattr(R, op)(tensor=t, indices=i, updates=u))
case("TensorScatterUpdate", [a(True, False, True, dt=b8), a([1], [2], dt=i32), a(True, False, dt=b8)],
     call=lambda t, i, u: R.TensorScatterUpdate(tensor=t, indices=i, updates=u))
SEGX = r([6, 3], 74)
for op in ["SegmentSum", "SegmentMean", "SegmentMax", "SegmentMin", "SegmentProd"]:
    case(op, [SEGX, a(0, 0, 1, 3, 3, 3, dt=i32)],
         call=lambda x, s, op=op: getattr(R, op)(data=x, segment_ids=s))
    case(op, [a(4, 7, -2, 9, 1, dt=i32), a(1, 1, 2, 2, 2, dt=i64)],
         call=lambda x, s, op=op: getattr(R, op)(data=x, segment_ids=s))
for op in ["UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd"]:
    case(op, [SEGX, a(3, 0, -1, 3, 0, 1, dt=i32), scalar(5, i32)],
         call=lambda x, s, n, op=op: getattr(R, op)(data=x, segment_ids=s, num_segments=n))
    case(op, [a([4, 7, -2], [9, 1, 3], dt=i64), a([1, 0, 1], [2, 2, 0], dt=i64), scalar(3, i64)],
         call=lambda x, s, n, op=op: getattr(R, op)(data=x, segment_ids=s, num_segments=n))
EMB = r([5, 4], 75)
for op in ["SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"]:
    case(op, [EMB, a(0, 3, 3, 1, 4, 2, dt=i32), a(0, 0, 0, 2, 2, 3, dt=i32)],
         call=lambda x, i, s, op=op: getattr(R, op)(data=x, indices=i, segment_ids=s))
    case(op + "WithNumSegments", [EMB, a(4, 1, 0, dt=i64), a(1, 1, 3, dt=i64), scalar(6, i32)],
         call=lambda x, i, s, n, op=op: getattr(R, op + "WithNumSegments")(
             data=x, indices=i, segment_ids=s, num_segments=n))
UQ = a(3.5, -1.0, 3.5, 0.0, -0.0, 2.0, -1.0, 3.5)
case("Unique", [UQ], n_out=2, call=lambda x: R.Unique(x=x))
case("Unique", [a(7, 7, 1, 9, 1, 4, dt=i64)], {"out_idx": tf.int64}, n_out=2,
     call=lambda x: R.Unique(x=x, out_idx=tf.int64))
case("UniqueWithCounts", [UQ], n_out=3, call=lambda x: R.UniqueWithCounts(x=x))
case("UniqueWithCounts", [a(5, 2, 5, 5, 8, 2, dt=i32)], {"out_idx": tf.int64}, n_out=3,
     call=lambda x: R.UniqueWithCounts(x=x, out_idx=tf.int64))
case("Assert", [scalar(True, b8), a(1.0, 2.0)], n_out=0,
     call=lambda c, x: R.Assert(condition=c, data=[x]))
case("CheckNumerics", [a(1.0, -2.5, 0.0)], {"message": "ok"},
     call=lambda x: R.CheckNumerics(tensor=x, message="ok"))

# --- complex numbers and Fourier transforms: prime, odd and even lengths,
# batch dims, fft_length cropping and zero-padding the signal
c64, c128 = np.complex64, np.complex128


def cx(shape, seed, dt=c64):
    g = np.random.default_rng(seed)
    return (np.round(g.uniform(-2, 2, shape), 2) + 1j * np.round(g.uniform(-2, 2, shape), 2)).astype(dt)


for op, shape in [("FFT", [7]), ("FFT", [2, 8]), ("IFFT", [3, 5]), ("FFT2D", [3, 4]),
                  ("FFT2D", [2, 3, 5]), ("IFFT2D", [2, 6, 3]), ("FFT3D", [2, 3, 2]),
                  ("IFFT3D", [2, 2, 3, 5])]:
    case(op, [cx(shape, len(shape) * 10 + shape[-1])], {"Tcomplex": tf.complex64},
         call=lambda x, op=op: getattr(R, op)(input=x))
case("FFT", [cx([2, 11], 3, c128)], {"Tcomplex": tf.complex128},
     call=lambda x: R.FFT(input=x))
case("FFT", [cx([0, 4], 3)], {"Tcomplex": tf.complex64}, call=lambda x: R.FFT(input=x))
for op, shape, n in [("RFFT", [9], [9]), ("RFFT", [2, 8], [8]), ("RFFT", [2, 7], [5]),
                     ("RFFT", [12], [11]), ("RFFT2D", [3, 5], [3, 5]), ("RFFT2D", [2, 3, 4], [2, 4]),
                     ("RFFT3D", [2, 3, 4], [2, 3, 4])]:
    case(op, [r(shape, sum(shape)), a(*n, dt=i32)], {"Treal": tf.float32, "Tcomplex": tf.complex64},
         call=lambda x, l, op=op: getattr(R, op)(input=x, fft_length=l))
case("RFFT", [r([5], 9).astype(np.float64), a(5, dt=i32)],
     {"Treal": tf.float64, "Tcomplex": tf.complex128},
     call=lambda x, l: R.RFFT(input=x, fft_length=l, Tcomplex=tf.complex128))
for op, shape, n in [("IRFFT", [5], [8]), ("IRFFT", [2, 5], [9]), ("IRFFT", [4], [7]),
                     ("IRFFT", [2, 6], [4]), ("IRFFT", [3], [5]), ("IRFFT2D", [3, 4], [3, 6]),
                     ("IRFFT2D", [2, 5, 3], [5, 5]), ("IRFFT3D", [2, 3, 3], [2, 3, 4])]:
    case(op, [cx(shape, sum(shape) + 1), a(*n, dt=i32)],
         {"Treal": tf.float32, "Tcomplex": tf.complex64},
         call=lambda x, l, op=op: getattr(R, op)(input=x, fft_length=l))
case("Complex", [r([2, 3], 81), r([3], 82)], {"T": tf.float32, "Tout": tf.complex64},
     call=lambda x, y: R.Complex(real=x, imag=y, Tout=tf.complex64))
CX = cx([2, 3], 83)
for op in ["Real", "Imag", "ComplexAbs", "Angle"]:
    case(op, [CX], {"T": tf.complex64, "Tout": tf.float32},
         call=lambda x, op=op: getattr(R, op)(input=x, Tout=tf.float32) if op != "ComplexAbs"
         else R.ComplexAbs(x=x, Tout=tf.float32))
case("Angle", [a(1 + 0j, -1 + 0j, 0j, -2 - 0j, 0 - 3j, dt=c64)], {"T": tf.complex64, "Tout": tf.float32},
     call=lambda x: R.Angle(input=x, Tout=tf.float32))
case("Conj", [CX], {"T": tf.complex64}, call=lambda x: R.Conj(input=x))
case("Real", [cx([3], 84, c128)], {"T": tf.complex128, "Tout": tf.float64},
     call=lambda x: R.Real(input=x, Tout=tf.float64))
for op in ["Add", "Sub", "Mul", "RealDiv"]:
    case(op, [CX, cx([3], 85)], call=lambda x, y, op=op: getattr(R, op)(x=x, y=y))
CU = cx([6], 86)
for op in ["Neg", "Exp", "Expm1", "Log", "Log1p", "Sqrt", "Rsqrt", "Square", "Reciprocal", "Sign",
           "Sin", "Cos", "Tanh", "Sigmoid"]:
    case(op, [CU], {"T": tf.complex64}, call=lambda x, op=op: getattr(R, op)(x=x))
case("Sign", [a(0j, 3 - 4j, dt=c64)], {"T": tf.complex64}, call=lambda x: R.Sign(x=x))
case("Exp", [cx([3], 87, c128)], {"T": tf.complex128}, call=lambda x: R.Exp(x=x))
case("Cast", [a(-1.5, 0.0, 2.25)], {"DstT": tf.complex64},
     call=lambda x: R.Cast(x=x, DstT=tf.complex64))
case("Cast", [a(3, -4, dt=i32)], {"DstT": tf.complex64},
     call=lambda x: R.Cast(x=x, DstT=tf.complex64))
case("Cast", [CX], {"DstT": tf.float32}, call=lambda x: R.Cast(x=x, DstT=tf.float32))
case("Cast", [CX], {"DstT": tf.complex128}, call=lambda x: R.Cast(x=x, DstT=tf.complex128))

# BroadcastArgs: rank differences, 1s on either side, a 0 against a 1, an empty shape.
for s0, s1, dt in [([2, 1, 3], [4, 1, 1, 1], i32), ([0, 1], [1, 3], i64), ([], [5, 2], i32),
                   ([1], [1], i64), ([7, 1, 5], [7, 6, 1], i32)]:
    case("BroadcastArgs", [np.array(s0, dtype=dt), np.array(s1, dtype=dt)],
         {"T": tf.as_dtype(dt)}, call=lambda x, y: R.BroadcastArgs(s0=x, s1=y))
f64 = np.float64
for x in [r([3, 4], 90), r([2, 3], 91).astype(f64) * 1.5, scalar(-3.25), np.zeros([0, 2], f32),
          r([257], 92, lo=-40, hi=40)]:
    case("L2Loss", [x], {"T": tf.as_dtype(x.dtype)}, call=lambda t: R.L2Loss(t=t))
# LinSpace: num 1 (start alone), a descending run, equal ends, float64 with int64 num.
for st, sp, num, dt, nt in [(1.0, 5.0, 1, f32, i32), (0.1, 0.7, 7, f32, i32),
                            (5.0, -5.0, 4, f32, i64), (2.0, 2.0, 3, f32, i32),
                            (-3.0, 2.5, 12, f64, i64), (0.1, 1.0, 2, f64, i32),
                            (-1.0, 1.0, 100, f32, i32)]:
    case("LinSpace", [scalar(st, dt), scalar(sp, dt), scalar(num, nt)],
         {"T": tf.as_dtype(dt), "Tidx": tf.as_dtype(nt)},
         call=lambda a, b, n: R.LinSpace(start=a, stop=b, num=n))

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "op_cases.inc"), "w") as f:
    f.write("/* Generated by tests/engine/make_op_cases.py from TensorFlow %s: do not edit. */\n"
            % tf.__version__)
    for op, at, ins, outs, note in cases:
        f.write("{\"%s\", \"%s\", %d, {%s}, %d, {%s}},\n" % (
            op, at, len(ins), ", ".join(tensor_lit(x) for x in ins), len(outs),
            ", ".join(tensor_lit(x) for x in outs)))
print(len(cases), "cases")
