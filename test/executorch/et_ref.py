"""ExecuTorch itself, as the reference for etc's .pte files (run by scripts/python-env.sh's
environment: ExecuTorch and PyTorch from PyPI).

  et_ref.py run PTE OUTDIR [INPUT.npy ...]
      Load PTE with ExecuTorch's runtime (program verification on: InternalConsistency),
      run method 'forward' on the inputs, write OUTDIR/output_<i>.npy.
  et_ref.py load PTE
      Load the program only (verification on) and print its method names: for programs
      whose delegates ExecuTorch does not have.
  et_ref.py inputs INSPECT.json OUTDIR SEED
      Seeded inputs for a program from `etc inspect --format json`: OUTDIR/in<i>.npy.
  et_ref.py compare EXPECTED_DIR|PREFIX ACTUAL_DIR RTOL ATOL
      Compare ACTUAL_DIR/output_<i>.npy with EXPECTED_DIR/output_<i>.npy (or with
      PREFIX.out<i>.npy); print the worst error, exit 1 on a mismatch.
  et_ref.py fixtures OUTDIR
      Write programs exported by ExecuTorch (torch.export -> to_edge -> to_executorch,
      portable kernels), each NAME.pte with NAME.in<i>.npy inputs and NAME.out<i>.npy
      PyTorch eager outputs, and the list of names in OUTDIR/cases.txt.
"""

import os
import sys
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TORCH_LOGS", "-all")

import numpy as np  # noqa: E402


def _runtime():
    from executorch.runtime import Runtime, Verification

    return Runtime.get(), Verification.InternalConsistency


def cmd_run(pte, outdir, inputs):
    import torch

    rt, verification = _runtime()
    program = rt.load_program(pte, verification=verification)
    method = program.load_method("forward")
    args = [torch.from_numpy(np.load(p)) for p in inputs]
    outputs = method.execute(args)
    os.makedirs(outdir, exist_ok=True)
    for i, o in enumerate(outputs):
        np.save(os.path.join(outdir, f"output_{i}.npy"), o.detach().numpy())
    print(f"executorch ran {os.path.basename(pte)}: {len(outputs)} output(s)")


def cmd_load(pte):
    rt, verification = _runtime()
    program = rt.load_program(pte, verification=verification)
    print("executorch loaded", os.path.basename(pte), "methods:", sorted(program.method_names))


_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
           "int64": np.int64, "int32": np.int32, "int8": np.int8, "uint8": np.uint8,
           "bool": np.bool_}


def cmd_inputs(inspect_json, outdir, seed):
    import json

    with open(inspect_json) as f:
        program = json.load(f)
    plan = program["plans"][0]
    rng = np.random.default_rng(int(seed))
    os.makedirs(outdir, exist_ok=True)
    for i, v in enumerate(plan["inputs"]):
        value = plan["values"][v]
        dtype = _DTYPES[value["dtype"]]
        shape = value["sizes"]
        if np.issubdtype(dtype, np.floating):
            x = rng.standard_normal(shape).astype(dtype)
        else:
            x = rng.integers(0, 2, shape).astype(dtype)
        np.save(os.path.join(outdir, f"in{i}.npy"), x)
    print(len(plan["inputs"]))


def cmd_compare(expected, actual, rtol, atol):
    rtol, atol = float(rtol), float(atol)
    i, worst = 0, 0.0
    while True:
        want_path = (os.path.join(expected, f"output_{i}.npy") if os.path.isdir(expected)
                     else f"{expected}.out{i}.npy")
        got_path = os.path.join(actual, f"output_{i}.npy")
        if not os.path.exists(want_path):
            break
        if not os.path.exists(got_path):
            print(f"output {i}: missing {got_path}")
            return 1
        want, got = np.load(want_path), np.load(got_path)
        if want.shape != got.shape or want.dtype != got.dtype:
            print(f"output {i}: {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}")
            return 1
        if want.dtype.kind in "fc":
            err = np.abs(got.astype(np.float64) - want.astype(np.float64))
            bound = atol + rtol * np.abs(want.astype(np.float64))
            if not np.all(np.isfinite(got) == np.isfinite(want)) or np.any(err > bound):
                k = int(np.argmax(err - bound))
                print(f"output {i}: max abs error {err.max():.3g} (at flat index {k}: "
                      f"{got.flat[k]!r} vs {want.flat[k]!r}) exceeds atol {atol} + rtol {rtol}")
                return 1
            worst = max(worst, float(err.max()) if err.size else 0.0)
        elif not np.array_equal(want, got):
            print(f"output {i}: values differ")
            return 1
        i += 1
    if i == 0:
        print(f"no expected outputs at {expected}")
        return 1
    print(f"{i} output(s) match, max abs error {worst:.3g}")
    return 0


