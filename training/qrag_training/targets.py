"""PQN's target encoders: Polyak-averaged copies of the online state and chunk encoders, and the
tensors of theirs a resumable checkpoint keeps (only the trained part differs from the base)."""

from __future__ import annotations

import torch

from qrag_integrations.core.encoder import MeanPoolEncoder
from qrag_integrations.core.model import QRAGModel


@torch.no_grad()
def polyak_update(
    model: QRAGModel, target_state: MeanPoolEncoder, target_chunk: MeanPoolEncoder, tau: float
) -> None:
    """``target <- (1 - tau) * target + tau * online`` for the trained parameters."""
    for online, target in (
        (model.state_encoder, target_state),
        (model.chunk_encoder, target_chunk),
    ):
        for p_target, p_online in zip(target.parameters(), online.parameters()):
            if p_online.requires_grad:
                p_target.lerp_(p_online, tau)


def target_tensors(
    model: QRAGModel, target_state: MeanPoolEncoder, target_chunk: MeanPoolEncoder
) -> dict[str, torch.Tensor]:
    """The targets' tensors at the keys ``model`` trains, named ``target_<key>``, on the CPU."""
    keys = model.trained_state_dict().keys()
    out: dict[str, torch.Tensor] = {}
    for prefix, module in (("state_encoder.", target_state), ("chunk_encoder.", target_chunk)):
        sd = module.state_dict()
        for key in keys:
            if key.startswith(prefix):
                out["target_" + key] = sd[key[len(prefix) :]].detach().to("cpu").contiguous()
    return out


def load_target_tensors(
    model: QRAGModel,
    target_state: MeanPoolEncoder,
    target_chunk: MeanPoolEncoder,
    tensors: dict[str, torch.Tensor],
) -> None:
    """Inverse of :func:`target_tensors`: targets are first copied from the online model.

    Raises:
        ValueError: a tensor that is not a target tensor, or one the model does not have.
    """
    target_state.load_state_dict(model.state_encoder.state_dict())
    target_chunk.load_state_dict(model.chunk_encoder.state_dict())
    state, chunk = {}, {}
    for key, value in tensors.items():
        name = key.removeprefix("target_")
        if name.startswith("state_encoder."):
            state[name.removeprefix("state_encoder.")] = value
        elif name.startswith("chunk_encoder."):
            chunk[name.removeprefix("chunk_encoder.")] = value
        else:
            raise ValueError(f"unexpected target tensor {key!r}")
    for module, sd in ((target_state, state), (target_chunk, chunk)):
        missing = set(sd) - set(module.state_dict())
        if missing:
            raise ValueError(f"target tensors do not fit the model: {sorted(missing)[:3]}")
        module.load_state_dict(sd, strict=False)
