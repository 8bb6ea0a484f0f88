"""A reader on any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM's ``vllm serve``,
llama.cpp's server, TGI, Ollama, OpenAI itself, ...), over ``httpx``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

from qrag_integrations.llm.base import (
    ReaderError,
    ReaderUnavailable,
    chat_messages,
    first_line,
)

#: HTTP statuses worth another try: rate limited, or a server-side failure.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


def chat_completions_url(base_url: str) -> str:
    """``base_url`` + ``/chat/completions`` if it ends in ``/v1``, else + ``/v1/chat/...``."""
    base = base_url.rstrip("/")
    return f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"


class OpenAICompatibleReader:
    """Greedy answers from an OpenAI-compatible chat-completions server.

    Setup:
        Base install (``httpx`` comes with it). Start a server, e.g.
        ``vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000``.

    Usage:
        >>> reader = OpenAICompatibleReader("http://localhost:8000/v1", "Qwen/Qwen2.5-7B-Instruct")
        >>> reader.generate(["Question: What colour is the sky?\\nAnswer:"])
        ['Blue']

    Each prompt is one request (one user message, ``temperature=0``); up to ``max_in_flight``
    requests run at once. Timeouts, connection errors and statuses 408 / 429 / 5xx are retried
    ``max_retries`` times with exponential backoff (a ``Retry-After`` header is honoured, up to
    30 s); anything else, or a reply without ``choices[0].message.content``, raises
    :class:`ReaderError` naming the URL and the status.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        max_in_flight: int = 8,
        max_tokens: int = 32,
        backoff_s: float = 0.5,
        system_prompt: str | None = None,
    ) -> None:
        """Set up the client (no request is made here).

        Args:
            base_url: server root, with or without the trailing ``/v1``.
            model: the ``model`` field of each request.
            api_key: sent as ``Authorization: Bearer ...``; ``None`` sends no header.
            timeout_s: per-request timeout (connect, read, write), seconds.
            max_retries: further tries of a request after a retryable failure.
            max_in_flight: most requests open at once.
            max_tokens: most tokens generated per answer.
            backoff_s: wait before the first retry; doubled at each further one.
            system_prompt: system message prepended to each request.
        """
        try:
            import httpx
        except ImportError as exc:
            raise ReaderUnavailable(f"the OpenAI-compatible reader needs httpx: {exc}") from exc
        if max_in_flight < 1 or max_retries < 0 or max_tokens < 1 or timeout_s <= 0:
            raise ReaderError(
                "need max_in_flight >= 1, max_retries >= 0, max_tokens >= 1, timeout_s > 0; got "
                f"{max_in_flight}, {max_retries}, {max_tokens}, {timeout_s}"
            )
        self.url = chat_completions_url(base_url)
        self.model = model
        self.name = f"openai:{model}"
        self.max_retries = max_retries
        self.max_in_flight = max_in_flight
        self.max_tokens = max_tokens
        self.backoff_s = backoff_s
        self.system_prompt = system_prompt
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=max_in_flight)
        self._client = httpx.Client(timeout=timeout_s, headers=headers, limits=limits)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def generate(self, prompts: Sequence[str]) -> list[str]:
        """One answer per prompt, in order; at most ``max_in_flight`` requests at a time."""
        if not prompts:
            return []
        with ThreadPoolExecutor(max_workers=min(self.max_in_flight, len(prompts))) as pool:
            return list(pool.map(self._answer, prompts))

    def _body(self, prompt: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": chat_messages(prompt, self.system_prompt),
            "temperature": 0,
            "max_tokens": self.max_tokens,
        }

    def _answer(self, prompt: str) -> str:
        import httpx

        body = self._body(prompt)
        for attempt in range(self.max_retries + 1):
            last_try = attempt == self.max_retries
            try:
                response = self._client.post(self.url, json=body)
            except httpx.TransportError as exc:  # timeouts, refused / dropped connections
                if last_try:
                    raise ReaderError(
                        f"POST {self.url} failed after {attempt + 1} tries: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                self._wait(attempt, None)
                continue
            if response.status_code in RETRY_STATUSES and not last_try:
                self._wait(attempt, response.headers.get("retry-after"))
                continue
            return self._parse(response, tries=attempt + 1)
        raise AssertionError("unreachable")  # the last try always returns or raises

    def _wait(self, attempt: int, retry_after: str | None) -> None:
        delay = self.backoff_s * 2**attempt
        if retry_after is not None:
            try:
                delay = max(delay, min(float(retry_after), 30.0))
            except ValueError:
                pass  # an HTTP date: keep the backoff
        time.sleep(delay)

    def _parse(self, response: Any, *, tries: int) -> str:
        if response.status_code != 200:
            raise ReaderError(
                f"POST {self.url} returned HTTP {response.status_code} after {tries} "
                f"tr{'y' if tries == 1 else 'ies'}: {response.text[:300]}"
            )
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ReaderError(
                f"POST {self.url} returned HTTP 200 without choices[0].message.content: "
                f"{response.text[:300]}"
            ) from exc
        if not isinstance(content, str):
            raise ReaderError(
                f"POST {self.url} returned a non-text message content: {content!r:.300}"
            )
        return first_line(content)
