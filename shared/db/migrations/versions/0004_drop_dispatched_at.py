"""jobs.dispatched_at goes: servers hand jobs to Celery themselves, and whether a job was handed
over is the Redis hand-off key's to say (`paperworks.shared.bus.handoff`), not a row's

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-05 23:40:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('dispatched_at')


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('dispatched_at', sa.DateTime(timezone=True), nullable=True))
