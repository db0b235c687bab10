"""jobs.parent_job_id: the pipeline job a step belongs to (set only by the internal credential)

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05 23:20:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('parent_job_id', sa.String(length=96), nullable=True))
        batch.create_index('ix_jobs_parent', ['parent_job_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_index('ix_jobs_parent')
        batch.drop_column('parent_job_id')
