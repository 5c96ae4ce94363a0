#!/usr/bin/env python3
"""Writes one small etc.graph model per CUDA-capable op case (every op of the CUDA capability
table, src/backends/cuda/cuda_capability.cpp, with the dtypes it admits) into DIR, and DIR/cases.txt:
    NAME|OP|extra `etc run` arguments (tolerances)
cuda_ops_test.sh exports each model for CUDA and runs it with `etc run --verify`, which
compares the CUDA delegate with the CPU reference on fresh random inputs — or, for the stress
cases, on inputs written here as DIR/NAME.INPUT.npy (passed with --input): integers over
their whole range (indices kept in range), large-magnitude floats, special values (inf, -inf,
nan, -0.0) where the op defines them, conversions that overflow or wrap, and tensors above the
CUDA kernels' grid cap and above 2^31 bytes (the "big" cases; --no-big leaves them out).
Usage: op_cases.py DIR [--no-big]"""
import json
import os
import random
import re
import struct
import sys

# .npy without numpy (the GPU machine's python3 may lack it): format 1.0, C order, little end.
_NPY = {"float32": ("<f4", "f"), "float16": ("<f2", "e"), "int32": ("<i4", "i"),
        "int64": ("<i8", "q"), "bool": ("|b1", "?")}


def write_npy(path, dtype, shape, values):
    descr, fmt = _NPY[dtype]
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape) if len(shape) != 1 else "%d," % shape[0])
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))

F32, F16, BF16, I32, I64, BOOL = "float32", "float16", "bfloat16", "int32", "int64", "bool"
FLOATS = [F32, F16, BF16]


class Case:
    def __init__(self, name, op):
        self.name, self.op = name, op
        self.inputs, self.constants, self.nodes, self.outputs = [], [], [], []
        self.run_args = ""
        self.data = {}  # input name -> values written as NAME.INPUT.npy (the input's dtype)

    def input(self, name, dtype, shape):
        self.inputs.append({"name": name, "dtype": dtype, "shape": shape})
        return name

    def spec(self, name):
        return next(i for i in self.inputs if i["name"] == name)

    def constant(self, name, dtype, shape, values):
        self.constants.append({"name": name, "dtype": dtype, "shape": shape, "values": values})
        return name

    def node(self, op, args, outputs):
        self.nodes.append({"name": "n%d" % len(self.nodes), "op": op, "args": args,
                           "outputs": outputs})
        return outputs

    def graph(self):
        return {"format": "etc.graph", "version": 1, "name": self.name, "inputs": self.inputs,
                "constants": self.constants, "nodes": self.nodes, "outputs": self.outputs}


def single_node_case(name, op, args_of, in_specs, outs=("y",), run_args=""):
    """One node of `op` on fresh inputs (name, dtype, shape); its first output is the model's."""
    c = Case(name, op)
    names = [c.input(n, d, s) for n, d, s in in_specs]
    c.node(op, args_of(*names), list(outs))
    c.outputs = [outs[0]]
    c.run_args = run_args
    return c


