#!/usr/bin/env python3
"""Exports the model zoos etc's coverage is counted on, from the pinned PyPI packages with
random weights (nothing is downloaded).

Families:
  torchvision  every classification model torchvision.models.list_models() lists and the
               segmentation models of torchvision.models.segmentation (weights=None,
               weights_backbone=None), at a small input size

Weights are PyTorch's default initialisation from a fixed seed; parameters initialised to
zero (ViT's classification head) are drawn from N(0, 0.02) so that no output is trivially
zero. For each model, into OUT/FAMILY/NAME/:
  model.pt2        torch.export.export(model, (x,)) (the default, TRAINING dialect)
  model.core.pt2   the same after run_decompositions() (Core ATen)
  input_0.npy      the input, expected_0.npy PyTorch eager's output on it
  meta.json        family, parameters, input shape, each form's op counts, seconds taken;
                   or "export_error" when PyTorch itself cannot export the model
Models already in OUT (meta.json written) are kept: a run adds what is missing.

  make-zoo.py OUT [--set ci|all] [--family torchvision] [--jobs N] [NAME ...]

--set ci (the default) is one model or two per architecture family, what CI runs; --set all
is every model (the largest, up to 645M parameters, need about 8 GB of memory and 3 GB of
disk each). Run with the reference environment's python (scripts/python-env.sh prints it).
"""
import argparse
import concurrent.futures
import json
import os
import sys
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_layers import op_counts  # noqa: E402

# One model or two per torchvision architecture family: the blocks every other member is
# built from (the larger members differ in widths and depths).
TORCHVISION_CI = [
    "alexnet", "convnext_tiny", "densenet121", "efficientnet_b0", "efficientnet_v2_s",
    "googlenet", "inception_v3", "maxvit_t", "mnasnet0_5", "mobilenet_v2",
    "mobilenet_v3_small", "regnet_x_400mf", "regnet_y_400mf", "resnet18", "resnext50_32x4d",
    "shufflenet_v2_x0_5", "squeezenet1_1", "swin_t", "swin_v2_t", "vgg11_bn", "vit_b_32",
    "deeplabv3_mobilenet_v3_large", "fcn_resnet50", "lraspp_mobilenet_v3_large",
]

# Input sizes where 64x64 does not work: models with a minimum size or a fixed grid.
SIZES = {"inception_v3": 96, "maxvit_t": 224}
# Constructor arguments: the ViTs take their image size (a 64x64 grid of 16 or 32 pixel
# patches, 56x56 of 14).
KWARGS = {"vit_b_16": {"image_size": 64}, "vit_b_32": {"image_size": 64},
          "vit_l_16": {"image_size": 64}, "vit_l_32": {"image_size": 64},
          "vit_h_14": {"image_size": 56}}
SIZES.update({"vit_h_14": 56})


class SegmentationOut(torch.nn.Module):
    """A segmentation model's "out" tensor (the models return a dict)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def torchvision_models(selection):
    import torchvision
    classification = torchvision.models.list_models(module=torchvision.models)
    segmentation = torchvision.models.list_models(module=torchvision.models.segmentation)
    names = classification + segmentation
    if selection == "ci":
        names = [n for n in names if n in TORCHVISION_CI]
    out = []
    for name in names:
        def build(name=name):
            kwargs = dict(KWARGS.get(name, {}))
            if name in segmentation:
                m = torchvision.models.get_model(name, weights=None, weights_backbone=None,
                                                 **kwargs)
                return SegmentationOut(m)
            if name in ("googlenet", "inception_v3"):
                kwargs.update(aux_logits=False, init_weights=True)
            return torchvision.models.get_model(name, weights=None, **kwargs)
        out.append((name, build, SIZES.get(name, 64)))
    return out


FAMILIES = {"torchvision": torchvision_models}


def export_one(family, name, build, size, out_dir):
    torch.manual_seed(0)
    meta = {"family": family, "name": name, "torch": torch.__version__}
    start = time.perf_counter()
    try:
        model = build().eval()
        # Parameters a model initialises to zero (ViT's head) would make its output zero and
        # the comparison empty: they get small random values.
        with torch.no_grad():
            for param in model.parameters():
                if param.numel() > 1 and not torch.any(param):
                    param.normal_(0.0, 0.02)
        x = torch.randn(1, 3, size, size)
        with torch.no_grad():
            expected = model(x)
            ep = torch.export.export(model, (x,))
            core = ep.run_decompositions()
        os.makedirs(out_dir, exist_ok=True)
        torch.export.save(ep, os.path.join(out_dir, "model.pt2"))
        torch.export.save(core, os.path.join(out_dir, "model.core.pt2"))
        np.save(os.path.join(out_dir, "input_0.npy"), x.numpy())
        np.save(os.path.join(out_dir, "expected_0.npy"), expected.detach().numpy())
        meta.update({
            "parameters": sum(p.numel() for p in model.parameters()),
            "input": [1, 3, size, size],
            "output": list(expected.shape),
            "ops": {"model.pt2": op_counts(ep), "model.core.pt2": op_counts(core)},
        })
    except Exception as e:  # noqa: BLE001 -- what PyTorch cannot export is recorded, not fatal
        os.makedirs(out_dir, exist_ok=True)
        meta["export_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300])
        traceback.print_exc()
    meta["seconds"] = round(time.perf_counter() - start, 1)
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    return meta


def export_by_name(family, name, out_dir, threads):
    """export_one in a worker process (one model per process: memory goes back after each)."""
    torch.set_num_threads(threads)
    for n, build, size in FAMILIES[family]("all"):
        if n == name:
            return export_one(family, name, build, size, out_dir)
    raise KeyError(name)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--set", choices=["ci", "all"], default="ci")
    p.add_argument("--family", choices=sorted(FAMILIES), action="append")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("names", nargs="*")
    args = p.parse_args()
    todo = []
    for family in args.family or sorted(FAMILIES):
        for name, _, _ in FAMILIES[family]("all" if args.names else args.set):
            if args.names and name not in args.names:
                continue
            d = os.path.join(args.out, family, name)
            if not os.path.exists(os.path.join(d, "meta.json")):
                todo.append((family, name, d))
    threads = max(1, (os.cpu_count() or 1) // max(1, args.jobs))
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs),
                                                max_tasks_per_child=1) as pool:
        futures = {pool.submit(export_by_name, f, n, d, threads): (f, n) for f, n, d in todo}
        for fut in concurrent.futures.as_completed(futures):
            family, name = futures[fut]
            meta = fut.result()
            status = meta.get("export_error", "exported")
            print("make-zoo: %s/%s (%s s): %s" % (family, name, meta["seconds"], status),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
