"""etc.load and Module.run: outputs against PyTorch eager and `etc run`, inputs as NumPy
arrays and torch tensors, one copy each way and no more, and each bad call the documented
exception naming the input."""
import json

import numpy as np
import pytest

import etc
from conftest import fixture_expected, fixture_inputs

RTOL, ATOL = 1e-4, 1e-4  # of the output's scale, as test/torch/torch_models_test.py


def close(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = float(np.abs(want).max(initial=0.0))
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= RTOL * np.abs(want) + ATOL * scale))


@pytest.mark.parametrize("target", ["cpu", "cuda:0"])
@pytest.mark.parametrize("name", ["add_mul", "conv1d", "linear", "movement", "mobilenet_v3_small"])
def test_matches_pytorch_eager(torch_fixtures, name, target):
    folder = torch_fixtures / name
    prog = etc.export(folder / "model.pt2", target=target)
    m = etc.load(prog.to_bytes(), device="cpu")  # a cuda:0 program: its delegate on the CPU reference
    outs = m.run(*fixture_inputs(folder))
    want = fixture_expected(folder)
    assert len(outs) == len(want)
    for o, w in zip(outs, want):
        assert isinstance(o, np.ndarray)
        assert close(o, w), f"{name}: max abs error {np.abs(o - w).max():.3g}"


def test_torch_tensors_in_torch_tensors_out(torch_fixtures):
    torch = pytest.importorskip("torch")
    folder = torch_fixtures / "add_mul"
    m = etc.load(etc.export(folder / "model.pt2", target="cpu"), device="cpu")
    arrays = fixture_inputs(folder)
    from_numpy = m.run(*arrays)
    from_torch = m.run(*[torch.from_numpy(a) for a in arrays])
    assert all(isinstance(t, torch.Tensor) for t in from_torch)
    for t, a in zip(from_torch, from_numpy):
        assert t.dtype == torch.float32 and np.array_equal(t.numpy(), a)


def test_outputs_equal_etc_run(tmp_path, torch_fixtures, cli):
    folder = torch_fixtures / "conv1d"
    pte = tmp_path / "m.pte"
    etc.export(folder / "model.pt2", pte, target="cuda:0")
    inputs = fixture_inputs(folder)
    args = []
    for i, a in enumerate(inputs):
        np.save(tmp_path / f"in{i}.npy", a)
        args += ["--input", f"{i}={tmp_path / f'in{i}.npy'}"]
    cli("run", pte, "--device", "cpu", "--output-dir", tmp_path / "out", *args)
    outs = etc.load(pte, device="cpu").run(*inputs)
    for i, o in enumerate(outs):
        assert np.array_equal(o, np.load(tmp_path / "out" / f"output_{i}.npy"))  # bit for bit


def test_one_copy_each_way(torch_fixtures):
    folder = torch_fixtures / "add"
    m = etc.load(etc.export(folder / "model.pt2", target="cpu"), device="cpu")
    x, y = fixture_inputs(folder)
    out1 = m.run(x, y)
    s = m.stats()
    # Each input read in place from the caller's array into its planned memory: one copy;
    # each output copied once into the array handed back; nothing converted.
    assert s["inputs_copied"] == 2 and s["input_bytes_copied"] == x.nbytes + y.nbytes
    assert s["outputs_copied"] == len(out1)
    assert s["output_bytes_copied"] == sum(o.nbytes for o in out1)
    assert s["conversions"] == 0 and s["inputs_uploaded"] == 0
    # Outputs own their memory: a second run with other inputs leaves the first's alone.
    first = [o.copy() for o in out1]
    out2 = m.run(x * 2, y)
    for a, b, c in zip(out1, first, out2):
        assert np.array_equal(a, b) and not np.shares_memory(a, c)
        assert a.flags.writeable
    # A transposed (non-contiguous) view is made contiguous once, and counted.
    xt = np.ascontiguousarray(x.T).T
    assert not xt.flags.c_contiguous
    out3 = m.run(xt, y)
    assert m.stats()["conversions"] == 1
    for a, b in zip(out3, out1):
        assert np.array_equal(a, b)


