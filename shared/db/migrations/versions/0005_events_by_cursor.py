"""Events are published from job_events past a per-service cursor instead of one outbox row per
event: job_events.tx (the writing transaction's id on PostgreSQL) and relay_cursors

Rows already in job_events were published through the outbox: each service's cursor starts
after them (tx 0 marks them on PostgreSQL). Outbox rows still unsent are sent as before.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-06 02:40:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('job_events') as batch:
        batch.add_column(sa.Column('tx', sa.BigInteger(), nullable=True))
        batch.create_index('ix_job_events_tx', ['tx', 'id'], unique=False)
    op.create_table(
        'relay_cursors',
        sa.Column('service', sa.String(length=64), nullable=False),
        sa.Column('tx', sa.BigInteger(), nullable=False),
        sa.Column('event_id', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('service'),
    )
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('UPDATE job_events SET tx = 0')
    op.execute(
        "INSERT INTO relay_cursors (service, tx, event_id) "
        "SELECT jobs.service, 0, MAX(job_events.id) FROM job_events "
        "JOIN jobs ON jobs.id = job_events.job_id GROUP BY jobs.service"
    )


def downgrade() -> None:
    op.drop_table('relay_cursors')
    with op.batch_alter_table('job_events') as batch:
        batch.drop_index('ix_job_events_tx')
        batch.drop_column('tx')
