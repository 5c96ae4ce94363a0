"""ONNX opsets 18-21 (what PyTorch's exporter writes today: opset 18 and later; Debian's
conformance data stops at 17): small models built with the `onnx` package, each at the opset
that changed the op, run in ONNX Runtime and in etc (`etc export --target cpu`, `etc run`) on
the same inputs and compared. Then the changes etc refuses, each with exit 1 and a message
naming it.

  opset_test.py ETC
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

etc = sys.argv[1]
failures = 0
F = TensorProto.FLOAT


def check(ok, label, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + label + (f": {detail}" if detail else ""))
    if not ok:
        failures += 1


def model(opset, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "t", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def vinfo(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def const(name, values, t=TensorProto.INT64):
    return helper.make_tensor(name, t, [len(values)], values)


def compare(label, m, feeds, tmp):
    path = os.path.join(tmp, label.replace(" ", "_") + ".onnx")
    onnx.save(m, path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    pte = path + ".pte"
    r = subprocess.run([etc, "export", path, "-o", pte, "--target", "cpu"], capture_output=True, text=True)
    if r.returncode != 0:
        return check(False, label, r.stderr.strip())
    args = []
    for i, (name, v) in enumerate(feeds.items()):
        np.save(os.path.join(tmp, f"in{i}.npy"), v)
        args += ["--input", f"{i}={os.path.join(tmp, f'in{i}.npy')}"]
    out = pte + ".out"
    r = subprocess.run([etc, "run", pte, "--device", "cpu", "--output-dir", out, *args],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return check(False, label, r.stderr.strip())
    errs = []
    for i, w in enumerate(want):
        got = np.load(os.path.join(out, f"output_{i}.npy"))
        if got.shape != w.shape:
            return check(False, label, f"output {i}: etc {got.shape}, ONNX Runtime {w.shape}")
        errs.append(float(np.abs(got.astype(np.float64) - w).max()) if w.size else 0.0)
    check(max(errs) <= 1e-5, label + f" (opset {m.opset_import[0].version})",
          f"max abs error {max(errs):.3g}")


def refused(label, m, words, tmp):
    path = os.path.join(tmp, label.replace(" ", "_") + ".onnx")
    onnx.save(m, path)
    r = subprocess.run([etc, "export", path, "-o", path + ".pte", "--target", "cpu"],
                       capture_output=True, text=True)
    ok = r.returncode == 1 and all(w in r.stderr for w in words) and not os.path.exists(path + ".pte")
    check(ok, label + ": refused with exit 1", r.stderr.strip())


rng = np.random.default_rng(0)
x = rng.uniform(-2, 2, (2, 3, 4, 5)).astype(np.float32)
with tempfile.TemporaryDirectory() as tmp:
    for op in ["ReduceMean", "ReduceMax", "ReduceL2", "ReduceSumSquare"]:
        for keep in [0, 1]:
            m = model(18, [helper.make_node(op, ["x", "axes"], ["y"], keepdims=keep)],
                      [vinfo("x", [2, 3, 4, 5])], [vinfo("y", None)], [const("axes", [1, -1])])
            compare(f"{op} with an axes input, keepdims={keep}", m, {"x": x}, tmp)
    m = model(18, [helper.make_node("ReduceMean", ["x"], ["y"], keepdims=1)],
              [vinfo("x", [2, 3, 4, 5])], [vinfo("y", None)])
    compare("ReduceMean with no axes (all)", m, {"x": x}, tmp)
    m = model(18, [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=3, num_outputs=3)],
              [vinfo("x", [2, 3, 4, 5])], [vinfo(n, None) for n in "abc"])
    compare("Split into num_outputs=3 uneven parts (2, 2, 1)", m, {"x": x}, tmp)
    m = model(18, [helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"])],
              [vinfo("x", [2, 3, 4, 5])], [vinfo("y", None)],
              [const("pads", [1, 0, 2, 3]), const("axes", [2, -1])])
    compare("Pad with an axes input", m, {"x": x}, tmp)
    m = model(18, [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                                    axes=[2, 3], coordinate_transformation_mode="asymmetric",
                                    nearest_mode="floor")],
              [vinfo("x", [2, 3, 4, 5])], [vinfo("y", None)], [const("scales", [2.0, 2.0], F)])
    compare("Resize with an axes attribute", m, {"x": x}, tmp)
    m = model(18, [helper.make_node("Resize", ["x2", "", "scales"], ["y"], mode="cubic",
                                    exclude_outside=1, cubic_coeff_a=-0.5)],
              [vinfo("x2", [6, 20])], [vinfo("y", None)], [const("scales", [1.5, 0.6], F)])
    compare("Resize cubic of a matrix (exclude_outside)", m, {"x2": x.reshape(6, 20)}, tmp)
    for approx in ["none", "tanh"]:
        m = model(20, [helper.make_node("Gelu", ["x"], ["y"], approximate=approx)],
                  [vinfo("x", [2, 3, 4, 5])], [vinfo("y", None)])
        compare(f"Gelu approximate='{approx}'", m, {"x": x}, tmp)
    m = model(21, [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]),
                   helper.make_node("Reshape", ["t", "shape"], ["r"]),
                   helper.make_node("Unsqueeze", ["r", "one"], ["u"]),
                   helper.make_node("Squeeze", ["u", "one"], ["s"]),
                   helper.make_node("Flatten", ["s"], ["f"], axis=1),
                   helper.make_node("Cast", ["f"], ["y"], to=TensorProto.FLOAT16)],
              [vinfo("x", [2, 3, 4, 5])], [vinfo("y", None, TensorProto.FLOAT16)],
              [const("shape", [2, 4, 15]), const("one", [1])])
    compare("layout ops and Cast at opset 21", m, {"x": x}, tmp)

    m = model(18, [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", antialias=1)],
              [vinfo("x", [2, 3, 4, 5])], [vinfo("y", None)], [const("scales", [1, 1, 0.5, 0.5], F)])
    refused("Resize antialias=1", m, ["antialias=1", "Resize"], tmp)
    m = model(19, [helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")],
              [vinfo("x", [2, 3, 4, 5])], [vinfo("y", None)], [const("pads", [0, 0, 1, 1, 0, 0, 1, 1])])
    refused("Pad mode='wrap' (opset 19)", m, ["mode 'wrap'"], tmp)
    for mode in ["reflect", "edge"]:
        m = model(18, [helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)],
                  [vinfo("x", [2, 3, 4, 5])], [vinfo("y", None)],
                  [const("pads", [0, 1, 2, 3, 0, 2, 1, 4])])
        compare(f"Pad mode='{mode}'", m, {"x": x}, tmp)
    # LSTM (opset 14 layouts; Silero VAD's recurrent layer): both directions, biases, states.
    H, I = 8, 5
    for direction, layout in [("forward", 0), ("reverse", 0), ("bidirectional", 0)]:
        D = 2 if direction == "bidirectional" else 1
        xs = [6, 3, I] if layout == 0 else [3, 6, I]
        sts = [D, 3, H] if layout == 0 else [3, D, H]
        inits = [helper.make_tensor(n, F, s, rng.uniform(-0.5, 0.5, s).astype(np.float32).ravel())
                 for n, s in [("W", [D, 4 * H, I]), ("R", [D, 4 * H, H]), ("B", [D, 8 * H])]]
        node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["y", "yh", "yc"],
                                hidden_size=H, direction=direction, layout=layout)
        m = model(14, [node], [vinfo("x", xs), vinfo("h0", sts), vinfo("c0", sts)],
                  [vinfo(n, None) for n in ["y", "yh", "yc"]], inits)
        feeds = {"x": rng.standard_normal(xs).astype(np.float32),
                 "h0": rng.standard_normal(sts).astype(np.float32),
                 "c0": rng.standard_normal(sts).astype(np.float32)}
        compare(f"LSTM {direction}, layout {layout}", m, feeds, tmp)
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=H)
    inits = [helper.make_tensor(n, F, s, rng.uniform(-0.5, 0.5, s).astype(np.float32).ravel())
             for n, s in [("W", [1, 4 * H, I]), ("R", [1, 4 * H, H])]]
    m = model(14, [node], [vinfo("x", [4, 2, I])], [vinfo("y", None)], inits)
    compare("LSTM without bias or initial state", m, {"x": rng.standard_normal([4, 2, I]).astype(np.float32)}, tmp)
    inits_p = inits + [helper.make_tensor("P", F, [1, 3 * H],
                                          rng.uniform(-0.5, 0.5, 3 * H).astype(np.float32))]
    node = helper.make_node("LSTM", ["x", "W", "R", "", "", "", "c0", "P"], ["", "yh", "yc"],
                            hidden_size=H)
    m = model(14, [node], [vinfo("x", [4, 2, I]), vinfo("c0", [1, 2, H])],
              [vinfo("yh", None), vinfo("yc", None)], inits_p)
    compare("LSTM with peepholes and only the final states", m,
            {"x": rng.standard_normal([4, 2, I]).astype(np.float32),
             "c0": rng.standard_normal([1, 2, H]).astype(np.float32)}, tmp)
    # Einsum: broadcast ellipses, the implicit output, a diagonal with a sum.
    for eq, shapes in [("...ij,...jk->...ik", [[2, 1, 3, 4], [1, 5, 4, 2]]),
                       ("ij,jk", [[3, 4], [4, 2]]), ("bii->b", [[2, 3, 3]]),
                       ("ik,jk->ji", [[3, 4], [2, 4]])]:
        names = [f"e{i}" for i in range(len(shapes))]
        m = model(13, [helper.make_node("Einsum", names, ["y"], equation=eq)],
                  [vinfo(nm, sh) for nm, sh in zip(names, shapes)], [vinfo("y", None)])
        compare(f"Einsum '{eq}'", m,
                {nm: rng.standard_normal(sh).astype(np.float32) for nm, sh in zip(names, shapes)},
                tmp)
    # GRU both ways round r (linear_before_reset), RNN with Relu: both directions, states.
    for op, gates, extra in [("GRU", 3, {"linear_before_reset": 0}),
                             ("GRU", 3, {"linear_before_reset": 1}),
                             ("RNN", 1, {"activations": ["Relu", "Tanh"]})]:
        inits = [helper.make_tensor(n, F, s, rng.uniform(-0.5, 0.5, s).astype(np.float32).ravel())
                 for n, s in [("W", [2, gates * H, I]), ("R", [2, gates * H, H]),
                              ("B", [2, 2 * gates * H])]]
        node = helper.make_node(op, ["x", "W", "R", "B", "", "h0"], ["y", "yh"], hidden_size=H,
                                direction="bidirectional", **extra)
        m = model(14, [node], [vinfo("x", [5, 3, I]), vinfo("h0", [2, 3, H])],
                  [vinfo(n, None) for n in ["y", "yh"]], inits)
        feeds = {"x": rng.standard_normal([5, 3, I]).astype(np.float32),
                 "h0": rng.standard_normal([2, 3, H]).astype(np.float32)}
        compare(f"{op} bidirectional {extra}", m, feeds, tmp)
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=H, clip=1.0)
    m = model(14, [node], [vinfo("x", [4, 2, I])], [vinfo("y", None)], inits)
    refused("LSTM with cell clipping", m, ["clip"], tmp)
    m = model(22, [helper.make_node("Relu", ["x"], ["y"])], [vinfo("x", [2])], [vinfo("y", None)])
    refused("opset 22", m, ["opset 22", "1 to 21"], tmp)

print(f"opset_test: {failures} failure(s)")
sys.exit(1 if failures else 0)
