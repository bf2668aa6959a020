"""kgstream's one settings object.

Built once, from (lowest to highest precedence) the defaults below, an optional
TOML file, the environment (`KGSTREAM_<FIELD>`, plus the usual
`OPENAI_BASE_URL` / `OPENAI_API_KEY`) and command-line overrides, then passed
explicitly. Fields are flat so every one has an obvious env name and TOML key;
the `*_options()` methods build the typed option objects each part takes.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from connectors.redis.projection_control import ProjectionMode
from connectors.vectors.qdrant_cluster import QdrantClusterOptions
from dataflow.core.chunking import ChunkingOptions
from dataflow.core.contributions import RenderOptions
from dataflow.core.documents import DocumentLimits
from dataflow.core.prompts import ExtractionPromptOptions
from gateway.types import RequestLimits
from kgstream.logs import level_number

ENV_PREFIX = "KGSTREAM_"
FILE_SUFFIX = "_FILE"  # KGSTREAM_X_FILE=/run/secrets/x: the setting's value is that file's content
# Names that OpenAI-compatible tooling already uses, honoured as aliases.
ENV_ALIASES = {"OPENAI_BASE_URL": "llm_base_url", "OPENAI_API_KEY": "llm_api_key"}
SECRET_FIELDS = frozenset({"llm_api_key", "embedding_api_key", "grpc_auth_token", "redis_password"})


class SettingsError(ValueError):
    """A setting has a value kgstream cannot use; the message names it."""


@dataclass(frozen=True)
class Settings:
    # Every field has a comment of its own, right above it or at its line's end: what it does,
    # its unit and its limits. docs/settings.md is generated from them (scripts/gen-docs), and
    # the generator stops when a field has none. Section headings stand apart (a blank line).

    # -- where state lives

    # the directory of this process's state: the recovery partitions (`recovery/`), the
    # embedded Redis and vector store when no server is set, and the LLM's reply cache; one
    # writer at a time
    data_dir: Path = Path("kgstream-data")
    # the index's name in the stores (Redis keys `kg:<workspace>:...`, vector collections
    # `kg_<workspace>_...`), so several indexes can share one Redis and one Qdrant; 1-64
    # characters of A-Z a-z 0-9 _ . -
    workspace: str = "default"

    # -- documents and chunking (LightRAG's defaults)

    # a document over this many bytes is FAILED as too large (the folder source reads no
    # further than that); > 0
    max_document_bytes: int = 10_000_000
    # a large document is passed on from extraction in pieces of this many extracted chunks
    # (0: whole), each committed and shown as progress; documents saved after it overtake it
    # (docs/decisions/0004-extraction-off-the-dataflow-thread.md)
    document_chunks_per_round: int = 64
    # the dataflow's epoch in seconds (Bytewax's epoch interval; > 0): keyed state is
    # snapshotted into the recovery partitions once per epoch, and a restart after a crash
    # replays at most about one epoch of input (docs/decisions/0005-epochs-of-ten-seconds.md)
    epoch_seconds: float = 10.0
    # the longest chunk, in tokens of `tokenizer_encoding`; > 0
    chunk_token_size: int = 1200
    # tokens that consecutive windows of a long text share; >= 0 and < chunk_token_size
    chunk_overlap_tokens: int = 100
    # a separator the text is split on first (e.g. `"\n\n"`): each piece that fits is a chunk,
    # a longer one is cut into token windows; unset: token windows over the whole text
    split_by_character: str | None = None
    # the tiktoken encoding that chunk sizes and the gateway's token budgets are counted in:
    # cl100k_base or o200k_base (both ship with kgstream; nothing is downloaded)
    tokenizer_encoding: str = "cl100k_base"

    # -- extraction: the offline extractor unless an LLM endpoint is set

    # an OpenAI-compatible endpoint (e.g. https://api.openai.com/v1) for extraction,
    # summaries, query keywords and answers; unset: the offline extractor, offline keywords
    # and extractive answers
    llm_base_url: str | None = None
    # the LLM endpoint's API key (a secret: masked in `kgstream config`); unset: for an
    # endpoint that checks none
    llm_api_key: str | None = None
    # the model every LLM call asks for; its replies are cached by prompt and model under
    # data_dir, so another model costs new calls
    llm_model: str = "gpt-4o-mini"
    # the longest one LLM request may take, in seconds, before it counts as failed (and is
    # retried); > 0
    llm_timeout_seconds: float = 60.0
    # LLM requests in flight at once, shared by extraction, summaries and the gateway's
    # answers in one process; >= 1
    llm_max_concurrency: int = 4
    # retries of an LLM request that failed in a way retrying may fix (timeouts, 429, 5xx, a
    # reply not in the asked format), after the first try; a chunk whose extraction still
    # fails leaves its document FAILED (`kgstream retry-failed`); >= 0
    llm_max_retries: int = 3
    # LLM extraction's "what did you miss?" passes per chunk after the first (LightRAG's
    # gleaning), each one more call; 0: none
    max_gleaning: int = 1
    # the entity types the LLM is asked to extract (comma-separated; none blank); the
    # offline extractor keeps its own
    entity_types: tuple[str, ...] = ("organization", "person", "geo", "event", "category")
    # the language the LLM writes names, keywords, descriptions and summaries in
    language: str = "English"

    # -- descriptions: an entity's or relation's fragment descriptions joined, or summarised
    # (by the LLM, else extractively) above these sizes

    # a record with more than this many distinct descriptions has them summarised; >= 1
    summarize_over_fragments: int = 8
    # a record whose descriptions joined are over this many tokens has them summarised; >= 1
    summarize_over_tokens: int = 1200
    # the longest summary, in tokens (the LLM is asked for it; the extractive one keeps the
    # best-supported descriptions that fit); >= 1
    summary_max_tokens: int = 500
    # seconds: a key due a summary is summarised at most once per this long (0: on every
    # change; docs/decisions/0025-no-summary-window-by-default.md); with an LLM only
    summary_coalesce_seconds: float = 0.0

    # -- embeddings: the local MiniLM unless an embedding endpoint is set

    # an OpenAI-compatible endpoint for embeddings; unset: the local all-MiniLM-L6-v2
    embedding_base_url: str | None = None
    # the embedding endpoint's API key (a secret: masked in `kgstream config`); unset: for
    # an endpoint that checks none
    embedding_api_key: str | None = None
    # the model the embedding endpoint is asked for; with the dimension it names the vector
    # collections, so another model needs `kgstream rebuild-vectors` (unused by the local
    # model)
    embedding_model: str = "all-MiniLM-L6-v2"
    # the width of the embedding endpoint's vectors: a reply of another width is an error
    # (the local model's are 384 wide whatever this says); >= 1
    embedding_dimension: int = 384
    # local model and texts over its 256 tokens: "windows" (embed overlapping windows and
    # average: the whole chunk counts) or "truncate" (its start only; ~5x faster on long chunks)
    embedding_long_text: str = "windows"
    # onnxruntime threads of the local model; 0: one per core this process may run on, at
    # most 4. With several dataflow workers, 1 keeps them from fighting for the cores.
    embedding_threads: int = 0
    # local model: int8 matrix products (a dynamically quantized copy, made once into the
    # model cache; about 1.5x faster, docs/decisions/0015-int8-minilm.md) or false: the
    # shipped model's float products, another vector space (`kgstream rebuild-vectors`
    # re-embeds an index made with the other)
    embedding_quantized: bool = True

    # -- stores: embedded unless URLs are set

    # a Redis server (redis://, rediss:// for TLS, unix://) or a Redis Cluster
    # (redis+cluster://host:port,host:port, rediss+cluster://); unset: a redis-server
    # started on a private socket under data_dir
    redis_url: str | None = None
    # joined to redis_url (URL-escaped), e.g. from KGSTREAM_REDIS_PASSWORD_FILE; not with a
    # password in redis_url (a secret: masked in `kgstream config`)
    redis_password: str | None = None
    # the graph as a property graph in FalkorDB, kept exact by the commits that write the
    # records, for Cypher (docs/graph.md): "auto" (where the Redis server has the FalkorDB
    # module, as the embedded one does), "on" (a server without it is refused at start, with
    # how to get it) or "off"
    graph_projection: str = "auto"
    # a Qdrant server or cluster (http://host:6333); unset: Qdrant Edge in process, under
    # data_dir
    qdrant_url: str | None = None
    # shards of each collection kgstream creates on the Qdrant server (unset: Qdrant's
    # default, one per node); >= 1; an existing collection keeps its layout
    qdrant_shard_number: int | None = None
    # copies of each shard of a new collection (unset: Qdrant's default, 1); >= 1
    qdrant_replication_factor: int | None = None
    # replicas that must apply a write before Qdrant confirms it (unset: 1); at most
    # qdrant_replication_factor, and equal to it for read-your-writes on every replica
    qdrant_write_consistency_factor: int | None = None

    # -- event log

    # Kafka brokers (host:port, comma-separated): `kgstream run` reads the topic instead of
    # a folder, and Ingest publishes to it; unset: a watched folder
    kafka_bootstrap_servers: str | None = None
    # the Kafka topic of document events, keyed by doc id (the event format: docs/sources.md)
    kafka_topic: str = "kgstream.documents"
    # where undecodable messages are copied (with reason headers); unset: logged, counted and
    # listed by `kgstream status` only; never kafka_topic
    dlq_topic: str | None = None

    # -- gateway

    # host:port the gRPC gateway listens on (port 0: a free one, printed at start)
    grpc_address: str = "127.0.0.1:50051"
    # a bearer token every call of the gRPC and HTTP APIs must carry (a secret: masked in
    # `kgstream config`); health checks and reflection stay open; unset: no auth
    grpc_auth_token: str | None = None
    # TLS for the gateway: the PEM certificate (chain); set with grpc_tls_key_path; unset:
    # plaintext (named _path: an env variable ending in _FILE means "the value is in that
    # file")
    grpc_tls_cert_path: Path | None = None
    # TLS for the gateway: the PEM private key of grpc_tls_cert_path
    grpc_tls_key_path: Path | None = None
    # the HTTP/JSON API, chat endpoint and web UI (docs/http-api.md), beside gRPC, with the
    # same auth token; empty: off. 9621 is LightRAG's server port.
    http_address: str | None = "127.0.0.1:9621"
    # origins a browser may call the HTTP API from (CORS); none: same-origin only
    http_cors_origins: tuple[str, ...] = ()
    # host names (as a request's Host header gives them, without the port) the HTTP API
    # answers to when grpc_auth_token is unset, against DNS rebinding; none: localhost,
    # 127.0.0.1 and ::1 when http_address is a loopback address, else any. Behind a proxy
    # that forwards the public name, list that name.
    http_allowed_hosts: tuple[str, ...] = ()
    # the longest question a request may ask, in characters; over it: INVALID_ARGUMENT
    # naming the limit (gateway/types.py says why each limit exists); >= 1
    max_question_chars: int = 4000
    # keywords a request may pass, high- and low-level together (an LLM's are cut to it);
    # more: INVALID_ARGUMENT; >= 1
    max_keywords: int = 100
    # the longest keyword a request may pass, in characters; over it: INVALID_ARGUMENT; >= 1
    max_keyword_chars: int = 200
    # the longest user_prompt (and response_type) a request may pass, in characters; over
    # it: INVALID_ARGUMENT; >= 1
    max_user_prompt_chars: int = 4000
    # conversation turns a request may carry (chat front ends send the whole conversation);
    # more: INVALID_ARGUMENT; >= 1
    max_history_turns: int = 100
    # the conversation history's characters, every turn together; over it: INVALID_ARGUMENT;
    # >= 1
    max_history_chars: int = 100_000
    # min_index_version: the longest wait in seconds, whatever the call's deadline; >= 0
    version_wait_seconds: float = 30.0
    # min_index_version: how many calls may wait at once, over gRPC, HTTP and MCP together
    # (a gRPC wait holds one of the gateway's 16 workers: keep it well below; an HTTP wait
    # holds none); one more is RESOURCE_EXHAUSTED (HTTP 429) at once; >= 1
    max_version_waits: int = 8
    # retrievals running at once; more calls wait for a slot (within their deadline). Unset:
    # 1 in `kgstream run`, whose indexer shares the process (and its GIL), so queries cannot
    # take its share; no bound in `kgstream serve`. 0: no bound.
    max_concurrent_retrievals: int | None = None

    # -- operations

    metrics_address: str | None = None  # HOST:PORT for Prometheus metrics; off when unset
    log_format: str = "auto"  # auto (JSON when stderr is not a terminal), json or text
    log_level: str = "INFO"  # kgstream's own records from this level up
    library_log_level: str = "WARNING"  # kafka-python, httpx, openai, grpc, ... (logs.py)

    def __post_init__(self) -> None:
        # Build every option object once so a bad value fails here, by name.
        if self.embedding_long_text not in ("windows", "truncate"):
            raise SettingsError(
                f"embedding_long_text must be windows or truncate; got {self.embedding_long_text!r}"
            )
        if self.graph_projection not in [mode.value for mode in ProjectionMode]:
            raise SettingsError(
                f"graph_projection must be off, auto or on; got {self.graph_projection!r}"
            )
        if self.dlq_topic is not None and self.dlq_topic in ("", self.kafka_topic):
            raise SettingsError(
                f"dlq_topic must be a topic other than kafka_topic ({self.kafka_topic!r}); "
                f"got {self.dlq_topic!r}"
            )
        if self.redis_password and self.redis_url and urlsplit(self.redis_url).password:
            raise SettingsError("redis_url holds a password already; drop it or redis_password")
        for name in ("log_level", "library_log_level"):
            try:
                level_number(getattr(self, name))
            except ValueError as error:
                raise SettingsError(f"{name}: {error}") from error
        if self.max_version_waits < 1:
            raise SettingsError(f"max_version_waits must be >= 1; got {self.max_version_waits}")
        if self.max_concurrent_retrievals is not None and self.max_concurrent_retrievals < 0:
            raise SettingsError(
                "max_concurrent_retrievals must be >= 0 (0: no bound); "
                f"got {self.max_concurrent_retrievals}"
            )
        if not self.version_wait_seconds >= 0:
            raise SettingsError(
                f"version_wait_seconds must be >= 0; got {self.version_wait_seconds}"
            )
        if (self.grpc_tls_cert_path is None) != (self.grpc_tls_key_path is None):
            raise SettingsError(
                "grpc_tls_cert_path and grpc_tls_key_path go together (TLS needs both)"
            )
        if self.document_chunks_per_round < 0:
            raise SettingsError(
                "document_chunks_per_round must be >= 0 (0: no bound); "
                f"got {self.document_chunks_per_round}"
            )
        if not self.epoch_seconds > 0:
            raise SettingsError(f"epoch_seconds must be > 0; got {self.epoch_seconds}")
        if self.embedding_threads < 0:
            raise SettingsError(
                f"embedding_threads must be >= 0 (0: one per core, at most 4); "
                f"got {self.embedding_threads}"
            )
        try:
            self.chunking_options()
            self.document_limits()
            self.render_options()
            self.request_limits()
            cluster = self.qdrant_cluster_options()
        except ValueError as error:
            raise SettingsError(str(error)) from error
        if not self.qdrant_url and not cluster.is_default():
            raise SettingsError(
                "qdrant_shard_number, qdrant_replication_factor and "
                "qdrant_write_consistency_factor lay out collections on a Qdrant server: set "
                "qdrant_url too (the embedded vector store has one shard)"
            )

    def redis_connection_url(self) -> str | None:
        """`redis_url` with `redis_password` in it (URL-escaped), or None for the embedded one."""
        if not self.redis_url or not self.redis_password:
            return self.redis_url
        parts = urlsplit(self.redis_url)
        user = quote(parts.username or "", safe="")
        host = parts.netloc.rpartition("@")[2]  # host:port as written (IPv6 brackets kept)
        netloc = f"{user}:{quote(self.redis_password, safe='')}@{host}"
        return urlunsplit(parts._replace(netloc=netloc))

    def qdrant_cluster_options(self) -> QdrantClusterOptions:
        return QdrantClusterOptions(
            shard_number=self.qdrant_shard_number,
            replication_factor=self.qdrant_replication_factor,
            write_consistency_factor=self.qdrant_write_consistency_factor,
        )

    def chunking_options(self) -> ChunkingOptions:
        return ChunkingOptions(
            chunk_token_size=self.chunk_token_size,
            chunk_overlap_tokens=self.chunk_overlap_tokens,
            split_by_character=self.split_by_character,
        )

    def document_limits(self) -> DocumentLimits:
        return DocumentLimits(max_bytes=self.max_document_bytes)

    def render_options(self) -> RenderOptions:
        return RenderOptions(
            summarize_over_fragments=self.summarize_over_fragments,
            summarize_over_tokens=self.summarize_over_tokens,
            summary_max_tokens=self.summary_max_tokens,
        )

    def request_limits(self) -> RequestLimits:
        return RequestLimits(
            max_question_chars=self.max_question_chars,
            max_keywords=self.max_keywords,
            max_keyword_chars=self.max_keyword_chars,
            max_user_prompt_chars=self.max_user_prompt_chars,
            max_history_turns=self.max_history_turns,
            max_history_chars=self.max_history_chars,
        )

    def prompt_options(self) -> ExtractionPromptOptions:
        return ExtractionPromptOptions(entity_types=self.entity_types, language=self.language)

    def masked(self) -> dict[str, Any]:
        """The effective settings as plain data, secrets masked (for `kgstream config`)."""
        shown: dict[str, Any] = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name in SECRET_FIELDS and value:
                value = "****" + str(value)[-4:] if len(str(value)) > 8 else "****"
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            shown[field.name] = value
        return shown


def load_settings(
    env: Mapping[str, str],
    toml_path: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings from a TOML file, the environment and explicit overrides."""
    values: dict[str, Any] = {}
    if toml_path is not None:
        try:
            with toml_path.open("rb") as handle:
                values.update(_from_mapping(tomllib.load(handle), f"{toml_path}"))
        except OSError as error:
            raise SettingsError(f"cannot read settings file {toml_path}: {error}") from error
        except tomllib.TOMLDecodeError as error:
            raise SettingsError(f"settings file {toml_path} is not valid TOML: {error}") from error
    values.update(_from_env(env))
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return Settings(**values)


