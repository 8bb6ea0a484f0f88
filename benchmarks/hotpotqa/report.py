"""Print the HotpotQA tables of benchmarks/README.md from the result JSONs (no number typed by hand).

    python -m benchmarks.hotpotqa.report

Tables: the untrained design choice on the validation slice (question_weight), the ablation of
what the shipped checkpoint's parts contributed (validation slice), the warm start's validation
curve (from the run's metrics.jsonl, if the run folder is there) and the held-out results.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
KS = (1, 2, 4)


def load(name: str) -> dict | None:
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


def margins_table(design: list[dict]) -> str:
    """EM@k and recall@k minus dense top-k, per untrained variant and setting (val)."""
    rows: dict[tuple[str, str], dict] = {}
    for result in design:
        for setting, block in result["settings"].items():
            for method, m in block["methods"].items():
                rows[(setting, method)] = m
    lines = [
        "| setting | method | "
        + " | ".join(f"EM@{k} - dense" for k in KS[1:])
        + " | "
        + " | ".join(f"recall@{k} - dense" for k in KS)
        + " | worst EM margin |",
        "|---|---|" + "---:|" * (len(KS) * 2),
    ]
    for (setting, method), m in sorted(rows.items()):
        if not method.startswith("untrained"):
            continue
        dense = rows[(setting, "dense")]
        em = [m[f"em@{k}"] - dense[f"em@{k}"] for k in KS[1:]]
        rc = [m[f"recall@{k}"] - dense[f"recall@{k}"] for k in KS]
        lines.append(
            f"| {setting} | {method} | "
            + " | ".join(f"{x:+.3f}" for x in em + rc)
            + f" | {min(em):+.3f} |"
        )
    return "\n".join(lines)


def methods_table(result: dict, rename: dict[str, str] | None = None) -> str:
    rename = rename or {}
    lines = [
        "| setting | method | EM@2 | EM@4 | recall@1 | recall@2 | recall@4 | fact F1 (2 picks) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for setting, block in result["settings"].items():
        for name, m in block["methods"].items():
            lines.append(
                f"| {setting} ({block['questions']} q) | {rename.get(name, name)} | {m['em@2']:.3f} | "
                f"{m['em@4']:.3f} | {m['recall@1']:.3f} | {m['recall@2']:.3f} | {m['recall@4']:.3f} | "
                f"{m['fact_f1']:.3f} |"
            )
    return "\n".join(lines)


def stop_table(result: dict) -> str:
    lines = [
        "| setting | method | stop_threshold | EM | recall | mean steps |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for setting, block in result["settings"].items():
        for name, m in block["methods"].items():
            for row in m.get("stop", []):
                lines.append(
                    f"| {setting} | {name} | {row['stop_threshold']:g} | {row['em']:.3f} | "
                    f"{row['recall']:.3f} | {row['mean_steps']:.2f} |"
                )
    return "\n".join(lines)


def curve_table(metrics: Path) -> str | None:
    if not metrics.exists():
        return None
    lines = [
        "| update | questions seen | val fact EM (EM@2) | val fact F1 | train hop accuracy |",
        "|---:|---:|---:|---:|---:|",
    ]
    for line in metrics.read_text().splitlines():
        r = json.loads(line)
        if "eval/fact_em" in r:
            lines.append(
                f"| {r['step']} | {r['step'] * 8} | {r['eval/fact_em']:.3f} | {r['eval/fact_f1']:.3f} | "
                f"{r.get('hop_accuracy', float('nan')):.3f} |"
            )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--metrics",
        type=Path,
        default=RESULTS / "hotpotqa_nexthop_metrics.jsonl",
        help="metrics.jsonl of the warm-start run (a copy of runs/hotpotqa-nexthop/metrics.jsonl)",
    )
    args = p.parse_args()
    design = [
        d
        for d in (
            load("hotpotqa_val_untrained_design.json"),
            load("hotpotqa_val_untrained_design2.json"),
        )
        if d
    ]
    if design:
        print("### untrained variants minus dense top-k (val)\n")
        print(margins_table(design) + "\n")
    val = load("hotpotqa_val_full.json")
    if val:
        print("### validation slice, all methods\n")
        print(methods_table(val) + "\n")
        print(stop_table(val) + "\n")
    curve = curve_table(args.metrics)
    if curve:
        print(f"### warm-start validation curve ({args.metrics.name})\n")
        print(curve + "\n")
    for name, label in (
        ("hotpotqa_eval_full.json", "previous checkpoint (CPU-trained)"),
        ("hotpotqa_eval_full_v2.json", "shipped checkpoint (GPU-trained)"),
    ):
        test = load(name)
        if test:
            print(f"### held-out bucket 0: {label} ({name})\n")
            print(methods_table(test) + "\n")
            print(stop_table(test) + "\n")


if __name__ == "__main__":
    main()