def test_inputs_by_name(torch_fixtures):
    folder = torch_fixtures / "add"
    m = etc.load(etc.export(folder / "model.pt2", target="cpu"), device="cpu")
    names = [i.name for i in m.inputs]
    x, y = fixture_inputs(folder)
    by_position = m.run(x, y)
    by_name = m.run(**{names[1]: y, names[0]: x})
    for a, b in zip(by_position, by_name):
        assert np.array_equal(a, b)
    assert m.inputs[0].dtype == "float32" and m.inputs[0].shape == x.shape
    assert m.device == "cpu" and m(x, y)[0].shape == by_position[0].shape


def test_bad_inputs_name_the_input(torch_fixtures):
    folder = torch_fixtures / "add"
    m = etc.load(etc.export(folder / "model.pt2", target="cpu"), device="cpu")
    x, y = fixture_inputs(folder)
    name = m.inputs[1].name
    with pytest.raises(etc.InputError, match=rf"input 1 \({name}\) must be float32\[.*\], got float64"):
        m.run(x, y.astype(np.float64))
    with pytest.raises(etc.InputError, match=r"input 0 .* must be float32\[.*\], got float32\[1\]"):
        m.run(np.zeros(1, np.float32), y)
    with pytest.raises(etc.InputError, match="takes 2 inputs, 3 given"):
        m.run(x, y, y)
    with pytest.raises(etc.InputError, match="missing input"):
        m.run(x)
    with pytest.raises(etc.InputError, match="no input named 'nope'"):
        m.run(x, nope=y)
    with pytest.raises(ValueError):  # InputError is a ValueError too
        m.run(x, y[:1])
    assert np.array_equal(m.run(x, y)[0], m.run(x, y)[0])  # still usable after errors


def test_bfloat16_inputs_and_outputs(tmp_path):
    torch = pytest.importorskip("torch")

    class Scale(torch.nn.Module):
        def forward(self, x):
            return x * 3 + 1

    x = torch.randn(4, 8, dtype=torch.bfloat16)
    ep = torch.export.export(Scale(), (x,))
    m = etc.load(etc.export(ep, target="cpu"), device="cpu")
    assert m.inputs[0].dtype == "bfloat16" and m.outputs[0].dtype == "bfloat16"
    want = Scale()(x)
    got_t = m.run(x)[0]  # torch bfloat16 in, torch bfloat16 out
    assert got_t.dtype == torch.bfloat16 and torch.equal(got_t, want)
    got_np = m.run(x.float().numpy())[0]  # float32 in (rounded), float32 out (widened exactly)
    assert got_np.dtype == np.float32 and np.array_equal(got_np, want.float().numpy())
    assert m.stats()["conversions"] == 1


def test_corrupt_programs_raise_program_error(tmp_path, source):
    prog = etc.export(source / "examples" / "mlp.json", tmp_path / "m.pte", target="cpu")
    data = bytearray(prog.to_bytes())
    with pytest.raises(etc.ProgramError) as info:
        etc.load(bytes(data[: len(data) // 2]), device="cpu")
    assert info.value.exit_code == 1 and "<bytes>" in info.value.message
    data[4:8] = b"XXXX"  # the FlatBuffers file identifier
    (tmp_path / "bad.pte").write_bytes(bytes(data))
    with pytest.raises(etc.ProgramError) as info:
        etc.load(tmp_path / "bad.pte", device="cpu")
    assert "bad.pte" in info.value.message
    with pytest.raises(etc.ProgramError):
        etc.load(source / "examples" / "mlp.json", device="cpu")
    with pytest.raises(etc.ProgramError, match="missing.pte"):
        etc.load(tmp_path / "missing.pte", device="cpu")


def test_devices(tmp_path, source):
    prog = etc.export(source / "examples" / "cnn.json", tmp_path / "m.pte", target="cuda:0")
    with pytest.raises(etc.DeviceUnavailableError, match="cuda:99") as info:
        etc.load(prog, device="cuda:99")
    assert info.value.exit_code == 4
    with pytest.raises(etc.UsageError, match="device="):
        etc.load(prog, device="tpu")
    m = etc.load(prog, device="auto")
    assert m.device in ("cpu", "cuda:0") and m.device_note.startswith("device= auto")
    if not etc.cuda_built():
        with pytest.raises(etc.DeviceUnavailableError, match="built without CUDA"):
            etc.load(prog, device="cuda:0")


def test_build_info():
    info = etc.build_info()
    assert info.startswith(f"etc {etc.__version__}\n") and "CPU kernels" in info
    assert ("CUDA support: built in" in info) == etc.cuda_built()
