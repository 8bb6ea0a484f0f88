"""What the first picks of a "Where is the <object>?" story are, per search setting: why 2-pick
precision falls with haystack length.

For one cell (task, length, noise, seed: the episodes :mod:`benchmarks.babilong.run` builds) every
``--checkpoint NAME=SPEC`` (a model spec with search settings, as the runner takes) searches
``--steps`` picks, and each of the first two picks gets a role:

- ``support``: a supporting fact (the holder's last take / drop of the object, its latest move);
- ``earlier move``: another move of the person whose move supports the answer (a superseded one);
- ``object fact``: another take or drop of the asked object;
- ``other fact``: another story fact (other people, other objects);
- ``noise``: a noise sentence.

It also says, per sample, whether the supporting move shares its position with an earlier move of
the same person once the first pick is made (the default's ``document_relative`` layout: the
picks cut the haystack, one document, into segments, each spread over ``M = int(relative_span *
relative_step)`` = 18 positions, ~1,100 sentences a position at 1M tokens), the order the search
could no longer see. Writes JSON (every sample's picks and roles) and prints a
Markdown table.

    python -m benchmarks.babilong.diagnose --seed 555580 --task qa2-moves --tokens 1000000 \\
        --noise mixed --n 60 --checkpoint default=packaged:qrag-general-minilm \\
        --checkpoint nosup=packaged:qrag-general-minilm:supersede_margin=none --out X.json
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from qrag_training.data.babi_world import MOVE, parse_fact
from qrag_training.data.babilong import STORY_TASKS, babilong_dataset, tokens_to_sentences
from qrag_training.data.episode import Episode
from qrag_training.data.noise import MIXED

from benchmarks.babilong.cells import POOL_MAX, Method
from benchmarks.babilong.run import noise_pool
from benchmarks.harness import results as harness
from benchmarks.harness.embedding_cache import CACHE_DIR, pool_embedder
from benchmarks.harness.model_specs import load_with_model_settings
from benchmarks.harness.noise_sources import UNSEEN_NOISE, noise_split_refusal
from qrag_integrations.core.atomic import write_json_atomic
from qrag_integrations.core.config import PositionMode, QRAGConfig
from qrag_integrations.core.positions import layout_positions, relative_positions_at

ROLES = ("support", "earlier move", "object fact", "other fact", "noise")


def pick_roles(episode: Episode, picks: Sequence[int]) -> list[str]:
    """The role (:data:`ROLES`) of each pick in a "Where is the <object>?" episode."""
    story = {i: parse_fact(episode.chunks[i]) for i in episode.meta["story_positions"]}
    support = set(episode.support)
    movers = {story[i].actor for i in support if story[i].kind == MOVE}
    obj = episode.question.rstrip("?").split()[-1]
    roles = []
    for i in picks:
        if i in support:
            roles.append("support")
        elif i not in story:
            roles.append("noise")
        elif story[i].kind == MOVE and story[i].actor in movers:
            roles.append("earlier move")
        elif story[i].obj == obj:
            roles.append("object fact")
        else:
            roles.append("other fact")
    return roles


def chunk_positions(
    config: QRAGConfig, n: int, ranks: Sequence[int], picked: Sequence[int]
) -> list[int]:
    """Positions of the chunks at ``ranks`` of a one-document haystack of ``n`` chunks after the
    picks ``picked``, under ``config``'s position mode."""
    mode, step, span = config.position_mode, config.relative_step, config.relative_span
    at = np.asarray(ranks, dtype=np.int64)
    if mode in (PositionMode.RELATIVE, PositionMode.DOCUMENT_RELATIVE):
        out = relative_positions_at(at, n, list(picked), step, span)
    elif mode is PositionMode.DOCUMENT:
        out = layout_positions(at, np.full_like(at, n), step, span)
    elif mode is PositionMode.ABSOLUTE:
        out = at
    else:
        out = np.zeros_like(at)
    return [int(p) for p in out]


