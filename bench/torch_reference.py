"""PyTorch reference of attn's Transformer, shared by bench/step_vs_torch.py and bench/train_vs_torch.py.

torch.nn.Transformer (post-norm, ReLU) between one embedding matrix shared by source, target
and output projection (§3.4, scaled by √d_model, drawn with deviation d_model^-1/2 as attn
does) and sinusoidal positions (§3.5), with dropout on the embeddings. The model runs in the
scripts' worker processes, under the system python3 with Debian's python3-torch.

like_attn=False is stock nn.Transformer, as step_vs_torch.py has always timed it: a final
LayerNorm on each stack, and dropout also on the attention weights and inside the FFN.
like_attn=True removes those three, so the model is attn's (same parameters, same count) and
dropout falls only on embeddings and residuals (§5.4).

attn_parameters, from_attn and load_attn map attn's checkpoint tensors onto a like_attn Model
(bench/parity_vs_torch.py starts both sides from the same weights with them); save_attn writes
a like_attn Model back as an attn checkpoint (tests/train/safetensors_read.py on the path).

The scripts' parent processes only read CONFIGS and need no torch: torch is imported when
Model or anything else that needs it is first asked for (module __getattr__, PEP 562).
"""
import math

CONFIGS = {  # d_model, d_ff, heads, layers (N); d_k = d_v = d_model / h
    "tiny": (128, 512, 4, 2),
    "small": (256, 1024, 4, 3),
    "base": (512, 2048, 8, 6),
    "big": (1024, 4096, 16, 6),
}
# P_drop where a preset differs from the paper's 0.1 (Table 3's big row; nn::big).
DROPOUT = {"big": 0.3}


