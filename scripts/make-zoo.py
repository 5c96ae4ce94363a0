#!/usr/bin/env python3
"""Exports the model zoos etc's coverage is counted on, from the pinned PyPI packages with
random weights (nothing is downloaded).

Families:
  torchvision   every classification model torchvision.models.list_models() lists and the
                segmentation models of torchvision.models.segmentation (weights=None,
                weights_backbone=None), at a small input size
  transformers  Hugging Face transformers models built from tiny config objects (hidden 64,
                2 layers, vocabulary 1000; never from_pretrained):
                decoders   causal LMs wrapped as ExecuTorch's LLM users export them,
                           convert_and_export_with_cache (TorchExportableModuleWithStaticCache,
                           a static KV cache of MAX_CACHE positions in registered buffers,
                           torch.export strict): forward(input_ids [1, 1], cache_position [1])
                           -> logits [1, 1, 1000]
                encoders   text (BERT family, T5's encoder: token ids [1, 16]), vision (ViT
                           family: pixels [1, 3, 32, 32]) and speech (Wav2Vec2 family: samples
                           [1, 4000]; Whisper's encoder: log-mel [1, 16, 64]) models' last
                           hidden state

Weights are PyTorch's (or transformers') default initialisation from a fixed seed, the
decoders' with initializer_range 0.1 (the greedy choice then wins by a clear margin: at 0.02
the top two logits of these tiny models are often within 1e-4); parameters initialised to
zero (ViT's classification head, biases) are drawn from N(0, 0.02) so that none is trivially
zero. For each model, into OUT/FAMILY/NAME/:
  model.pt2        torch.export.export(...) (the default, TRAINING dialect; the decoders'
                   KV-cache writes are in-place index_copy_ on the buffers)
  model.core.pt2   the same after run_decompositions() (Core ATen)
  input_0.npy      the input, expected_0.npy PyTorch eager's output on it; or, for a decoder,
  prompt.npy       PROMPT token ids (int64), expected_ids.npy the eager wrapper's greedy ids for
                   STEPS tokens (the prompt fed one token per call, as `etc run --prompt`
                   does), expected_logits.npy its logits of every call [PROMPT + STEPS - 1,
                   vocab]
  meta.json        family, parameters, input shape, each form's op counts, seconds taken (a
                   decoder: kind, steps, cache length, the config's arguments, the smallest
                   margin between eager's top two logits, whether the exported program run
                   by PyTorch gives the same ids); or "export_error" when PyTorch
                   (or transformers' export wrapper) cannot export the model
Models already in OUT (meta.json written) are kept: a run adds what is missing.

  make-zoo.py OUT [--set ci|all] [--family torchvision|transformers] [--jobs N] [NAME ...]

--set ci (the default) is what CI runs: one model or two per torchvision architecture family,
and a handful of transformers decoders and encoders; --set all is every model (the largest
torchvision ones, up to 645M parameters, need about 8 GB of memory and 3 GB of disk each).
Run with the reference environment's python (scripts/python-env.sh prints it).
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


# ---- Hugging Face transformers ------------------------------------------------------------

# Decoders: PROMPT token ids, then STEPS greedy tokens, over a static KV cache of MAX_CACHE.
PROMPT, STEPS, MAX_CACHE = 8, 8, 64
VOCAB = 1000
DECODER_BASE = dict(vocab_size=VOCAB, max_position_embeddings=128, initializer_range=0.1,
                    pad_token_id=0, bos_token_id=1, eos_token_id=2)
# Llama-style arguments (most configs take these names): grouped-query attention (4 query
# heads, 2 key/value heads of 16), or multi-head attention where an architecture has no GQA.
GQA = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=2, head_dim=16)
MHA = dict(GQA, num_key_value_heads=4)
# Local attention (sliding windows, llama4's chunks, gpt_neo's local layers) of 8 positions,
# so that it acts within the 15 positions generated (transformers' export wrapper keeps a full
# static cache for those layers; the window is in the mask).
SWA = dict(GQA, sliding_window=8)
# Mixture of experts: 4 experts of 32, 2 per token (each config reads the names it knows).
MOE = dict(num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
           n_routed_experts=4, n_shared_experts=1, shared_expert_intermediate_size=32)
# name: (model_type, config arguments). The last group is what PyTorch cannot export through
# transformers' wrapper today (sizes computed from data; a cache the static cache does not
# shape): kept in --set all so that the record says so.
DECODERS = {
    "llama": ("llama", GQA), "mistral": ("mistral", SWA),
    "mixtral": ("mixtral", dict(GQA, **MOE)), "ministral": ("ministral", SWA),
    # transformers' default experts ("grouped_mm") call its own op on CPU in float32
    # (transformers::grouped_mm_fallback); "batched_mm" is the ATen alternative it offers.
    "mixtral_batched_mm": ("mixtral", dict(GQA, **MOE, experts_implementation="batched_mm")),
    "qwen2": ("qwen2", GQA), "qwen2_moe": ("qwen2_moe", dict(GQA, **MOE)),
    "qwen3": ("qwen3", GQA), "qwen3_moe": ("qwen3_moe", dict(GQA, **MOE)),
    "gemma": ("gemma", GQA), "gemma2": ("gemma2", SWA),
    "gemma3_text": ("gemma3_text", SWA),
    "vaultgemma": ("vaultgemma", SWA),
    "phi": ("phi", GQA), "phi3": ("phi3", GQA), "phimoe": ("phimoe", dict(GQA, **MOE)),
    "gpt2": ("gpt2", MHA), "gpt_neox": ("gpt_neox", MHA), "bloom": ("bloom", MHA),
    "persimmon": ("persimmon", MHA),
    "gptj": ("gptj", dict(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=128)),
    "codegen": ("codegen", dict(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=128,
                                n_ctx=128)),
    "gpt_bigcode": ("gpt_bigcode", dict(n_embd=64, n_layer=2, n_head=4, n_positions=128,
                                        multi_query=True)),
    "gpt_neo": ("gpt_neo", dict(hidden_size=64, num_layers=2, num_heads=4, window_size=8,
                                attention_types=[[["global", "local"], 1]])),
    "falcon": ("falcon", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                              num_kv_heads=2, new_decoder_architecture=True)),
    "olmo": ("olmo", GQA), "olmo2": ("olmo2", GQA), "olmo3": ("olmo3", SWA),
    "olmoe": ("olmoe", dict(GQA, **MOE)), "flex_olmo": ("flex_olmo", dict(GQA, **MOE)),
    "smollm3": ("smollm3", GQA), "granite": ("granite", GQA),
    "granitemoe": ("granitemoe", dict(GQA, **MOE)),
    "cohere": ("cohere", GQA), "cohere2": ("cohere2", SWA), "stablelm": ("stablelm", GQA),
    "starcoder2": ("starcoder2", GQA), "glm": ("glm", GQA), "glm4": ("glm4", GQA),
    "glm4_moe": ("glm4_moe", dict(GQA, **MOE)), "helium": ("helium", GQA),
    "exaone4": ("exaone4", SWA), "exaone_moe": ("exaone_moe", dict(SWA, **MOE)),
    "apertus": ("apertus", GQA), "arcee": ("arcee", GQA), "seed_oss": ("seed_oss", GQA),
    "ernie4_5": ("ernie4_5", GQA), "ernie4_5_moe": ("ernie4_5_moe", dict(GQA, **MOE)),
    "hunyuan_v1_dense": ("hunyuan_v1_dense", GQA),
    "hunyuan_v1_moe": ("hunyuan_v1_moe", dict(GQA, **MOE)),
    "internlm3": ("internlm3", GQA), "nemotron": ("nemotron", GQA), "bitnet": ("bitnet", GQA),
    "diffllama": ("diffllama", GQA), "doge": ("doge", GQA),
    "llama4_text": ("llama4_text", dict(GQA, **MOE, attention_chunk_size=8)),
    "nanochat": ("nanochat", GQA),
    "gpt_oss": ("gpt_oss", dict(SWA, **MOE)), "jetmoe": ("jetmoe", dict(GQA, **MOE)),
    "dots1": ("dots1", dict(GQA, **MOE)),
    # Not exported today (recorded).
    "opt": ("opt", dict(hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=4,
                        word_embed_proj_dim=64)),
    "biogpt": ("biogpt", MHA),
    "xglm": ("xglm", dict(d_model=64, ffn_dim=128, num_layers=2, attention_heads=4)),
    "ctrl": ("ctrl", dict(n_embd=64, dff=128, n_layer=2, n_head=4, n_positions=128)),
    "mpt": ("mpt", dict(d_model=64, n_layers=2, n_heads=4, max_seq_len=128, use_cache=True)),
    "deepseek_v3": ("deepseek_v3", dict(MHA, **MOE, head_dim=None, n_group=1, topk_group=1,
                                        first_k_dense_replace=1, kv_lora_rank=16,
                                        q_lora_rank=32, qk_rope_head_dim=8,
                                        qk_nope_head_dim=16, v_head_dim=16)),
}

# Encoders: name -> (model_type, config arguments, input).
TEXT = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=128, pad_token_id=0)
VISION = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              image_size=32, patch_size=8)
SPEECH = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              conv_dim=(32,) * 7, num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
              vocab_size=32)
ENCODERS = {
    "bert": ("bert", TEXT, "text"), "roberta": ("roberta", TEXT, "text"),
    "xlm_roberta": ("xlm-roberta", TEXT, "text"), "camembert": ("camembert", TEXT, "text"),
    "ernie": ("ernie", TEXT, "text"), "deberta_v2": ("deberta-v2", TEXT, "text"),
    "mpnet": ("mpnet", TEXT, "text"),
    "distilbert": ("distilbert", dict(vocab_size=VOCAB, dim=64, hidden_dim=128, n_layers=2,
                                      n_heads=4, max_position_embeddings=128, pad_token_id=0),
                   "text"),
    "albert": ("albert", dict(TEXT, embedding_size=32), "text"),
    "electra": ("electra", dict(TEXT, embedding_size=32), "text"),
    "modernbert": ("modernbert", dict(TEXT, global_attn_every_n_layers=2, local_attention=16),
                   "text"),
    "mobilebert": ("mobilebert", dict(TEXT, embedding_size=32, intra_bottleneck_size=32,
                                      true_hidden_size=32, num_feedforward_networks=2), "text"),
    "squeezebert": ("squeezebert", dict(TEXT, embedding_size=64), "text"),
    "convbert": ("convbert", dict(TEXT, embedding_size=64), "text"),
    "roformer": ("roformer", dict(TEXT, embedding_size=64), "text"),
    "t5_encoder": ("t5", dict(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                              num_heads=4), "text"),
    "vit": ("vit", VISION, "image"), "deit": ("deit", VISION, "image"),
    "beit": ("beit", VISION, "image"), "dinov2": ("dinov2", VISION, "image"),
    "clip_vision": ("clip_vision_model", VISION, "image"),
    "siglip_vision": ("siglip_vision_model", VISION, "image"),
    "wav2vec2": ("wav2vec2", SPEECH, "speech"), "hubert": ("hubert", SPEECH, "speech"),
    "wavlm": ("wavlm", dict(SPEECH, num_buckets=32, max_bucket_distance=64), "speech"),
    "data2vec_audio": ("data2vec-audio", SPEECH, "speech"),
    "whisper_encoder": ("whisper", dict(vocab_size=VOCAB, d_model=64, encoder_layers=2,
                                        decoder_layers=2, encoder_attention_heads=4,
                                        decoder_attention_heads=4, encoder_ffn_dim=128,
                                        decoder_ffn_dim=128, num_mel_bins=16,
                                        max_source_positions=32, max_target_positions=64,
                                        pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                        decoder_start_token_id=1), "mel"),
}
# Inputs of the encoders (token ids avoid the padding id 0: RoBERTa numbers positions past it).
ENCODER_INPUTS = {
    "text": lambda: torch.randint(3, VOCAB, (1, 16)),
    "image": lambda: torch.randn(1, 3, 32, 32),
    "speech": lambda: torch.randn(1, 4000),  # 12 frames after the 320x convolutional stem
    "mel": lambda: torch.randn(1, 16, 64),   # 2 x max_source_positions frames
}
TRANSFORMERS_CI = ["llama", "qwen2", "qwen3", "gpt2", "phi3", "gemma2", "mixtral",
                   "bert", "roberta", "distilbert", "vit", "wav2vec2", "whisper_encoder"]


class LastHiddenState(torch.nn.Module):
    """An encoder's last_hidden_state (transformers' models return a ModelOutput)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x).last_hidden_state


