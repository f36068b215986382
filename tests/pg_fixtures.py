"""Fixtures for the PostgreSQL index: one real server for the whole session.

``$FACTWEAVE_PG_DSN`` when set (a server of one's own; the tests create and replace indexes
named ``fwtest_*`` there), else a throwaway cluster started from the installed binaries
(:class:`agent.index.pg_local.LocalPostgres`) and stopped at the end. Without PostgreSQL the
tests skip, except where FACTWEAVE_REQUIRE_POSTGRES is set (``.ci/run`` sets it after
installing Debian's ``postgresql``): there they fail.
"""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def pg_dsn():
    """A connection string of a running PostgreSQL server."""
    env = os.environ.get("FACTWEAVE_PG_DSN")
    if env:
        yield env
        return
    required = os.environ.get("FACTWEAVE_REQUIRE_POSTGRES")
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        if required:
            pytest.fail("psycopg is not installed: pip install -e '.[test]'")
        pytest.skip("psycopg not installed (pip install 'factweave[postgres]')")
    from agent.index.pg_local import LocalPostgres, find_pg_bin

    if find_pg_bin() is None:
        if required:
            pytest.fail("no PostgreSQL server binaries: apt-get install postgresql")
        pytest.skip("no PostgreSQL (apt-get install postgresql); .ci/run installs it and runs these tests")
    server = LocalPostgres().start()
    yield server.dsn
    server.stop()
