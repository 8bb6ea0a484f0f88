"""One forward pass of an online encoder and its target copy, sharing the frozen bottom layers."""

from __future__ import annotations

from typing import Any

import torch

from qrag_integrations.core.encoder import MeanPoolEncoder


class _Replay(torch.nn.Module):
    """Stands in for a frozen transformer block: returns a recorded output, computes nothing."""

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__()
        self.record = record

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.record["out"]


def forward_online_and_target(
    online: MeanPoolEncoder, target: MeanPoolEncoder, frozen: int, batch: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Embed one batch with an online encoder and its target copy, computing shared layers once.

    The bottom ``frozen`` blocks are never trained, so they are identical in both encoders: the
    online pass records the output of the last frozen block and the target pass replays it
    instead of recomputing the blocks (with ``frozen == 0`` these are two plain passes).
    """
    if frozen <= 0:
        return online(**batch), target(**batch)
    record: dict[str, Any] = {}
    online_layers, target_layers = online.layers(), target.layers()
    hook = online_layers[frozen - 1].register_forward_hook(
        lambda m, i, o: record.__setitem__("out", o)
    )
    try:
        out_online = online(**batch)
    finally:
        hook.remove()
    names = {id(m): n for n, m in target.named_modules()}
    container = target.get_submodule(names[id(target_layers[0])].rsplit(".", 1)[0])
    originals = [container[i] for i in range(frozen)]
    try:
        for i in range(frozen):
            container[i] = _Replay(record)
        out_target = target(**batch)
    finally:
        for i, layer in enumerate(originals):
            container[i] = layer
    return out_online, out_target
