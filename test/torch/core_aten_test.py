#!/usr/bin/env python3
"""Core ATen conformance, overload by overload, against PyTorch eager (in the style of ONNX's
node tests). Run with the reference environment's python (scripts/python-env.sh prints it):

  core_aten_test.py ETC [--min-pass N] [--table FILE.md] [--only NAME.OVERLOAD ...]
                        [--sample I] [--keep DIR] [--list] [--cache DIR] [--regenerate]
                        [--perturb EPS]

Which overloads: every overload PyTorch's dispatcher registers under aten:: whose tags include
torch.Tag.core, enumerated from the pinned PyTorch at run time (no list is kept here; a
PyTorch update shows what is new). One rule, printed, excludes the training-only overloads:
those whose operator name ends in `_backward` (convolution_backward, embedding_dense_backward,
native_group_norm_backward, ...).

Which samples, per overload (at most MAX_SAMPLES, chosen the same way on every run):
  op_db     PyTorch's OpInfo database (torch.testing._internal.common_methods_invocations), in
            float32, int64, int32 and bool where the OpInfo takes them (complex64 too where an
            _fft overload needs it), two ways. "direct": an
            OpInfo named for the operator (op.aten_name, op.name): its sample_inputs('cpu',
            dtype) passed to the overload itself. "via": every OpInfo's samples run under a
            TorchDispatchMode that records each call of a core overload with its actual
            arguments (F.conv_transpose1d reaches convolution.default, softmax
            _softmax.default, .to() _to_copy.default).
  derived   from op_db samples: the in-place form's arguments (copy_ -> copy), a sibling
            overload's arguments with a tensor turned into a Python scalar (gt.Tensor ->
            gt.Scalar), arguments adapted from a non-core op of the same meaning
            (native_batch_norm -> _native_batch_norm_legit_no_training, upsample_*2d ->
            upsample_*2d.vec, var.correction -> var.dim, _embedding_bag_forward_only ->
            _embedding_bag). Then, into chosen samples, edge values (the first elements of each
            float tensor: NaN, inf, -inf, -0.0; of each integer tensor: its type's limits and
            0) and a zero-size variant (first dim 0: empty reductions). A derived sample
            PyTorch eager refuses is dropped.
  hand      written here (hand_samples), only for overloads op_db gives nothing for.
Order: a sample of each dtype (an ordinary tensor first), then broadcasting (pointwise ops), a
non-contiguous input, a zero-size input, a 0-dim input, the rest in op_db order, up to
MAX_BASE; then the edge-value and zero-size variants. Non-contiguous tensors are the export's
example inputs; etc gets their values as contiguous arrays, and the reference is computed
from those.

Each sample is a tiny nn.Module whose forward calls torch.ops.aten.NAME.OVERLOAD, the sample's
tensors the program's inputs (tensors in lists too), its other arguments constants (an
overload that returns a SymInt or a number feeds a view's size or scalar_tensor). It is
exported with torch.export.export (then run_decompositions() when the export holds a non-core
op) and saved with torch.export.save beside its inputs and PyTorch eager's outputs (.npy).
Skipped, with the reason, and not counted against etc: a sample PyTorch cannot export, whose
program has no NAME.OVERLOAD (export traced it away), with a non-tensor output or a dtype
outside the four. The programs are made once and cached in
${ETC_CACHE_DIR:-$HOME/.cache/etc}/core-aten/KEY (KEY: a hash of this script and the versions of
PyTorch, NumPy and Python; --cache DIR: elsewhere; --regenerate: again).

Then each sample: `etc export model.pt2 -o model.pte --target cpu`, `etc run model.pte
--device cpu --input I=input_I.npy ... --output-dir D`, and every output against PyTorch:
shapes equal; dtypes equal to what the exported program declares (PyTorch eager's mask of an
empty native_dropout is float32 where its program says bool); integers and bools exact;
floats |etc - torch| <= ATOL + RTOL |torch| (float32: 1e-5 and 1e-5), NaN where PyTorch has
NaN, the same infinities. Where PyTorch's own decomposition (torch._decomp) disagrees with
eager (gelu(inf): eager NaN, the decomposition inf), an element may match either (noted).
Outputs that are not values are checked by their contract: rand in [0, 1), randn finite,
randperm a permutation, native_dropout in training mask * x / (1 - p), empty/empty_strided
shape and dtype; sort, topk and max_pool*_with_indices may pick another index among equal
values. Every compared sample that passes is compared again against its reference moved by
1e-4 (relative; NaN and infinities replaced, integers + 1, bools inverted), which must fail:
the comparison can fail.

A sample ends in:
  pass         every output matches
  unsupported  etc export exits 1 with an error naming the operator (shown)
  refused      a failure, not fatal: etc run exits 1 with an error on a program etc exported
               (etc should refuse it at import or run it), or etc export exits 1 with an
               error that names no operator
  FAILURE      fatal: a wrong value, shape or dtype, a missing output, a crash, any other
               exit status (70: internal error), a timeout
An overload is FAILURE if any sample is, else refused if any is, else unsupported if any is,
else pass; "untested" when no sample could be exported (counted in M, not in N). The summary
ends `core-aten: N/M core overloads pass`, with the failures listed and how to reproduce each.

Exit status: 1 on any FAILURE, or with --min-pass N when fewer than N overloads pass (N is
recorded in test/CMakeLists.txt: raise it when etc learns an operator); else 0.
--only/--sample pick samples; --keep DIR copies each one checked with etc's program, its
outputs and the commands (commands.sh); --list prints every sample; --table FILE.md writes the
results as a table (docs/core-aten.md); --perturb EPS moves every reference (a self-check:
every compared overload must then fail).
"""
import argparse
import collections
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

MAX_SAMPLES = 8          # checked samples per overload
MAX_BASE = 6             # of them, op_db (or hand) samples; the rest are edge/zero-size variants
SAMPLES_PER_OPINFO = 12  # op_db samples read per OpInfo and dtype
MAX_CANDIDATES = 400     # recorded calls kept per overload
DTYPE_NAMES = ["float32", "int64", "int32", "bool"]
TOL = {"float32": (1e-5, 1e-5)}  # (rtol, atol)
# indices that may differ among equal values (index_equivalent)
INDEX_TIES = {"sort.default", "topk.default", "max_pool2d_with_indices.default",
              "max_pool3d_with_indices.default"}
# outputs that are not (all) deterministic values: no torch._decomp reference; rand, randn,
# randperm, empty and native_dropout in training are checked by their contract (compare,
# check_dropout)
NONDETERMINISTIC = {"rand.default", "randn.default", "randperm.default", "native_dropout.default",
                    "empty.memory_format", "empty_strided.default"}


