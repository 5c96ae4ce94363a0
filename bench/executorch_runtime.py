"""ExecuTorch's side of bench/vs_executorch.sh (run by scripts/python-env.sh's environment).

  executorch_runtime.py export REPEAT PT2 OUT_PORTABLE OUT_XNNPACK
      Time ExecuTorch's Python export pipeline on PT2 (torch.export.load -> to_edge ->
      to_executorch -> write OUT_PORTABLE), REPEAT times in this process after its imports
      (the interpreter and import cost are left out); print "export MEDIAN_SECONDS"; then
      write the same
      program with its XNNPACK delegate (to_edge_transform_and_lower(XnnpackPartitioner)) to
      OUT_XNNPACK (not timed).
  executorch_runtime.py latency THREADS WARMUP ITERATIONS PTE INPUT.npy...
      Load PTE in ExecuTorch's runtime, set its thread pool to THREADS, run WARMUP untimed
      calls then ITERATIONS timed ones of method.execute(inputs) (set the inputs, execute,
      return the outputs; fewer, at least 3, when they would take over $BUDGET_S seconds,
      default 20), and print "latency MEDIAN_MS MIN_MS".
"""

import os
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TORCH_LOGS", "-all")


def cmd_export(repeat, pt2, out_portable, out_xnnpack):
    import torch
    from executorch.exir import to_edge, to_edge_transform_and_lower

    times = []
    for _ in range(repeat):
        os.sync()  # the previous write's dirty pages are flushed outside the timed part
        start = time.perf_counter()
        ep = torch.export.load(pt2)
        program = to_edge(ep).to_executorch()
        with open(out_portable, "wb") as f:
            f.write(program.buffer)
        times.append(time.perf_counter() - start)
    print(f"export {statistics.median(times):.4f}")
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    ep = torch.export.load(pt2)
    xnn = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    with open(out_xnnpack, "wb") as f:
        f.write(xnn.buffer)


def cmd_latency(threads, warmup, iterations, pte, inputs):
    import numpy as np
    import torch
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    portable_lib._unsafe_reset_threadpool(threads)
    torch.set_num_threads(threads)
    method = Runtime.get().load_program(pte).load_method("forward")
    args = [torch.from_numpy(np.load(p)) for p in inputs]
    for _ in range(warmup):
        method.execute(args)
    # A slow program (portable convolutions take seconds) runs fewer timed calls: about
    # BUDGET_S seconds' worth, at least 3.
    start = time.perf_counter()
    method.execute(args)
    once = time.perf_counter() - start
    budget = float(os.environ.get("BUDGET_S", "20"))
    iterations = min(iterations, max(3, int(budget / max(once, 1e-9))))
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        method.execute(args)
        times.append((time.perf_counter() - start) * 1e3)
    print(f"latency {statistics.median(times):.4f} {min(times):.4f}")


def main(argv):
    if len(argv) == 5 and argv[0] == "export":
        cmd_export(int(argv[1]), *argv[2:])
    elif len(argv) >= 5 and argv[0] == "latency":
        cmd_latency(int(argv[1]), int(argv[2]), int(argv[3]), argv[4], argv[5:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
