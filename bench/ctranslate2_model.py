#!/usr/bin/env python3
"""An attn checkpoint as a CTranslate2 model: the paper's post-norm Transformer with tied
embeddings, filled into CTranslate2's TransformerSpec (pre_norm=False, no final LayerNorms,
embeddings scaled by √d_model, attn's interleaved sinusoids or learned positions given as its
position table, the shared embedding as source and target embeddings and output projection,
no output bias). Used by bench/decode_vs_torch.py --ctranslate2; checked there by greedy output
identical to attn-translate's.

  python3 bench/ctranslate2_model.py CHECKPOINT VOCAB.model OUT_DIR [--positions N]

Needs the ctranslate2, sentencepiece and numpy modules (pip install ctranslate2); reads the
checkpoint with tests/train/safetensors_read.py.
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "train"))


def sinusoids(rows, d, np):
    """attn::nn::sinusoids: PE(pos, 2i) = sin, PE(pos, 2i + 1) = cos (§3.5), angles in double."""
    pos = np.arange(rows, dtype=np.float64)[:, None]
    i = np.arange(d)
    angle = pos / np.power(10000.0, (i - i % 2).astype(np.float64) / d)
    return np.where(i % 2 == 0, np.sin(angle), np.cos(angle)).astype(np.float32)


def convert(checkpoint, vocab, out_dir, positions=1024):
    """Writes the CTranslate2 model of `checkpoint` to out_dir; returns (metadata, pieces)."""
    import ctranslate2
    import numpy as np
    import safetensors_read
    import sentencepiece
    from ctranslate2.specs import common_spec, transformer_spec

    metadata, stored = safetensors_read.load(str(checkpoint))
    weights = {}
    for name, (dtype, shape, data) in stored.items():
        if name.startswith("model."):
            if dtype != "F32":
                raise ValueError(f"{checkpoint}: tensor '{name}' is {dtype}, not F32")
            weights[name[len("model."):]] = np.frombuffer(bytearray(data), dtype=np.float32).reshape(shape)
    if metadata.get("model.norm") != "post" or metadata.get("model.tied_embeddings") != "true":
        raise ValueError("the converter is for post-norm models with tied embeddings (the paper's)")
    layers, heads = int(metadata["model.layers"]), int(metadata["model.heads"])
    d = int(metadata["model.d_model"])

    def take(name):
        if name not in weights:
            raise KeyError(f"{checkpoint}: no tensor 'model.{name}'")
        return weights[name]

    def linear(spec, *prefixes):  # attn's [in, out] weights side by side, as CTranslate2's [out, in]
        spec.weight = np.ascontiguousarray(np.concatenate([take(p + ".weight").T for p in prefixes], 0))
        spec.bias = np.ascontiguousarray(np.concatenate([take(p + ".bias") for p in prefixes], 0))

    def norm(spec, prefix):
        spec.gamma, spec.beta = take(prefix + ".norm.gain"), take(prefix + ".norm.bias")

    spec = transformer_spec.TransformerSpec.from_config(
        layers, heads, pre_norm=False, no_final_norm=True, activation=common_spec.Activation.RELU)
    shared = take("embeddings.shared")
    if metadata.get("model.positions") == "learned":
        source_table, target_table = take("embeddings.source_positions"), take("embeddings.target_positions")
    else:
        source_table = target_table = sinusoids(positions, d, np)
    spec.encoder.embeddings[0].weight = shared
    spec.encoder.scale_embeddings = True
    spec.encoder.position_encodings.encodings = source_table
    spec.decoder.embeddings.weight = shared
    spec.decoder.scale_embeddings = True
    spec.decoder.position_encodings.encodings = target_table
    spec.decoder.projection.weight = shared
    for i in range(layers):
        e, p = spec.encoder.layer[i], f"encoder.layer.{i}"
        linear(e.self_attention.linear[0], *(f"{p}.self_attention.{x}" for x in ("query", "key", "value")))
        linear(e.self_attention.linear[1], f"{p}.self_attention.output")
        norm(e.self_attention.layer_norm, f"{p}.self_attention_block")
        linear(e.ffn.linear_0, f"{p}.ffn.inner")
        linear(e.ffn.linear_1, f"{p}.ffn.outer")
        norm(e.ffn.layer_norm, f"{p}.ffn_block")
        t, p = spec.decoder.layer[i], f"decoder.layer.{i}"
        linear(t.self_attention.linear[0], *(f"{p}.self_attention.{x}" for x in ("query", "key", "value")))
        linear(t.self_attention.linear[1], f"{p}.self_attention.output")
        norm(t.self_attention.layer_norm, f"{p}.self_attention_block")
        linear(t.attention.linear[0], f"{p}.cross_attention.query")
        linear(t.attention.linear[1], f"{p}.cross_attention.key", f"{p}.cross_attention.value")
        linear(t.attention.linear[2], f"{p}.cross_attention.output")
        norm(t.attention.layer_norm, f"{p}.cross_attention_block")
        linear(t.ffn.linear_0, f"{p}.ffn.inner")
        linear(t.ffn.linear_1, f"{p}.ffn.outer")
        norm(t.ffn.layer_norm, f"{p}.ffn_block")

    processor = sentencepiece.SentencePieceProcessor(model_file=str(vocab))
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    if len(pieces) != shared.shape[0]:
        raise ValueError(f"{vocab} has {len(pieces)} pieces, the checkpoint's vocabulary {shared.shape[0]}")
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = pieces[1], pieces[2], pieces[3]
    spec.config.decoder_start_token = pieces[2]

    class Loaded(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    Loaded().convert(str(out_dir), force=True)
    return metadata, pieces


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", type=Path)
    p.add_argument("vocab", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--positions", type=int, default=1024,
                   help="rows of the sinusoid table (the longest sentence it can take; default 1024)")
    args = p.parse_args()
    convert(args.checkpoint, args.vocab, args.out, args.positions)
    print(f"ctranslate2_model: {args.out}")


if __name__ == "__main__":
    main()
