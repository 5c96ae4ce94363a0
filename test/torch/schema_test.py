#!/usr/bin/env python3
"""Every schema of etc's op table (src/graph/ops.def, as `etc ops --json` prints it) is
PyTorch's own: for each ATen op, the functional schema and the out variant the table declares
are compared with `torch.ops.aten.<name>.<overload>._schema` of the pinned PyTorch, argument by
argument: name, type, optional, keyword-only, out (Tensor(a!)), fixed list length and default.
So are the schemas of the CPU runtime's kernels outside the table (the out variants of
ExecuTorch's programs). A typo, or a PyTorch update that changes a schema, fails here with the
difference.
Usage: schema_test.py ETC  (run with the reference environment's python)"""
import ast
import json
import subprocess
import sys

import torch

# PyTorch's spellings of the types etc's schema parser reads (graph/op_schema.cpp).
_BASE = {"SymInt": "int", "int": "int", "float": "float", "bool": "bool", "str": "str",
         "Scalar": "Scalar", "Tensor": "Tensor", "ScalarType": "ScalarType", "Layout": "Layout",
         "Device": "Device", "MemoryFormat": "MemoryFormat"}


def split_top(text):
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def parse_torch_arg(text, kwarg_only):
    """One argument of PyTorch's schema text as etc's JSON fields."""
    decl, _, default = text.partition("=")
    typ, name = decl.strip().rsplit(" ", 1)
    out = False
    if "(" in typ:  # alias annotation: Tensor(a!) is an out
        p, q = typ.index("("), typ.index(")")
        out = "!" in typ[p:q]
        typ = typ[:p] + typ[q + 1:]
    optional = typ.endswith("?")
    typ = typ.rstrip("?")
    if typ == "Tensor?[]":
        return {"name": name, "type": "Tensor?[]", "optional": False, "kwarg_only": kwarg_only,
                "out": out, "length": 0, "default": default.strip() or None}
    length = 0
    is_list = "[" in typ
    if is_list:
        b = typ.index("[")
        length = int(typ[b + 1:-1]) if typ[b + 1:-1] else 0
        typ = typ[:b]
    base = _BASE[typ] + ("[]" if is_list else "")
    return {"name": name, "type": base, "optional": optional, "kwarg_only": kwarg_only, "out": out,
            "length": length, "default": default.strip() or None}


def parse_torch_schema(text):
    head, _, rest = text.partition("(")
    args_text, _, ret = rest.rpartition(") -> ")
    args, kwarg_only = [], False
    for part in split_top(args_text):
        if part == "*":
            kwarg_only = True
            continue
        args.append(parse_torch_arg(part, kwarg_only))
    ret = ret.strip()
    results = len(split_top(ret[1:-1])) if ret.startswith("(") else 1
    return args, results


def value(text, arg):
    """A default as a Python value; a single value for an int[N] stands for N copies."""
    if text is None:
        return None
    # A ScalarType default: PyTorch's schema gives its enum number (4 for long), etc prints the
    # dtype; both as the number (c10::ScalarType, which ExecuTorch's ScalarType follows).
    scalar_types = {"int64": 4, "long": 4, "int32": 3, "int": 3, "float32": 6, "float": 6,
                    "float64": 7, "double": 7, "bool": 11}
    if text in scalar_types:
        return float(scalar_types[text])
    v = ast.literal_eval({"True": "True", "False": "False", "None": "None"}.get(text, text))
    if isinstance(v, bool):
        return v
    if arg["length"] > 1 and isinstance(v, (int, float)):
        v = [v] * arg["length"]
    if isinstance(v, (list, tuple)):
        return [float(x) for x in v]
    return float(v) if isinstance(v, (int, float)) else v


def compare(where, etc_schema, torch_text):
    problems = []
    t_args, t_results = parse_torch_schema(torch_text)
    e_args = etc_schema["args"]
    if [a["name"] for a in e_args] != [a["name"] for a in t_args]:
        return ["%s: arguments %s, PyTorch has %s" % (where, [a["name"] for a in e_args],
                                                       [a["name"] for a in t_args])]
    if etc_schema["results"] != t_results:
        problems.append("%s: %d results, PyTorch has %d" % (where, etc_schema["results"], t_results))
    for e, t in zip(e_args, t_args):
        for field in ("type", "optional", "kwarg_only", "out"):
            if e[field] != t[field]:
                problems.append("%s: argument '%s' %s is %r, PyTorch has %r" %
                                (where, e["name"], field, e[field], t[field]))
        # int[1] takes any length (ATen); other fixed lengths must match.
        if e["length"] != t["length"] and not (t["length"] == 1 and e["length"] in (0, 1)):
            problems.append("%s: argument '%s' length %d, PyTorch has %d" %
                            (where, e["name"], e["length"], t["length"]))
        if value(e.get("default"), e) != value(t["default"], t):
            problems.append("%s: argument '%s' default %s, PyTorch has %s" %
                            (where, e["name"], e.get("default"), t["default"]))
    return problems


def torch_schema(ns, name, overload):
    packet = getattr(getattr(torch.ops, ns), name, None)
    if packet is None or overload not in packet.overloads():
        return None
    text = str(getattr(packet, overload)._schema)
    return text.split("::", 1)[1]


def main():
    table = json.loads(subprocess.run([sys.argv[1], "ops", "--json"], check=True,
                                      capture_output=True, text=True).stdout)
    ops = table["ops"] + [{"name": k["name"], "schema": k["schema"], "out_variant": None}
                          for k in table["runtime_kernels"]]
    problems, checked = [], 0
    for op in ops:
        forms = [("", op["schema"])] + ([(" out variant", op["out_variant"])]
                                         if op["out_variant"] else [])
        for label, s in forms:
            if s["namespace"] != "aten":
                continue  # etc's compiler ops (et_copy, executorch) are not PyTorch's
            where = "%s%s" % (op["name"], label)
            text = torch_schema(s["namespace"], s["name"], s["overload"])
            if text is None:
                problems.append("%s: PyTorch has no aten.%s.%s" % (where, s["name"], s["overload"]))
                continue
            problems += compare(where, s, text)
            checked += 1
    for p in problems:
        print("FAIL " + p)
    print("%d schemas checked against PyTorch %s, %d differences" %
          (checked, torch.__version__, len(problems)))
    if checked < 100:
        print("FAIL: expected at least 100 schemas")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
