"""etc.export: the same bytes as `etc export` from every kind of model, the report as
objects, and each failure the documented exception with etc's message."""
import json

import numpy as np
import pytest

import etc

EXAMPLES = ["mlp", "cnn", "transformer_block"]


@pytest.mark.parametrize("target", ["cpu", "cuda:0"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_json_model_matches_cli_bytes_and_report(tmp_path, source, cli, name, target):
    model = source / "examples" / f"{name}.json"
    prog = etc.export(model, tmp_path / "py.pte", target=target)
    cli("export", model, "-o", tmp_path / "cli.pte", "--target", target, "--report", tmp_path / "r.json")
    assert (tmp_path / "py.pte").read_bytes() == (tmp_path / "cli.pte").read_bytes()
    assert prog.size == (tmp_path / "cli.pte").stat().st_size
    assert prog.path == str(tmp_path / "py.pte")
    assert prog.report.to_dict() == json.loads((tmp_path / "r.json").read_text())


def test_report_reads_as_objects(tmp_path, source):
    prog = etc.export(source / "examples" / "cnn.json", tmp_path / "a.pte", target="cuda:0")
    r = prog.report
    # cnn: one partition on cuda:0, the image uploaded and the result downloaded.
    assert len(r.partitions) == 1 and r.partitions[0].device == "cuda:0"
    assert r.copies.h2d == 1 and r.copies.d2h == 1
    assert r["copies"]["list"][0]["source"] == "image"
    assert sum(m.planned_bytes for m in r.memory) > 0
    with pytest.raises(AttributeError, match="no field 'nope'"):
        r.nope


def test_in_memory_and_from_bytes_equal_the_file(tmp_path, source, cli):
    model = source / "examples" / "mlp.json"
    cli("export", model, "-o", tmp_path / "cli.pte", "--target", "cpu")
    want = (tmp_path / "cli.pte").read_bytes()
    prog = etc.export(model, target="cpu")  # no path: kept in memory
    assert prog.path is None and prog.to_bytes() == want
    # A JSON model whose weights sit in a file next to it reads from its own folder; bytes
    # of a self-contained model (an ONNX model, a .pt2 archive) are complete.


def test_pt2_archive_matches_cli(tmp_path, torch_fixtures, cli):
    model = torch_fixtures / "add_mul" / "model.pt2"
    prog = etc.export(model, tmp_path / "py.pte", target="cuda:0")
    cli("export", model, "-o", tmp_path / "cli.pte", "--target", "cuda:0")
    assert (tmp_path / "py.pte").read_bytes() == (tmp_path / "cli.pte").read_bytes()
    from_bytes = etc.export(model.read_bytes(), target="cuda:0")
    assert from_bytes.to_bytes() == (tmp_path / "cli.pte").read_bytes()
    assert prog.dynamic_dims == ""


def test_onnx_model_matches_cli(tmp_path, torch_fixtures, cli):
    model = torch_fixtures / "mobilenet_v3_small" / "model.onnx"
    etc.export(model, tmp_path / "py.pte", target="cpu")
    cli("export", model, "-o", tmp_path / "cli.pte", "--target", "cpu")
    assert (tmp_path / "py.pte").read_bytes() == (tmp_path / "cli.pte").read_bytes()
    assert etc.export(model.read_bytes(), target="cpu").to_bytes() == (tmp_path / "cli.pte").read_bytes()


def test_exported_program_in_memory(tmp_path, cli):
    torch = pytest.importorskip("torch")

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 8)

        def forward(self, x, y):
            return torch.relu(self.fc(x)) * torch.sigmoid(y), x.sum(dim=1)

    torch.manual_seed(0)
    module = Block().eval()
    x, y = torch.randn(4, 16), torch.randn(4, 8)
    ep = torch.export.export(module, (x, y))
    prog = etc.export(ep, tmp_path / "py.pte", target="cpu")
    torch.export.save(ep, tmp_path / "saved.pt2")
    cli("export", tmp_path / "saved.pt2", "-o", tmp_path / "cli.pte", "--target", "cpu")
    assert (tmp_path / "py.pte").read_bytes() == (tmp_path / "cli.pte").read_bytes()
    got = etc.load(prog, device="cpu").run(x, y)
    want = module(x, y)
    assert all(isinstance(g, torch.Tensor) for g in got)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w.detach(), rtol=1e-5, atol=1e-5)


def test_unsupported_operator_lists_the_ops(tmp_path):
    torch = pytest.importorskip("torch")

    class Spectrum(torch.nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs() + x[..., :5]

    ep = torch.export.export(Spectrum(), (torch.randn(2, 8),))
    out = tmp_path / "never.pte"
    with pytest.raises(etc.UnsupportedOperatorError) as info:
        etc.export(ep, out, target="cpu")
    e = info.value
    assert e.ops == ["aten.fft_rfft.default"]
    assert isinstance(e, etc.ExportError) and isinstance(e, etc.Error)
    assert e.exit_code == 1 and e.code == "unsupported"
    assert "cannot import" in e.message and "aten.fft_rfft.default" in str(e)
    assert not out.exists()  # no partial output


def test_export_errors(tmp_path, source):
    with pytest.raises(etc.ExportError) as info:
        etc.export(tmp_path / "missing.onnx", tmp_path / "a.pte")
    assert "missing.onnx" in info.value.message and info.value.exit_code == 1
    with pytest.raises(etc.UsageError, match="target="):
        etc.export(source / "examples" / "mlp.json", tmp_path / "a.pte", target="gpu")
    with pytest.raises(etc.UsageError, match="io_device"):
        etc.export(source / "examples" / "mlp.json", tmp_path / "a.pte", io_device="both")
    with pytest.raises(etc.UsageError, match="cannot export a dict"):
        etc.export({"not": "a model"}, tmp_path / "a.pte")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "etc.graph", "version": 1, "nodes": [')
    with pytest.raises(etc.ExportError) as info:
        etc.export(bad, tmp_path / "a.pte")
    assert "bad.json" in info.value.message
    assert not (tmp_path / "a.pte").exists()


def test_export_of_nn_module_says_what_to_do(tmp_path):
    torch = pytest.importorskip("torch")
    with pytest.raises(etc.UsageError, match="torch.export.export"):
        etc.export(torch.nn.Linear(2, 2), tmp_path / "a.pte")


def test_short_export_draws_no_progress(tmp_path, source, capfd):
    etc.export(source / "examples" / "mlp.json", tmp_path / "a.pte", progress=True)
    assert capfd.readouterr().err == ""