def move_shares_position(episode: Episode, config: QRAGConfig, picked: Sequence[int]) -> bool:
    """Whether the supporting move sits at the same position as an earlier move of the same
    person once ``picked`` are picked: the order the search can no longer see."""
    story = {i: parse_fact(episode.chunks[i]) for i in episode.meta["story_positions"]}
    moves = [i for i in episode.support if story[i].kind == MOVE]
    if not moves:
        return False
    move = moves[0]
    earlier = [
        i for i, e in story.items() if e.kind == MOVE and e.actor == story[move].actor and i < move
    ]
    if not earlier:
        return False
    *before, last = chunk_positions(config, len(episode.chunks), [*earlier, move], picked)
    return last in before


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, required=True, help="a validation seed")
    p.add_argument("--task", choices=STORY_TASKS, default="qa2-moves")
    p.add_argument("--tokens", type=int, default=1_000_000)
    p.add_argument("--noise", choices=[MIXED, *UNSEEN_NOISE], default=MIXED)
    p.add_argument(
        "--pool-tokens",
        type=int,
        default=1_000_000,
        help="noise pool size in tokens (the runner's is its longest length: the same episodes)",
    )
    p.add_argument("--n", type=int, default=60)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--checkpoint", action="append", required=True, metavar="NAME=SPEC")
    p.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    if refusal := noise_split_refusal([args.noise], "val"):  # a diagnosis runs on validation seeds
        raise SystemExit(f"diagnose: {refusal}")
    harness.set_threads(args.threads)
    size = tokens_to_sentences(max(args.tokens, args.pool_tokens))
    pool = noise_pool(args.noise, min(size, POOL_MAX), args.seed)
    episodes = babilong_dataset(args.task, args.n, args.tokens, args.seed, noise=pool)
    result: dict = {
        "benchmark": "babilong-diagnose",
        "task": args.task,
        "tokens": args.tokens,
        "noise": pool.kind,
        "pool_sentences": len(pool),
        "seed": args.seed,
        "n": len(episodes),
        "steps": args.steps,
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "methods": {},
    }
    for name, spec in (c.split("=", 1) for c in args.checkpoint):
        model = load_with_model_settings(spec)
        embed, _ = pool_embedder(model, pool.sentences, args.cache_dir)
        started = time.perf_counter()
        found = Method(name, "multi-step", model=model, embed=embed).retrieve(episodes, args.steps)
        samples = []
        for e, r in zip(episodes, found):
            gold = set(e.support)
            samples.append(
                {
                    "picks": r.picked,
                    "roles": pick_roles(e, r.picked[:2]),
                    "em@facts": int(gold <= set(r.picked[: len(gold)])),
                    "em@budget": int(gold <= set(r.picked)),
                    "move_shares_position": move_shares_position(e, model.config, r.picked[:1]),
                }
            )
        result["methods"][name] = {
            "spec": spec,
            "seconds": round(time.perf_counter() - started, 1),
            "em@facts": sum(s["em@facts"] for s in samples) / len(samples),
            "em@budget": sum(s["em@budget"] for s in samples) / len(samples),
            "roles": {
                f"pick {j + 1}": dict(Counter(s["roles"][j] for s in samples)) for j in range(2)
            },
            "samples": samples,
        }
        write_json_atomic(args.out, result)
        print(table(result), flush=True)
    return result


def table(result: dict) -> str:
    """Markdown: per method, EM at 2 and 6 picks and the roles of picks 1 and 2."""
    head = "| method | em@facts | em@budget | " + " | ".join(f"pick 2: {r}" for r in ROLES)
    head += " | misses with the move's position shared / all misses"
    lines = [head + " |", "|---" * (4 + len(ROLES)) + "|"]
    for name, m in result["methods"].items():
        roles = m["roles"]["pick 2"]
        cells = " | ".join(str(roles.get(r, 0)) for r in ROLES)
        misses = [s for s in m["samples"] if not s["em@facts"]]
        shared = sum(s["move_shares_position"] for s in misses)
        lines.append(
            f"| {name} | {m['em@facts']:.3f} | {m['em@budget']:.3f} | {cells} | "
            f"{shared} / {len(misses)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