def _define():
    import torch

    def sinusoids(length, d_model):
        """§3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...): [length, d_model]."""
        pos = torch.arange(length).unsqueeze(1)
        rate = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(length, d_model)
        pe[:, 0::2] = torch.sin(pos * rate)
        pe[:, 1::2] = torch.cos(pos * rate)
        return pe

    class Model(torch.nn.Module):
        def __init__(self, vocab, d_model, d_ff, heads, layers, max_length, dropout=0.1, like_attn=False):
            super().__init__()
            self.d_model = d_model
            self.embed = torch.nn.Embedding(vocab, d_model)  # shared: source, target, output (§3.4)
            torch.nn.init.normal_(self.embed.weight, 0.0, d_model ** -0.5)
            self.core = torch.nn.Transformer(d_model, heads, layers, layers, d_ff, dropout=dropout, batch_first=True)
            self.drop = torch.nn.Dropout(dropout)
            self.register_buffer("pe", sinusoids(max_length, d_model))
            if like_attn:
                self.core.encoder.norm = None
                self.core.decoder.norm = None
                for layer in list(self.core.encoder.layers) + list(self.core.decoder.layers):
                    layer.dropout = torch.nn.Identity()  # inside the FFN, after the ReLU
                    layer.self_attn.dropout = 0.0        # on the attention weights
                    if hasattr(layer, "multihead_attn"):
                        layer.multihead_attn.dropout = 0.0

        def embed_tokens(self, ids):  # [batch, len] -> [batch, len, d_model]
            return self.drop(self.embed(ids) * math.sqrt(self.d_model) + self.pe[: ids.shape[1]])

        def forward(self, src, tgt, pad=None):
            """Logits [batch, tgt, vocab]. With `pad`, keys that are padding are masked in every
            attention (encoder, decoder self-attention, encoder-decoder), as attn does."""
            mask = self.core.generate_square_subsequent_mask(tgt.shape[1]).to(tgt.device)
            src_pad = tgt_pad = None
            if pad is not None:
                src_pad, tgt_pad = src == pad, tgt == pad
            out = self.core(self.embed_tokens(src), self.embed_tokens(tgt), tgt_mask=mask,
                            src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                            memory_key_padding_mask=src_pad)
            return out @ self.embed.weight.t()

    def attn_parameters(model):
        """(attn names, torch parameter, how) for every parameter of a like_attn Model: how the
        tensors of attn's checkpoint (names without "model.", docs/checkpoints.md) make the
        torch parameter. attn keeps linear weights as [in, out] (x·W), torch as [out, in], and
        nn.MultiheadAttention fuses the query, key and value projections into one in_proj."""
        yield ("embeddings.shared",), model.embed.weight, "copy"
        for side, layers in (("encoder", model.core.encoder.layers), ("decoder", model.core.decoder.layers)):
            for i, layer in enumerate(layers):
                prefix = f"{side}.layer.{i}."
                attentions = [("self_attention", layer.self_attn)]
                blocks = ["self_attention_block"]
                if side == "decoder":
                    attentions.append(("cross_attention", layer.multihead_attn))
                    blocks.append("cross_attention_block")
                blocks.append("ffn_block")
                for name, attention in attentions:
                    a = prefix + name + "."
                    yield tuple(a + p + ".weight" for p in ("query", "key", "value")), attention.in_proj_weight, "transpose"
                    yield tuple(a + p + ".bias" for p in ("query", "key", "value")), attention.in_proj_bias, "copy"
                    yield (a + "output.weight",), attention.out_proj.weight, "transpose"
                    yield (a + "output.bias",), attention.out_proj.bias, "copy"
                for k, block in enumerate(blocks, 1):
                    norm = getattr(layer, f"norm{k}")
                    yield (prefix + block + ".norm.gain",), norm.weight, "copy"
                    yield (prefix + block + ".norm.bias",), norm.bias, "copy"
                for name, linear in (("inner", layer.linear1), ("outer", layer.linear2)):
                    yield (f"{prefix}ffn.{name}.weight",), linear.weight, "transpose"
                    yield (f"{prefix}ffn.{name}.bias",), linear.bias, "copy"

    def from_attn(tensors, names, how):
        """The torch layout of attn's tensors `names` (a dict of torch tensors by name)."""
        parts = [tensors[n].t() if how == "transpose" else tensors[n] for n in names]
        return torch.cat(parts, 0) if len(parts) > 1 else parts[0].clone()

    def load_attn(model, tensors):
        """Copies attn's weights (tensors by name, without "model.") into a like_attn Model."""
        with torch.no_grad():
            for names, parameter, how in attn_parameters(model):
                value = from_attn(tensors, names, how)
                if value.shape != parameter.shape:
                    raise ValueError(f"{names}: attn's tensor makes {tuple(value.shape)}, the model has "
                                     f"{tuple(parameter.shape)}")
                parameter.copy_(value)

    def save_attn(model, template, out):
        """Writes the like_attn Model's weights as an attn checkpoint: a copy of `template`
        (a checkpoint of the same configuration and vocabulary attn-train wrote) with every
        "model." tensor replaced, so attn-translate reads the PyTorch-trained model."""
        import safetensors_read
        replacements = {}
        for names, parameter, how in attn_parameters(model):
            value = parameter.detach().float()
            parts = value.split(value.shape[0] // len(names), 0) if len(names) > 1 else [value]
            for name, part in zip(names, parts):
                part = part.t() if how == "transpose" else part
                replacements["model." + name] = part.contiguous().numpy().tobytes()
        _, stored = safetensors_read.load(template)
        expected = {name for name in stored if name.startswith("model.")}
        if expected != set(replacements):
            raise ValueError(f"{template}: its model tensors and the PyTorch model's differ: "
                             f"{sorted(expected ^ set(replacements))}")
        for name, data in replacements.items():
            dtype, shape, _ = stored[name]
            size = 4 * math.prod(shape)
            if dtype != "F32" or size != len(data):
                raise ValueError(f"{template}: '{name}' is {dtype} {shape}, the PyTorch model's is {len(data)} bytes of F32")
        safetensors_read.rewrite(template, out, replacements)

    return {"torch": torch, "sinusoids": sinusoids, "Model": Model, "attn_parameters": attn_parameters,
            "from_attn": from_attn, "load_attn": load_attn, "save_attn": save_attn}


def __getattr__(name):
    if name in ("Model", "sinusoids", "attn_parameters", "from_attn", "load_attn", "save_attn"):
        globals().update(_define())
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