def unary_math_ops():
    """(ATen name, kind) of each op of src/graph/unary_math.def: a line added there gets its
    CUDA and stress cases here without more."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "graph",
                        "unary_math.def")
    with open(path) as f:
        text = f.read()
    out = []
    for op, kind in re.findall(r"^ETC_UNARY_MATH\((\w+), (\w+),", text, re.M):
        out.append(("aten.%s.default" % re.sub(r"(?<!^)([A-Z])", r"_\1", op).lower(), kind))
    return out


def binary_math_ops():
    """(ATen name, function, form, kind) of each op of src/graph/binary_math.def."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "graph",
                        "binary_math.def")
    with open(path) as f:
        text = f.read()
    kinds = dict(re.findall(r"^ETC_BINARY_FN\((\w+), (\w+),", text, re.M))
    names = {"LogicalAnd": "logical_and", "LogicalOr": "logical_or", "LogicalXor": "logical_xor",
             "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}
    out = []
    for op, fn, form in re.findall(r"^ETC_BINARY_OP\((\w+), (\w+), (\w+),", text, re.M):
        base = names.get(fn, fn.lower())
        if fn in ("LogicalAnd", "LogicalOr", "LogicalXor", "Maximum", "Minimum", "Atan2"):
            aten = "aten.%s.default" % base
        elif fn == "Pow":
            aten = "aten.pow.Tensor_Tensor"
        else:
            aten = "aten.%s.%s" % (base, "Tensor" if form == "kTensor" else "Scalar")
        out.append((aten, fn, form, kinds[fn]))
    return out


# The dtypes of each kind of binary math op (integer fmod, remainder and pow divide by or
# raise to random values, which may be 0 or negative: their integer cases are the stress
# cases, with safe values).
BINARY_MATH_DTYPES = {"kCompare": FLOATS + [I32, I64, BOOL], "kLogical": FLOATS + [I32, I64, BOOL],
                      "kBitwise": [I32, I64, BOOL], "kArith": FLOATS + [I32, I64],
                      "kFloat": FLOATS + [I32, I64]}


# The input dtypes of each kind of unary math op (the CUDA kernels' dtypes it admits).
UNARY_MATH_DTYPES = {"kFloat": FLOATS + [I32, I64, BOOL], "kNumeric": FLOATS + [I32, I64],
                     "kAny": FLOATS + [I32, I64, BOOL], "kIntegral": [I32, I64, BOOL],
                     "kPredicate": FLOATS + [I32, I64, BOOL]}


def tol(dtype, gemm=False):
    """`etc run` tolerance flags: the dtype defaults, looser for long float16/bfloat16 sums."""
    if dtype == BF16:
        return "--atol 0.03 --rtol 0.02" if gemm else ""
    if dtype == F16:
        return "--atol 0.005 --rtol 0.003" if gemm else ""
    return "--atol 2e-4 --rtol 1e-4" if gemm else ""


def cases():
    out = []

    def simple(name, op, args_of, in_specs, outs=("y",), run_args=""):
        c = single_node_case(name, op, args_of, in_specs, outs, run_args)
        out.append(c)
        return c

    # Elementwise binary: broadcasting, every admitted dtype.
    for d in FLOATS + [I32, I64]:
        simple("add_tensor_%s" % d, "aten.add.Tensor",
               lambda a, b: {"self": a, "other": b, "alpha": 2}, [("a", d, [4, 3, 5]), ("b", d, [3, 1])])
        simple("sub_tensor_%s" % d, "aten.sub.Tensor",
               lambda a, b: {"self": a, "other": b}, [("a", d, [2, 6]), ("b", d, [2, 6])])
        simple("mul_tensor_%s" % d, "aten.mul.Tensor",
               lambda a, b: {"self": a, "other": b}, [("a", d, [5, 1, 4]), ("b", d, [3, 4])])
        simple("add_scalar_%s" % d, "aten.add.Scalar",
               lambda a: {"self": a, "other": 3, "alpha": 2}, [("a", d, [7, 9])])
        simple("sub_scalar_%s" % d, "aten.sub.Scalar", lambda a: {"self": a, "other": 1}, [("a", d, [33])])
        simple("mul_scalar_%s" % d, "aten.mul.Scalar", lambda a: {"self": a, "other": 3}, [("a", d, [2, 2, 2])])
        simple("neg_%s" % d, "aten.neg.default", lambda a: {"self": a}, [("a", d, [300])])
        simple("relu_%s" % d, "aten.relu.default", lambda a: {"self": a}, [("a", d, [3, 100])])
        simple("clamp_%s" % d, "aten.clamp.default", lambda a: {"self": a, "min": 0, "max": 1}, [("a", d, [64])])
        simple("hardtanh_%s" % d, "aten.hardtanh.default",
               lambda a: {"self": a, "min_val": -0.5 if d in FLOATS else 0, "max_val": 0.5 if d in FLOATS else 1},
               [("a", d, [10, 10])])
        simple("where_%s" % d, "aten.where.self", lambda c_, a, b: {"condition": c_, "self": a, "other": b},
               [("c", BOOL, [4, 1]), ("a", d, [4, 6]), ("b", d, [6])])
    # Comparisons and logic (bool results; PyTorch's safe softmax in Core ATen uses them).
    for d in FLOATS + [I32, I64, BOOL]:
        simple("eq_scalar_%s" % d, "aten.eq.Scalar", lambda a: {"self": a, "other": 0}, [("a", d, [5, 70])])
        simple("logical_not_%s" % d, "aten.logical_not.default", lambda a: {"self": a}, [("a", d, [3, 41])])
        simple("any_dim_%s" % d, "aten.any.dim", lambda a: {"self": a, "dim": 1, "keepdim": True},
               [("a", d, [4, 300, 3])])
    simple("eq_scalar_float_vs_i64", "aten.eq.Scalar", lambda a: {"self": a, "other": 0.5}, [("a", I64, [16])])
    simple("add_tensor_bool", "aten.add.Tensor", lambda a, b: {"self": a, "other": b},
           [("a", BOOL, [8]), ("b", BOOL, [8])])
    simple("mul_tensor_bool", "aten.mul.Tensor", lambda a, b: {"self": a, "other": b},
           [("a", BOOL, [8]), ("b", BOOL, [8])])
    for d in (I32, I64):  # integer powers wrap, as ATen's
        simple("pow_2_%s" % d, "aten.pow.Tensor_Scalar", lambda a: {"self": a, "exponent": 3},
               [("a", d, [50])])
    simple("clamp_min_only_f32", "aten.clamp.default", lambda a: {"self": a, "min": -0.25}, [("a", F32, [64])])
    simple("add_tensor_mixed_f32_i64", "aten.add.Tensor", lambda a, b: {"self": a, "other": b},
           [("a", F32, [4, 4]), ("b", I64, [4])])
    # Float-only elementwise.
    for d in FLOATS:
        simple("div_tensor_%s" % d, "aten.div.Tensor", lambda a, b: {"self": a, "other": b},
               [("a", d, [4, 8]), ("b", d, [8])])
        simple("div_scalar_%s" % d, "aten.div.Scalar", lambda a: {"self": a, "other": 3}, [("a", d, [40])])
        for e in (2, 3, 0.5):
            simple("pow_%s_%s" % (str(e).replace(".", "_"), d), "aten.pow.Tensor_Scalar",
                   lambda a: {"self": a, "exponent": e}, [("a", d, [50])])
        for op in ("exp", "log", "rsqrt", "sigmoid", "sqrt", "tanh", "erf", "hardsigmoid", "hardswish", "silu"):
            simple("%s_%s" % (op, d), "aten.%s.default" % op, lambda a: {"self": a}, [("a", d, [3, 70])])
        for approx in ("none", "tanh"):
            simple("gelu_%s_%s" % (approx, d), "aten.gelu.default",
                   lambda a: {"self": a, "approximate": approx}, [("a", d, [129])])
    # The unary math ops, every dtype their kind admits.
    for op, kind in unary_math_ops():
        short = op.split(".")[1]
        for d in UNARY_MATH_DTYPES[kind]:
            simple("%s_%s" % (short, d), op, lambda a: {"self": a}, [("a", d, [3, 70])])
    # The binary math ops, every dtype their kind admits, broadcasting.
    for op, fn, form, kind in binary_math_ops():
        short = op.split(".")[1] + ("_scalar" if form == "kScalar" else "")
        second = "exponent" if fn == "Pow" else "other"
        for d in BINARY_MATH_DTYPES[kind]:
            if fn in ("Fmod", "Remainder", "Pow") and d not in FLOATS:
                continue
            if form == "kTensor":
                simple("%s_%s" % (short, d), op, lambda a, b: {"self": a, second: b},
                       [("a", d, [3, 1, 5]), ("b", d, [4, 5])])
            else:
                number = True if d == BOOL else (1 if kind == "kBitwise" or d in (I32, I64) else 0.25)
                simple("%s_%s" % (short, d), op, lambda a: {"self": a, "other": number},
                       [("a", d, [6, 7])])
    # div with a rounding mode (binary_math.def's TrueDiv, DivTrunc, DivFloor); integer
    # divisors may be 0 in random data, so the integer cases are stress cases.
    for mode in (None, "trunc", "floor"):
        tag = mode or "true"
        for d in FLOATS:
            simple("div_mode_%s_%s" % (tag, d), "aten.div.Tensor_mode",
                   lambda a, b, m=mode: {"self": a, "other": b, "rounding_mode": m},
                   [("a", d, [3, 1, 5]), ("b", d, [4, 5])])
            simple("div_scalar_mode_%s_%s" % (tag, d), "aten.div.Scalar_mode",
                   lambda a, m=mode: {"self": a, "other": -0.75, "rounding_mode": m},
                   [("a", d, [6, 7])])
    # GEMMs.
    for d in FLOATS:
        g = tol(d, gemm=True)
        simple("mm_%s" % d, "aten.mm.default", lambda a, b: {"self": a, "mat2": b},
               [("a", d, [33, 64]), ("b", d, [64, 17])], run_args=g)
        simple("bmm_%s" % d, "aten.bmm.default", lambda a, b: {"self": a, "mat2": b},
               [("a", d, [3, 20, 40]), ("b", d, [3, 40, 9])], run_args=g)
        simple("addmm_%s" % d, "aten.addmm.default",
               lambda s, a, b: {"self": s, "mat1": a, "mat2": b, "beta": 0.5, "alpha": 2},
               [("s", d, [17]), ("a", d, [8, 64]), ("b", d, [64, 17])], run_args=g)
        simple("addmm_full_bias_%s" % d, "aten.addmm.default",
               lambda s, a, b: {"self": s, "mat1": a, "mat2": b},
               [("s", d, [8, 17]), ("a", d, [8, 64]), ("b", d, [64, 17])], run_args=g)
        simple("linear_%s" % d, "aten.linear.default",
               lambda x, w, b: {"input": x, "weight": w, "bias": b},
               [("x", d, [2, 5, 48]), ("w", d, [24, 48]), ("b", d, [24])], run_args=g)
        simple("linear_nobias_%s" % d, "aten.linear.default", lambda x, w: {"input": x, "weight": w},
               [("x", d, [7, 48]), ("w", d, [24, 48])], run_args=g)
    # etc::weight_only_linear (graph/weight_only.h): 4-bit and int8 weights, zero points of the
    # input's dtype, int8 or none, with and without a bias; up to 8 rows on the kernel that
    # reads the packed weight (one row: a decode step), more on the dequantized weight and
    # cuBLAS; K not a multiple of the kernel's 8-value chunks, groups that split a chunk, odd
    # K (4-bit rows whose last byte holds one value, not word-aligned).
    for d in FLOATS:
        g = tol(d, gemm=True)
        for tag, wtype, x_shape, gs, zero, bias in (
                ("int4_decode", "uint8", [1, 256], 32, d, True),
                ("int4_rows5", "uint8", [5, 256], 32, None, False),
                ("int4_prompt", "uint8", [19, 256], 64, "int8", True),
                ("int4_rank3", "uint8", [2, 3, 128], 128, d, False),
                ("int4_odd_k", "uint8", [4, 51], 17, d, False),
                ("int8_axis", "int8", [3, 200], 200, d, False),
                ("int8_tail", "int8", [2, 52], 13, "int8", True),
                ("int8_prompt", "int8", [12, 96], 32, None, True)):
            k = x_shape[-1]
            n = 24
            specs = [("x", d, x_shape), ("w", wtype, [n, (k + 1) // 2 if wtype == "uint8" else k]),
                     ("s", d, [n, k // gs])]
            if zero:
                specs.append(("z", zero, [n, k // gs]))
            if bias:
                specs.append(("b", d, [n]))

            def args_of(*names, gs=gs, zero=zero, bias=bias):
                a = {"input": names[0], "weight": names[1], "scale": names[2], "group_size": gs}
                a["zero_point"] = names[3] if zero else None
                a["bias"] = names[-1] if bias else None
                return a
            simple("weight_only_linear_%s_%s" % (tag, d), "etc.weight_only_linear.default",
                   args_of, specs, run_args=g)
    # aten._int_mm: uint8 and int8 rows by int8, exact int32 sums (compared exactly): one row
    # (a decode step), rows and columns past the kernel's 16 x 16 tiles, K past a tile and K
    # not a multiple of 4.
    for a_type in ("uint8", "int8"):
        for tag, m, k, n in (("decode", 1, 300, 40), ("tiles", 33, 64, 17), ("odd", 5, 7, 3),
                             ("k70", 3, 70, 50)):
            simple("int_mm_%s_%s" % (tag, a_type), "aten._int_mm.default",
                   lambda a, b: {"self": a, "mat2": b},
                   [("a", a_type, [m, k]), ("b", "int8", [k, n])])
    # Large K: cuBLAS may split K, and its default math mode lets 16-bit GEMMs reduce the
    # partial sums in 16 bits (more than one rounding). etc disallows it, so the result is one
    # rounding of a float accumulation, as on the CPU: within about one 16-bit ulp.
    for d, rtol in ((BF16, "0.008"), (F16, "0.001")):
        simple("linear_large_k_%s" % d, "aten.linear.default", lambda x, w: {"input": x, "weight": w},
               [("x", d, [4, 16384]), ("w", d, [64, 16384])], run_args="--atol 0.02 --rtol %s" % rtol)
    # Convolution: plain, padded/strided/dilated, grouped, depthwise, pointwise.
    for d in FLOATS:
        g = tol(d, gemm=True)
        for name, cin, cout, k, stride, pad, dil, groups in (
                ("conv3x3", 3, 8, 3, 1, 1, 1, 1), ("conv_strided", 4, 6, 3, 2, 0, 1, 1),
                ("conv_dilated", 4, 4, 3, 1, 2, 2, 1), ("conv_grouped", 8, 6, 3, 1, 1, 1, 2),
                ("conv_depthwise", 8, 8, 3, 1, 1, 1, 8), ("conv_pointwise", 8, 16, 1, 1, 0, 1, 1)):
            simple("%s_%s" % (name, d), "aten.convolution.default",
                   lambda x, w, b: {"input": x, "weight": w, "bias": b, "stride": [stride, stride],
                                    "padding": [pad, pad], "dilation": [dil, dil], "transposed": False,
                                    "output_padding": [0, 0], "groups": groups},
                   [("x", d, [2, cin, 9, 11]), ("w", d, [cout, cin // groups, k, k]), ("b", d, [cout])],
                   run_args=g)
        simple("conv_nobias_%s" % d, "aten.convolution.default",
               lambda x, w: {"input": x, "weight": w, "bias": None, "stride": [1, 1], "padding": [0, 0],
                             "dilation": [1, 1], "transposed": False, "output_padding": [0, 0], "groups": 1},
               [("x", d, [1, 3, 6, 6]), ("w", d, [5, 3, 2, 2])], run_args=g)
    # Pooling.
    for d in FLOATS:
        simple("max_pool2d_%s" % d, "aten.max_pool2d.default",
               lambda x: {"self": x, "kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]},
               [("x", d, [2, 3, 9, 10])])
        simple("max_pool2d_ceil_dilated_%s" % d, "aten.max_pool2d.default",
               lambda x: {"self": x, "kernel_size": [2, 2], "dilation": [2, 2], "ceil_mode": True},
               [("x", d, [1, 2, 9, 9])])
        simple("avg_pool2d_%s" % d, "aten.avg_pool2d.default",
               lambda x: {"self": x, "kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]},
               [("x", d, [2, 3, 9, 10])])
        simple("avg_pool2d_nopad_count_%s" % d, "aten.avg_pool2d.default",
               lambda x: {"self": x, "kernel_size": [2, 2], "padding": [1, 1], "count_include_pad": False,
                          "ceil_mode": True},
               [("x", d, [3, 7, 7])])
        simple("adaptive_avg_pool2d_%s" % d, "aten.adaptive_avg_pool2d.default",
               lambda x: {"self": x, "output_size": [3, 4]}, [("x", d, [2, 3, 10, 9])])
        simple("upsample_nearest2d_scale_%s" % d, "aten.upsample_nearest2d.vec",
               lambda x: {"input": x, "output_size": None, "scale_factors": [2.0, 3.0]}, [("x", d, [2, 3, 5, 4])])
        simple("upsample_nearest2d_size_%s" % d, "aten.upsample_nearest2d.vec",
               lambda x: {"input": x, "output_size": [7, 3], "scale_factors": None}, [("x", d, [1, 2, 5, 4])])
        simple("upsample_bilinear2d_%s" % d, "aten.upsample_bilinear2d.vec",
               lambda x: {"input": x, "output_size": None, "align_corners": False, "scale_factors": [2.0, 0.5]},
               [("x", d, [1, 3, 6, 8])])
        simple("upsample_bilinear2d_corners_%s" % d, "aten.upsample_bilinear2d.vec",
               lambda x: {"input": x, "output_size": [9, 5], "align_corners": True, "scale_factors": None},
               [("x", d, [2, 2, 4, 6])])
    # Reductions and normalisation.
    for d in FLOATS:
        simple("amax_%s" % d, "aten.amax.default", lambda x: {"self": x, "dim": [1], "keepdim": True},
               [("x", d, [4, 300, 3])])
        simple("amin_%s" % d, "aten.amin.default", lambda x: {"self": x, "dim": [0, 2], "keepdim": False},
               [("x", d, [4, 30, 3])])
        simple("prod_dim_int_%s" % d, "aten.prod.dim_int", lambda x: {"self": x, "dim": 1, "keepdim": True},
               [("x", d, [5, 12, 3])], run_args=tol(d, gemm=True))
        simple("cumsum_%s" % d, "aten.cumsum.default", lambda x: {"self": x, "dim": 1},
               [("x", d, [3, 40, 5])], run_args=tol(d, gemm=True))
        simple("native_group_norm_%s" % d, "aten.native_group_norm.default",
               lambda x, w, b: {"input": x, "weight": w, "bias": b, "N": 2, "C": 6, "HxW": 20,
                                "group": 3, "eps": 1e-5},
               [("x", d, [2, 6, 4, 5]), ("w", d, [6]), ("b", d, [6])], outs=("y", "mean", "rstd"))
        simple("native_group_norm_noaffine_%s" % d, "aten.native_group_norm.default",
               lambda x: {"input": x, "weight": None, "bias": None, "N": 3, "C": 4, "HxW": 7,
                          "group": 4, "eps": 1e-5},
               [("x", d, [3, 4, 7])], outs=("y", "mean", "rstd"))
        simple("mean_dim_%s" % d, "aten.mean.dim", lambda x: {"self": x, "dim": [0, 2]}, [("x", d, [5, 6, 7])])
        simple("var_dim_%s" % d, "aten.var.correction", lambda x: {"self": x, "dim": [1]},
               [("x", d, [4, 300, 3])])
        simple("var_all_keepdim_%s" % d, "aten.var.correction",
               lambda x: {"self": x, "dim": None, "correction": 0, "keepdim": True}, [("x", d, [3, 50])])
        simple("var_dims_correction_%s" % d, "aten.var.correction",
               lambda x: {"self": x, "dim": [-1, 0], "correction": 2.5}, [("x", d, [5, 6, 7])])
        simple("sum_dim_%s" % d, "aten.sum.dim_IntList", lambda x: {"self": x, "dim": [-1], "keepdim": True},
               [("x", d, [6, 1000])], run_args=tol(d, gemm=True))
        simple("sum_all_%s" % d, "aten.sum.dim_IntList", lambda x: {"self": x, "dim": None},
               [("x", d, [3, 50])], run_args=tol(d, gemm=True))
    # Whole-tensor and few-output reductions of 2^22 elements: the CUDA kernels split each
    # output's elements in chunks over many blocks, then combine the partials (two steps).
    big_x = [("x", F32, [2048, 2048])]
    simple("sum_whole_2p22_f32", "aten.sum.dim_IntList", lambda x: {"self": x, "dim": None},
           big_x, run_args=tol(F32, gemm=True))
    simple("mean_whole_2p22_f32", "aten.mean.dim", lambda x: {"self": x, "dim": [0, 1]}, big_x,
           run_args=tol(F32, gemm=True))
    simple("amax_whole_2p22_f32", "aten.amax.default", lambda x: {"self": x, "dim": [0, 1]}, big_x)
    simple("sum_two_outputs_2p21_f32", "aten.sum.dim_IntList",
           lambda x: {"self": x, "dim": [1, 2], "keepdim": True}, [("x", F32, [2, 1024, 2048])],
           run_args=tol(F32, gemm=True))
    simple("amax_three_outputs_2p22_f32", "aten.amax.default",
           lambda x: {"self": x, "dim": [1], "keepdim": False}, [("x", F32, [3, 1 << 22])])
    simple("any_dim_few_outputs_2p22_bool", "aten.any.dim", lambda x: {"self": x, "dim": 1},
           [("x", BOOL, [2, 1 << 21])])
    for d in FLOATS:
        for op in ("_softmax", "_log_softmax"):
            simple("%s_last_%s" % (op.strip("_"), d), "aten.%s.default" % op,
                   lambda x: {"self": x, "dim": -1, "half_to_float": False}, [("x", d, [6, 257])])
            simple("%s_mid_%s" % (op.strip("_"), d), "aten.%s.default" % op,
                   lambda x: {"self": x, "dim": 1, "half_to_float": False}, [("x", d, [2, 33, 5])])
        c = simple("layer_norm_%s" % d, "aten.native_layer_norm.default",
                   lambda x, w, b: {"input": x, "normalized_shape": [96], "weight": w, "bias": b, "eps": 1e-5},
                   [("x", d, [3, 4, 96]), ("w", d, [96]), ("b", d, [96])], outs=("y", "mean", "rstd"))
        c.outputs = ["y", "mean", "rstd"]
        simple("layer_norm_noaffine_%s" % d, "aten.native_layer_norm.default",
               lambda x: {"input": x, "normalized_shape": [4, 24], "weight": None, "bias": None, "eps": 1e-5},
               [("x", d, [5, 4, 24])], outs=("y", "mean", "rstd"))
        c = Case("batch_norm_%s" % d, "aten._native_batch_norm_legit_no_training.default")
        x = c.input("x", d, [2, 5, 4, 3])
        w = c.input("w", d, [5])
        b = c.input("b", d, [5])
        rm = c.input("rm", d, [5])
        rv = c.constant("rv", d, [5], [0.5, 1.0, 1.5, 2.0, 0.25])
        c.node(c.op, {"input": x, "weight": w, "bias": b, "running_mean": rm, "running_var": rv,
                      "momentum": 0.1, "eps": 1e-5}, ["y", "o1", "o2"])
        c.outputs = ["y"]
        out.append(c)
    # var over an empty dim: NaN (0 / 0) in every output, as ATen.
    simple("var_empty_dim_f32", "aten.var.correction", lambda x: {"self": x, "dim": [1]},
           [("x", F32, [2, 0, 3])])
    # Index reductions, every dtype the capability admits (random integers are 0 or 1: ties,
    # which go to the first index); both outputs of max.dim / min.dim are compared.
    for d in FLOATS + [I32, I64, BOOL]:
        simple("argmax_dim_%s" % d, "aten.argmax.default", lambda x: {"self": x, "dim": 1},
               [("x", d, [5, 37, 3])])
        simple("argmin_neg_dim_keepdim_%s" % d, "aten.argmin.default",
               lambda x: {"self": x, "dim": -1, "keepdim": True}, [("x", d, [4, 6, 300])])
        simple("argmax_flat_%s" % d, "aten.argmax.default", lambda x: {"self": x, "dim": None},
               [("x", d, [7, 50])])
        c = simple("max_dim_%s" % d, "aten.max.dim", lambda x: {"self": x, "dim": -2, "keepdim": True},
                   [("x", d, [6, 45, 2])], outs=("values", "indices"))
        c.outputs = ["values", "indices"]
        c = simple("min_dim_%s" % d, "aten.min.dim", lambda x: {"self": x, "dim": 0},
                   [("x", d, [33, 5])], outs=("values", "indices"))
        c.outputs = ["values", "indices"]
    # Lanes longer than a block (each thread scans a strided share), and empty outputs.
    simple("argmax_long_f32", "aten.argmax.default", lambda x: {"self": x, "dim": 0}, [("x", F32, [5000, 2])])
    simple("argmin_long_i64", "aten.argmin.default", lambda x: {"self": x, "dim": 1, "keepdim": True},
           [("x", I64, [3, 5000])])
    simple("argmax_keepdim_empty_f32", "aten.argmax.default",
           lambda x: {"self": x, "dim": 0, "keepdim": True}, [("x", F32, [4, 0])])
    c = simple("max_dim_empty_f32", "aten.max.dim", lambda x: {"self": x, "dim": -1},
               [("x", F32, [3, 0, 2])], outs=("values", "indices"))
    c.outputs = ["values", "indices"]
    # sort and topk, every dtype the capability admits, both outputs compared: random integers
    # are 0 or 1, so the indices check that equal keys keep their order (stable). Lanes longer
    # than the kernels' shared-memory tile (2048) take the merge path.
    for d in FLOATS + [I32, I64, BOOL]:
        for name, args, shape in (
                ("sort", {"dim": 1}, [4, 37, 3]),
                ("sort_desc", {"dim": -1, "descending": True}, [5, 300]),
                ("sort_long", {"dim": 1}, [3, 5000]),
                ("sort_long_desc_mid", {"dim": 1, "descending": True}, [2, 3000, 3])):
            c = simple("%s_%s" % (name, d), "aten.sort.default", lambda x: dict(args, self=x),
                       [("x", d, shape)], outs=("values", "indices"))
            c.outputs = ["values", "indices"]
        for name, args, shape in (
                ("topk", {"k": 5}, [6, 50]),
                ("topk_smallest_unsorted", {"k": 7, "dim": 0, "largest": False, "sorted": False}, [40, 3, 4]),
                ("topk_all", {"k": 33, "dim": -2}, [2, 33, 4]),
                ("topk_long", {"k": 100}, [2, 10000])):
            c = simple("%s_%s" % (name, d), "aten.topk.default", lambda x: dict(args, self=x),
                       [("x", d, shape)], outs=("values", "indices"))
            c.outputs = ["values", "indices"]
    for name, op, args, shape in (("topk_k0_f32", "aten.topk.default", {"k": 0}, [3, 8]),
                                  ("sort_empty_lane_f32", "aten.sort.default", {"dim": 1}, [3, 0]),
                                  ("sort_no_lanes_f32", "aten.sort.default", {"dim": -1}, [0, 4]),
                                  ("topk_one_f32", "aten.topk.default", {"k": 1, "dim": 0}, [1, 5])):
        c = simple(name, op, lambda x: dict(args, self=x), [("x", F32, shape)], outs=("values", "indices"))
        c.outputs = ["values", "indices"]
    # Layout ops, every dtype (the capability table admits all but float64).
    for d in FLOATS + [I32, I64, BOOL]:
        simple("cat_%s" % d, "aten.cat.default", lambda a, b: {"tensors": [a, b], "dim": 1},
               [("a", d, [2, 3, 4]), ("b", d, [2, 5, 4])])
        simple("clone_%s" % d, "aten.clone.default", lambda a: {"self": a}, [("a", d, [3, 5])])
        simple("constant_pad_nd_%s" % d, "aten.constant_pad_nd.default",
               lambda a: {"self": a, "pad": [1, 2, 0, 1], "value": 1}, [("a", d, [2, 3, 4])])
        simple("expand_%s" % d, "aten.expand.default", lambda a: {"self": a, "size": [2, 3, 4]},
               [("a", d, [3, 1])])
        simple("permute_%s" % d, "aten.permute.default", lambda a: {"self": a, "dims": [2, 0, 1]},
               [("a", d, [2, 3, 4])])
        simple("reshape_%s" % d, "aten.reshape.default", lambda a: {"self": a, "shape": [4, -1]},
               [("a", d, [2, 3, 4])])
        simple("select_%s" % d, "aten.select.int", lambda a: {"self": a, "dim": 1, "index": -1},
               [("a", d, [2, 3, 4])])
        simple("slice_%s" % d, "aten.slice.Tensor", lambda a: {"self": a, "dim": 2, "start": 1, "end": 9, "step": 3},
               [("a", d, [2, 3, 10])])
        simple("squeeze_dim_%s" % d, "aten.squeeze.dim", lambda a: {"self": a, "dim": 1}, [("a", d, [3, 1, 4])])
        simple("squeeze_dims_%s" % d, "aten.squeeze.dims", lambda a: {"self": a, "dim": [0, 2]},
               [("a", d, [1, 4, 1])])
        simple("transpose_%s" % d, "aten.transpose.int", lambda a: {"self": a, "dim0": 0, "dim1": 2},
               [("a", d, [2, 3, 4])])
        simple("unsqueeze_%s" % d, "aten.unsqueeze.default", lambda a: {"self": a, "dim": -1}, [("a", d, [3, 4])])
        simple("view_%s" % d, "aten.view.default", lambda a: {"self": a, "size": [6, 2]}, [("a", d, [3, 4])])
    # Conversion, indexing, creation.
    for src in FLOATS + [I32, I64, BOOL]:
        for dst in FLOATS + [I32, I64, BOOL]:
            if src != dst:
                simple("to_copy_%s_to_%s" % (src, dst), "aten._to_copy.default",
                       lambda a: {"self": a, "dtype": dst}, [("a", src, [3, 7])])
    for d in FLOATS:
        for idx in (I64, I32):
            simple("embedding_%s_%s" % (d, idx), "aten.embedding.default",
                   lambda w, i: {"weight": w, "indices": i}, [("w", d, [5, 16]), ("i", idx, [3, 4])])
        # Rows of 2 to 20 bytes: the kernel copies 16, 8, 4 or 2 bytes at a time, the widest
        # unit dividing the row (embedding_kernel); these take each narrower path.
        for width in (1, 2, 3, 5):
            simple("embedding_%s_width%d" % (d, width), "aten.embedding.default",
                   lambda w, i: {"weight": w, "indices": i}, [("w", d, [7, width]), ("i", I64, [2, 9])])
    # 8-bit tables: a quantized embedding's rows gathered before they are dequantized
    # (gather-rows-first), widths that take the kernel's narrow copies too.
    for d in ("int8", "uint8"):
        for width in (16, 3):
            simple("embedding_%s_width%d" % (d, width), "aten.embedding.default",
                   lambda w, i: {"weight": w, "indices": i}, [("w", d, [7, width]), ("i", I64, [2, 9])])
    # etc::unpack_int4 (the pack-int4-weights pass puts it after an int4 weight): every byte
    # value over rows of even and odd length, widened to float and multiplied by the input.
    for size in (8, 7):
        c = Case("unpack_int4_size%d" % size, "etc.unpack_int4.default")
        x = c.input("x", F32, [32, size])
        row = (size + 1) // 2
        values = [(r * row + b) % 256 for r in range(32) for b in range(row)]
        if size % 2:  # an odd row's last high nibble is 0
            values = [v & 0x0F if i % row == row - 1 else v for i, v in enumerate(values)]
        k = c.constant("k", "uint8", [32, row], values)
        c.node("etc.unpack_int4.default", {"packed": k, "size": size}, ["q"])
        c.node("aten._to_copy.default", {"self": "q", "dtype": F32}, ["w"])
        c.node("aten.mul.Tensor", {"self": x, "other": "w"}, ["y"])
        c.outputs = ["y"]
        out.append(c)
    for d in FLOATS + [I32, I64, BOOL]:
        # Creation ops feed an add so the delegate has an input; fold-constants is left out of the
        # pipeline (cuda_ops_test.sh) so they stay in the graph.
        for op, extra in (("full", {"fill_value": 2}), ("ones", {}), ("zeros", {})):
            c = Case("%s_%s" % (op, d), "aten.%s.default" % op)
            x = c.input("x", d, [3, 4])
            args = {"size": [3, 4], "dtype": d}
            args.update(extra)
            c.node(c.op, args, ["k"])
            c.node("aten.mul.Tensor", {"self": x, "other": "k"}, ["y"])
            c.outputs = ["y"]
            out.append(c)
        c = Case("full_like_%s" % d, "aten.full_like.default")
        x = c.input("x", d, [3, 4])
        c.node(c.op, {"self": x, "fill_value": 3}, ["k"])
        c.node("aten.mul.Tensor", {"self": x, "other": "k"}, ["y"])
        c.outputs = ["y"]
        out.append(c)
    stress_cases(simple)
    return out


INF, NAN = float("inf"), float("nan")
I32_MIN, I32_MAX, I64_MIN, I64_MAX = -2**31, 2**31 - 1, -2**63, 2**63 - 1
# Above the grid cap of the elementwise kernels (65535 * 8 blocks of 256 threads: 134,215,680
# elements; 4x that on the float32 float4 path) and above 2^31 bytes.
GRID_CAP = 65535 * 8 * 256


def stress_cases(simple):
    """Inputs that expose what (-1, 1) floats and 0/1 integers cannot (added through
    `simple`, which collects the cases)."""
    rng = random.Random(20261201)

    def with_data(c, name, values):
        c.data[name] = values
        return c

    def floats(n, lo, hi, special=()):
        v = [rng.uniform(lo, hi) for _ in range(n - len(special))] + list(special)
        rng.shuffle(v)
        return v

    def ints(n, lo, hi, special=()):
        v = [rng.randint(lo, hi) for _ in range(n - len(special))] + list(special)
        rng.shuffle(v)
        return v

    def case(name, op, args_of, specs, values, outs=("y",), run_args=""):
        c = simple(name, op, args_of, specs, outs=outs, run_args=run_args)
        for (n, _, _), v in zip(specs, values):
            if v is not None:
                with_data(c, n, v)
        return c

    unary = lambda a: {"self": a}  # noqa: E731
    # Conversions: truncation toward zero over the whole target range, overflow to inf,
    # wrapping integer narrowing, and what bool makes of -0.0, nan and tiny values.
    to = lambda d: (lambda a: {"self": a, "dtype": d})  # noqa: E731
    case("stress_to_copy_f32_to_i32_wide", "aten._to_copy.default", to(I32), [("a", F32, [4096])],
         [floats(4096, -2.1e9, 2.1e9, (0.5, -0.5, 1.5, -1.5, -0.0, 2147483520.0, -2147483648.0))])
    case("stress_to_copy_f32_to_i64_wide", "aten._to_copy.default", to(I64), [("a", F32, [4096])],
         [floats(4096, -9e18, 9e18, (0.99, -0.99, 9.2e18, -9.2e18))])
    case("stress_to_copy_f32_to_f16_overflow", "aten._to_copy.default", to(F16), [("a", F32, [2048])],
         [floats(2048, -7e4, 7e4, (65504.0, 65519.0, 65520.0, -65520.0, 1e-8, -1e-8, 6e-8, INF, -INF, NAN))])
    case("stress_to_copy_f32_to_bool_special", "aten._to_copy.default", to(BOOL), [("a", F32, [64])],
         [floats(64, -1e-30, 1e-30, (0.0, -0.0, NAN, INF, -INF, 1e-45))])
    case("stress_to_copy_i64_to_f32_wide", "aten._to_copy.default", to(F32), [("a", I64, [4096])],
         [ints(4096, I64_MIN, I64_MAX, (I64_MIN, I64_MAX, 2**24 + 1, -(2**53 + 1)))])
    case("stress_to_copy_i64_to_i32_wrap", "aten._to_copy.default", to(I32), [("a", I64, [4096])],
         [ints(4096, -2**40, 2**40, (2**31, -2**31 - 1, 2**32 + 5, I64_MIN, I64_MAX))])
    case("stress_to_copy_i32_to_f16_overflow", "aten._to_copy.default", to(F16), [("a", I32, [2048])],
         [ints(2048, -10**6, 10**6, (65504, 65519, 65520, I32_MIN, I32_MAX))])
    # Integer arithmetic over the whole range: two's-complement wrapping, as ATen.
    for d, lo, hi, edge in ((I32, I32_MIN, I32_MAX, (I32_MIN, I32_MAX, -1, 0)),
                            (I64, I64_MIN, I64_MAX, (I64_MIN, I64_MAX, -1, 0))):
        for op, short in (("aten.add.Tensor", "add"), ("aten.sub.Tensor", "sub"), ("aten.mul.Tensor", "mul")):
            case("stress_%s_%s_wrap" % (short, d), op, lambda a, b: {"self": a, "other": b},
                 [("a", d, [4, 1024]), ("b", d, [1024])],
                 [ints(4096, lo, hi, edge), ints(1024, lo, hi, edge)])
        case("stress_neg_%s_min" % d, "aten.neg.default", unary, [("a", d, [1024])], [ints(1024, lo, hi, edge)])
        case("stress_add_scalar_%s_wrap" % d, "aten.add.Scalar", lambda a: {"self": a, "other": 3, "alpha": 2},
             [("a", d, [1024])], [ints(1024, lo, hi, edge)])
    # Indices over the whole table.
    for idx in (I64, I32):
        case("stress_embedding_all_rows_%s" % idx, "aten.embedding.default",
             lambda w, i: {"weight": w, "indices": i}, [("w", F32, [3000, 8]), ("i", idx, [64, 50])],
             [None, ints(3200, 0, 2999, (0, 2999))])
    # Advanced indexing: one index on a middle dim (negative indices too), two broadcast
    # indices on non-adjacent dims (B first), and index_put with distinct positions (repeated
    # ones would leave either value, as in ATen) — the KV-cache write and a broadcast value.
    for d in (F32, F16, I64):
        case("stress_index_mid_%s" % d, "aten.index.Tensor",
             lambda x, i: {"self": x, "indices": [None, i]}, [("x", d, [3, 7, 5]), ("i", I64, [4])],
             [None, [6, -1, 0, 3]])
        case("stress_index_put_kv_%s" % d, "aten.index_put.default",
             lambda x, i, v: {"self": x, "indices": [None, None, i], "values": v},
             [("x", d, [1, 2, 9, 4]), ("i", I64, [3]), ("v", d, [1, 2, 3, 4])],
             [None, [7, 0, -5], None])
    case("stress_index_split_i32", "aten.index.Tensor",
         lambda x, i, j: {"self": x, "indices": [i, None, j]},
         [("x", F32, [5, 3, 6, 2]), ("i", I32, [2, 1]), ("j", I64, [3])],
         [None, [4, -5], [0, 5, 2]])
    case("stress_index_put_broadcast_f32", "aten.index_put.default",
         lambda x, i, v: {"self": x, "indices": [i], "values": v},
         [("x", F32, [6, 3, 4]), ("i", I64, [2]), ("v", F32, [4])], [None, [5, 1], None])
    # Large magnitudes: softmax must subtract the row max (exp(300) overflows float32),
    # -inf entries are masked positions (exp gives 0).
    for op in ("_softmax", "_log_softmax"):
        case("stress_%s_large_f32" % op.strip("_"), "aten.%s.default" % op,
             lambda x: {"self": x, "dim": -1, "half_to_float": False}, [("x", F32, [6, 257])],
             [floats(6 * 257, -300, 300, (-INF,) * 20)])
        case("stress_%s_large_f16" % op.strip("_"), "aten.%s.default" % op,
             lambda x: {"self": x, "dim": 1, "half_to_float": False}, [("x", F16, [2, 33, 5])],
             [floats(330, -60, 60, (-INF,) * 5)])
    # Special values where the op defines them.
    special = (INF, -INF, NAN, -0.0, 0.0, 3.4e38, -3.4e38, 1e-45)
    for op, short in (("aten.relu.default", "relu"), ("aten.neg.default", "neg"), ("aten.exp.default", "exp"),
                      ("aten.sigmoid.default", "sigmoid"), ("aten.tanh.default", "tanh")):
        case("stress_%s_special_f32" % short, op, unary, [("a", F32, [3, 100])],
             [floats(300, -100, 100, special)])
    # The unary math ops: special values and a wide range of floats; integers over their whole
    # range with the extremes (abs of the lowest wraps, as in ATen).
    for op, kind in unary_math_ops():
        short = op.split(".")[1]
        if kind != "kIntegral":
            case("stress_%s_special_f32" % short, op, unary, [("a", F32, [3, 100])],
                 [floats(300, -100, 100, special)])
        if kind != "kFloat":
            case("stress_%s_wide_i32" % short, op, unary, [("a", I32, [512])],
                 [ints(512, -2**31, 2**31 - 1, (-2**31, 2**31 - 1, 0, -1, 1))])
            case("stress_%s_wide_i64" % short, op, unary, [("a", I64, [512])],
                 [ints(512, -2**63, 2**63 - 1, (-2**63, 2**63 - 1, 0, -1, 1))])
    # The binary math ops: special values on both sides (float32); integers over their range
    # with divisors and exponents that ATen takes (non-zero, non-negative).
    for op, fn, form, kind in binary_math_ops():
        short = op.split(".")[1] + ("_scalar" if form == "kScalar" else "")
        second = "exponent" if fn == "Pow" else "other"
        if kind != "kBitwise" and form == "kTensor":
            case("stress_%s_special_f32" % short, op, lambda a, b: {"self": a, second: b},
                 [("a", F32, [4, 64]), ("b", F32, [4, 64])],
                 [floats(256, -50, 50, special), floats(256, -50, 50, special[::-1])])
        if kind in ("kCompare", "kBitwise", "kArith") and form == "kTensor":
            hi = 20 if fn == "Pow" else 2**31 - 1
            lo = -5 if fn == "Pow" else -2**31
            # Integer pow to negative powers gives 1, -1 or 0, as ATen's.
            b_vals = ints(256, 1 if fn in ("Fmod", "Remainder") else lo, hi,
                          () if fn in ("Fmod", "Remainder") else (0, -1, -2) if fn == "Pow"
                          else (0, -1, 2**31 - 1))
            if fn in ("Fmod", "Remainder"):
                b_vals = [v if rng.random() < 0.5 else -v for v in b_vals]
            case("stress_%s_wide_i32" % short, op, lambda a, b: {"self": a, second: b},
                 [("a", I32, [256]), ("b", I32, [256])],
                 [ints(256, -2**31, 2**31 - 1, (-2**31, 2**31 - 1, 0, -1, 1)), b_vals])
    for mode in (None, "trunc", "floor"):
        tag = mode or "true"
        case("stress_div_mode_%s_special_f32" % tag, "aten.div.Tensor_mode",
             lambda a, b, m=mode: {"self": a, "other": b, "rounding_mode": m},
             [("a", F32, [4, 64]), ("b", F32, [4, 64])],
             [floats(256, -50, 50, special), floats(256, -50, 50, special[::-1])])
        for d in (I32, I64):
            lim = 2**31 - 1 if d == I32 else 2**62
            b_vals = [v if rng.random() < 0.5 else -v for v in ints(256, 1, lim, (1, 7))]
            case("stress_div_mode_%s_wide_%s" % (tag, d), "aten.div.Tensor_mode",
                 lambda a, b, m=mode: {"self": a, "other": b, "rounding_mode": m},
                 [("a", d, [256]), ("b", d, [256])],
                 [ints(256, -lim, lim, (-lim, lim, 0, -1, 1)), b_vals])
        case("stress_div_scalar_mode_%s_i64" % tag, "aten.div.Scalar_mode",
             lambda a, m=mode: {"self": a, "other": -3, "rounding_mode": m},
             [("a", I64, [64])], [ints(64, -1000, 1000, (0, -1, 1, 3, -3))])
    case("stress_clamp_special_f32", "aten.clamp.default", lambda a: {"self": a, "min": -1, "max": 1},
         [("a", F32, [64])], [floats(64, -10, 10, special)])
    for d in (I32, I64, BOOL):
        case("stress_cumsum_wide_%s" % d, "aten.cumsum.default", lambda x: {"self": x, "dim": 0},
             [("x", d, [64, 2])],
             [[v % 2 for v in ints(128, 0, 1)] if d == BOOL
              else ints(128, -2**31, 2**31 - 1, (2**31 - 1, 2**31 - 1, -2**31))])
    case("stress_amin_special_f32", "aten.amin.default", lambda x: {"self": x, "dim": [1], "keepdim": False},
         [("x", F32, [4, 300])], [floats(1200, -1e30, 1e30, (NAN, INF, -INF))])
    case("stress_prod_wide_i64", "aten.prod.dim_int", lambda x: {"self": x, "dim": 1, "keepdim": False},
         [("x", I64, [4, 16])], [ints(64, -2**40, 2**40, (0, -1, 2**62))])
    case("stress_amax_special_f32", "aten.amax.default", lambda x: {"self": x, "dim": [1], "keepdim": False},
         [("x", F32, [4, 300])], [floats(1200, -1e30, 1e30, (NAN, INF, -INF))])
    case("stress_max_pool2d_special_f32", "aten.max_pool2d.default",
         lambda x: {"self": x, "kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]},
         [("x", F32, [2, 3, 9, 10])], [floats(540, -1e30, 1e30, (NAN, INF, -INF, -INF, -INF))])
    # Not +-inf: ATen's float kernels give nan for gelu(+inf) (float64 gives inf), etc and
    # ExecuTorch's portable kernel inf.
    case("stress_gelu_large_f16", "aten.gelu.default", lambda a: {"self": a}, [("a", F16, [512])],
         [floats(512, -6e4, 6e4, (65504.0, -65504.0))])
    # Index reductions on ties, signed zeros, infinities and NaN (the first NaN wins, else the
    # first extreme value), over the whole integer range, and over lanes longer than a block.
    tied = (-1.0, 0.0, -0.0, 2.0, 2.0, INF, -INF)

    def tied_floats(n, nans):
        v = [rng.choice(tied) for _ in range(n)]
        for k in nans:
            v[k] = NAN
        return v
    case("stress_argmax_ties_nan_f32", "aten.argmax.default", lambda x: {"self": x, "dim": 1},
         [("x", F32, [6, 50])], [tied_floats(300, (60, 170, 190))])
    case("stress_argmin_ties_nan_f16", "aten.argmin.default",
         lambda x: {"self": x, "dim": 0, "keepdim": True}, [("x", F16, [40, 8])],
         [tied_floats(320, (9, 17, 25, 250))])
    c = case("stress_max_dim_ties_nan_f32", "aten.max.dim", lambda x: {"self": x, "dim": -1},
             [("x", F32, [6, 50])], [tied_floats(300, (60, 170, 190))], outs=("values", "indices"))
    c.outputs = ["values", "indices"]
    c = case("stress_min_dim_wide_i64", "aten.min.dim", lambda x: {"self": x, "dim": 1, "keepdim": True},
             [("x", I64, [4, 64])], [ints(256, I64_MIN, I64_MAX, (I64_MIN, I64_MIN, I64_MAX, I64_MIN))],
             outs=("values", "indices"))
    c.outputs = ["values", "indices"]
    case("stress_argmax_flat_wide_i32", "aten.argmax.default", lambda x: {"self": x, "dim": None},
         [("x", I32, [8, 32])], [ints(256, I32_MIN, I32_MAX, (I32_MAX, I32_MAX, I32_MIN))])
    case("stress_argmax_long_ties_f32", "aten.argmax.default", lambda x: {"self": x, "dim": -1},
         [("x", F32, [3, 5000])], [[float(rng.randint(0, 5)) for _ in range(15000)]])
    # var of values far from 0: the mean is taken first (two passes), so nothing cancels.
    case("stress_var_offset_f32", "aten.var.correction", lambda x: {"self": x, "dim": [1]},
         [("x", F32, [4, 1000])], [floats(4000, 999.0, 1001.0)])
    # sort and topk on ties, signed zeros, infinities and NaN (NaN sorts above +inf; equal values
    # keep their index order, as ATen's stable sort; descending puts NaN first), over the whole
    # integer range, and on lanes long enough for the merge passes.
    for name, op, args, d, shape in (
            ("stress_sort_ties_nan_f32", "aten.sort.default", {"dim": 1}, F32, [4, 64]),
            ("stress_sort_desc_ties_nan_f16", "aten.sort.default", {"dim": 0, "descending": True}, F16, [64, 3]),
            ("stress_sort_long_ties_nan_f32", "aten.sort.default", {"dim": -1, "descending": True}, F32, [2, 6000]),
            ("stress_topk_ties_nan_f32", "aten.topk.default", {"k": 10}, F32, [4, 64]),
            ("stress_topk_smallest_ties_nan_f16", "aten.topk.default", {"k": 9, "largest": False}, F16, [3, 70])):
        n = shape[0] * shape[1]
        c = case(name, op, lambda x: dict(args, self=x), [("x", d, shape)],
                 [tied_floats(n, [rng.randrange(n) for _ in range(n // 20)])], outs=("values", "indices"))
        c.outputs = ["values", "indices"]
    c = case("stress_sort_wide_i64", "aten.sort.default", lambda x: {"self": x, "dim": -1}, [("x", I64, [4, 64])],
             [ints(256, I64_MIN, I64_MAX, (I64_MIN, I64_MAX, I64_MIN, I64_MAX, -1, 0, 0))],
             outs=("values", "indices"))
    c.outputs = ["values", "indices"]
    c = case("stress_topk_wide_i32", "aten.topk.default", lambda x: {"self": x, "k": 20, "largest": False},
             [("x", I32, [3, 90])], [ints(270, I32_MIN, I32_MAX, (I32_MIN, I32_MIN, I32_MAX, I32_MAX))],
             outs=("values", "indices"))
    c.outputs = ["values", "indices"]


def big_cases(simple):
    """Above the grid cap and above 2^31 bytes: the grid-stride loops' continuation."""
    out = []
    # float16 on the scalar path: GRID_CAP + 1,000,003 elements (270 MB).
    out.append(simple("big_relu_f16_above_grid_cap", "aten.relu.default", lambda a: {"self": a},
                      [("a", F16, [GRID_CAP + 1000003])]))
    # float32 on the float4 path above its cap (4 * GRID_CAP): 2.16 GB, more than 2^31 bytes.
    out.append(simple("big_neg_f32_above_2gib", "aten.neg.default", lambda a: {"self": a},
                      [("a", F32, [4 * GRID_CAP + 4099])]))
    # A broadcast binary op whose output passes 2^31 bytes (the index maps' 64-bit offsets),
    # from small inputs: [134300, 1] + [4000].
    out.append(simple("big_add_broadcast_f32_above_2gib", "aten.add.Tensor",
                      lambda a, b: {"self": a, "other": b},
                      [("a", F32, [134300, 1]), ("b", F32, [4000])]))
    # etc::unpack_int4 of GRID_CAP + 2,000,006 values (a vocabulary's 4-bit weight): one
    # output value a step of the grid-stride loop.
    out.append(simple("big_unpack_int4_above_grid_cap", "etc.unpack_int4.default",
                      lambda p: {"packed": p, "size": 2},
                      [("p", "uint8", [GRID_CAP // 2 + 1000003, 1])], outs=("q",)))
    # etc::weight_only_linear over 9 rows (the dequantized weight and cuBLAS) with a weight
    # of 16384 x 8448 values, above the grid cap.
    out.append(simple("big_weight_only_linear_above_grid_cap", "etc.weight_only_linear.default",
                      lambda x, w, s: {"input": x, "weight": w, "scale": s, "group_size": 128},
                      [("x", BF16, [9, 8448]), ("w", "int8", [16384, 8448]),
                       ("s", BF16, [16384, 66])], run_args=tol(BF16, gemm=True)))
    return out


def main():
    folder = sys.argv[1]
    big = "--no-big" not in sys.argv[2:]
    os.makedirs(folder, exist_ok=True)
    lines = []
    all_cases = cases()
    if big:
        all_cases += big_cases(single_node_case)
    for c in all_cases:
        with open(os.path.join(folder, c.name + ".json"), "w") as f:
            json.dump(c.graph(), f, indent=1)
        run_args = c.run_args
        for name, values in c.data.items():
            spec = c.spec(name)
            path = os.path.join(os.path.abspath(folder), "%s.%s.npy" % (c.name, name))
            write_npy(path, spec["dtype"], spec["shape"], values)
            run_args += " --input %s=%s" % (name, path)
        lines.append("%s|%s|%s" % (c.name, c.op, run_args.strip()))
    with open(os.path.join(folder, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%d cases" % len(lines))


if __name__ == "__main__":
    main()
