#!/usr/bin/env python3
"""Collect out/*/result.json + score.md into one markdown table (summary.md)."""

import json
import os
import pathlib

HERE = os.path.dirname(os.path.abspath(__file__))
COLS = ["recall@5", "recall@10", "all_gold@2", "all_gold@5", "all_gold@10", "MRR"]


def parse(md):
    """{section: {group: {metric: value}}} from score.md"""
    out, sec, hdr = {}, None, None
    for line in md.splitlines():
        if line.startswith("## "):
            sec = line[3:].split()[0]  # "dense" / "RRF(k=60)"
            out[sec] = {}
        elif line.startswith("| group"):
            hdr = [c.strip() for c in line.strip("|").split("|")]
        elif line.startswith("|") and not line.startswith("|---") and hdr:
            cells = [c.strip() for c in line.strip("|").split("|")]
            out.setdefault(sec or "bm25", {})[cells[0]] = dict(zip(hdr, cells, strict=False))
    return out


rows = []
bm = parse(pathlib.Path(HERE, "out/bm25/score.md").read_text())
for g in ("ALL", "hotpot-bridge"):
    rows.append(
        ["BM25 (retrieval_eval.py --bm25)", "-", g] + [bm["bm25"][g][c] for c in COLS] + ["", ""]
    )
for name in sorted(os.listdir(os.path.join(HERE, "out"))):
    rp = os.path.join(HERE, "out", name, "result.json")
    if not os.path.exists(rp):
        continue
    r = json.loads(pathlib.Path(rp).read_text())
    sc = parse(pathlib.Path(HERE, "out", name, "score.md").read_text())
    for sec, label in (("dense", "dense"), ("RRF(k=60)", "RRF k=60 with BM25")):
        for g in ("ALL", "hotpot-bridge"):
            speed = (
                [str(r["passages_per_s"]), str(r["ms_per_question_mean"])]
                if (sec == "dense" and g == "ALL")
                else ["", ""]
            )
            rows.append([name, label, g] + [sc[sec][g][c] for c in COLS] + speed)

hdr = ["model", "run", "group", *COLS, "passages/s (1 thread)", "ms/question"]
lines = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
lines += ["| " + " | ".join(r) + " |" for r in rows]
pathlib.Path(HERE, "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
