"""A tiny randomly initialised causal LM and its tokenizer, built offline for reader tests."""

from __future__ import annotations

from pathlib import Path

import torch

_WORDS = [
    "the",
    "a",
    "is",
    "where",
    "who",
    "what",
    "mary",
    "john",
    "kitchen",
    "garden",
    "apple",
    "milk",
    "went",
    "to",
    "left",
    "got",
    "picked",
    "up",
]


def build_tiny_llama(folder: Path) -> Path:
    """A randomly initialised 2-layer Llama and a whitespace word-level tokenizer, HF layout."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(["<pad>", "<eos>", "<bos>", "<unk>", *_WORDS])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
    )
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


#: Byte-level BPE merges of the tiny GGUF tokenizer (``Ġ`` is a space in byte-level BPE).
_GGUF_MERGES = ["Ġ t", "h e", "Ġt he", "a p", "ap p", "Ġ a", "Ġ app"]
_GGUF_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_llama_gguf(path: Path, seed: int = 0) -> Path:
    """A randomly initialised 2-layer Llama as a GGUF file laid out like SmolLM2's: a byte-level
    BPE (``gpt2``) tokenizer with a chat template, tied embeddings, Q8_0 linear weights (so that
    loading it de-quantises) and float32 norms."""
    import gguf
    import numpy as np
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    rng = np.random.default_rng(seed)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = [*specials, *bytes_to_unicode().values(), *(m.replace(" ", "") for m in _GGUF_MERGES)]
    hidden, ffn, layers, heads, kv_heads = 64, 128, 2, 4, 2  # rows of 64: Q8_0 blocks are 32
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(128)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_block_count(layers)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(specials) + [1] * (len(tokens) - len(specials)))
    writer.add_token_merges(_GGUF_MERGES)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(_GGUF_CHAT_TEMPLATE)

    def weight(name: str, rows: int, cols: int, quantized: bool = True) -> None:
        data = (rng.standard_normal((rows, cols)) * 0.2).astype(np.float32)
        if quantized:
            q8 = gguf.GGMLQuantizationType.Q8_0
            writer.add_tensor(name, gguf.quants.quantize(data, q8), raw_dtype=q8)
        else:
            writer.add_tensor(name, data)

    kv = hidden // heads * kv_heads
    weight("token_embd.weight", len(tokens), hidden, quantized=False)
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, np.float32))
        for name, rows, cols in [
            ("attn_q", hidden, hidden),
            ("attn_k", kv, hidden),
            ("attn_v", kv, hidden),
            ("attn_output", hidden, hidden),
            ("ffn_gate", ffn, hidden),
            ("ffn_up", ffn, hidden),
            ("ffn_down", hidden, ffn),
        ]:
            weight(f"blk.{i}.{name}.weight", rows, cols)
    writer.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