def training_only(name):
    """The stated exclusion rule."""
    return name.split(".")[0].endswith("_backward")


RULE = "training-only: the operator name ends in `_backward`"


# ---------------------------------------------------------------------------------------------
# Generation (PyTorch)
# ---------------------------------------------------------------------------------------------

def core_overloads(torch):
    """{"name.overload": OpOverload} for every aten overload tagged core, from the dispatcher's
    registry (dir(torch.ops.aten) lists only the packets loaded so far)."""
    out = {}
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::"):
            continue
        name, _, ov = full[len("aten::"):].partition(".")
        ov = ov or "default"
        try:
            op = getattr(getattr(torch.ops.aten, name), ov)
        except (AttributeError, RuntimeError):
            continue
        if torch.Tag.core in op.tags:
            out[f"{name}.{ov}"] = op
    return dict(sorted(out.items()))


def generate(out_dir, log):
    import torch
    import torch._decomp
    import torch.utils._pytree as pytree
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.testing._internal.common_methods_invocations import op_db
    import warnings
    warnings.filterwarnings("ignore")

    dtypes = [getattr(torch, d) for d in DTYPE_NAMES]
    core = core_overloads(torch)
    checked = {n: op for n, op in core.items() if not training_only(n)}
    by_op = {op: n for n, op in checked.items()}

    def tensors_of(tree):
        return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]

    def clone_tree(tree):
        def c(x):
            if isinstance(x, torch.Tensor):
                y = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype)
                y.copy_(x.detach())
                return y
            return x
        return pytree.tree_map(c, tree)

    def ok_dtype(t, name=""):
        d = str(t.dtype)[6:]
        return d in DTYPE_NAMES or (d == "complex64" and name.startswith("_fft"))

    # candidates[name] = list of dicts: args, kwargs, source, kind (rank: 0 direct, 1 via,
    # 2 derived, 3 hand)
    candidates = collections.defaultdict(list)
    seen = collections.defaultdict(set)

    def signature(args, kwargs):
        def s(x):
            if isinstance(x, torch.Tensor):
                return f"T{tuple(x.shape)}{x.dtype}{x.is_contiguous()}"
            if isinstance(x, float) and x != x:
                return "nan"
            return repr(x)
        return repr(pytree.tree_map(s, (args, kwargs)))

    def add(name, args, kwargs, source, rank):
        if len(candidates[name]) >= MAX_CANDIDATES:
            return
        if not all(ok_dtype(t, name) for t in tensors_of((args, kwargs))):
            return
        sig = signature(args, kwargs)
        if sig in seen[name]:
            return
        seen[name].add(sig)
        candidates[name].append({"args": args, "kwargs": kwargs, "source": source, "rank": rank})

    # Sources of adapted arguments: a non-core op with the same meaning, or an in-place form.
    def bn_no_training(a, k):
        # native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)
        if len(a) == 8 and a[5] is False and a[3] is not None and a[4] is not None:
            return (a[0], a[1], a[2], a[3], a[4], a[6], a[7]), {}
        return None

    def var_dim(a, k):
        # var.correction(input, dim, *, correction, keepdim) -> var.dim(input, dim, unbiased, keepdim)
        c = k.get("correction", 1)
        if c not in (0, 1) or len(a) < 2 or a[1] is None:
            return None
        return (a[0], a[1], bool(c), k.get("keepdim", False)), {}

    adapters = {  # source overload (qualified name) -> [(target, transform)]
        "aten::native_batch_norm": [("_native_batch_norm_legit_no_training.default", bn_no_training)],
        "aten::_embedding_bag_forward_only": [("_embedding_bag.default", lambda a, k: (a, k))],
        # upsample_*2d.default(input, output_size, [align_corners,] scales_h, scales_w) -> .vec
        "aten::upsample_bilinear2d": [("upsample_bilinear2d.vec", lambda a, k: ((a[0], list(a[1]), a[2], None), {}))],
        "aten::upsample_nearest2d": [("upsample_nearest2d.vec", lambda a, k: ((a[0], list(a[1]), None), {}))],
        "aten::var": [("var.dim", var_dim)],
    }

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = by_op.get(func)
            qual = func._schema.name
            if name is not None:
                self.calls.append((name, clone_tree(args), clone_tree(kwargs)))
            elif qual.endswith("_") and not qual.endswith("__"):
                # an in-place form: its arguments suit the functional overload of that name
                target = qual[len("aten::"):-1] + "." + func._overloadname
                if target in checked:
                    self.calls.append((target, clone_tree(args), clone_tree(kwargs), "in-place"))
            if qual in adapters and func._overloadname in ("default", "correction"):
                for target, fn in adapters[qual]:
                    if target in checked:
                        self.calls.append((target, clone_tree(args), clone_tree(kwargs), fn))
            return func(*args, **kwargs)

    t0 = time.time()
    packets = collections.defaultdict(list)
    for n in checked:
        packets[n.split(".")[0]].append(n)
    for opinfo in op_db:
        full = opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")
        names = {opinfo.name, opinfo.name.split(".")[-1], opinfo.aten_name or ""}
        direct = [n for p in names for n in packets.get(p, [])]
        supported = opinfo.supported_dtypes("cpu")
        for dtype in dtypes:
            if dtype not in supported:
                continue
            torch.manual_seed(0)
            try:
                samples = opinfo.sample_inputs("cpu", dtype)
                for i, sample in enumerate(samples):
                    if i >= SAMPLES_PER_OPINFO:
                        break
                    src = f"op_db {full} {str(dtype)[6:]} #{i}"
                    done = set()
                    for n in direct:
                        args = clone_tree((sample.input, *sample.args))
                        kwargs = clone_tree(dict(sample.kwargs))
                        try:
                            checked[n](*clone_tree(args), **clone_tree(kwargs))
                        except Exception:
                            continue
                        add(n, args, kwargs, f"{src} (direct)", 0)
                        done.add(n)
                    rec = Record()
                    try:
                        with rec:
                            opinfo.op(sample.input, *sample.args, **sample.kwargs)
                    except Exception:
                        pass
                    for call in rec.calls:
                        n, args, kwargs = call[:3]
                        if len(call) == 3:
                            if n in done:  # the direct call again
                                continue
                            same = n.split(".")[0] in names
                            add(n, args, kwargs, f"{src} (via)" if not same else f"{src} (direct, recorded)",
                                0 if same else 1)
                        elif call[3] == "in-place":
                            add(n, args, kwargs, f"{src} (derived: in-place form's arguments)", 2)
                        else:
                            adapted = call[3](args, kwargs)
                            if adapted is not None:
                                try:
                                    checked[n](*clone_tree(adapted[0]), **clone_tree(adapted[1]))
                                except Exception:
                                    continue
                                add(n, adapted[0], adapted[1], f"{src} (derived: adapted arguments)", 2)
            except Exception as e:  # a sample generator that fails on this build
                log(f"  op_db {full} {dtype}: sample_inputs failed: {type(e).__name__}")
    log(f"core-aten: op_db harvested in {time.time() - t0:.0f} s")

    # Sibling overloads: the arguments of another overload of the same operator, as they are
    # or with a tensor where this overload takes a Scalar turned into a Python number.
    for n in checked:
        if candidates[n]:
            continue
        op = checked[n]
        scalar_pos = [i for i, a in enumerate(op._schema.arguments) if str(a.type) in ("Scalar", "number")]
        for sib in packets[n.split(".")[0]]:
            if sib == n:
                continue
            for c in list(candidates[sib]):
                if c["rank"] > 1:
                    continue
                args = list(c["args"])
                tries = [args]
                conv = list(args)
                changed = False
                for i in scalar_pos:
                    if i < len(conv) and isinstance(conv[i], torch.Tensor) and conv[i].numel() > 0:
                        conv[i] = conv[i].reshape(-1)[0].item()
                        changed = True
                if changed:
                    tries.append(conv)
                for t in tries:
                    try:
                        op(*clone_tree(tuple(t)), **clone_tree(c["kwargs"]))
                    except Exception:
                        continue
                    how = "as they are" if t is args else "a tensor as a Python scalar"
                    add(n, tuple(t), c["kwargs"], f"{c['source']} (derived: {sib}'s arguments, {how})", 2)
                    break

    hand = hand_samples(torch)
    for n in checked:
        if not candidates[n] and n in hand:
            for i, s in enumerate(hand[n]):
                add(n, s[0], s[1], f"hand #{i}", 3)
                if len(s) > 2:
                    candidates[n][-1]["dynamic"] = s[2]

    # ---- choose, export, save --------------------------------------------------------------
    class Call(torch.nn.Module):
        def __init__(self, op, spec, consts, wrap):
            super().__init__()
            self.op, self.spec, self.consts, self.wrap = op, spec, consts, wrap

        def forward(self, *xs):
            it = iter(xs)
            leaves = [next(it) if c is TENSOR else c for c in self.consts]
            args, kwargs = pytree.tree_unflatten(leaves, self.spec)
            out = self.op(*args, **kwargs)
            if self.wrap:  # a SymInt/SymBool/scalar result, used by a tensor op
                out = self.wrap(out, xs)
            return out

    TENSOR = object()
    # Overloads that return a SymInt, SymBool or a Python number: the program uses the result
    # in a tensor op (sym_size as a view's size, as dynamic programs do; the others as a
    # scalar_tensor), so that it has a tensor output.
    as_tensor = lambda r, xs: torch.ops.aten.scalar_tensor.default(r)
    CALLED_BY_EDIT = {"sym_numel.default", "sym_stride.int", "sym_storage_offset.default"}
    WRAP = {n: as_tensor for n in checked if n.startswith("sym_") or n == "_local_scalar_dense.default"}
    WRAP["sym_size.int"] = lambda r, xs: torch.ops.aten.view.default(xs[0], [r, xs[0].shape[1]])
    # numel and stride(0) as a view's size, as sym_size: a size that moves with the dynamic dim
    WRAP["sym_numel.default"] = lambda r, xs: torch.ops.aten.view.default(xs[0], [r])
    WRAP["sym_stride.int"] = lambda r, xs: torch.ops.aten.view.default(xs[0], [xs[0].shape[0], r])

    def features(c, name):
        ts = tensors_of((c["args"], c["kwargs"]))
        f = set()
        for t in ts:
            f.add(str(t.dtype)[6:])
            if not t.is_contiguous():
                f.add("non-contiguous")
            if t.numel() == 0:
                f.add("zero-size")
            if t.dim() == 0:
                f.add("0-dim")
        shapes = {tuple(t.shape) for t in ts if t.dim() > 0}
        if len(shapes) > 1 and torch.Tag.pointwise in checked[name].tags:
            try:
                b = tuple(torch.broadcast_shapes(*shapes))
                if any(s != b for s in shapes):
                    f.add("broadcast")
            except RuntimeError:
                pass
        if not ts:
            f.add("no tensor input")
        return f

    def build(name, c):
        """(module, example inputs) of a candidate."""
        leaves, spec = pytree.tree_flatten((tuple(c["args"]), dict(c["kwargs"])))
        xs = [x for x in leaves if isinstance(x, torch.Tensor)]
        consts = [TENSOR if isinstance(x, torch.Tensor) else x for x in leaves]
        return Call(checked[name], spec, consts, WRAP.get(name)), xs

    core_ops = set(core.values())
    decompositions = torch._decomp.decomposition_table

    # sym_numel, sym_stride and sym_storage_offset: torch.export computes them from sym_size
    # (or, for a contiguous input's offset, 0) and leaves none in the program. The sample's
    # program is edited to call the overload where its scalar_tensor reads the value - a
    # program the serializer writes and etc must read like any other.
    def call_directly(ep, op, rest):
        g = ep.graph
        # The node that reads the value: the scalar_tensor, or the view (its size list).
        users = [n for n in g.nodes if n.op == "call_function" and n.target in
                 (torch.ops.aten.scalar_tensor.default, torch.ops.aten.view.default)]
        xs = [n for n in g.nodes if n.op == "placeholder"]
        if len(users) != 1 or not xs:
            return None
        user = users[0]
        with g.inserting_before(user):
            call = g.call_function(op, (xs[-1], *rest))
        val = xs[-1].meta["val"]
        call.meta["val"] = (val.numel() if op == torch.ops.aten.sym_numel.default else
                            val.stride(rest[0]) if op == torch.ops.aten.sym_stride.int else
                            val.storage_offset())
        if user.target == torch.ops.aten.scalar_tensor.default:
            user.args = (call,) + tuple(user.args[1:])
        else:  # the one size of the list that is computed (a node)
            sizes = list(user.args[1])
            moving = [i for i, v in enumerate(sizes) if isinstance(v, torch.fx.Node)]
            if len(moving) != 1:
                return None
            sizes[moving[0]] = call
            user.args = (user.args[0], sizes) + tuple(user.args[2:])
        g.eliminate_dead_code()
        ep.graph_module.recompile()
        return ep

    def export(name, c, sample_dir):
        """None, or the reason the sample is skipped."""
        mod, xs = build(name, c)
        contiguous = [x.contiguous() for x in xs]
        try:
            with torch.no_grad():
                expected = mod(*[x.clone() for x in contiguous])
        except Exception as e:
            return f"PyTorch eager refuses it: {first_line(e)}"
        flat = pytree.tree_leaves(expected)
        if not all(isinstance(t, torch.Tensor) for t in flat):
            return "non-tensor output (" + ", ".join(sorted({type(t).__name__ for t in flat})) + ")"
        if not all(ok_dtype(t, name) for t in flat):
            return "output dtype outside " + "/".join(DTYPE_NAMES) + ": " + ", ".join(str(t.dtype)[6:] for t in flat)
        op = checked[name]
        try:
            dyn = (tuple(c["dynamic"]),) if "dynamic" in c else None
            ep = torch.export.export(mod, tuple(xs), dynamic_shapes=dyn)
        except Exception as e:
            return f"not exportable: {first_line(e)}"
        targets = lambda p: [n.target for n in p.graph.nodes if n.op == "call_function"]
        # Core ATen already unless the export holds another op (run_decompositions() costs
        # half a second a program)
        form = "default"
        chosen = ep
        if any(t not in core_ops and not str(t).startswith(("<built-in function getitem", "aten.sym_")) and
               t.__module__ != "_operator" for t in targets(ep)):
            try:
                core_ep = ep.run_decompositions()
                if op in targets(core_ep):
                    chosen, form = core_ep, "core"
            except Exception:
                pass
        if op not in targets(chosen) and name in CALLED_BY_EDIT:
            edited = call_directly(chosen, op, c["args"][1:])
            if edited is not None:
                chosen = edited
                c["source"] += " (the program edited to call it)"
        if op not in targets(chosen):
            return "not exportable: the exported program has no " + name + " (" + \
                ", ".join(sorted({target_name(t) for t in targets(ep)})) + ")"
        # the dtypes the program declares for its outputs
        out_node = [n for n in chosen.graph.nodes if n.op == "output"][0]
        n_user = len(chosen.graph_signature.user_outputs)
        declared = [getattr(getattr(v, "meta", {}).get("val"), "dtype", None)
                    for v in list(out_node.args[0])[-n_user:]]
        if n_user != len(flat):
            return f"the program has {n_user} outputs, PyTorch eager {len(flat)}"
        # PyTorch's own decomposition (torch._decomp) where it disagrees with eager: a second
        # reference (gelu(inf): eager NaN, the decomposition inf)
        alt = None
        if op in decompositions and name not in NONDETERMINISTIC:
            try:
                with torch.no_grad():
                    fresh = iter([x.clone() for x in contiguous])
                    leaves = [next(fresh) if k is TENSOR else k for k in mod.consts]
                    a_args, a_kwargs = pytree.tree_unflatten(leaves, mod.spec)
                    r = decompositions[op](*a_args, **a_kwargs)
                    if mod.wrap:
                        r = mod.wrap(r, contiguous)
                r = pytree.tree_leaves(r)
                if len(r) == len(flat) and all(isinstance(t, torch.Tensor) and t.shape == e.shape and
                                               t.dtype == e.dtype for t, e in zip(r, flat)):
                    if any(compare(name, {}, k, t.numpy(), e.numpy(), [])[0]
                           for k, (t, e) in enumerate(zip(r, flat))):
                        alt = r
            except Exception:
                pass
        os.makedirs(sample_dir, exist_ok=True)
        torch.export.save(chosen, os.path.join(sample_dir, "model.pt2"))
        for i, x in enumerate(contiguous):
            np.save(os.path.join(sample_dir, f"input_{i}.npy"), x.numpy())
        for i, t in enumerate(flat):
            np.save(os.path.join(sample_dir, f"expected_{i}.npy"), t.detach().contiguous().numpy())
            if alt is not None:
                np.save(os.path.join(sample_dir, f"decomposition_{i}.npy"), alt[i].detach().contiguous().numpy())
        meta = {
            "overload": name, "source": c["source"], "features": sorted(features(c, name)),
            "form": form, "inputs": [[list(x.shape), str(x.dtype)[6:], x.is_contiguous()] for x in xs],
            "outputs": [[list(t.shape), str(t.dtype)[6:], str(d)[6:] if d is not None else None]
                        for t, d in zip(flat, declared)],
            "args": describe(c["args"], c["kwargs"]),
            "ops": sorted({target_name(t) for t in targets(chosen)}),
            "decomposition": alt is not None,
        }
        if name == "native_dropout.default":
            meta["p"], meta["train"] = float(c["args"][1]), bool(c["args"][2])
        if name in ("sort.default", "topk.default"):
            a, k = list(c["args"]), dict(c["kwargs"])
            pos = 1 if name == "sort.default" else 2
            meta["dim"] = a[pos] if len(a) > pos else k.get("dim", -1)
            meta["sorted"] = (a[4] if len(a) > 4 else k.get("sorted", True)) if name == "topk.default" else True
        with open(os.path.join(sample_dir, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        return None

    def describe(args, kwargs):
        def d(x):
            if isinstance(x, torch.Tensor):
                s = f"{str(x.dtype)[6:]}{list(x.shape)}"
                return s if x.is_contiguous() else s + "(non-contiguous)"
            return x
        a = pytree.tree_map(d, (list(args), kwargs))
        return repr(a[0])[1:-1] + ("" if not kwargs else ", " + ", ".join(f"{k}={v!r}" for k, v in a[1].items()))

    def edge_variant(name, c, kind):
        """The candidate with edge values written into the first elements of its float (kind
        "float": NaN, inf, -inf, -0.0) or integer (kind "int": the type's limits, 0) tensors, or
        None when it has none. An integer variant holds no -1 (every -1 becomes 1), and none is
        made for a division with a -1 argument: INT_MIN / -1 kills PyTorch eager (SIGFPE)."""
        args, kwargs = clone_tree((tuple(c["args"]), dict(c["kwargs"])))
        if kind == "int" and name.split(".")[0] in ("div", "remainder", "fmod") and \
                any(x == -1 for x in pytree.tree_leaves((args, kwargs)) if type(x) is int):
            return None
        hit = False
        for t in tensors_of((args, kwargs)):
            if t.numel() == 0:
                continue
            if kind == "float" and t.dtype.is_floating_point:
                vals = [float("nan"), float("inf"), float("-inf"), -0.0]
            elif kind == "int" and t.dtype in (torch.int64, torch.int32):
                info = torch.iinfo(t.dtype)
                vals = [info.min, info.max, 0]
            else:
                continue
            if kind == "int":
                for u in tensors_of((args, kwargs)):
                    if u.dtype in (torch.int64, torch.int32):
                        u[u == -1] = 1
            for k, v in zip(range(t.numel()), vals):
                t[tuple(int(d) for d in np.unravel_index(k, tuple(t.shape)))] = v
            hit = True
        if not hit:
            return None
        what = "NaN, +-inf, -0.0" if kind == "float" else "integer limits, 0"
        return {"args": args, "kwargs": kwargs, "source": f"{c['source']} + edge values ({what})", "rank": c["rank"]}

    def zero_variant(c):
        ts = tensors_of((c["args"], c["kwargs"]))
        if len(ts) != 1 or ts[0].dim() == 0 or ts[0].shape[0] == 0:
            return None
        args, kwargs = clone_tree((tuple(c["args"]), dict(c["kwargs"])))

        def z(x):
            return x[:0].clone() if isinstance(x, torch.Tensor) else x
        args, kwargs = pytree.tree_map(z, (args, kwargs))
        return {"args": args, "kwargs": kwargs, "source": f"{c['source']} with its first dim 0", "rank": c["rank"]}

    def eager_ok(name, c):
        try:
            with torch.no_grad():
                checked[name](*clone_tree(tuple(c["args"])), **clone_tree(dict(c["kwargs"])))
            return True
        except Exception:
            return False

    index = {"torch": torch.__version__, "rule": RULE, "core": list(core), "overloads": {}}
    t1 = time.time()
    for name in checked:
        cands = sorted(candidates[name], key=lambda c: c["rank"])
        entry = {"samples": [], "skipped": [], "origin": []}
        index["overloads"][name] = entry
        used = set()
        chosen = []

        def try_one(c):
            sdir = os.path.join(out_dir, name, str(len(entry["samples"])))
            reason = export(name, c, sdir)
            if reason is None:
                entry["samples"].append(str(len(entry["samples"])))
                origin = c["source"].split(" ")[0]
                if origin not in entry["origin"]:
                    entry["origin"].append(origin)
                chosen.append(c)
                return True
            entry["skipped"].append(f"{c['source']}: {reason}")
            return False

        feats = [features(c, name) for c in cands]

        def order():
            """Candidates by rank, then the OpInfo used least so far (convolution.default is
            reached by conv1d, conv2d, conv_transpose1d ...: one of each before a second)."""
            used_from = collections.Counter(c["source"].split(" ")[1] for c in chosen)
            return sorted((i for i in range(len(cands)) if i not in used),
                          key=lambda i: (cands[i]["rank"], used_from[cands[i]["source"].split(" ")[1]], i))

        # a dtype first with an ordinary tensor (not 0-dim, not empty): those come next
        wanted = [(d, True) for d in DTYPE_NAMES] + [(d, False) for d in DTYPE_NAMES] + \
            [(w, False) for w in ("broadcast", "non-contiguous", "zero-size", "0-dim")]
        for w, ordinary in wanted:
            for i in order():
                if len(chosen) >= MAX_BASE or any(w in features(x, name) for x in chosen):
                    break
                if w not in feats[i] or (ordinary and feats[i] & {"zero-size", "0-dim"}):
                    continue
                used.add(i)
                if try_one(cands[i]):
                    break
        while len(chosen) < MAX_BASE and len(entry["skipped"]) <= 3 * MAX_SAMPLES:
            rest = order()
            if not rest:
                break
            used.add(rest[0])
            try_one(cands[rest[0]])
        base = list(chosen)
        extra = []
        roomy = sorted(base, key=lambda c: sum(t.numel() for t in tensors_of((c["args"], c["kwargs"]))) < 4)
        for kind in ("float", "int"):
            for c in roomy:
                v = edge_variant(name, c, kind)
                if v is not None and eager_ok(name, v):
                    extra.append(v)
                    break
        if not any("zero-size" in features(c, name) for c in base):
            for c in base:
                v = zero_variant(c)
                if v is not None and eager_ok(name, v):
                    extra.append(v)
                    break
        for v in extra:
            if len(chosen) < MAX_SAMPLES:
                try_one(v)
        log(f"  {name}: {len(entry['samples'])} samples, {len(entry['skipped'])} skipped")
    log(f"core-aten: exported in {time.time() - t1:.0f} s")
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1)


def target_name(t):
    """aten.add.Tensor; operator.mul for a Python function (no address)."""
    if hasattr(t, "_schema") or not hasattr(t, "__name__"):
        return str(t)
    return f"{getattr(t, '__module__', '') or ''}.{t.__name__}".lstrip(".")


def first_line(e):
    s = str(e).strip().splitlines()
    return (type(e).__name__ + ": " + (s[0] if s else ""))[:300]


def hand_samples(torch):
    """Samples for overloads op_db gives nothing for: {name: [(args, kwargs[, dynamic_shapes])]}."""
    from torch.export import Dim
    g = torch.Generator().manual_seed(0)

    def r(*shape, dtype=torch.float32):
        if dtype == torch.float32:
            return torch.randn(*shape, generator=g)
        return torch.randint(-9, 10, shape, generator=g, dtype=dtype)

    n = Dim("n", min=2, max=16)
    s = {
        "native_dropout.default": [((r(4, 5), 0.5, False), {}), ((r(4, 5), 0.0, True), {}),
                                   ((r(8, 16), 0.5, True), {}), ((r(3, 7), 0.25, True), {})],
        "randperm.default": [((7,), {}), ((1,), {}), ((0,), {}), ((12,), {"dtype": torch.int32})],
        # col2im(input [N,] C*kh*kw x blocks, output_size, kernel_size, dilation, padding, stride)
        "col2im.default": [((r(1, 12, 12), [4, 5], [2, 2], [1, 1], [0, 0], [1, 1]), {}),
                           ((r(2, 8, 12), [5, 6], [2, 2], [1, 1], [1, 1], [2, 2]), {}),
                           ((r(4, 4), [3, 3], [2, 2], [1, 1], [0, 0], [1, 1]), {}),
                           ((r(1, 18, 4), [4, 4], [3, 3], [1, 1], [0, 0], [1, 1]), {})],
        "atan2.out": [((r(3, 4), r(3, 4)), {"out": torch.zeros(3, 4)})],
        "sym_size.int": [((r(5, 3), 0), {}, ({0: n},))],
        "sym_numel.default": [((r(5, 3),), {}, ({0: n},))],
        "sym_stride.int": [((r(5, 3), 0), {}, ({1: Dim("m", min=2, max=16)},))],
        "sym_storage_offset.default": [((r(5, 3),), {}, ({0: n},))],
        "sym_is_contiguous.default": [((r(5, 3),), {}, ({0: n},))],
    }
    return s


# ---------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------

def cache_key():
    import torch
    h = hashlib.sha256()
    with open(os.path.abspath(__file__), "rb") as f:
        h.update(f.read())
    h.update(torch.__version__.encode())
    h.update(np.__version__.encode())
    h.update(sys.version.encode())
    return h.hexdigest()[:16]


def programs(args, log):
    root = args.cache or os.path.join(os.environ.get("ETC_CACHE_DIR", os.path.expanduser("~/.cache/etc")), "core-aten")
    d = os.path.join(root, cache_key())
    if os.path.exists(os.path.join(d, ".complete")) and not args.regenerate:
        return d
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(d, ".complete")) and not args.regenerate:
            return d
        tmp = d + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        log(f"core-aten: exporting the samples with PyTorch into {d}")
        t = time.time()
        generate(tmp, log)
        open(os.path.join(tmp, ".complete"), "w").close()
        shutil.rmtree(d, ignore_errors=True)
        os.rename(tmp, d)
        log(f"core-aten: made in {time.time() - t:.0f} s")
    return d


