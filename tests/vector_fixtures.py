"""Fixtures for vector tests: the packaged embedding model and a local Pinecone-speaking server.

The hosted Pinecone service is replaced by :class:`tests.pinecone_server.PineconeTestServer`, a
real HTTP server on 127.0.0.1 that the real ``pinecone`` SDK talks to.
"""
from __future__ import annotations

import os
import secrets

import pytest


@pytest.fixture(scope="session")
def embedder():
    """The packaged all-MiniLM-L6-v2 (real weights, CPU, no network)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from agent.embeddings import Embedder

    return Embedder(device="cpu")


@pytest.fixture(scope="session")
def pinecone_server():
    """One server for the session: ``.url``, ``.api_key``, ``.reset(dimension=...)``,
    ``.fail_next(n, status)``, ``.requests``."""
    from pinecone_server import PineconeTestServer

    server = PineconeTestServer(api_key=f"pc-test-{secrets.token_hex(12)}").start()
    yield server
    server.stop()


@pytest.fixture()
def fresh_pinecone_server(pinecone_server):
    """The session server, emptied (records, injected failures, request log) for this test,
    serving an index of dimension 8."""
    pinecone_server.reset(dimension=8)
    yield pinecone_server
    pinecone_server.reset()
