"""A tiny randomly initialised causal LM and its tokenizer, built offline for reader tests."""

from __future__ import annotations

from pathlib import Path

import torch

_WORDS = (
    "the a is where who what mary john kitchen garden apple milk went to left got picked up".split()
)


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
