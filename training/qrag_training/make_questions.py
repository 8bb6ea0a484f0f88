"""``qrag-make-questions``: training lines from your documents, no questions needed.

    qrag-make-questions docs/ --out lines.jsonl                      # rules, no LLM
    qrag-make-questions notes.jsonl --out lines.jsonl --reader local   # SmolLM2 writes them
    qrag-make-questions --loader mypkg.load:documents --out lines.jsonl \\
        --reader 'openai:http://localhost:8000/v1#Qwen/Qwen2.5-7B-Instruct'
    qrag-train preset=custom_cpu env.path=lines.jsonl out_dir=runs/mine

Reads a folder of text / Markdown files (and JSONL files in it), a JSONL file (one document per
line: ``text``, optional ``id`` and ``title``) or the documents a Python function returns
(LangChain / LlamaIndex documents, dicts or strings); writes lines in the custom JSONL format
(``training/DATA_FORMAT.md``), then loads the file back with the trainer's loader to prove it
loads.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from qrag_integrations.cli_errors import one_line_errors
from qrag_training.answering import load_reader, reader_options
from qrag_training.data.custom import SPLITTERS, load_custom_jsonl
from qrag_training.questions import (
    QuestionSettings,
    call_loader,
    make_questions,
    read_path,
    write_lines,
)
from qrag_training.questions.settings import SPLIT_MODES

PROG = "qrag-make-questions"
#: Options that set a :class:`QuestionSettings` field of the same name: flag, type, help.
_SETTING_FLAGS: tuple[tuple[str, type, str], ...] = (
    ("--reader-batch", int, "prompts per reader call"),
    ("--questions-per-chunk", int, "most single-chunk questions per chunk"),
    (
        "--bridge-share",
        float,
        "most bridge questions, as a share of the single-chunk ones (0: none)",
    ),
    ("--bridge-max-chunks", int, "a linking name is named in 2 to this many chunks"),
    ("--chunk-size", int, "characters per chunk: train with the same env.chunk_size"),
    ("--chunk-overlap", int, "chunk overlap in characters (LangChain splitter)"),
    (
        "--pool-chunks",
        int,
        "chunks each line searches, at least (its documents, topped up with others)",
    ),
    ("--seed", int, "seed of every random choice"),
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    d = QuestionSettings()
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("inputs", nargs="*", help="folders, text / Markdown files or JSONL files")
    p.add_argument(
        "--loader",
        help="package.module:function returning documents (LangChain, LlamaIndex, dicts, strings)",
    )
    p.add_argument("--out", required=True, help="the JSONL file to write")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    p.add_argument("--text-key", default="text", help="key of a JSONL document's text")
    p.add_argument(
        "--reader",
        help="reader LLM that writes the questions: local, local:PATH, openai:BASE_URL#MODEL, vllm:MODEL (default: rules, no LLM)",
    )
    p.add_argument(
        "--reader-option",
        dest="reader_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument of the reader (JSON value, else a string; repeatable)",
    )
    p.add_argument(
        "--no-rules-fallback",
        action="store_true",
        help="drop a question the reader got wrong instead of keeping the rules' one",
    )
    for flag, kind, help_text in _SETTING_FLAGS:
        field = flag[2:].replace("-", "_")
        p.add_argument(flag, type=kind, default=getattr(d, field), help=help_text)
    p.add_argument(
        "--splitter", choices=SPLITTERS, default=d.splitter, help="train with the same env.splitter"
    )
    p.add_argument(
        "--split",
        choices=SPLIT_MODES,
        default=d.split,
        help="hash: no line mixes the trainer's train and held-out documents; none: you hold documents out yourself",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command (see the module docstring)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args(argv)
    with one_line_errors(PROG):
        if not args.inputs and not args.loader:
            raise ValueError("give input folders / files, or --loader package.module:function")
        settings = QuestionSettings(
            **{
                f[2:].replace("-", "_"): getattr(args, f[2:].replace("-", "_"))
                for f, _, _ in _SETTING_FLAGS
            },
            splitter=args.splitter,
            split=args.split,
            rules_fallback=not args.no_rules_fallback,
        )
        documents = [doc for path in args.inputs for doc in read_path(path, args.text_key)]
        if args.loader:
            documents += call_loader(args.loader)
        reader = (
            load_reader(args.reader, reader_options(args.reader_options)) if args.reader else None
        )
        lines, report = make_questions(documents, settings, reader)
        write_lines(args.out, lines, overwrite=args.overwrite)
        loaded = load_custom_jsonl(
            args.out, settings.chunk_size, settings.chunk_overlap, settings.splitter
        )
        print(report.summary())
        print(
            f"wrote {args.out}: {len(loaded)} lines, loaded back by the trainer's loader; train with "
            f"qrag-train preset=custom_cpu env.path={args.out} env.chunk_size={settings.chunk_size} "
            f"env.splitter={settings.splitter}"
        )


if __name__ == "__main__":
    main()