# ---------------------------------------------------------------------------------------------
# Checking (etc)
# ---------------------------------------------------------------------------------------------

def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", "timed out after 120 s")


def refusal(text, name):
    """The reason of an import refusal (exit 1) whose error names an operator, else None (also
    when etc says the program's recorded shape or dtype is not what it computes: its own bug)."""
    if "etc: error:" not in text or not re.search(r"\baten\.\w+", text) or "etc computes" in text:
        return None
    ops = sorted(set(re.findall(r"^\s*(aten\.[\w.]+) x\d+", text, re.M)))
    if "cannot import" in text and ops:
        # The reason etc gives for an op it refuses by design ("why: ..." under the op).
        why = sorted(set(re.findall(r"^\s*why: ([^:;]*)", text, re.M)))
        return "cannot import " + ", ".join(ops) + ("".join(f" ({w.strip()})" for w in why))
    msg = first_error(text)
    msg = re.sub(r"^\S*model\.pt2!\S*: ", "", msg)
    msg = re.sub(r'^/graph_module/graph/nodes/\d+\S*( \(node "[^"]*"\))?: ', "", msg)
    msg = re.sub(r" \(from [^()]*core_aten_test\.py.*$", "", msg)
    return msg[:240]


def mismatch(got, want):
    """Mask of the elements of got that differ from want (same shapes)."""
    if want.dtype.kind in "biu" and got.dtype.kind in "biu":
        return got != want
    rtol, atol = TOL.get(str(want.dtype), (1e-5, 1e-5))
    g = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
    w = want.astype(g.dtype)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    bad = nan_g != nan_w
    fin = np.isfinite(g) & np.isfinite(w)
    bad |= ~fin & ~(nan_g | nan_w) & (g != w)  # infinities: the same, with the same sign
    with np.errstate(invalid="ignore"):
        bad |= fin & (np.abs(g - w) > atol + rtol * np.abs(w))
    return bad


