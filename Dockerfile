# kgstream: one image for the indexer (`kgstream run`) and the gateway (`kgstream serve`).
# Build: docker build -t kgstream .   Run: docker run --rm kgstream --help
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Runtime dependencies only (no dev extras); the sources are not kept in the image.
COPY pyproject.toml README.md constraints.txt /tmp/kgstream-src/
COPY build_backend /tmp/kgstream-src/build_backend
COPY kgstream /tmp/kgstream-src/kgstream
COPY dataflow /tmp/kgstream-src/dataflow
COPY connectors /tmp/kgstream-src/connectors
COPY gateway /tmp/kgstream-src/gateway
COPY kgstream_protos /tmp/kgstream-src/kgstream_protos
RUN pip install -c /tmp/kgstream-src/constraints.txt /tmp/kgstream-src && rm -rf /tmp/kgstream-src

# A non-root user; /data (the data directory) is created here so a named volume
# mounted on it starts out owned by that user.
RUN useradd --create-home --uid 10001 --user-group kgstream \
    && mkdir /data \
    && chown kgstream:kgstream /data
USER kgstream
WORKDIR /home/kgstream
ENV KGSTREAM_DATA_DIR=/data
# The local model's quantized copy, made once here into the user's model cache
# (~/.cache/kgstream/models) rather than at every container's first start.
RUN python -c "from connectors.embeddings.local import LocalMiniLMEmbedder; LocalMiniLMEmbedder().load()"

# 50051: the gRPC gateway; 9621: its HTTP API and web UI.
EXPOSE 50051 9621
ENTRYPOINT ["kgstream"]
CMD ["--help"]
