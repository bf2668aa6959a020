"""`kgstream run --workers 2`: commits are partitioned, so both workers write (the entities,
relations and documents they own), and the per-worker Prometheus series show each one's
share, in the metrics a real scrape returns."""

import re
import signal
import urllib.request
from collections import defaultdict

from tests.kgstream.processes import Output, clean_environment, kgstream
from tests.support.wait import wait_until

PEOPLE = ["Alice Moreau", "Bob Tanaka", "Carla Diaz", "Dmitri Volkov", "Erin Walsh", "Farah Khan"]
ORGS = ["Northwind Labs", "Helios Corp", "Atlas Foundation", "Kestrel Bank", "Orion Trust"]
DOCUMENTS = 30


def series(exposition: str, name: str) -> dict[str, float]:
    """Every sample of `name`, by its label text (`worker="0",kind="entity"`)."""
    found = re.findall(rf"^{re.escape(name)}\{{([^}}]*)\}} (\S+)$", exposition, re.MULTILINE)
    return {labels: float(value) for labels, value in found}


def by_worker(samples: dict[str, float], **labels: str) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for text, value in samples.items():
        fields = dict(re.findall(r'(\w+)="([^"]*)"', text))
        if all(fields.get(k) == v for k, v in labels.items()):
            totals[fields["worker"]] += value
    return dict(totals)


def test_two_workers_each_write_their_share_and_the_metrics_show_it(llm_server, tmp_path):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    for i in range(DOCUMENTS):
        person, org = PEOPLE[i % len(PEOPLE)], ORGS[i % len(ORGS)]
        text = f"{person} joined {org} in City{i}. {org} hired Agent{i} Smith in Town{i}."
        (folder / f"doc-{i:02}.md").write_text(text)
    env = {**clean_environment(llm_server.base_url), "KGSTREAM_METRICS_ADDRESS": "127.0.0.1:0"}
    running = kgstream(
        "run", "--watch", str(folder), "--data", str(data), "--no-serve", "-w", "2", env=env
    )
    output = Output(running)
    try:
        wait_until(lambda: "metrics on" in output.text(), 60, "the metrics server")
        url = re.search(r"metrics on (\S+)", output.text()).group(1)

        def scrape() -> str:
            return urllib.request.urlopen(url, timeout=10).read().decode()

        def completed() -> dict[str, float]:
            return series(scrape(), "kgstream_worker_documents_completed_total")

        wait_until(lambda: sum(completed().values()) >= DOCUMENTS, 120, "every document")
        exposition = scrape()
    finally:
        running.send_signal(signal.SIGINT)
        running.wait(timeout=60)
    assert running.returncode == 0, output.join()

    done = by_worker(series(exposition, "kgstream_worker_documents_completed_total"))
    assert set(done) == {"0", "1"} and sum(done.values()) == DOCUMENTS, done
    written = series(exposition, "kgstream_worker_records_written_total")
    for kind in ("entity", "relation", "chunk", "document"):
        share = by_worker(written, kind=kind)
        assert set(share) == {"0", "1"} and all(share.values()), (kind, share)
    for name in ("kgstream_worker_writes_total", "kgstream_worker_commit_cpu_seconds_total"):
        share = by_worker(series(exposition, name))
        assert set(share) == {"0", "1"} and all(share.values()), (name, share)
