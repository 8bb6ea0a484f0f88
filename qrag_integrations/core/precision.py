"""Reduced-precision compute for the encoders: ``torch.autocast`` in bfloat16.

On CPUs with bfloat16 matrix instructions (AVX512-BF16 or AMX: recent Xeon and EPYC) and on recent
GPUs, the encoders' matrix products in bfloat16 run ~1.5-2x faster than in float32 while weights,
pooling, normalisation and everything after the encoder (scans, Q-values, losses) stay float32. On
a CPU without such instructions autocast is *slower* than float32: :func:`bf16_is_fast` says which
case a machine is, and ``"auto"`` settings use it.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

#: CPU flags (``/proc/cpuinfo``) of bfloat16 matrix instructions that oneDNN uses.
_BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


@functools.cache
def _cpu_flags() -> frozenset[str]:
    """The CPU's feature flags on Linux (empty elsewhere: no way to tell without a private API)."""
    info = Path("/proc/cpuinfo")
    if not sys.platform.startswith("linux") or not info.exists():
        return frozenset()
    for line in info.read_text(errors="replace").splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def bf16_is_fast(device: torch.device | str) -> bool:
    """Whether bfloat16 autocast speeds up matrix products on ``device``: a CUDA device that
    supports bfloat16, or a Linux CPU with AVX512-BF16 / AMX-BF16."""
    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        return bool(_cpu_flags() & _BF16_CPU_FLAGS)
    return False


@contextlib.contextmanager
def bf16_autocast(device: torch.device | str, enabled: bool = True) -> Iterator[None]:
    """``torch.autocast`` in bfloat16 on ``device``'s type when ``enabled``, else nothing."""
    if not enabled:
        yield
        return
    with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        yield


class AutocastEncoder:
    """Calls an encoder (``input_ids``, ``attention_mask`` -> ``(B, D)``) under bfloat16
    autocast and returns float32 embeddings (the ``quantize="bf16"`` inference path)."""

    def __init__(self, encoder: nn.Module) -> None:
        self.encoder = encoder

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        with bf16_autocast(input_ids.device):
            out = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        return out.float()
