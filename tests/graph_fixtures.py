"""Fixtures for graph tests: one real embedded ArcadeDB (Bolt) server for the whole session.

Starting the server costs a few seconds (a JVM in a child process), so it is shared; each test
gets the same database emptied instead. ArcadeDB's Bolt plugin cannot create databases
(``CREATE DATABASE`` is refused), and clearing a test-sized graph takes milliseconds.
"""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def graph_server(tmp_path_factory):
    """A running EmbeddedGraphServer: ``.uri``, ``.user``, ``.password``, ``.database``, ``.folder``."""
    from agent.web.arcade import EmbeddedGraphServer

    server = EmbeddedGraphServer(tmp_path_factory.mktemp("graph-server"))
    yield server
    server.stop()


@pytest.fixture()
def graph(graph_server):
    """A GraphStore on the session server's database, emptied before the test."""
    from agent.web.graph import GraphStore

    store = GraphStore(graph_server.uri, graph_server.user, graph_server.password, graph_server.database)
    store.clear()
    store.ensure_schema()
    yield store
    store.close()
