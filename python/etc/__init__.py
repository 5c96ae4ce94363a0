"""etc: an ahead-of-time compiler and runtime for machine-learning programs, from Python.

    import etc
    prog = etc.export(ep, "model.pte", target="cuda:0")  # ExportedProgram, .pt2/.onnx/.json path, or bytes
    print(prog.report.copies.h2d)                        # the export report, as objects
    m = etc.load("model.pte", device="cpu")              # or "cuda:0", or "auto"
    out = m.run(x, pos)                                  # numpy arrays or torch tensors in, the same kind out
    ids = m.generate(prompt_ids, steps=32)               # decoders with state

The package wraps the same library calls as the ``etc`` command (which it also installs):
``etc.export`` is ``etc export``, ``Module.run`` is ``etc run``; the programs are
byte-for-byte the ones the CLI writes. Errors are :class:`etc.Error` subclasses carrying etc's
located message (see ``etc._errors``). docs/python.md has the whole guide.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from . import _convert, _etc
from ._errors import (
    DeviceUnavailableError,
    Error,
    ExportError,
    InputError,
    InternalError,
    ProgramError,
    RunError,
    UnsupportedOperatorError,
    UsageError,
)

__version__: str = _etc.__version__

__all__ = [
    "export",
    "load",
    "Program",
    "Module",
    "Report",
    "TensorInfo",
    "cuda_built",
    "build_info",
    "num_threads",
    "set_num_threads",
    "Error",
    "ExportError",
    "UnsupportedOperatorError",
    "ProgramError",
    "InputError",
    "RunError",
    "UsageError",
    "DeviceUnavailableError",
    "InternalError",
]

PathLike = Union[str, "os.PathLike[str]"]


def cuda_built() -> bool:
    """Whether this etc was built with CUDA support (a GPU may still be absent)."""
    return bool(_etc.cuda_built)


def build_info() -> str:
    """What this etc runs on: CPU kernels, oneDNN, CUDA support, the driver and each GPU."""
    return f"etc {__version__}\n" + _etc.describe_runtimes()


def num_threads() -> int:
    """The CPU threads etc's kernels use."""
    return _etc.num_threads()


def set_num_threads(n: int) -> None:
    """Sets the CPU threads etc's kernels use (0: every core). Process-wide, like ``etc run --threads``."""
    if n < 0:
        raise UsageError("set_num_threads: n must be >= 0 (0: every core)", "usage", 2)
    _etc.set_num_threads(n)


# ---- export --------------------------------------------------------------------------------


class Report(Mapping):
    """The export report (what ``etc export --report FILE.json`` writes), readable as objects.

    ``report.copies.h2d``, ``report.partitions[0].nodes``, ``report["memory"]``; nested
    objects are Reports, lists are lists. ``to_dict()`` gives the plain JSON data.
    """

    def __init__(self, data: Mapping[str, Any]):
        self._data = dict(data)

    @staticmethod
    def _wrap(v: Any) -> Any:
        if isinstance(v, Mapping):
            return Report(v)
        if isinstance(v, list):
            return [Report._wrap(x) for x in v]
        return v

    def __getitem__(self, key: str) -> Any:
        return self._wrap(self._data[key])

    def __getattr__(self, name: str) -> Any:
        try:
            return self._wrap(self._data[name])
        except KeyError:
            raise AttributeError(f"the report has no field '{name}' (fields: {', '.join(self._data)})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Report({json.dumps(self._data)[:200]})"

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._data))


class Program:
    """A program ``etc.export`` wrote: where, how large, and its export report."""

    def __init__(self, path: Optional[str], data: Optional[bytes], info: Mapping[str, Any]):
        self.path: Optional[str] = path
        self._data = data
        self.size: int = int(info["size"])
        self.report: Report = Report(json.loads(info["report_json"]))
        self.summary: str = info["summary"]
        self.dynamic_dims: str = info["dynamic_dims"]

    def to_bytes(self) -> bytes:
        """The .pte bytes."""
        if self._data is not None:
            return self._data
        return Path(self.path).read_bytes()

    def load(self, device: str = "auto") -> "Module":
        """Loads this program to run (``etc.load``)."""
        return load(self.path if self.path is not None else self.to_bytes(), device=device)

    def __repr__(self) -> str:
        where = self.path if self.path is not None else "in memory"
        return f"<etc.Program {where}, {self.size} bytes>"


