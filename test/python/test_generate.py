"""Module.generate: a decoder with a KV cache generates PyTorch eager's greedy ids."""
import json

import numpy as np
import pytest

import etc


@pytest.mark.parametrize("form", ["model", "model.core"])
def test_llama_decoder_generates_pytorch_ids(decoder_fixtures, form):
    folder = decoder_fixtures / "llama_decoder"
    meta = json.loads((folder / "meta.json").read_text())
    prompt = np.load(folder / "prompt.npy")
    want_ids = np.load(folder / "expected_ids.npy")
    want_logits = np.load(folder / "expected_logits.npy")
    steps = meta["steps"]
    assert steps >= 16
    m = etc.load(etc.export(folder / f"{form}.pt2", target="cpu"), device="cpu")
    ids, logits = m.generate(prompt, steps, return_logits=True)
    assert ids.dtype == np.int64 and ids.tolist() == want_ids.tolist()
    tol = 1e-4 * max(1.0, float(np.abs(want_logits).max()))
    assert logits.shape == want_logits.shape and float(np.abs(logits - want_logits).max()) <= tol
    # Again: every generation starts from the initial state.
    assert m.generate(prompt, steps).tolist() == want_ids.tolist()


def test_torch_prompt_gives_torch_ids(decoder_fixtures):
    torch = pytest.importorskip("torch")
    folder = decoder_fixtures / "llama_decoder"
    want = np.load(folder / "expected_ids.npy")
    m = etc.load(etc.export(folder / "model.pt2", target="cpu"), device="cpu")
    ids = m.generate(torch.from_numpy(np.load(folder / "prompt.npy")), 16)
    assert isinstance(ids, torch.Tensor) and ids.tolist() == want[:16].tolist()


def test_generate_needs_a_decoder(source, tmp_path):
    m = etc.load(etc.export(source / "examples" / "mlp.json", target="cpu"), device="cpu")
    with pytest.raises(etc.InputError, match="decoder program"):
        m.generate(np.array([1, 2], np.int64), 4)
    folder_prompt = np.array([[1.5, 2.5]], np.float32)
    with pytest.raises((etc.InputError, etc.UsageError)):
        m.generate(folder_prompt, 0)
