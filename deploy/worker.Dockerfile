# An agent worker of deploy/compose.yaml: `factweave serve --engine remote`. Its replies are written
# by the vLLM server; it keeps the model's tokenizer and the model itself on its CPU for reading
# questions, retrieves from Neo4j and Pinecone, and serves the OpenAI-compatible API.
# Built from the repository root: docker build -f deploy/worker.Dockerfile .
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

WORKDIR /opt/factweave
COPY pyproject.toml README.md ./
COPY agent ./agent
COPY ui ./ui
COPY prompts ./prompts
# serve: the OpenAI-compatible server (FastAPI, uvicorn); pinecone: the vector store's SDK.
# torch from PyTorch's CPU index: the worker generates nothing on a GPU, and the default (CUDA)
# wheels would add gigabytes.
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu '.[serve,pinecone]' \
    && factweave serve --help >/dev/null

# A user of its own; the folders the volumes mount here are created with its ownership.
RUN useradd --create-home --uid 1000 factweave \
    && mkdir -p /data/web /data/kb /home/factweave/.cache/huggingface \
    && chown -R factweave:factweave /data /home/factweave/.cache
USER factweave
WORKDIR /home/factweave
EXPOSE 8000
CMD ["factweave", "serve", "--help"]