def compare(name, meta, i, got, want, inputs, alt=None):
    """(problem, note) of output i: problem None when it matches."""
    note = None
    decl = (meta.get("outputs") or [[None, None, None]] * (i + 1))[i][2]
    if decl and str(want.dtype) != decl and got.shape == want.shape and \
            np.array_equal(want.astype(decl).astype(want.dtype), want):
        # PyTorch eager and its exported program disagree (native_dropout of an empty input:
        # eager's mask is float32, the program's bool): the program's dtype, eager's values
        # (when they survive the cast)
        note = f"output {i}: PyTorch eager gives {want.dtype}, its program declares {decl}"
        want = want.astype(decl)
    if got.shape != want.shape:
        return f"output {i}: shape {list(got.shape)}, PyTorch {list(want.shape)}", note
    if got.dtype != want.dtype:
        return f"output {i}: dtype {got.dtype}, PyTorch {want.dtype}", note
    if name in ("empty.memory_format", "empty_strided.default"):
        return None, note
    if name == "rand.default":
        return (None if np.all((got >= 0) & (got < 1)) else f"output {i}: values outside [0, 1)"), note
    if name == "randn.default":
        return (None if np.all(np.isfinite(got)) else f"output {i}: non-finite values"), note
    if name == "randperm.default":
        ok = np.array_equal(np.sort(got), np.arange(got.size))
        return (None if ok else f"output {i}: not a permutation of 0..{got.size - 1}"), note
    bad = mismatch(got, want)
    if bad.any() and alt is not None and alt.shape == got.shape:
        alt_bad = mismatch(got, alt.astype(got.dtype))
        if (bad & ~alt_bad).any():
            note = f"output {i}: {int((bad & ~alt_bad).sum())} element(s) match torch._decomp's result, not eager's"
        bad &= alt_bad
    if not bad.any():
        return None, note
    at = tuple(int(v) for v in np.argwhere(bad)[0])
    if want.dtype.kind in "biu":
        return (f"output {i}: {int(bad.sum())} of {want.size} elements differ; first at {list(at)}: "
                f"etc {got[at]!r}, PyTorch {want[at]!r}"), note
    rtol, atol = TOL.get(str(want.dtype), (1e-5, 1e-5))
    with np.errstate(invalid="ignore"):
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    fin = np.isfinite(err)
    return (f"output {i}: {int(bad.sum())} of {want.size} elements differ (rtol {rtol:g}, atol {atol:g}); "
            f"max abs error {float(err[fin].max()) if fin.any() else float('nan'):.3g}; first at {list(at)}: "
            f"etc {got[at]!r}, PyTorch {want[at]!r}"), note