def transformers_models(selection):
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, T5EncoderModel
    out = []
    for name, (model_type, kwargs) in DECODERS.items():
        def build(model_type=model_type, kwargs=kwargs):
            kwargs = dict(kwargs)
            load = {k: kwargs.pop(k) for k in ["experts_implementation"] if k in kwargs}
            kwargs = {k: v for k, v in kwargs.items() if v is not None}
            config = AutoConfig.for_model(model_type, **DECODER_BASE, **kwargs)
            return AutoModelForCausalLM.from_config(config, **load)
        out.append((name, build, {"kind": "decoder", "config": dict(kwargs)}))
    for name, (model_type, kwargs, inp) in ENCODERS.items():
        def build(model_type=model_type, kwargs=kwargs):
            config = AutoConfig.for_model(model_type, **kwargs)
            if model_type == "t5":
                return LastHiddenState(T5EncoderModel(config))
            model = AutoModel.from_config(config)
            return LastHiddenState(model.get_encoder() if model_type == "whisper" else model)
        out.append((name, build, {"kind": "encoder", "input": inp, "config": dict(kwargs)}))
    if selection == "ci":
        out = [m for m in out if m[0] in TRANSFORMERS_CI]
    return out


def export_decoder(model, out_dir):
    """A causal LM through transformers' ExecuTorch recipe; the eager wrapper's greedy ids."""
    from transformers.integrations.executorch import (TorchExportableModuleWithStaticCache,
                                                      convert_and_export_with_cache)
    model.generation_config.cache_implementation = "static"
    model.generation_config.cache_config = {"batch_size": 1, "max_cache_len": MAX_CACHE}
    with torch.no_grad():
        ep = convert_and_export_with_cache(model)  # input_ids [[1]], cache_position [0]
        core = ep.run_decompositions()
    torch.export.save(ep, os.path.join(out_dir, "model.pt2"))
    torch.export.save(core, os.path.join(out_dir, "model.core.pt2"))
    # PyTorch eager: the same wrapper with a cache of its own, the prompt one token per call.
    wrapper = TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=MAX_CACHE)
    vocab = model.config.get_text_config().vocab_size
    prompt = torch.randint(3, vocab, (PROMPT,), generator=torch.Generator().manual_seed(1))

    def greedy(module):
        tokens, rows, margins = prompt.tolist(), [], []
        with torch.no_grad():
            for pos in range(PROMPT + STEPS - 1):
                logits = module(input_ids=torch.tensor([[tokens[pos]]]),
                                cache_position=torch.tensor([pos]))
                row = logits[0, -1].float()
                rows.append(row.numpy().copy())
                if pos >= PROMPT - 1:
                    top = torch.topk(row, 2).values
                    margins.append(float(top[0] - top[1]))
                    tokens.append(int(row.argmax()))
        return tokens[PROMPT:], rows, margins, list(logits.shape)

    ids, rows, margins, shape = greedy(wrapper)
    # The exported program run by PyTorch (after saving: this writes its buffers) should agree;
    # recorded, so that a difference in etc is not blamed on the export.
    exported_ids = greedy(ep.module())[0]
    np.save(os.path.join(out_dir, "prompt.npy"), prompt.numpy())
    np.save(os.path.join(out_dir, "expected_ids.npy"), np.array(ids, np.int64))
    np.save(os.path.join(out_dir, "expected_logits.npy"), np.stack(rows))
    return {
        "kind": "decoder", "steps": STEPS, "prompt_tokens": PROMPT, "max_cache_len": MAX_CACHE,
        "input": [1, 1], "output": shape, "min_margin": min(margins),
        "exported_program_ids_match": exported_ids == ids,
        "ops": {"model.pt2": op_counts(ep), "model.core.pt2": op_counts(core)},
    }