def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(Settings)


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """Settings from `KGSTREAM_<NAME>` (and the OpenAI aliases), each also readable from a
    file named by `<VARIABLE>_FILE` (Docker and Kubernetes secrets: the file's content, one
    trailing newline dropped); setting both forms of one variable is an error."""
    types_by_name = _field_types()
    values: dict[str, Any] = {}
    variables = dict(ENV_ALIASES)
    for key in env:
        stem = key.removesuffix(FILE_SUFFIX)
        name = stem[len(ENV_PREFIX) :].lower()
        if stem.startswith(ENV_PREFIX) and name in types_by_name:
            variables[stem] = name  # unknown names are not ours: other tools share the prefix
    for variable, name in variables.items():
        raw = _env_value(env, variable)
        if raw is not None and (raw or variable not in ENV_ALIASES):
            values[name] = _coerce(name, raw, types_by_name[name], variable)
    return values


def _env_value(env: Mapping[str, str], variable: str) -> str | None:
    """`variable`'s value, from the environment or from the file `<variable>_FILE` names."""
    path = env.get(variable + FILE_SUFFIX)
    if path is None:
        return env.get(variable)
    if variable in env:
        raise SettingsError(f"set {variable} or {variable}{FILE_SUFFIX}, not both")
    try:
        return Path(path).read_text(encoding="utf-8").removesuffix("\n")
    except (OSError, UnicodeDecodeError) as error:
        raise SettingsError(f"{variable}{FILE_SUFFIX}: cannot read {path}: {error}") from error


