"""Run ``qrag-train`` (under torchrun or alone) and write each rank's weight hashes afterwards.

    torchrun --nproc_per_node 2 tests/ddp_worker.py HASH_DIR out_dir=... <more qrag-train overrides>

Every rank writes ``HASH_DIR/rank<r>.json`` (outside the run folder) with the fingerprints of its
trained weights and target encoders, its step counters and world size, so a test can compare the
ranks' models, which only rank 0 saves.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from qrag_training import train

from qrag_integrations.core.checkpoint import tensor_fingerprint


def main() -> None:
    hash_dir, overrides = Path(sys.argv[1]), sys.argv[2:]
    trainer_train = train.Trainer.train

    def train_and_hash(self: train.Trainer) -> dict[str, Any]:
        record = trainer_train(self)
        report = {
            "trained": tensor_fingerprint(self.model.trained_state_dict()),
            "targets": tensor_fingerprint(self.agent.target_tensors()),
            "updates": self.agent.updates,
            "env_steps": self.agent.env_steps,
            "world_size": self.dist.world_size,
        }
        hash_dir.mkdir(parents=True, exist_ok=True)
        (hash_dir / f"rank{self.dist.rank}.json").write_text(json.dumps(report), encoding="utf-8")
        return record

    train.Trainer.train = train_and_hash  # type: ignore[method-assign]
    sys.argv = [sys.argv[0], *overrides]
    train.main()


if __name__ == "__main__":
    main()
