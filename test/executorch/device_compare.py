"""ExecuTorch's own device annotations against etc's, program by program (run by
scripts/python-env.sh's environment: ExecuTorch and PyTorch from PyPI).

ExecuTorch annotates devices when a delegate's compile specs carry `target_device`
(exir/passes/propagate_device_pass.py). Its test partitioner `DeviceAwarePartitioner`
(exir/backend/test/device_util.py) delegates every `aten.add.Tensor` to its demo backend with
`target_device` set, so for programs whose delegated ops are adds, ExecuTorch and etc are
asked the same question: the same ops on the same device. The ops ExecuTorch's partitioner
leaves on the host are given to etc as `--exclude-ops`.

  device_compare.py fixtures OUTDIR
      For each case: OUTDIR/NAME.pt2 (the torch.export program), OUTDIR/NAME.et.pte
      (ExecuTorch: to_edge_transform_and_lower with DeviceAwarePartitioner, then
      to_executorch), OUTDIR/NAME.etc-args (etc export's flags for the same question), and
      OUTDIR/cases.txt.
  device_compare.py compare NAME ET.json ETC.json
      Compare the two programs (`etc inspect --format json` of each) field by field: graph IO
      devices and planning, every instruction with the device of each tensor it touches, the
      delegates' target devices, the copies, non_const_buffer_device and the planned bytes
      per device. Prints both and the differences; exit 0 when the differences are exactly
      the ones this case expects (EXPECTED below, explained in docs/executorch-compat.md),
      1 otherwise.
  device_compare.py load PTE...
      How far ExecuTorch's runtime (CPU-only wheel, verification on) gets with each
      device-annotated program: program load, method metadata, method load. Writes PTE.load,
      one line per stage, "accepted" or "refused: <reason>".
"""

import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TORCH_LOGS", "-all")


def _cases():
    """(name, module, inputs, target device, ExecuTorch IO on device, ops left on the host)."""
    import torch

    class Add(torch.nn.Module):
        def forward(self, a, b):
            return a + b

    class AddChain(torch.nn.Module):  # two adds, one delegate
        def forward(self, a, b, c):
            return (a + b) + c

    class HostOpBetween(torch.nn.Module):  # two delegates around a host relu; b read by both
        def forward(self, a, b):
            return torch.relu(a + b) + b

    class Fanout(torch.nn.Module):  # a delegate output read by the delegate and by the host
        def forward(self, a, b):
            t = a + b
            return t + a, torch.relu(t)

    x = [torch.randn(2, 3) for _ in range(3)]
    relu = ["aten.relu.default"]
    return [
        ("add", Add(), (x[0], x[1]), "cuda:0", False, []),
        ("add_chain", AddChain(), (x[0], x[1], x[2]), "cuda:0", False, []),
        ("host_op_between", HostOpBetween(), (x[0], x[1]), "cuda:0", False, relu),
        ("fanout", Fanout(), (x[0], x[1]), "cuda:0", False, relu),
        ("add_cuda1", Add(), (x[0], x[1]), "cuda:1", False, []),
        ("add_chain_io_device", AddChain(), (x[0], x[1], x[2]), "cuda:0", True, []),
    ]


# The differences each case is expected to show (compare's keys), with the reason in
# docs/executorch-compat.md. Every case also differs in the delegate's backend id and in
# ExecuTorch's demo compile spec `max_value`, which compare leaves out.
EXPECTED = {
    "add": set(),
    "add_chain": set(),
    # etc copies a host tensor to a device once and every delegate on that device reads the
    # copy; ExecuTorch inserts an h2d per delegate input, so b crosses twice.
    "host_op_between": {"h2d_copies", "instructions", "planned_bytes"},
    "fanout": set(),
    "add_cuda1": set(),
    "add_chain_io_device": set(),
}


