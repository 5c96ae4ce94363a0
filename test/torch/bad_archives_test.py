#!/usr/bin/env python3
"""Damaged and unsupported torch.export archives through `etc export` and `etc validate`:
each must end in exit 1 (or 2 for a bad --input-shape) with a located error that says what
is wrong, never a crash, and leave no output file. Built from test/torch/programs/ with
Python's zipfile (no PyTorch needed).

  bad_archives_test.py ETC SOURCE_DIR
"""
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile


def read_archive(path):
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def write_archive(path, entries, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for name, data in entries:
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data,
                       compress_type=compression)


def read_archive_bytes(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def archive_bytes(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in entries:
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def edit(entries, suffix, fn):
    """Entries with the one ending in `suffix` replaced by fn(bytes) (dropped when None)."""
    out = []
    for name, data in entries:
        if name.endswith(suffix):
            data = fn(data)
            if data is None:
                continue
        out.append((name, data))
    return out


def edit_program(entries, fn):
    def f(data):
        m = json.loads(data)
        fn(m)
        return json.dumps(m).encode()
    return edit(entries, "models/model.json", f)


def main(argv):
    etc, src = argv[1], argv[2]
    programs = os.path.join(src, "test", "torch", "programs")
    linear = read_archive(os.path.join(programs, "linear.pt2"))
    failures = []
    with tempfile.TemporaryDirectory() as work:
        def case(label, data_or_entries, expect, code=1, extra=(), command="export"):
            path = os.path.join(work, label.replace(" ", "_") + ".pt2")
            if isinstance(data_or_entries, bytes):
                open(path, "wb").write(data_or_entries)
            else:
                write_archive(path, data_or_entries)
            out = os.path.join(work, "out.pte")
            if os.path.exists(out):
                os.remove(out)
            cmd = [etc, command, path] + (["-o", out] if command == "export" else []) + list(extra)
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            problems = []
            if r.returncode != code:
                problems.append(f"exit {r.returncode}, expected {code}")
            for e in expect:
                if e not in r.stdout:
                    problems.append(f"the message lacks {e!r}")
            if command == "export" and os.path.exists(out):
                problems.append("an output file was written")
            if problems:
                failures.append(f"{label}: {'; '.join(problems)}\n    {r.stdout.strip()}")
            print(f"{'ok  ' if not problems else 'FAIL'} {label}: {r.stdout.strip().splitlines()[0] if r.stdout.strip() else ''}")

        raw = open(os.path.join(programs, "linear.pt2"), "rb").read()
        for frac in (0.1, 0.5, 0.9):
            case(f"truncated at {int(frac * 100)}%", raw[:int(len(raw) * frac)], ["zip"])
        case("truncated by 10 bytes", raw[:-10], ["end-of-central-directory record"])
        case("not a zip", b"this is not a model\n", ["byte 0: not a zip archive"])
        case("zip magic, then garbage", b"PK\x03\x04" + b"\x00" * 200, ["zip"])
        case("no archive_format", edit(linear, "archive_format", lambda d: None),
             ["no archive_format record"])
        case("no program", edit(linear, "models/model.json", lambda d: None), ["has no program"])
        case("weight missing", edit(linear, "data/weights/weight_0", lambda d: None),
             ["'fc.weight'", "weight_0) are missing"])
        case("weight shorter than its config", edit(linear, "data/weights/weight_0", lambda d: d[:1000]),
             ["'fc.weight'", "storage of 250 elements"])
        case("unknown archive version", edit(linear, "archive_version", lambda d: b"7"),
             ["archive version 7; etc reads version 0"])
        case("big-endian archive", edit(linear, "byteorder", lambda d: b"big"), ["byte order 'big'"])

        def schema9(m):
            m["schema_version"] = {"major": 9, "minor": 1}
        case("unknown schema version", edit_program(linear, schema9),
             ["schema version 9.1; etc reads schema 8.x"])

        def unknown_op(m):
            m["graph_module"]["graph"]["nodes"][0]["target"] = "torch.ops.aten.frobnicate.default"
        case("unsupported op", edit_program(linear, unknown_op),
             ["aten.frobnicate.default x1: linear", "make-torch-fixtures.py:", "return self.fc(x)"])

        # A torchao op whose argument a later torchao renamed: the error names the argument,
        # the torchao release etc reads torchao's ops as, and the node's arguments.
        def renamed_torchao_arg(m):
            for node in m["graph_module"]["graph"]["nodes"]:
                if "choose_qparams_affine" in node["target"]:
                    for a in node["inputs"]:
                        if a["name"] == "mapping_type":
                            a["name"] = "mapping"
        w8a8 = read_archive(os.path.join(programs, "linear_w8a8.pt2"))
        case("torchao schema of another release", edit_program(w8a8, renamed_torchao_arg),
             ["torchao.choose_qparams_affine.default: argument 'mapping_type' is required",
              "as torchao 0.18.0 declares them", "this node's arguments: input, mapping, "])

        # An Int8Tensor whose activations' quantization etc does not import (MappingType 2,
        # SYMMETRIC_NO_CLIPPING_ERR): refused by name, with what the weight holds.
        def mapping_type_2(data):
            inner = read_archive_bytes(data)
            out = []
            for name, body in inner:
                if name.endswith("data.pkl"):
                    marker = b"MappingType\n"
                    at = body.index(marker) + len(marker)
                    at = body.index(b"K\x01", at)  # BININT1 1: the enum's value
                    body = body[:at] + b"K\x02" + body[at + 2:]
                out.append((name, body))
            return archive_bytes(out)
        case("torchao activation quantization etc does not import",
             edit(w8a8, "data/weights/weight_0", mapping_type_2),
             ["'fc.weight' is a torchao Int8Tensor in a layout etc does not import",
              "mapping_type=MappingType.SYMMETRIC_NO_CLIPPING_ERR"])

        def pickled(data):
            c = json.loads(data)
            c["config"]["fc.weight"]["use_pickle"] = True
            return json.dumps(c).encode()
        case("pickled weight", edit(linear, "model_weights_config.json", pickled),
             ["'fc.weight', which is stored pickled", "does not start with 'PK'"])

        def flip(data):
            b = bytearray(data)
            b[100] ^= 0xFF
            return bytes(b)
        # zipfile computes the CRC of what it writes: damage the bytes inside the archive.
        good = io.BytesIO()
        with zipfile.ZipFile(good, "w") as z:
            for name, data in linear:
                z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
        blob = bytearray(good.getvalue())
        at = blob.find(next(d for n, d in linear if n.endswith("weights/weight_0"))[:64])
        blob[at + 100] ^= 0xFF
        case("damaged weight bytes (CRC)", bytes(blob), ["CRC-32 mismatch", "weight_0"])
        # A 20 MiB storage (the weight is a view of its first 2 KiB) is checked in parts on
        # several cores: a byte damaged in the last part is still found.
        big = io.BytesIO()
        with zipfile.ZipFile(big, "w") as z:
            for name, data in linear:
                if name.endswith("weights/weight_0"):
                    data = data + bytes(20 * 2**20 - len(data))
                z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
        blob = bytearray(big.getvalue())
        # Undamaged, the parts' CRCs join to the archive's: it validates.
        case("a large weight, undamaged (CRC in parts)", bytes(blob), ["valid torch.export program"], code=0,
             command="validate")
        at = blob.find(next(d for n, d in linear if n.endswith("weights/weight_0"))[:64])
        blob[at + 19 * 2**20] ^= 0xFF
        case("damaged bytes late in a large weight (CRC in parts)", bytes(blob),
             ["CRC-32 mismatch", "weight_0"])

        case("malformed program JSON", edit(linear, "models/model.json", lambda d: d[:500]),
             ["malformed JSON", "models/model.json: byte"])

        def mutation(m):
            m["graph_module"]["signature"]["output_specs"][0] = {
                "buffer_mutation": {"arg": {"name": "linear"}, "buffer_name": "fc.weight"}}
        case("a mutation of a buffer no input declares", edit_program(linear, mutation),
             ["mutates buffer 'fc.weight', which no input spec declares",
              "/graph_module/signature/output_specs/0/buffer_mutation/buffer_name"])

        def input_mutation(m):
            m["graph_module"]["signature"]["output_specs"][0] = {
                "user_input_mutation": {"arg": {"name": "linear"}, "user_input_name": "x"}}
        case("a mutation of a user input", edit_program(linear, input_mutation),
             ["output 0 is a user_input_mutation", "/graph_module/signature/output_specs/0"])

        def undefined(m):
            m["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"] = {"as_tensor": {"name": "nope"}}
        case("undefined tensor", edit_program(linear, undefined),
             ["tensor 'nope' is not defined before this node", "/graph_module/graph/nodes/0/inputs/0/arg"])

        def wrong_shape(m):
            m["graph_module"]["graph"]["tensor_values"]["linear"]["sizes"][1] = {"as_int": 17}
        case("recorded shape disagrees", edit_program(linear, wrong_shape),
             ["records 'linear' as float32[4, 17]; etc computes float32[4, 16]"])

        dyn = read_archive(os.path.join(programs, "linear_dynamic.pt2"))

        def unbounded(m):
            m["range_constraints"]["s77"]["max_val"] = "int_oo"
        case("a symbolic dim without an upper bound", edit_program(dyn, unbounded),
             ["symbol s77 (inputs x) has no upper bound", "Dim(max=...)", "--input-shape"])
        case("--input-shape outside the range", dyn, ["outside s77 in [1, 64]"], code=2,
             extra=["--input-shape", "x=65x32"])
        case("--input-shape fixing a static dim", dyn, ["dim 1 is 31"], code=2,
             extra=["--input-shape", "x=4x31"])
        case("validate: unsupported op", edit_program(linear, unknown_op),
             ["aten.frobnicate.default"], command="validate")

        # PyTorch's default export keeps in-place ops: one on a view writes through to the
        # viewed tensor (view_writes_test.py), here the user input x, which etc does not take
        # as state (refused, not miscomputed).
        case("in-place update of a view", read_archive(os.path.join(src, "test", "torch", "bad", "inplace_on_view.pt2")),
             ["in-place update of user input 'x'", "registered buffers"])

        # Deflated entries (a zip tool may recompress the archive) still import, and give the
        # same program.
        deflated = os.path.join(work, "deflated.pt2")
        write_archive(deflated, linear, zipfile.ZIP_DEFLATED)
        for label, path in (("stored", os.path.join(programs, "linear.pt2")), ("deflated", deflated)):
            r = subprocess.run([etc, "export", path, "-o", os.path.join(work, label + ".pte")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                failures.append(f"{label} archive: exit {r.returncode}: {r.stdout}")
        a = open(os.path.join(work, "stored.pte"), "rb").read() if os.path.exists(os.path.join(work, "stored.pte")) else b""
        b = open(os.path.join(work, "deflated.pte"), "rb").read() if os.path.exists(os.path.join(work, "deflated.pte")) else b"x"
        if a != b:
            failures.append("a deflated copy of linear.pt2 exports to different bytes than the stored one")
        else:
            print("ok   deflated archive: the same .pte as the stored one")

    print(f"bad_archives_test: {len(failures)} failure(s)")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
