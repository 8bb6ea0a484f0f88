"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, run in a thread by a test."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Reply:
    """What the server sends for one request."""

    status: int = 200
    content: str | None = None
    """Message content of a 200 reply (``None``: ``body`` is sent as it is)."""
    body: str = ""
    delay_s: float = 0.0
    """Sleep before replying (longer than the client's timeout: a timeout)."""
    headers: dict[str, str] = field(default_factory=dict)


def completion(content: str) -> str:
    """A minimal chat-completions reply body."""
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
    }
    return json.dumps({"id": "x", "object": "chat.completion", "choices": [choice]})


def echo(index: int, body: dict[str, Any]) -> Reply:
    """Answers ``re: <the user message>`` and a second line a reader must drop."""
    return Reply(content=f"re: {body['messages'][-1]['content']}\nsecond line")


class StubServer:
    """Serves ``POST /v1/chat/completions`` by ``responder(request_index, json_body) -> Reply``.

    Records each request (``requests``: headers and body) and the most requests it held at once
    (``max_in_flight``).
    """

    def __init__(self, responder: Callable[[int, dict[str, Any]], Reply] = echo) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub._lock:
                    index = len(stub.requests)
                    stub.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": body}
                    )
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                reply = (
                    stub.responder(index, body)
                    if self.path == "/v1/chat/completions"
                    else Reply(404, body="no route")
                )
                time.sleep(reply.delay_s)
                with stub._lock:
                    stub.in_flight -= 1
                payload = (
                    completion(reply.content) if reply.content is not None else reply.body
                ).encode()
                try:
                    self.send_response(reply.status)
                    for key, value in {"Content-Type": "application/json", **reply.headers}.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