def index_equivalent(name, meta, outs, wants, inputs):
    """sort / topk / max_pool*_with_indices: etc's indices may pick another of equal values
    (and topk(sorted=False) may return its k values in any order)."""
    if len(outs) != 2 or outs[1].shape != wants[1].shape or outs[1].dtype != wants[1].dtype:
        return False
    vals, idx = outs
    want = wants[0]
    x = inputs[0]
    if name in ("sort.default", "topk.default"):
        dim = meta["dim"]
        if x.ndim == 0:
            picked = np.broadcast_to(x, idx.shape) if np.all(idx == 0) else None
        elif idx.size and (idx.min() < 0 or idx.max() >= x.shape[dim]):
            picked = None
        else:
            picked = np.take_along_axis(x, idx.astype(np.int64), axis=dim)
        if not meta["sorted"] and vals.ndim:
            vals_sorted, want = np.sort(vals, axis=dim), np.sort(want, axis=dim)
        else:
            vals_sorted = vals
    else:
        k = 2 if "2d" in name else 3
        plane = x.reshape(x.shape[:-k] + (-1,))
        fi = idx.reshape(idx.shape[:-k] + (-1,)).astype(np.int64)
        if fi.size and (fi.min() < 0 or fi.max() >= plane.shape[-1]):
            picked = None
        else:
            picked = np.take_along_axis(plane, fi, axis=-1).reshape(idx.shape)
        vals_sorted = vals
    if picked is None:
        return False
    same = np.array_equal(picked.astype(vals.dtype), vals, equal_nan=vals.dtype.kind == "f")
    return same and compare(name, meta, 0, vals_sorted, want, inputs)[0] is None


