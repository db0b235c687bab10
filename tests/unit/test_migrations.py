"""Alembic migrations build exactly the schema the models describe, on both databases."""
from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from paperworks.shared.db.models import Base


def test_migrated_schema_matches_models(store):
    with store.db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []
