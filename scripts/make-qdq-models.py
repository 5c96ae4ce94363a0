#!/usr/bin/env python3
"""Writes the QDQ quantized ONNX models etc's quantization test runs (test/onnx/qdq_models_test.py).

For each torchvision model (resnet18, mobilenet_v2; weights from a fixed seed, nothing is
downloaded), into OUT/:
  NAME.onnx        the float model, torch.onnx.export (TorchScript exporter, opset 17)
  NAME.pc.onnx     quantized by ONNX Runtime's own tool: onnxruntime.quantization's
                   quant_pre_process, then quantize_static in QDQ format (activations uint8,
                   weights int8), per-channel weights
  NAME.pt.onnx     the same with per-tensor weights
Randomly initialised networks are nearly degenerate (mobilenet_v2's logits come out ~1e-9),
so each model's BatchNorm statistics are first set from 4 seeded random batches (train-mode
forward passes, cumulative averages): every layer then sees unit-scale activations, as a
trained network does. Calibration: 8 batches of seeded standard-normal images (1x3x224x224).

Run with the reference environment's python (scripts/python-env.sh prints it).

  make-qdq-models.py OUT
"""
import os
import sys
import warnings

import numpy as np
import torch
import torchvision
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process

MODELS = ["resnet18", "mobilenet_v2"]
SHAPE = (1, 3, 224, 224)


class Calibration(CalibrationDataReader):
    def __init__(self, n=8):
        rng = np.random.default_rng(0)
        self.batches = [{"x": rng.standard_normal(SHAPE, dtype=np.float32)} for _ in range(n)]

    def get_next(self):
        return self.batches.pop(0) if self.batches else None


def main(out):
    os.makedirs(out, exist_ok=True)
    warnings.simplefilter("ignore", DeprecationWarning)
    for name in MODELS:
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)()
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.momentum = None  # cumulative average of the batches' statistics
        model.train()
        with torch.no_grad():
            for _ in range(4):
                model(torch.randn(8, *SHAPE[1:]))
        model.eval()
        path = os.path.join(out, f"{name}.onnx")
        torch.onnx.export(model, (torch.randn(SHAPE),), path, dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"])
        pre = os.path.join(out, f"{name}.pre.onnx")
        quant_pre_process(path, pre)
        for tag, per_channel in (("pc", True), ("pt", False)):
            quantize_static(pre, os.path.join(out, f"{name}.{tag}.onnx"), Calibration(),
                            quant_format=QuantFormat.QDQ, per_channel=per_channel,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        os.remove(pre)
        print(f"{name}: float and QDQ (per-channel, per-tensor) models written", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
