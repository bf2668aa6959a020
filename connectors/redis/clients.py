"""Redis clients from URLs: one server, or a Redis Cluster.

``redis://``, ``rediss://`` (TLS) and ``unix://`` name one server (standalone, or a
primary with replicas); ``redis+cluster://`` and ``rediss+cluster://`` name a Redis
Cluster through one or more of its nodes, comma-separated
(``redis+cluster://user:password@10.0.0.1:6379,10.0.0.2:6379/``): the client asks the
first node that answers for the cluster's layout and follows it from there. The scheme
says which, rather than a probe at start, so that a URL means the same thing while the
server is down; a plain URL pointed at a cluster node fails with MOVED on the first key
of another node (`moved_message` says what it means).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisClusterException

RedisClient = redis.Redis | RedisCluster

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def is_cluster_url(url: str) -> bool:
    return urlsplit(url).scheme.lower() in CLUSTER_SCHEMES


def connect(url: str) -> RedisClient:
    """A client for `url` that decodes replies. A cluster client learns the cluster's
    layout here, so an unreachable cluster raises `redis.ConnectionError` (an outage) at
    once, naming the nodes it tried (never the URL's password)."""
    parts = urlsplit(url)
    base = CLUSTER_SCHEMES.get(parts.scheme.lower())
    if base is None:
        return redis.Redis.from_url(url, decode_responses=True)
    credentials, _, hosts = parts.netloc.rpartition("@")
    seeds = [host.strip() for host in hosts.split(",") if host.strip()]
    if not seeds:
        raise ValueError(f"a {parts.scheme}:// URL needs at least one host:port")
    userinfo = f"{credentials}@" if credentials else ""
    first = urlunsplit((base, userinfo + seeds[0], parts.path, parts.query, ""))
    others = [_node(seed) for seed in seeds[1:]]
    try:
        return RedisCluster.from_url(first, decode_responses=True, startup_nodes=others)
    except RedisClusterException as error:
        raise redis.ConnectionError(
            f"no node of the Redis Cluster at {', '.join(seeds)} answered with the cluster's "
            f"layout ({error})"
        ) from error


def _node(seed: str) -> ClusterNode:
    split = urlsplit(f"//{seed}")
    return ClusterNode(split.hostname or "127.0.0.1", split.port or 6379)  # type: ignore[no-untyped-call]


def moved_message(error: redis.exceptions.MovedError) -> str:
    """What a one-server client meeting a Redis Cluster node (a MOVED reply) means."""
    return (
        f"the Redis at redis_url is a Redis Cluster node: it sent the client elsewhere "
        f"(MOVED {str(error).rpartition(': ')[2]}); a cluster needs a redis+cluster:// URL"
    )