FAMILIES = {"torchvision": torchvision_models, "transformers": transformers_models}


def export_module(model, x, out_dir):
    """A module of one input: both forms, the input and PyTorch eager's output."""
    with torch.no_grad():
        expected = model(x)
        ep = torch.export.export(model, (x,))
        core = ep.run_decompositions()
    torch.export.save(ep, os.path.join(out_dir, "model.pt2"))
    torch.export.save(core, os.path.join(out_dir, "model.core.pt2"))
    np.save(os.path.join(out_dir, "input_0.npy"), x.numpy())
    np.save(os.path.join(out_dir, "expected_0.npy"), expected.detach().numpy())
    return {"input": list(x.shape), "output": list(expected.shape),
            "ops": {"model.pt2": op_counts(ep), "model.core.pt2": op_counts(core)}}


def error_text(e):
    """The exception's first line, and its innermost cause's when that says more (dynamo's
    "Unsupported: Observed exception" is raised from the error that explains it)."""
    def first(x):
        return "%s: %s" % (type(x).__name__, (str(x).splitlines() or [""])[0][:300])
    inner = e
    while inner.__cause__ is not None:
        inner = inner.__cause__
    return first(e) if inner is e else first(e) + " <- " + first(inner)


def export_one(family, name, build, arg, out_dir):
    torch.manual_seed(0)
    meta = {"family": family, "name": name, "torch": torch.__version__}
    if family == "transformers":
        import transformers
        meta.update(transformers=transformers.__version__, config=arg["config"])
    start = time.perf_counter()
    try:
        model = build().eval()
        # Parameters a model initialises to zero (ViT's head, biases) would make its output
        # zero or leave a term untested: they get small random values.
        with torch.no_grad():
            for param in model.parameters():
                if param.numel() > 1 and not torch.any(param):
                    param.normal_(0.0, 0.02)
        meta["parameters"] = sum(p.numel() for p in model.parameters())
        os.makedirs(out_dir, exist_ok=True)
        if family == "transformers" and arg["kind"] == "decoder":
            meta.update(export_decoder(model, out_dir))
        elif family == "transformers":
            meta.update(export_module(model, ENCODER_INPUTS[arg["input"]](), out_dir),
                        kind="encoder")
        else:
            meta.update(export_module(model, torch.randn(1, 3, arg, arg), out_dir))
    except Exception as e:  # noqa: BLE001 -- what PyTorch cannot export is recorded, not fatal
        os.makedirs(out_dir, exist_ok=True)
        meta["export_error"] = error_text(e)
        traceback.print_exc()
    meta["seconds"] = round(time.perf_counter() - start, 1)
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    return meta


