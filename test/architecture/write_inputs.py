"""Writes seeded random inputs for a .pte program as .npy files, in plain Python (no NumPy).

    etc inspect P.pte --format json | python3 write_inputs.py OUT_DIR [SEED]

One file per input of the first plan, OUT_DIR/input_<i>.npy, of the input's sizes and dtype:
standard normal floats, integers in [0, 4).
"""
import array
import json
import random
import sys

CODES = {"float32": ("f", "<f4"), "float64": ("d", "<f8"), "int64": ("q", "<i8"),
         "int32": ("i", "<i4")}


def npy_bytes(descr, sizes, payload):
    shape = "(%d,)" % sizes[0] if len(sizes) == 1 else "(" + "".join("%d, " % d for d in sizes) + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"  # total header a multiple of 64
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + payload


def main():
    out_dir = sys.argv[1]
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 7)
    plan = json.load(sys.stdin)["plans"][0]
    for i, v in enumerate(plan["inputs"]):
        t = plan["values"][v]
        if t["dtype"] not in CODES:
            sys.exit("write_inputs: input %d has dtype %s, not written here" % (i, t["dtype"]))
        code, descr = CODES[t["dtype"]]
        n = 1
        for d in t["sizes"]:
            n *= d
        values = [rng.gauss(0, 1) if code in "fd" else rng.randrange(4) for _ in range(n)]
        with open("%s/input_%d.npy" % (out_dir, i), "wb") as f:
            f.write(npy_bytes(descr, t["sizes"], array.array(code, values).tobytes()))


if __name__ == "__main__":
    main()
