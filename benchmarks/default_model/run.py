"""Which model should a retriever built without ``checkpoint=`` use? bAbI-style side of the choice.

The HotpotQA checkpoint becomes the default only if it does not lose to the untrained default on
the bAbI-style tasks (issue "Real text first"). This runs ``qrag-eval``'s own evaluation
(``qrag_training.evaluate.run``, the product's search) on generated BabiLong-style episodes for
each task and pick budget, for every model given, in one process, and writes JSON + a table:

    python -m benchmarks.default_model.run \\
        --model untrained=packaged:all-MiniLM-L6-v2 \\
        --model hotpotqa=qrag_integrations/assets/hotpotqa_checkpoint \\
        --model demo=qrag_integrations/assets/demo_checkpoint

Episodes come from seed 424242 (used by neither training, ``seed*1000+pass``, nor checkpoint
selection, ``eval_seed`` 999999), at about ``--tokens`` tokens of haystack each.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from qrag_training.evaluate import build_parser, run

from benchmarks.harness import results as harness

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--model",
        action="append",
        required=True,
        metavar="NAME=CHECKPOINT",
        help="a checkpoint folder or an encoder name (untrained; e.g. packaged:all-MiniLM-L6-v2)",
    )
    p.add_argument("--tasks", default="qa1,qa2,qa3", help="comma-separated bAbI tasks")
    p.add_argument("--steps", default="2,6", help="comma-separated pick budgets")
    p.add_argument("--tokens", type=int, default=4000, help="haystack length per episode")
    p.add_argument("--n", type=int, default=100, help="episodes per task")
    p.add_argument("--seed", type=int, default=424242)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS / "default_model_babi.json")
    args = p.parse_args(argv)
    models = dict(m.split("=", 1) for m in args.model)
    rows = []
    for task in args.tasks.split(","):
        for steps in [int(s) for s in args.steps.split(",")]:
            for name, checkpoint in models.items():
                eval_args = build_parser().parse_args(
                    [
                        checkpoint,
                        "--env",
                        "babilong",
                        "--set",
                        f"env.task={task}",
                        "--set",
                        f"env.eval_target_tokens={args.tokens}",
                        "--n",
                        str(args.n),
                        "--seed",
                        str(args.seed),
                        "--steps",
                        str(steps),
                        "--threads",
                        str(args.threads),
                    ]
                )
                summary = run(eval_args)
                rows.append(
                    {
                        "model": name,
                        "checkpoint": checkpoint,
                        "task": task,
                        "steps": steps,
                        **{
                            k: summary[k]
                            for k in ("fact_em", "fact_f1", "mean_steps", "n", "seconds")
                        },
                    }
                )
                print(
                    f"{task} {steps} picks {name:>10}: fact EM {summary['fact_em']:.3f} "
                    f"F1 {summary['fact_f1']:.3f} ({summary['seconds']:.0f} s)",
                    flush=True,
                )
    result = {
        "benchmark": "default_model_babi",
        "tokens": args.tokens,
        "seed": args.seed,
        "models": models,
        "command": harness.command_line(list(argv) if argv is not None else None),
        "code": harness.code_version(),
        "machine": harness.machine_info(args.threads, "cpu"),
        "rows": rows,
    }
    harness.write_json(args.out, result)
    print(markdown_table(result))
    print(f"wrote {args.out}")
    return result


def markdown_table(result: dict) -> str:
    """One row per task and pick budget, one column per model: fact EM / F1."""
    models = list(result["models"])
    lines = [
        "| task | picks | " + " | ".join(f"{m}: fact EM / F1" for m in models) + " |",
        "|---|---|" + "---|" * len(models),
    ]
    keys = dict.fromkeys((r["task"], r["steps"]) for r in result["rows"])
    for task, steps in keys:
        cells = []
        for m in models:
            r = next(
                r for r in result["rows"] if (r["task"], r["steps"], r["model"]) == (task, steps, m)
            )
            cells.append(f"{r['fact_em']:.3f} / {r['fact_f1']:.3f}")
        lines.append(f"| {task} | {steps} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