def check_dropout(meta, outs, inputs):
    x, p = inputs[0], meta["p"]
    out, mask = outs
    if mask.dtype != np.bool_ or out.shape != x.shape or mask.shape != x.shape:
        return "dropout: wrong output shapes or mask dtype"
    want = np.where(mask, x.astype(np.float64) / (1 - p), 0.0)
    if not np.allclose(out, want, rtol=1e-5, atol=1e-6, equal_nan=True):
        return "dropout: output is not mask * x / (1 - p)"
    if x.size >= 64 and not (0.05 < mask.mean() < 0.95):
        return f"dropout: {mask.mean():.2f} of the elements kept with p = {p}"
    return None


def check_sample(etc, d, name, work, keep=False):
    """(status, detail, note) of the sample in directory d (etc's files go to work)."""
    meta = json.load(open(os.path.join(d, "meta.json")))
    n_in, n_out = len(meta["inputs"]), len(meta["outputs"])
    pte = os.path.join(work, "model.pte")
    out_dir = os.path.join(work, "out")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    if os.path.exists(pte):
        os.remove(pte)
    cmd_export = [etc, "export", os.path.join(d, "model.pt2"), "-o", pte, "--target", "cpu"]
    cmd_run = [etc, "run", pte, "--device", "cpu", "--output-dir", out_dir]
    for i in range(n_in):
        cmd_run += ["--input", f"{i}={os.path.join(d, f'input_{i}.npy')}"]
    if keep:
        with open(os.path.join(d, "commands.sh"), "w") as f:
            f.write(" ".join(cmd_export) + "\n" + " ".join(cmd_run) + "\n")
    r = run(cmd_export)
    text = (r.stdout + r.stderr).strip()
    if r.returncode == 1:
        why = refusal(text, name)
        if why:
            return "unsupported", why, None
        if "etc: error:" in text:
            return "refused", "etc export: " + first_error(text)[:300], None
    if r.returncode != 0:
        return "FAILURE", f"etc export exited {r.returncode}: {one_line(text)[-400:]}", None
    r = run(cmd_run)
    text = (r.stdout + r.stderr).strip()
    if r.returncode == 1 and "etc: error:" in text:
        return "refused", "etc run: " + first_error(text)[:300], None
    if r.returncode != 0:
        return "FAILURE", f"etc run exited {r.returncode}: {one_line(text)[-400:]}", None
    inputs = [np.load(os.path.join(d, f"input_{i}.npy")) for i in range(n_in)]
    wants = [np.load(os.path.join(d, f"expected_{i}.npy")) for i in range(n_out)]
    alts = [np.load(os.path.join(d, f"decomposition_{i}.npy")) if meta.get("decomposition") else None
            for i in range(n_out)]
    outs = []
    for i in range(n_out):
        f = os.path.join(out_dir, f"output_{i}.npy")
        if not os.path.exists(f):
            return "FAILURE", f"etc run wrote no output_{i}.npy ({n_out} expected)", None
        outs.append(np.load(f))
    if os.path.exists(os.path.join(out_dir, f"output_{n_out}.npy")):
        return "FAILURE", f"etc run wrote more than the {n_out} outputs of PyTorch", None
    random_dropout = name == "native_dropout.default" and meta.get("train") and 0 < meta.get("p", 0) < 1
    if random_dropout:
        why = check_dropout(meta, outs, inputs)
        return ("FAILURE", why, None) if why else ("pass", "", None)
    problems, notes = matches(name, meta, outs, wants, inputs, alts)
    if problems:
        return "FAILURE", problems, notes
    # The comparison must be able to fail: against a reference moved by 1e-4 (relative; NaN
    # and infinities replaced, integers + 1, bools inverted) etc's outputs must not pass.
    contract = name in NONDETERMINISTIC and name != "native_dropout.default"  # checked by contract
    if not contract and any(w.size for w in wants):
        moved = [perturb(w, 1e-4) for w in wants]
        moved_alts = [perturb(a, 1e-4) if a is not None else None for a in alts]
        if not matches(name, meta, outs, moved, inputs, moved_alts)[0]:
            return "FAILURE", "the comparison let a perturbed reference through", notes
    return "pass", "", notes


