"""``OpenAICompatibleReader`` against a scripted chat-completions server on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest
from openai_stub import Reply, StubServer

from qrag_integrations.llm import OpenAICompatibleReader, ReaderError
from qrag_integrations.llm.openai_http import chat_completions_url

FAST = {"backoff_s": 0.01, "timeout_s": 5.0}


def reader_for(server: StubServer, **options: Any) -> OpenAICompatibleReader:
    return OpenAICompatibleReader(server.url, "stub-model", **{**FAST, **options})


def test_answers_in_order_with_the_first_line_and_a_well_formed_request() -> None:
    prompts = [f"question {i}" for i in range(7)]
    with (
        StubServer() as server,
        reader_for(server, api_key="sk-test", max_tokens=12, system_prompt="be brief") as reader,
    ):
        assert reader.generate(prompts) == [f"re: {p}" for p in prompts]
        assert reader.generate([]) == []
    assert len(server.requests) == len(prompts)
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "stub-model" and body["temperature"] == 0 and body["max_tokens"] == 12
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["messages"][1]["role"] == "user"


def test_base_url_with_or_without_v1() -> None:
    assert chat_completions_url("http://h:8000") == "http://h:8000/v1/chat/completions"
    assert chat_completions_url("http://h:8000/v1/") == "http://h:8000/v1/chat/completions"


def test_a_timeout_is_retried() -> None:
    def slow_first(index: int, body: dict[str, Any]) -> Reply:
        return Reply(content="late", delay_s=2.0) if index == 0 else Reply(content="kitchen")

    with StubServer(slow_first) as server, reader_for(server, timeout_s=0.3) as reader:
        assert reader.generate(["Where is the apple?"]) == ["kitchen"]
    assert len(server.requests) == 2


@pytest.mark.parametrize(("status", "headers"), [(500, {}), (503, {}), (429, {"Retry-After": "0"})])
def test_server_errors_and_rate_limits_are_retried(status: int, headers: dict[str, str]) -> None:
    def fail_first(index: int, body: dict[str, Any]) -> Reply:
        return (
            Reply(status, body="busy", headers=headers) if index == 0 else Reply(content="kitchen")
        )

    with StubServer(fail_first) as server, reader_for(server) as reader:
        assert reader.generate(["Where is the apple?"]) == ["kitchen"]
    assert len(server.requests) == 2


def test_a_persistent_error_is_a_reader_error_naming_url_and_status() -> None:
    with (
        StubServer(lambda i, b: Reply(500, body="engine crashed")) as server,
        reader_for(server, max_retries=2) as reader,
        pytest.raises(
            ReaderError,
            match=r"POST http://127\.0\.0\.1:\d+/v1/chat/completions returned HTTP 500 after 3 tries: engine crashed",
        ),
    ):
        reader.generate(["q"])
    assert len(server.requests) == 3


def test_a_client_error_is_not_retried() -> None:
    with (
        StubServer(lambda i, b: Reply(400, body="unknown model")) as server,
        reader_for(server) as reader,
        pytest.raises(ReaderError, match="HTTP 400 after 1 try: unknown model"),
    ):
        reader.generate(["q"])
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "body", ["not json", '{"choices": []}', '{"choices": [{"message": {"content": null}}]}']
)
def test_a_malformed_reply_is_a_reader_error(body: str) -> None:
    with (
        StubServer(lambda i, b: Reply(body=body)) as server,
        reader_for(server) as reader,
        pytest.raises(ReaderError, match=r"/v1/chat/completions returned"),
    ):
        reader.generate(["q"])


def test_an_unreachable_server_is_a_reader_error_after_the_retries() -> None:
    with StubServer() as server:
        url = server.url
    reader = OpenAICompatibleReader(url, "m", max_retries=1, **FAST)
    with pytest.raises(ReaderError, match=r"failed after 2 tries: ConnectError"):
        reader.generate(["q"])


@pytest.mark.parametrize("max_in_flight", [1, 3])
def test_max_in_flight_caps_concurrent_requests(max_in_flight: int) -> None:
    with (
        StubServer(lambda i, b: Reply(content=f"a{i}", delay_s=0.15)) as server,
        reader_for(server, max_in_flight=max_in_flight) as reader,
    ):
        answers = reader.generate([f"q{i}" for i in range(8)])
    assert len(answers) == 8 and len(server.requests) == 8
    assert server.max_in_flight == max_in_flight


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ReaderError, match="max_in_flight >= 1"):
        OpenAICompatibleReader("http://localhost:1", "m", max_in_flight=0)
