"""No secret in any log line or error message: a whole `kgstream run` with the gateway's
auth token, a Redis password and the LLM and embedding API keys all set, logging everything
(DEBUG, the libraries too), through a wrong token, an LLM that echoes the key it was sent, a
Redis outage and a stop (real redis-server with requirepass, the real gRPC wire)."""

from __future__ import annotations

import re
import signal
from pathlib import Path
from urllib.parse import quote

import grpc

from kgstream_protos.v1 import query_pb2 as pb
from kgstream_protos.v1 import query_pb2_grpc
from tests.kgstream.processes import Output, clean_environment, kgstream
from tests.support.llm_server import OpenAICompatibleServer
from tests.support.redis import RedisTestServer
from tests.support.wait import wait_until

SECRETS = {
    "KGSTREAM_GRPC_AUTH_TOKEN": "tok-Zq8vWm3LxR7pN2",
    "KGSTREAM_REDIS_PASSWORD": "pw-Hk4TsB9cYd1uF6",
    "OPENAI_API_KEY": "sk-llm-Jr5XeG2wQa8mV3",
    "KGSTREAM_EMBEDDING_API_KEY": "sk-emb-Pn7CzL4vKt0yS9",
}


def leaked(text: str) -> list[str]:
    """The secrets (or their URL-escaped forms) found in `text`."""
    return [
        name for name, secret in SECRETS.items() if secret in text or quote(secret, safe="") in text
    ]


def test_a_run_with_every_secret_set_never_logs_or_returns_one(
    llm_server: OpenAICompatibleServer, tmp_path: Path
) -> None:
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "atlas.md").write_text("Carla Diaz leads the Atlas Project at Northwind Labs.")
    redis_server = RedisTestServer(password=SECRETS["KGSTREAM_REDIS_PASSWORD"], persistent=True)
    redis_server.start()
    # The first chat call fails the way OpenAI does, quoting the key it was sent.
    echo = "Incorrect API key provided: {}."
    llm_server.fail_next(
        401, body=echo.format(SECRETS["OPENAI_API_KEY"]), endpoint="chat.completions"
    )
    env = {
        **clean_environment(llm_server.base_url),
        **SECRETS,
        "KGSTREAM_REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "OPENAI_BASE_URL": llm_server.base_url,
        "KGSTREAM_LLM_MODEL": "test-chat-model",
        "KGSTREAM_LLM_MAX_RETRIES": "0",
        "KGSTREAM_LOG_LEVEL": "DEBUG",
        "KGSTREAM_LIBRARY_LOG_LEVEL": "DEBUG",
        "KGSTREAM_LOG_FORMAT": "json",
    }
    running = kgstream(
        "run", "--watch", str(folder), "--data", str(data), "--grpc", "127.0.0.1:0", env=env
    )
    output = Output(running)
    details: list[str] = []
    try:
        wait_until(lambda: output.has("gateway on"), 120, "the gateway banner")
        address = re.search(r"gateway on (\S+)", "".join(output.lines)).group(1)  # type: ignore[union-attr]
        channel = grpc.insecure_channel(address)
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        token = (("authorization", f"Bearer {SECRETS['KGSTREAM_GRPC_AUTH_TOKEN']}"),)
        request = pb.QueryRequest(question="Who leads the Atlas Project?")

        def error_of(metadata: tuple[tuple[str, str], ...], call=stub.Retrieve) -> str:
            try:
                call(request, metadata=metadata, timeout=30)
            except grpc.RpcError as error:
                details.append(error.details() or "")
                return error.code().name
            return "OK"

        document = pb.GetDocumentRequest(doc_id="atlas.md")

        def indexed() -> bool:
            try:
                found = stub.GetDocument(document, metadata=token, timeout=30).document
            except grpc.RpcError:
                return False
            return found.status in (pb.DOCUMENT_STATUS_PROCESSED, pb.DOCUMENT_STATUS_FAILED)

        wait_until(indexed, 120, "the document indexed (or failed)")
        assert error_of((("authorization", "Bearer wrong"),)) == "UNAUTHENTICATED"
        assert stub.Query(request, metadata=token, timeout=60).answer
        # The query's embedding call fails the same way.
        llm_server.fail_next(
            401, body=echo.format(SECRETS["KGSTREAM_EMBEDDING_API_KEY"]), endpoint="embeddings"
        )
        unseen = pb.QueryRequest(question="Which village gets the batteries?")
        assert error_of(token, lambda r, **kw: stub.Retrieve(unseen, **kw)) == "UNAVAILABLE"
        assert details[-1].startswith("the embedding call failed: "), details[-1]
        assert llm_server.count("embeddings") >= 2

        port = redis_server.port
        redis_server.stop(keep_data=True)
        wait_until(lambda: output.has("health NOT_SERVING"), 60, "the outage logged")
        assert error_of(token) == "UNAVAILABLE"
        redis_server.start(port)
        wait_until(lambda: output.has("health SERVING again"), 60, "the recovery logged")
        channel.close()
    finally:
        running.send_signal(signal.SIGTERM)
        running.wait(timeout=60)
        redis_server.stop()
    logged = output.join()
    assert '"level": "DEBUG"' in logged or "DEBUG" in logged  # everything was logged
    assert llm_server.count("chat.completions") >= 2  # the failing call and the answer
    assert "Incorrect API key provided: ****." in logged  # the echo was seen, and masked
    leaks = [line for line in logged.splitlines() if leaked(line)]
    assert leaks == [], "\n".join(leaks)
    assert leaked("\n".join(details)) == [], details