def matches(name, meta, outs, wants, inputs, alts):
    """(what differs or "", notes) of etc's outputs against PyTorch's."""
    checks = [compare(name, meta, i, outs[i], wants[i], inputs, alts[i]) for i in range(len(wants))]
    problems = [c[0] for c in checks if c[0]]
    notes = "; ".join(c[1] for c in checks if c[1]) or None
    if problems and name in INDEX_TIES and index_equivalent(name, meta, outs, wants, inputs):
        return "", "indices differ among equal values"
    return "; ".join(problems), notes


def perturb(a, eps):
    """a moved: finite floats by eps (|a| + 1), NaN to 1, infinities to 0; integers + 1 (wrapping);
    bools inverted."""
    if a.dtype.kind in "fc":
        with np.errstate(invalid="ignore", over="ignore"):
            m = a + (eps * (np.abs(a) + 1)).astype(a.dtype)
            m = np.where(np.isnan(a), np.ones_like(a), m)
            return np.where(np.isinf(a), np.zeros_like(a), m).astype(a.dtype)
    if a.dtype.kind in "iu":
        with np.errstate(over="ignore"):
            return (a + a.dtype.type(1)).astype(a.dtype)
    return ~a


def first_error(text):
    """The first line of etc's error, without the file it was reading."""
    msg = text.split("etc: error:", 1)[1].strip().splitlines()[0]
    return re.sub(r"^\S*model\.pt2!\S*: ", "", msg)