def _models():
    """(name, module, example inputs): programs whose kernel calls carry IntLists, BoolLists,
    DoubleLists, TensorLists, optional arguments, Int and Double scalars."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)

    class Add(nn.Module):
        def forward(self, a, b):
            return a + b

    class Conv(nn.Module):  # convolution: stride/padding/dilation/output_padding IntLists
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.c2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=4)
            self.bn = nn.BatchNorm2d(8)

        def forward(self, x):
            y = F.relu(self.bn(self.c1(x)))
            y = F.max_pool2d(self.c2(y), kernel_size=2, stride=2)
            return F.avg_pool2d(y, 2).flatten(1)

    class Views(nn.Module):  # view_copy, permute_copy, expand_copy, sum/mean over dims, cat
        def forward(self, x, y):
            a = x.reshape(2, 3, 4).permute(2, 0, 1)
            b = a.sum(dim=[1, 2], keepdim=True) + a.mean(dim=[0])
            c = torch.cat([b.reshape(-1), y.expand(2, 6).reshape(-1)], dim=0)
            return c.view(-1, 2), torch.transpose(a, 0, 2).contiguous()

    class Linear(nn.Module):  # linear -> permute_copy + addmm, softmax with an Int dim
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(16, 32)
            self.l2 = nn.Linear(32, 8)

        def forward(self, x):
            return torch.softmax(self.l2(F.gelu(self.l1(x))), dim=-1)

    class Pad(nn.Module):  # constant_pad_nd (IntList pad, Double value), clamp (optional Scalars)
        def forward(self, x):
            return torch.clamp(F.pad(x, [1, 2, 0, 1], value=0.5), min=-0.25, max=0.75)

    class Norm(nn.Module):  # native_layer_norm: normalized_shape IntList, Double eps
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm([4, 6])

        def forward(self, x):
            return self.ln(x) * 2.0

    class Cast(nn.Module):  # _to_dim_order_copy (ScalarType Int), contiguous -> _clone_dim_order
        def forward(self, x):
            return (x * 4.0).to(torch.int32), x.t().contiguous().to(torch.float64)

    return [
        ("add", Add(), (torch.randn(2, 2), torch.randn(2, 2))),
        ("conv", Conv().eval(), (torch.randn(1, 3, 16, 16),)),
        ("views", Views(), (torch.randn(24), torch.randn(1, 6))),
        ("linear", Linear().eval(), (torch.randn(3, 16),)),
        ("pad", Pad(), (torch.randn(1, 2, 3, 4),)),
        ("norm", Norm().eval(), (torch.randn(2, 4, 6),)),
        ("cast", Cast(), (torch.randn(3, 5),)),
    ]


def _inline_constant_program(outdir):
    """A program in ExecuTorch's deprecated layout (constants inline in
    Program.constant_buffer, no segments), written by ExecuTorch's own serializer: etc still
    reads such files. 3 * x + 2 on a float32 [2, 2] input."""
    import torch
    from executorch.exir import to_edge
    from executorch.exir._serialize._flatbuffer_program import _program_to_flatbuffer
    from executorch.exir._serialize._program import deserialize_pte_binary

    class Affine(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("a", torch.full((2, 2), 3.0))
            self.register_buffer("b", torch.full((2, 2), 2.0))

        def forward(self, x):
            return self.a * x + self.b

    x = torch.ones(2, 2)
    et = to_edge(torch.export.export(Affine(), (x,))).to_executorch()
    # ExecuTorch's reader puts the constants back inline (Program.constant_buffer, empty
    # constant_segment offsets, no segments); its packer writes that Program as it is.
    program = deserialize_pte_binary(et.buffer).program
    assert len(program.constant_buffer) == 3 and not program.segments
    flat = _program_to_flatbuffer(program)
    with open(os.path.join(outdir, "inline_constants.pte"), "wb") as f:
        f.write(bytes(flat.data))
    np.save(os.path.join(outdir, "inline_constants.in0.npy"), x.numpy())
    np.save(os.path.join(outdir, "inline_constants.out0.npy"), (3 * x + 2).numpy())


def cmd_fixtures(outdir):
    import torch
    from executorch.exir import to_edge

    os.makedirs(outdir, exist_ok=True)
    names = []
    for name, module, inputs in _models():
        with torch.no_grad():
            expected = module(*inputs)
        if isinstance(expected, torch.Tensor):
            expected = (expected,)
        program = to_edge(torch.export.export(module, inputs)).to_executorch()
        with open(os.path.join(outdir, f"{name}.pte"), "wb") as f:
            f.write(program.buffer)
        for i, t in enumerate(inputs):
            np.save(os.path.join(outdir, f"{name}.in{i}.npy"), t.numpy())
        for i, t in enumerate(expected):
            np.save(os.path.join(outdir, f"{name}.out{i}.npy"), t.numpy())
        names.append(name)
    _inline_constant_program(outdir)
    names.append("inline_constants")
    with open(os.path.join(outdir, "cases.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    print(f"wrote {len(names)} ExecuTorch programs to {outdir}")


def main(argv):
    if len(argv) >= 3 and argv[0] == "run":
        cmd_run(argv[1], argv[2], argv[3:])
    elif len(argv) == 2 and argv[0] == "load":
        cmd_load(argv[1])
    elif len(argv) == 4 and argv[0] == "inputs":
        cmd_inputs(*argv[1:])
    elif len(argv) == 5 and argv[0] == "compare":
        return cmd_compare(*argv[1:])
    elif len(argv) == 2 and argv[0] == "fixtures":
        cmd_fixtures(argv[1])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