def _model_file(model: Any, tmp: str) -> str:
    """A file holding ``model``: its own path, or one written into ``tmp``."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        # The format is told by the content (etc's importers check it again).
        suffix = ".pt2" if data[:2] == b"PK" else ".json" if data.lstrip()[:1] == b"{" else ".onnx"
        path = os.path.join(tmp, "model" + suffix)
        Path(path).write_bytes(data)
        return path
    torch = _convert.torch_module()
    if torch is not None and isinstance(model, torch.export.ExportedProgram):
        path = os.path.join(tmp, "model.pt2")
        torch.export.save(model, path)
        return path
    if torch is not None and isinstance(model, torch.nn.Module):
        raise UsageError(
            "etc.export takes a torch.export.ExportedProgram, not an nn.Module: "
            "export it first, ep = torch.export.export(module, example_inputs)", "usage", 2)
    raise UsageError(
        f"etc.export: cannot export a {type(model).__name__}; give a torch.export.ExportedProgram, "
        "a path to a .pt2 archive, ONNX model or etc.graph JSON, or such a file's bytes", "usage", 2)


def export(
    model: Any,
    path: Optional[PathLike] = None,
    *,
    target: str = "cuda:0",
    io_device: str = "host",
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    absent_inputs: Sequence[str] = (),
    max_copies: Optional[int] = None,
    progress: Optional[bool] = None,
) -> Program:
    """Compiles ``model`` into a .pte program, as ``etc export`` does.

    Args:
        model: a ``torch.export.ExportedProgram``, a path to a ``.pt2`` archive, an ONNX model
            or an etc.graph JSON file, or the bytes of one.
        path: where to write the program; ``None`` keeps it in memory (``Program.to_bytes()``).
        target: ``"cuda:N"`` (the CUDA delegate takes what it can) or ``"cpu"``.
        io_device: ``"host"`` (inputs and outputs in host memory) or ``"device"``.
        input_shapes: sizes for inputs with symbolic dims, ``{"x": [1, 3, 224, 224]}``.
        absent_inputs: ONNX optional inputs given as absent.
        max_copies: refuse programs needing more host<->device copies per run.
        progress: draw a progress line on stderr for exports longer than a second; the
            default draws it when stderr is a terminal.

    Raises:
        UnsupportedOperatorError: the model uses operators etc cannot import (``.ops``).
        ExportError: any other reason the model cannot be compiled.
        UsageError: a malformed argument.
    """
    if progress is None:
        progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
    shapes = {str(k): [int(d) for d in v] for k, v in (input_shapes or {}).items()}
    with tempfile.TemporaryDirectory(prefix="etc-export-") as tmp:
        model_path = _model_file(model, tmp)
        out = os.fspath(path) if path is not None else os.path.join(tmp, "program.pte")
        info = _etc.export_program(model_path, out, target, io_device, shapes,
                                   [str(a) for a in absent_inputs],
                                   -1 if max_copies is None else int(max_copies), progress)
        data = Path(out).read_bytes() if path is None else None
    return Program(out if path is not None else None, data, info)


# ---- running -------------------------------------------------------------------------------


class TensorInfo:
    """One input or output of a program: name, dtype, shape (the bound of a dynamic input), device."""

    def __init__(self, d: Mapping[str, Any]):
        self.name: str = d["name"]
        self.dtype: str = d["dtype"]
        self.shape: tuple[int, ...] = tuple(d["shape"])
        self.dynamic: bool = bool(d.get("dynamic", False))
        self.device: str = d["device"]

    def __repr__(self) -> str:
        dyn = " (dynamic-bound)" if self.dynamic else ""
        return f"TensorInfo({self.name!r}, {self.dtype}{list(self.shape)}{dyn}, {self.device})"


class Module:
    """A loaded program (``etc.load``): call ``run`` (or the module itself) and ``generate``.

    One call runs at a time (calls from several threads wait for each other); the
    interpreter lock is released while etc runs.
    """

    def __init__(self, native: Any):
        self._p = native
        self.inputs: list[TensorInfo] = [TensorInfo(d) for d in native.inputs()]
        self.outputs: list[TensorInfo] = [TensorInfo(d) for d in native.outputs()]
        self.device: str = native.device
        #: Why ``device="auto"`` chose what it chose (empty for a named device).
        self.device_note: str = native.note
        self._conversions = 0

    def _order(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
        n = len(self.inputs)
        if len(args) > n:
            raise InputError(f"the program takes {n} inputs, {len(args)} given", "invalid input", 1)
        given: list[Any] = list(args) + [None] * (n - len(args))
        names = [i.name for i in self.inputs]
        for key, value in kwargs.items():
            if key not in names:
                raise InputError(f"the program has no input named '{key}' (inputs: {', '.join(names)})",
                                 "invalid input", 1)
            k = names.index(key)
            if k < len(args):
                raise InputError(f"input {k} ({key}) given twice", "invalid input", 1)
            given[k] = value
        missing = [f"{k} ({names[k]})" if names[k] else str(k) for k, v in enumerate(given) if v is None]
        if missing:
            raise InputError(f"missing input(s) {', '.join(missing)}", "invalid input", 1)
        return given

    def run(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Runs the program once and returns its outputs, in order.

        Inputs go by position or by name; NumPy arrays, torch tensors (CPU), or anything with
        ``__dlpack__``. Outputs are NumPy arrays, or torch tensors when any input was one.
        A float32 array feeds a bfloat16 input (rounded to nearest even, as ``etc run`` does).

        Raises:
            InputError: an input's dtype, shape, device or count does not fit (the message
                names the input).
            RunError: the run failed.
        """
        given = self._order(args, kwargs)
        want_torch = any(_convert.is_torch_tensor(x) for x in given)
        arrays = []
        for x in given:
            a, converted = _convert.as_input(x)
            self._conversions += converted
            arrays.append(a)
        outs = self._p.run(arrays)  # the native module runs one call at a time
        return [_convert.as_output(o, info.dtype, want_torch) for o, info in zip(outs, self.outputs)]

    __call__ = run

    def generate(self, prompt: Any, steps: int = 32, *held: Any, return_logits: bool = False) -> Any:
        """Greedy decoding with a decoder program that has state (a KV cache).

        The program takes token ids ``[1, 1]`` (or ``[1, n]`` dynamic-bound) and positions, then
        any inputs held for every call (``held``, e.g. an encoder's output), and returns logits
        as output 0. ``prompt`` is int64 or int32 token ids ``[n]`` or ``[1, n]``.

        Returns:
            the ``steps`` generated ids (int64, NumPy or torch like ``prompt``), and with
            ``return_logits`` also the logits rows computed (float32 ``[rows, vocab]``).
        """
        want_torch = _convert.is_torch_tensor(prompt)
        p, _ = _convert.as_input(prompt)
        hs = []
        for x in held:
            a, converted = _convert.as_input(x)
            self._conversions += converted
            hs.append(a)
        ids, logits = self._p.generate(p, int(steps), hs)
        ids = _convert.as_output(ids, "int64", want_torch)
        if return_logits:
            return ids, _convert.as_output(logits, "float32", want_torch)
        return ids

    def stats(self) -> dict[str, int]:
        """What crossed between your arrays and the program's memory so far.

        ``inputs_copied``/``input_bytes_copied``: inputs copied into the program's planned
        memory (one copy each, read in place from your array); ``inputs_uploaded``: copies to
        a device; ``outputs_copied``/``output_bytes_copied``: outputs copied into the arrays
        returned; ``conversions``: inputs that first had to be made contiguous or converted
        (float32 rounded to a bfloat16 input counts too).
        """
        s = dict(self._p.stats())
        s["conversions"] += self._conversions
        return s

    def __repr__(self) -> str:
        return f"<etc.Module on {self.device}: {len(self.inputs)} inputs, {len(self.outputs)} outputs>"


def load(program: Union[PathLike, bytes, Program], device: str = "auto") -> Module:
    """Loads a .pte program to run.

    Args:
        program: a path, the program's bytes, or a :class:`Program` from ``etc.export``.
        device: ``"auto"`` (the first usable GPU, else the CPU; ``Module.device_note`` says
            why), ``"cpu"`` or ``"cuda:N"``.

    Raises:
        ProgramError: the file is not a program etc can load (the message says where).
        DeviceUnavailableError: the device is not there, or CUDA support is not built in.
    """
    if isinstance(program, Program):
        return program.load(device)
    if isinstance(program, (bytes, bytearray, memoryview)):
        return Module(_etc.Program.load_bytes(bytes(program), device))
    return Module(_etc.Program.load_file(os.fspath(program), device))