def _from_mapping(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    types_by_name = _field_types()
    values: dict[str, Any] = {}
    for name, raw in data.items():
        if name not in types_by_name:
            known = ", ".join(sorted(types_by_name))
            raise SettingsError(f"{source}: unknown setting {name!r}; known settings: {known}")
        values[name] = _coerce(name, raw, types_by_name[name], source)
    return values


def _coerce(name: str, raw: Any, annotation: Any, source: str) -> Any:
    """Turn a string (env) or TOML value into the field's type, or say what is wrong."""
    optional = False
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional, annotation = True, args[0]
    if optional and raw in ("", None):
        return None
    try:
        if annotation is bool:
            if isinstance(raw, bool):
                return raw
            lowered = str(raw).strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError("expected true or false")
        if annotation in (int, float):
            return annotation(raw)
        if annotation is Path:
            return Path(str(raw)).expanduser()
        if typing.get_origin(annotation) is tuple:
            items = raw if isinstance(raw, list) else str(raw).split(",")
            return tuple(str(item).strip() for item in items if str(item).strip())
        return str(raw)
    except (TypeError, ValueError) as error:
        raise SettingsError(
            f"{source}: setting {name} = {raw!r} is not a valid {annotation}: {error}"
        ) from error


def replace(settings: Settings, **changes: Any) -> Settings:
    """A copy with some fields changed (validated like the original)."""
    return dataclasses.replace(settings, **changes)
