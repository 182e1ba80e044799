"""Liveness and readiness."""

from __future__ import annotations

import psycopg

from helpline.db.engine import libpq_url


async def test_healthz(client):
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_ready_at_head(client, team):
    response = await client.get("/readyz", headers=team.headers)
    assert response.status_code == 200
    assert response.json()["status"] == "ready"


async def test_readyz_503_when_schema_not_at_head(client, database_url):
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        (head,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        conn.execute("UPDATE alembic_version SET version_num = 'older'")
        try:
            response = await client.get("/readyz")
        finally:
            conn.execute("UPDATE alembic_version SET version_num = %s", (head,))
    assert response.status_code == 503
    assert response.json()["migrations"] == "behind"
