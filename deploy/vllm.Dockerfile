# The shared vLLM server of deploy/compose.yaml: `factweave serve --engine vllm`, ReFactX's rule
# inside vLLM's own OpenAI-compatible server. factweave goes in --no-deps beside vLLM: its pins
# (transformers, fastapi) are not the UI's, and the processor's imports are all vLLM's own (README,
# Install). Built from the repository root: docker build -f deploy/vllm.Dockerfile .
ARG VLLM_VERSION=v0.32.0
FROM vllm/vllm-openai:${VLLM_VERSION}

COPY pyproject.toml README.md /opt/factweave/
COPY agent /opt/factweave/agent
COPY ui /opt/factweave/ui
COPY prompts /opt/factweave/prompts
RUN python3 -m pip install --no-cache-dir --no-deps /opt/factweave \
    && factweave serve --help >/dev/null

# The image's entrypoint is vLLM's own server; the compose file's command is factweave's.
ENTRYPOINT []
EXPOSE 8001
CMD ["factweave", "serve", "--help"]
