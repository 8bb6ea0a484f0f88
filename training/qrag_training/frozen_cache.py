"""Chunk encodings that skip the frozen layers: their output per chunk text, computed once.

With only the top ``trainable_layers`` of the chunk encoder training, the bottom layers' output for
a chunk never changes, yet a training step recomputes it for every chunk of every question
(~40 paragraphs of ~150 tokens for a question about one article). :class:`FrozenLayerCache` keeps
the output of the last frozen layer per chunk text (its real tokens only, in ``dtype``) and runs a
batch through the encoder with the frozen layers replaced by a module that returns the cached,
re-padded output: the embeddings layer and the trainable layers run, with gradients, and nothing
else. Least recently used texts leave the cache when it outgrows ``max_mb``.

The cached outputs are computed in eval mode (no dropout in the frozen layers, which have no
gradient; dropout still applies to the trainable layers in training mode). Attention masks hide
padding from the layers above and from mean pooling, so a chunk's embedding does not depend on
the batch it was cached in: with ``dtype=torch.float32`` the result equals the plain encoder's
up to float rounding (``tests/training/test_train_frozen_cache.py``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from qrag_integrations.core.encoder import MeanPoolEncoder

#: Tokenizer of the model: texts and a token budget -> ``input_ids`` / ``attention_mask``.
Tokenize = Callable[[Sequence[str], int], dict[str, torch.Tensor]]


class _Cached(nn.Module):
    """Stands in for the frozen layers: the first returns the cached output, the rest pass it on."""

    def __init__(self, hidden: torch.Tensor | None) -> None:
        super().__init__()
        self.hidden = hidden

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.hidden if self.hidden is not None else hidden_states


class FrozenLayerCache:
    """Per-text output of an encoder's bottom ``frozen`` layers, and encodings that reuse it."""

    def __init__(
        self,
        encoder: MeanPoolEncoder,
        frozen: int,
        tokenize: Tokenize,
        max_tokens: int,
        max_mb: float = 2048.0,
        dtype: torch.dtype = torch.float16,
    ) -> None:
        """Args:
        encoder: the chunk encoder (its bottom ``frozen`` layers must not train).
        frozen: how many bottom layers are frozen (>= 1; all of them: a frozen encoder, whose
            final outputs are cached).
        tokenize: the model's tokenizer call (``QRAGModel.tokenize``).
        max_tokens: the chunk token budget.
        max_mb: memory the cached outputs may take; least recently used texts leave first.
        dtype: storage dtype of the cached outputs (computed in the encoder's dtype).
        """
        layers = encoder.layers()
        if not 1 <= frozen <= len(layers):
            raise ValueError(f"frozen must be in 1..{len(layers)}, got {frozen}")
        for layer in layers[:frozen]:
            if any(p.requires_grad for p in layer.parameters()):
                raise ValueError("the cached layers must be frozen (requires_grad=False)")
        self.encoder, self.frozen, self.tokenize = encoder, frozen, tokenize
        self.max_tokens, self.max_bytes, self.dtype = max_tokens, max_mb * 2**20, dtype
        self._outputs: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        """Texts found in the cache so far."""
        self.misses = 0
        """Texts whose frozen layers ran so far."""
        names = {id(m): n for n, m in encoder.named_modules()}
        self._container = encoder.get_submodule(names[id(layers[0])].rsplit(".", 1)[0])

    @property
    def megabytes(self) -> float:
        """Memory the cached outputs take now."""
        return self._bytes / 2**20

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> torch.Tensor:
        """``(len(texts), D)`` embeddings of ``texts`` (differentiable through the trainable
        layers), in batches of similar length, in the input order."""
        self._fill(list(dict.fromkeys(texts)), batch_size)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        parts = [
            self._encode([texts[i] for i in order[s : s + batch_size]])
            for s in range(0, len(order), batch_size)
        ]
        out = torch.cat(parts)
        inverse = torch.empty(len(order), dtype=torch.long, device=out.device)
        inverse[torch.tensor(order, device=out.device)] = torch.arange(
            len(order), device=out.device
        )
        return out[inverse]

    # -- internals ------------------------------------------------------------------------------
    def _fill(self, texts: list[str], batch_size: int) -> dict[str, torch.Tensor]:
        """Run the frozen layers for the texts not cached yet (no gradient, eval mode); returns
        their outputs (also stored, unless the budget pushes them out again)."""
        missing = [t for t in texts if t not in self._outputs]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        for t in texts:
            if t in self._outputs:
                self._outputs.move_to_end(t)
        computed: dict[str, torch.Tensor] = {}
        if not missing:
            return computed
        record: dict[str, torch.Tensor] = {}
        last = self.encoder.layers()[self.frozen - 1]
        hook = last.register_forward_hook(lambda m, i, o: record.__setitem__("out", o))
        tops = self._swap(range(self.frozen, len(self.encoder.layers())), _Cached(None))
        was_training = self.encoder.training
        self.encoder.eval()
        try:
            with torch.no_grad():
                for s in range(0, len(missing), batch_size):
                    batch = missing[s : s + batch_size]
                    tokens = self.tokenize(batch, self.max_tokens)
                    self.encoder(**tokens)  # the trainable layers are skipped: pass-throughs
                    lengths = tokens["attention_mask"].sum(1).tolist()
                    for text, hidden, n in zip(batch, record["out"], lengths):
                        computed[text] = hidden[: int(n)].to(self.dtype).clone()
                        self._store(text, computed[text])
        finally:
            hook.remove()
            self._restore(tops)
            self.encoder.train(was_training)
        return computed

    def _store(self, text: str, hidden: torch.Tensor) -> None:
        self._outputs[text] = hidden
        self._bytes += hidden.element_size() * hidden.nelement()
        while self._bytes > self.max_bytes and len(self._outputs) > 1:
            _, old = self._outputs.popitem(last=False)
            self._bytes -= old.element_size() * old.nelement()

    def _encode(self, texts: list[str]) -> torch.Tensor:
        """One batch through the encoder with the frozen layers replaced by the cached output."""
        tokens = self.tokenize(texts, self.max_tokens)
        known = {t: self._outputs[t] for t in texts if t in self._outputs}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        # evicted since _fill (a cache smaller than one step): computed again for this batch
        known.update(self._fill(missing, len(missing)) if missing else {})
        outputs = [known[t] for t in texts]
        width = tokens["input_ids"].shape[1]
        hidden = outputs[0].new_zeros((len(texts), width, outputs[0].shape[-1]))
        for row, cached in enumerate(outputs):
            hidden[row, : cached.shape[0]] = cached
        dtype = next(self.encoder.parameters()).dtype
        bottoms = self._swap(range(self.frozen), _Cached(None))
        self._container[0] = _Cached(hidden.to(dtype))
        try:
            return self.encoder(**tokens)
        finally:
            self._restore(bottoms)

    def _swap(self, indices: range, module: nn.Module) -> dict[int, nn.Module]:
        """Put ``module`` at ``indices`` of the layer list; returns the originals."""
        originals = {i: self._container[i] for i in indices}
        for i in indices:
            self._container[i] = module
        return originals

    def _restore(self, originals: dict[int, nn.Module]) -> None:
        for i, layer in originals.items():
            self._container[i] = layer
