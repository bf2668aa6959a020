"""Questions about the bench corpus, and gRPC clients that ask them (shared by the bench scripts;
it imports none of them)."""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.corpus import _TOPICS, World
from gateway.types import MODE_NAMES, parse_mode

MODES = MODE_NAMES
CALL_TIMEOUT_SECONDS = 60.0
LOAD_CALL_TIMEOUT_SECONDS = 30.0  # a call of a client under load

_QUESTION_TEMPLATES = (
    "What has {person} said about {topic}?",
    "Who does {person} work with?",
    "What is {org} doing about {topic}?",
    "Which organisations are based in {place}?",
    "What happened at the {event}?",
    "How is {topic} changing in {place}?",
    "What are the main concerns about {topic}?",
    "How are {person} and {org} connected?",
)
_DRAWS_PER_QUESTION = 20  # distinct questions: draws allowed per question before giving up


def names_in_corpus(names: Sequence[str], corpus: dict[str, str]) -> list[str]:
    """The names that occur in some document (a small corpus mentions only part of the world)."""
    text = "\n".join(corpus.values())
    return [name for name in names if name in text]


def build_questions(
    world: World, corpus: dict[str, str], count: int, seed: int, distinct: bool = False
) -> list[str]:
    """`count` seeded questions about entities and topics of `corpus`; `distinct`: no
    question twice (a latency figure must not count answers from the gateway's cache of
    query embeddings)."""
    rng = random.Random(f"kgstream-gateway-bench-{seed}")
    people = names_in_corpus([p.name for p in world.people], corpus)
    orgs = names_in_corpus([o.name for o in world.organisations], corpus)
    places = names_in_corpus([p.name for p in world.places], corpus)
    events = names_in_corpus([e.name for e in world.events], corpus)
    for kind, found in (("people", people), ("organisations", orgs), ("places", places)):
        if not found:
            raise ValueError(f"the corpus mentions no {kind}; use a bigger --docs")
    events = events or [f"{places[0]} Trade Expo"]
    questions: list[str] = []
    seen: set[str] = set()
    for _ in range(count * _DRAWS_PER_QUESTION):
        template = rng.choice(_QUESTION_TEMPLATES)
        question = template.format(
            person=rng.choice(people),
            org=rng.choice(orgs),
            place=rng.choice(places),
            event=rng.choice(events),
            topic=rng.choice(_TOPICS),
        )
        if distinct and question in seen:
            continue
        seen.add(question)
        questions.append(question)
        if len(questions) == count:
            return questions
    raise ValueError(
        f"the corpus yields {len(questions)} distinct questions, not {count}: use a bigger "
        "--docs or fewer --calls"
    )


def open_channel(address: str) -> Any:
    """A channel with its own connection (gRPC otherwise shares subchannels per process)."""
    import grpc

    channel = grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
    grpc.channel_ready_future(channel).result(timeout=30)
    return channel


def retrieve_stub(channel: Any) -> Any:
    from kgstream_protos.v1 import query_pb2_grpc

    return query_pb2_grpc.KnowledgeGraphStub(channel)  # type: ignore[no-untyped-call]


@dataclass
class ClientLog:
    """What one client saw: latencies by mode, errors, and the versions in call order."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    errors: list[str] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)

    def backward_steps(self) -> list[tuple[int, int]]:
        """(earlier, later) for every call whose version is below the one before it."""
        return [(a, b) for a, b in zip(self.versions, self.versions[1:], strict=False) if b < a]


def query_until(
    address: str,
    questions: Sequence[str],
    first_mode: int,
    done: Callable[[], bool],
    log: ClientLog,
) -> None:
    """Retrieve calls back to back until `done()`, cycling through the modes."""
    import grpc

    from kgstream.query_command import build_request

    channel = open_channel(address)
    stub = retrieve_stub(channel)
    try:
        turn = 0
        while not done():
            mode = MODES[(first_mode + turn) % len(MODES)]
            request = build_request(questions[turn % len(questions)], parse_mode(mode), None)
            turn += 1
            began = time.perf_counter()
            try:
                response = stub.Retrieve(request, timeout=LOAD_CALL_TIMEOUT_SECONDS)
            except grpc.RpcError as error:
                log.errors.append(f"{mode}: {error.code().name}: {error.details()}")
                continue
            log.latencies[mode].append(time.perf_counter() - began)
            log.versions.append(response.index_version)
    finally:
        channel.close()