def export_batch(batch, threads):
    """export_one of each (family, name, out_dir) in a worker process. A torchvision model
    gets a process of its own (memory goes back after each); the transformers models are tiny,
    and share one (importing transformers and warming up torch.export's strict tracer, ~15 s,
    would take longer than exporting one of them)."""
    torch.set_num_threads(threads)
    metas = []
    for family, name, out_dir in batch:
        for n, build, arg in FAMILIES[family]("all"):
            if n == name:
                break
        else:
            raise KeyError(name)
        torch._dynamo.reset()
        meta = export_one(family, name, build, arg, out_dir)
        print("make-zoo: %s/%s (%s s): %s" % (family, name, meta["seconds"],
                                              meta.get("export_error", "exported")), flush=True)
        metas.append(meta)
    return metas


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--set", choices=["ci", "all"], default="ci")
    p.add_argument("--family", choices=sorted(FAMILIES), action="append")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("names", nargs="*")
    args = p.parse_intermixed_args()
    batches = []
    for family in args.family or sorted(FAMILIES):
        todo = []
        for name, _, _ in FAMILIES[family]("all" if args.names else args.set):
            if args.names and name not in args.names:
                continue
            d = os.path.join(args.out, family, name)
            if not os.path.exists(os.path.join(d, "meta.json")):
                todo.append((family, name, d))
        if family == "transformers":
            k = max(1, min(args.jobs, len(todo)))
            batches += [todo[i::k] for i in range(k) if todo[i::k]]
        else:
            batches += [[t] for t in todo]
    threads = max(1, (os.cpu_count() or 1) // max(1, args.jobs))
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs),
                                                max_tasks_per_child=1) as pool:
        for fut in concurrent.futures.as_completed(
                [pool.submit(export_batch, b, threads) for b in batches]):
            fut.result()
    return 0


if __name__ == "__main__":
    sys.exit(main())
