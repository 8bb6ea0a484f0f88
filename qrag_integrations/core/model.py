"""The Q-RAG Q-function: a state encoder, a chunk encoder, RoPE positions and twin heads.

``Q(s, a) = Q1 + Q2`` with ``Q1 = <E_s(s)[:D/2], R(p) E_a(a)[:D/2]>`` and ``Q2`` likewise on the
second halves. The trainer (``qrag_training``) trains exactly this module.
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from qrag_integrations.core.checkpoint import save_pretrained
from qrag_integrations.core.config import PositionMode, QRAGConfig, StateOrder
from qrag_integrations.core.encoder import MeanPoolEncoder, load_base
from qrag_integrations.core.errors import QRAGError
from qrag_integrations.core.onnx_backend import BACKENDS, QUANTIZE_OF, OnnxEncoder, onnx_encoder
from qrag_integrations.core.openvino_backend import OpenVinoEncoder, openvino_encoder
from qrag_integrations.core.positions import rotate_as
from qrag_integrations.core.precision import AutocastEncoder
from qrag_integrations.core.progress import progress_bar

#: Texts tokenized at a time to count their tokens (:meth:`QRAGModel.length_order`).
LENGTH_WINDOW = 4096
#: Serialises tokenizer calls: a fast tokenizer sets shared padding / truncation state on every
#: call, so concurrent calls (async embedding paths run in threads) could come back unpadded or
#: raise "Already borrowed" (transformers issue 47085). One lock for all models: tokenizing is
#: short beside encoding, and a module-level lock survives deepcopy and pickling of a model.
TOKENIZER_LOCK = threading.Lock()


@contextlib.contextmanager
def eval_mode(module: nn.Module) -> Iterator[None]:
    """``module`` in eval mode (no dropout) inside the block, its previous mode restored after."""
    was_training = module.training
    module.eval()
    try:
        yield
    finally:
        module.train(was_training)


class QRAGModel(nn.Module):
    """State and chunk encoders of a Q-RAG retriever.

    Build one from a base encoder with :meth:`from_base`, or load a checkpoint with
    :func:`qrag_integrations.load_model`.
    """

    def __init__(
        self,
        config: QRAGConfig,
        state_encoder: MeanPoolEncoder,
        chunk_encoder: MeanPoolEncoder,
        tokenizer: PreTrainedTokenizerBase,
    ) -> None:
        super().__init__()
        if state_encoder.hidden_size != chunk_encoder.hidden_size:
            raise ValueError("state and chunk encoders must have the same embedding size")
        if state_encoder.hidden_size % 4:
            raise ValueError(
                f"embedding size must be divisible by 4 (twin heads x RoPE pairs), "
                f"got {state_encoder.hidden_size}"
            )
        self.config = config
        self.state_encoder = state_encoder
        self.chunk_encoder = chunk_encoder
        self.tokenizer = tokenizer
        self.apply_trainable_layers()
        self._inference: dict[str, OnnxEncoder | OpenVinoEncoder | AutocastEncoder] | None = None
        self.inference_backend: tuple[str, str | None] = ("torch", None)
        """``(backend, quantize)`` of the last :meth:`set_backend` (torch float32 until then)."""

    @classmethod
    def from_base(
        cls,
        config: QRAGConfig | None = None,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> QRAGModel:
        """An untrained Q-RAG model: both encoders are copies of ``config.base_model``."""
        config = config or QRAGConfig()
        base, tokenizer = load_base(config.base_model)
        state = MeanPoolEncoder(base, config.output_scale, config.normalize)
        chunk = MeanPoolEncoder(copy.deepcopy(base), config.output_scale, config.normalize)
        return cls(config, state, chunk, tokenizer).to(device=device, dtype=dtype)

    def save_pretrained(
        self,
        path: str,
        card_notes: str = "",
        weights_dtype: torch.dtype | None = None,
        overwrite: bool = False,
    ) -> None:
        """Write a checkpoint folder atomically; refuses a path holding anything but an earlier
        checkpoint unless ``overwrite`` (see :func:`qrag_integrations.core.checkpoint.save_pretrained`)."""
        save_pretrained(
            self, path, card_notes=card_notes, weights_dtype=weights_dtype, overwrite=overwrite
        )

    # -- properties ---------------------------------------------------------------------------
    @property
    def embedding_dim(self) -> int:
        """Size ``D`` of state and chunk embeddings."""
        return self.state_encoder.hidden_size

    @property
    def device(self) -> torch.device:
        """Device of the encoders."""
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        """Floating dtype of the encoders."""
        return next(self.parameters()).dtype

    # -- training helpers ---------------------------------------------------------------------
    def apply_trainable_layers(self) -> None:
        """Freeze everything but the top ``config.trainable_layers`` layers (if set)."""
        n = self.config.trainable_layers
        for encoder in (self.state_encoder, self.chunk_encoder):
            if n is None:
                encoder.requires_grad_(True)
                continue
            encoder.requires_grad_(False)
            for layer in encoder.layers()[-n:]:
                layer.requires_grad_(True)

    def trained_state_dict(self) -> dict[str, torch.Tensor]:
        """The parameters a checkpoint must store: all, or only the trainable top layers."""
        full = self.state_dict()
        n = self.config.trainable_layers
        if n is None:
            return full
        prefixes = [f"state_encoder.{p}" for p in self.state_encoder.layer_prefixes(n)]
        prefixes += [f"chunk_encoder.{p}" for p in self.chunk_encoder.layer_prefixes(n)]
        return {k: v for k, v in full.items() if k.startswith(tuple(prefixes))}

    # -- text ---------------------------------------------------------------------------------
    def state_text(
        self, question: str, picked: Sequence[str], picked_order: Sequence[int] | None = None
    ) -> str:
        """The state text: the question and the picked chunks joined by the separator.

        Args:
            question: the user's question.
            picked: picked chunk texts in pick order.
            picked_order: their document-order keys; used when ``state_order`` is ``document``.
        """
        texts = list(picked)
        if self.config.state_order is StateOrder.DOCUMENT and picked_order is not None:
            texts = [t for _, t in sorted(zip(picked_order, texts), key=lambda pair: pair[0])]
        return self.config.state_separator.join([question, *texts])

    def tokenize(self, texts: Sequence[str], max_tokens: int) -> dict[str, torch.Tensor]:
        """Tokenize with truncation to ``max_tokens`` (and to the encoder's position table), on
        the model's device."""
        limit = self.state_encoder.max_positions
        with TOKENIZER_LOCK:
            batch = self.tokenizer(
                list(texts),
                padding=True,
                truncation=True,
                max_length=max_tokens if limit is None else min(max_tokens, limit),
                return_tensors="pt",
            )
        return {
            "input_ids": batch["input_ids"].to(self.device),
            "attention_mask": batch["attention_mask"].to(self.device),
        }

    def length_order(self, texts: Sequence[str], max_tokens: int) -> list[int]:
        """Indices of ``texts``, longest first by token count after truncation to ``max_tokens``.

        Batches cut from this order pad less than batches of texts sorted by characters
        (sentence-transformers' order; ``benchmarks/index_build`` measures both). Lengths are
        counted in windows of :data:`LENGTH_WINDOW` texts, so memory holds one window's token ids
        at a time; ties keep the input order.
        """
        limit = self.state_encoder.max_positions
        max_length = max_tokens if limit is None else min(max_tokens, limit)
        lengths: list[int] = []
        for start in range(0, len(texts), LENGTH_WINDOW):
            window = list(texts[start : start + LENGTH_WINDOW])
            with TOKENIZER_LOCK:
                counted = self.tokenizer(
                    window, truncation=True, max_length=max_length, return_length=True
                )
            lengths.extend(int(n) for n in counted["length"])
        return sorted(range(len(texts)), key=lambda i: -lengths[i])

    # -- embeddings ---------------------------------------------------------------------------
    def set_backend(
        self,
        backend: str = "torch",
        quantize: str | None = None,
        cache_dir: str | os.PathLike[str] | bool | None = None,
    ) -> None:
        """Encode for inference with ``backend`` in :meth:`embed_chunks` and, when gradients are
        off, :meth:`embed_states`; training never sets it.

        Args:
            backend: ``"torch"`` (default), ``"onnx"`` (ONNX Runtime on the CPU; exported once
                and cached: :mod:`qrag_integrations.core.onnx_backend`) or ``"openvino"``
                (OpenVINO on the CPU, from the same export:
                :mod:`qrag_integrations.core.openvino_backend`).
            quantize: ``None`` (float32); with ``onnx``, ``"int8"`` (dynamic int8 weights); with
                ``torch``, ``"bf16"`` (bfloat16 autocast: :mod:`qrag_integrations.core.precision`,
                faster only where :func:`~qrag_integrations.core.precision.bf16_is_fast`); with
                ``openvino``, ``"bf16"`` (OpenVINO's bfloat16 inference precision).
            cache_dir: where ONNX exports are kept.

        Raises:
            QRAGError: an unknown backend, a quantization the backend does not offer, ``onnx``
                or ``openvino`` off the CPU, or their libraries missing.
        """
        if backend not in BACKENDS:
            raise QRAGError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        offered = QUANTIZE_OF[backend]
        if quantize not in offered:
            raise QRAGError(
                f"quantize with backend={backend!r} must be one of "
                f"{', '.join(repr(q) for q in offered)}, got {quantize!r}"
            )
        if backend == "torch":
            self.inference_backend = (backend, quantize)
            self._inference = (
                None
                if quantize is None
                else {
                    "state": AutocastEncoder(self.state_encoder),
                    "chunk": AutocastEncoder(self.chunk_encoder),
                }
            )
            return
        if self.device.type != "cpu":
            raise QRAGError(f"backend={backend!r} runs on the CPU; this model is on {self.device}")
        compile_ = onnx_encoder if backend == "onnx" else openvino_encoder
        self._inference = {
            "state": compile_(self.state_encoder, quantize, cache_dir),
            "chunk": compile_(self.chunk_encoder, quantize, cache_dir),
        }
        self.inference_backend = (backend, quantize)

    def embed_states(self, texts: Sequence[str], batch_size: int = 32) -> torch.Tensor:
        """State embeddings ``(B, D)``; differentiable (wrap in ``torch.inference_mode`` to act).

        Without gradients (search, acting) more than ``batch_size`` states are encoded in
        batches of similar length, so a batch of questions is not padded to its longest state.
        """
        if torch.is_grad_enabled():
            return self.state_encoder(**self.tokenize(texts, self.config.max_state_tokens))
        encoder = self.state_encoder if self._inference is None else self._inference["state"]
        return self.encode_in_length_batches(
            encoder, texts, self.config.max_state_tokens, batch_size
        )

    def embed_chunks_grad(self, texts: Sequence[str], batch_size: int = 64) -> torch.Tensor:
        """Unrotated chunk embeddings ``(B, D)``, differentiable (training).

        Texts are encoded in batches of similar length (a sentence is not padded to the longest
        paragraph of the step); the result is in the input order.
        """
        return self.encode_in_length_batches(
            self.chunk_encoder, texts, self.config.max_chunk_tokens, batch_size
        )

    def encode_in_length_batches(
        self,
        encoder: Callable[..., torch.Tensor],
        texts: Sequence[str],
        max_tokens: int,
        batch_size: int,
    ) -> torch.Tensor:
        """``encoder``'s embeddings ``(B, D)`` of ``texts`` tokenized with this model's tokenizer,
        in batches of similar length, returned in the input order (differentiable when the
        encoder is; e.g. the chunk encoder in training, or a frozen teacher)."""
        if len(texts) <= batch_size:
            return encoder(**self.tokenize(texts, max_tokens))
        order = self.length_order(texts, max_tokens)
        parts = [
            encoder(**self.tokenize([texts[i] for i in order[s : s + batch_size]], max_tokens))
            for s in range(0, len(order), batch_size)
        ]
        inverse = torch.empty(len(order), dtype=torch.long, device=self.device)
        inverse[torch.tensor(order, device=self.device)] = torch.arange(
            len(order), device=self.device
        )
        return torch.cat(parts)[inverse]

    @torch.inference_mode()
    def embed_chunks(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        show_progress: bool = False,
        out_dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """Unrotated chunk embeddings ``(N, D)`` for inference, batched by similar length.

        Texts are sorted by token count (:meth:`length_order`) before batching so little compute
        goes to padding; the result is in the input order.
        """
        n = len(texts)
        out = torch.empty((n, self.embedding_dim), dtype=out_dtype, device=self.device)
        if n == 0:
            return out
        order = self.length_order(texts, self.config.max_chunk_tokens)
        bar = progress_bar(n, "embedding chunks", "chunk", show_progress)
        for start in range(0, n, batch_size):
            ids = order[start : start + batch_size]
            encoder = self.chunk_encoder if self._inference is None else self._inference["chunk"]
            emb = encoder(**self.tokenize([texts[i] for i in ids], self.config.max_chunk_tokens))
            out[torch.tensor(ids, device=self.device)] = emb.to(out_dtype)
            bar.update(len(ids))
        bar.close()
        return out

    def anchor_states(self, state_emb: torch.Tensor, question_emb: torch.Tensor) -> torch.Tensor:
        """State embeddings as the search scores them after the first step:
        ``(E_s(state) + w * E_s(question)) / (1 + w)`` with ``w = question_weight`` (unchanged
        when the weight is 0). Dividing by ``1 + w`` keeps Q-values on the scale of the first
        step's, so ``stop_threshold`` and the reported scores mean the same at every step."""
        w = self.config.question_weight
        return state_emb if w == 0 else (state_emb + w * question_emb) / (1 + w)

    def place_states(self, state_emb: torch.Tensor, last_positions: torch.Tensor) -> torch.Tensor:
        """States after the first step as the search scores them: with ``state_at_last_pick``
        rotated by their latest pick's fixed position (``(B,)``), so ``<R(p) s, R(c) a>`` reads
        the chunk's offset ``c - p`` from that pick; unchanged otherwise."""
        if not self.config.state_at_last_pick:
            return state_emb
        return rotate_as(self.config, state_emb, last_positions.to(state_emb.device))

    # -- Q-values -----------------------------------------------------------------------------
    def rotate_chunks(self, chunk_emb: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Apply the chunk positions (no-op in ``none`` mode)."""
        if self.config.position_mode is PositionMode.NONE:
            return chunk_emb
        return rotate_as(self.config, chunk_emb, positions)

    def twin_q(
        self, state_emb: torch.Tensor, rotated_chunk_emb: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Both heads for states against chunks.

        Args:
            state_emb: ``(B, D)``.
            rotated_chunk_emb: ``(N, D)`` shared by all states, or ``(B, N, D)`` per state.

        Returns:
            ``(Q1, Q2)``, each ``(B, N)``.
        """
        half = state_emb.shape[-1] // 2
        s1, s2 = state_emb[..., :half], state_emb[..., half:]
        c1, c2 = rotated_chunk_emb[..., :half], rotated_chunk_emb[..., half:]
        if rotated_chunk_emb.dim() == 2:
            return s1 @ c1.T, s2 @ c2.T
        return (
            torch.einsum("bd,bnd->bn", s1, c1),
            torch.einsum("bd,bnd->bn", s2, c2),
        )

    def q_values(
        self, state_emb: torch.Tensor, chunk_emb: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """Acting Q-values ``Q1 + Q2`` of states against unrotated chunks at ``positions``."""
        q1, q2 = self.twin_q(state_emb, self.rotate_chunks(chunk_emb, positions))
        return q1 + q2
