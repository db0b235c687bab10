"""job_events.service: each relay reads its service's events from one index

The relay's query joined job_events to jobs to pick its service's events; on PostgreSQL,
with the jobs table's statistics stale while it grows, the planner drove that join from
jobs and scanned every event past the cursor once per job (19 s for one batch of 500 at
10,000 jobs). The events now carry their job's service, indexed with the cursor's order.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06 06:55:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('job_events') as batch:
        batch.add_column(sa.Column('service', sa.String(length=64), nullable=True))
    op.execute("UPDATE job_events SET service = "
               "(SELECT jobs.service FROM jobs WHERE jobs.id = job_events.job_id)")
    with op.batch_alter_table('job_events') as batch:
        batch.drop_index('ix_job_events_tx')
        batch.create_index('ix_job_events_service', ['service', 'tx', 'id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('job_events') as batch:
        batch.drop_index('ix_job_events_service')
        batch.create_index('ix_job_events_tx', ['tx', 'id'], unique=False)
        batch.drop_column('service')
