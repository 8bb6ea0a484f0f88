"""Whether two ``benchmarks.general`` runs of a model have the same per-question results, cell by
cell and metric by metric (how the product's search was checked against the exploration patch)::

    python same_questions.py A.json:MODEL B.json:MODEL [C.json:MODEL D.json:MODEL ...]

Each pair of arguments compares the first file's model with the second file's."""

import json
import sys
from pathlib import Path


def per_question(arg: str) -> dict[str, dict[str, list[float]]]:
    path, model = arg.rsplit(":", 1)
    return {
        c["cell"]: c["per_question"][model] for c in json.loads(Path(path).read_text())["cells"]
    }


def main(args: list[str]) -> int:
    differing = 0
    for a, b in zip(args[::2], args[1::2]):
        left, right = per_question(a), per_question(b)
        for cell in sorted(left.keys() & right.keys()):
            for metric, scores in left[cell].items():
                other = right[cell][metric]
                diff = sum(x != y for x, y in zip(scores, other)) + abs(len(scores) - len(other))
                differing += diff
                print(f"{cell} {metric}: {len(scores)} questions, {diff} differ")
    print("same per-question results" if differing == 0 else f"{differing} results differ")
    return int(differing > 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