def one_line(text):
    return " / ".join(l.strip() for l in text.strip().splitlines() if l.strip())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("etc")
    p.add_argument("--min-pass", type=int, help="exit 1 when fewer overloads pass")
    p.add_argument("--table", help="write the results as a markdown table")
    p.add_argument("--only", nargs="*", default=[], help="these overloads (NAME.OVERLOAD) only")
    p.add_argument("--sample", type=int, help="this sample of each only")
    p.add_argument("--keep", help="copy each sample checked, etc's outputs and the commands here")
    p.add_argument("--cache", help="the programs' cache (default ${ETC_CACHE_DIR:-~/.cache/etc}/core-aten)")
    p.add_argument("--regenerate", action="store_true", help="export the samples again")
    p.add_argument("--list", action="store_true", help="print every sample")
    p.add_argument("--perturb", type=float, default=0.0,
                   help="self-check: move PyTorch's reference by this much (relative); every sample "
                        "compared with a reference must then fail")
    args = p.parse_args()
    log = lambda s: print(s, file=sys.stderr, flush=True)
    t0 = time.time()
    d = programs(args, log)
    index = json.load(open(os.path.join(d, "index.json")))
    core = index["core"]
    excluded = [n for n in core if training_only(n)]
    print(f"core-aten: {len(core)} core overloads in torch {index['torch']}; "
          f"{len(excluded)} excluded ({RULE}): {', '.join(excluded)}")
    names = [n for n in index["overloads"] if not args.only or n in args.only]
    if args.sample is not None:
        names = [n for n in names if str(args.sample) in index["overloads"][n]["samples"]]
    unknown = [n for n in args.only if n not in index["overloads"]]
    if unknown:
        print("core-aten: not a checked core overload: " + ", ".join(unknown))
        return 2
    results = {}
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            entry = index["overloads"][name]
            per = []
            for s in entry["samples"]:
                if args.sample is not None and int(s) != args.sample:
                    continue
                sd = os.path.join(d, name, s)
                meta = json.load(open(os.path.join(sd, "meta.json")))
                if args.perturb:
                    sd = perturbed(sd, work, args.perturb)
                if args.keep:  # the sample, etc's program and outputs, the commands
                    kept = os.path.join(os.path.abspath(args.keep), name, s)
                    shutil.copytree(sd, kept, dirs_exist_ok=True)
                    status, detail, note = check_sample(args.etc, kept, name, kept, True)
                else:
                    status, detail, note = check_sample(args.etc, sd, name, work)
                per.append((s, status, detail, meta, note))
                if args.list or status != "pass" or note or args.only:
                    print(f"    {name} #{s} [{meta['source']}] ({meta['args']}): {status}"
                          + (f": {detail}" if detail else "") + (f" (note: {note})" if note else ""))
            statuses = [x[1] for x in per]
            if not per:
                outcome = "untested"
            else:
                outcome = next(o for o in ("FAILURE", "refused", "unsupported", "pass") if o in statuses)
            npass = statuses.count("pass")
            why = "; ".join(sorted({x[2] for x in per if x[1] in ("unsupported", "refused")}))
            if outcome == "untested":
                why = "; ".join(entry["skipped"][:2]) if entry["skipped"] else "no sample"
            results[name] = (outcome, npass, len(per), why, per, entry)
            print(f"{outcome:14} {name}: {npass}/{len(per)} samples pass"
                  + (f"; {why}" if why and outcome != "FAILURE" else ""), flush=True)
    total = len(names)
    by = collections.defaultdict(list)
    for n in names:
        by[results[n][0]].append(n)
    passed, failures = by["pass"], by["FAILURE"]
    print()
    for outcome in ("unsupported", "untested"):
        for n in by[outcome]:
            print(f"core-aten: {outcome} {n}: {results[n][3]}")
    for n in by["refused"] + failures:
        for s, status, detail, meta, note in results[n][4]:
            if status in ("refused", "FAILURE"):
                print(f"{status} {n} #{s} [{meta['source']}] ({meta['args']}): {detail}")
                print(f"    reproduce: $(scripts/python-env.sh) test/torch/core_aten_test.py ETC --only {n} "
                      f"--sample {s} --keep DIR")
    print(f"core-aten: {len(passed)}/{total} core overloads pass ({len(by['unsupported'])} unsupported, "
          f"{len(by['untested'])} untested, {len(by['refused'])} refused, {len(failures)} FAILURE) "
          f"in {time.time() - t0:.0f} s")
    if by["refused"]:
        print("core-aten: failures, refused (etc exits 1 on a program it imported, or without naming an "
              "operator; not fatal): " + ", ".join(by["refused"]))
    if failures:
        print("core-aten: FAILURES (wrong results, crashes; fatal): " + ", ".join(failures))
    if args.table:
        write_table(args.table, index, names, results, excluded)
    status = 1 if failures else 0
    if args.min_pass is not None and len(passed) < args.min_pass:
        print(f"core-aten: FAIL: {len(passed)} overloads pass, the recorded minimum is {args.min_pass}")
        status = 1
    elif args.min_pass is not None and len(passed) > args.min_pass and not args.only:
        print(f"core-aten: {len(passed)} pass, more than the recorded {args.min_pass}: "
              "raise --min-pass in test/CMakeLists.txt")
    return status


def perturbed(sd, work, eps):
    """A copy of a sample whose PyTorch outputs are moved by eps (relative; --perturb)."""
    dst = os.path.join(work, "perturbed")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(sd, dst)
    for f in os.listdir(dst):
        if f.startswith(("expected_", "decomposition_")):
            np.save(os.path.join(dst, f), perturb(np.load(os.path.join(dst, f)), eps))
    return dst


def write_table(path, index, names, results, excluded):
    with open(path, "w") as f:
        n = sum(1 for x in names if results[x][0] == "pass")
        f.write(f"Core ATen overloads of torch {index['torch']}: **{n}/{len(names)} pass** "
                f"({len(excluded)} training-only overloads excluded: "
                f"{', '.join('`' + e + '`' for e in excluded)}).\n\n")
        f.write("| overload | result | samples passing | input dtypes | samples from | detail |\n"
                "|---|---|---|---|---|---|\n")
        for x in names:
            outcome, npass, nall, why, per, entry = results[x]
            dtypes = sorted({d for *_, m, _ in per for shape, d, contiguous in m["inputs"]},
                            key=lambda d: (d not in DTYPE_NAMES, DTYPE_NAMES.index(d) if d in DTYPE_NAMES else 0, d))
            detail = why
            if outcome == "FAILURE":
                detail = "; ".join(f"#{s}: {d}" for s, st, d, m, nt in per if st == "FAILURE")[:300]
            elif outcome == "refused":
                detail = "; ".join(f"#{s}: {d}" for s, st, d, m, nt in per if st == "refused")[:300]
            detail = detail.replace("|", "\\|")
            f.write(f"| `{x}` | {outcome} | {npass}/{nall} | {', '.join(dtypes) or '-'} | "
                    f"{', '.join(entry['origin']) or '-'} | {detail} |\n")


if __name__ == "__main__":
    sys.exit(main())