def cmd_fixtures(outdir):
    import torch
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.backend.test.device_util import DeviceAwarePartitioner
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.propagate_device_pass import PropagateDeviceConfig

    os.makedirs(outdir, exist_ok=True)
    names = []
    for name, module, inputs, device, io_on_device, host_ops in _cases():
        ep = torch.export.export(module, inputs)
        torch.export.save(ep, os.path.join(outdir, name + ".pt2"))
        if io_on_device:
            # ExecuTorch's documented pairing (PropagateDeviceConfig's docstring): skip the
            # IO copies and leave graph IO unplanned; the caller binds device memory.
            config = ExecutorchBackendConfig(
                emit_stacktrace=False,
                propagate_device_config=PropagateDeviceConfig(
                    skip_h2d_for_method_inputs=True, skip_d2h_for_method_outputs=True),
                enable_non_cpu_memory_planning=True,
                memory_planning_pass=MemoryPlanningPass(
                    alloc_graph_input=False, alloc_graph_output=False))
        else:
            config = ExecutorchBackendConfig(emit_stacktrace=False,
                                             enable_non_cpu_memory_planning=True)
        lowered = to_edge_transform_and_lower(ep, partitioner=[DeviceAwarePartitioner(device)])
        program = lowered.to_executorch(config)
        with open(os.path.join(outdir, name + ".et.pte"), "wb") as f:
            f.write(program.buffer)
        args = ["--target", device]
        if io_on_device:
            args += ["--io-device", "device"]
        if host_ops:
            args += ["--exclude-ops", ",".join(host_ops)]
        with open(os.path.join(outdir, name + ".etc-args"), "w") as f:
            f.write(" ".join(args) + "\n")
        names.append(name)
    with open(os.path.join(outdir, "cases.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    print(f"ExecuTorch wrote {len(names)} device-annotated programs to {outdir}")


def _tensor(values, i):
    v = values[i]
    return v if v.get("type") == "Tensor" else None


def _describe(v):
    return f"{v['dtype']}{v['sizes']}@{v['device']}"


def summarise(inspect):
    """What the comparison looks at, from `etc inspect --format json` of one program."""
    plan = inspect["plans"][0]
    values = plan["values"]

    def io(indices):
        out = []
        for i in indices:
            v = _tensor(values, i)
            out.append(f"{_describe(v)} {'planned' if v.get('allocation') else 'bound by the caller'}")
        return out

    instructions = []
    for ins in plan["instructions"]:
        args = [_tensor(values, a) for a in ins["args"]]
        # An out-variant call lists its out argument twice (out, and the returned value).
        devices = []
        seen = set()
        for a, t in zip(ins["args"], args):
            if t is not None and a not in seen:
                seen.add(a)
                devices.append(t["device"])
        if ins["kind"] == "delegate":
            d = plan["delegates"][ins["delegate"]]
            target = d.get("compile_specs", {}).get("target_device", "(none)")
            instructions.append(f"delegate[target_device={target}]({', '.join(devices)})")
        else:
            op = ins.get("op", ins["kind"])
            instructions.append(f"{op}({', '.join(devices)})")
    buffers = {}
    for b in plan["buffers"]:
        buffers.setdefault(b["device"], []).append(b["size"])
    return {
        "inputs": io(plan["inputs"]),
        "outputs": io(plan["outputs"]),
        "instructions": instructions,
        "h2d_copies": sum(i.startswith("et_copy::_h2d_copy") for i in instructions),
        "d2h_copies": sum(i.startswith("et_copy::_d2h_copy") for i in instructions),
        "delegates": len(plan["delegates"]),
        "device_tensors": sorted(
            {_describe(v) for v in values if v.get("type") == "Tensor" and v["device"] != "cpu"}),
        "non_const_buffer_device": [f"{e['buffer_idx']}:{e['device']}"
                                    for e in plan.get("non_const_buffer_device") or []],
        "planned_bytes": buffers,
    }


def cmd_compare(name, et_json, etc_json):
    with open(et_json) as f:
        et = summarise(json.load(f))
    with open(etc_json) as f:
        ours = summarise(json.load(f))
    differ = {k for k in et if et[k] != ours[k]}
    expected = EXPECTED.get(name)
    if expected is None:
        print(f"{name}: no expectation recorded for this case")
        return 1
    print(f"== {name}")
    width = max(len(k) for k in et)
    for k in et:
        mark = "  " if k not in differ else ("~ " if k in expected else "! ")
        print(f"{mark}{k:<{width}}  ExecuTorch: {json.dumps(et[k])}")
        if k in differ:
            print(f"  {'':<{width}}  etc:        {json.dumps(ours[k])}")
    ok = True
    # Planned bytes may differ only downwards: never more than ExecuTorch's on any device.
    for device, sizes in ours["planned_bytes"].items():
        if sum(sizes) > sum(et["planned_bytes"].get(device, [0])):
            print(f"! etc plans more bytes on {device} than ExecuTorch: {sum(sizes)} > "
                  f"{sum(et['planned_bytes'].get(device, [0]))}")
            ok = False
    if differ != expected:
        print(f"! differences {sorted(differ)}, expected {sorted(expected)}")
        ok = False
    print(f"{name}: {'as expected' if ok else 'UNEXPECTED'}"
          f" ({len(differ)} expected difference(s): {', '.join(sorted(differ)) or 'none'})")
    return 0 if ok else 1


def _load_stages(rt, verification, pte):
    stages = []
    try:
        program = rt.load_program(pte, verification=verification)
        stages.append(("program load (verification on)", None))
    except Exception as e:  # noqa: BLE001 - the reason is what is reported
        return stages + [("program load (verification on)", str(e))]
    try:
        meta = program.metadata("forward")
        planned = [meta.input_tensor_meta(i).is_memory_planned() for i in range(meta.num_inputs())]
        stages.append((f"method metadata ({meta.num_inputs()} inputs, planned {planned})", None))
    except Exception as e:  # noqa: BLE001
        stages.append(("method metadata", str(e)))
    try:
        program.load_method("forward")
        stages.append(("method load", None))
    except Exception as e:  # noqa: BLE001
        stages.append(("method load", str(e)))
    return stages


def cmd_load(ptes):
    from executorch.runtime import Runtime, Verification

    rt = Runtime.get()
    for pte in ptes:
        with open(pte + ".load", "w") as f:
            for stage, error in _load_stages(rt, Verification.InternalConsistency, pte):
                f.write(f"{stage}: " + ("accepted" if error is None else f"refused: {error}") + "\n")


def main(argv):
    if len(argv) == 2 and argv[0] == "fixtures":
        cmd_fixtures(argv[1])
    elif len(argv) == 4 and argv[0] == "compare":
        return cmd_compare(*argv[1:])
    elif len(argv) >= 2 and argv[0] == "load":
        cmd_load(argv[1:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
