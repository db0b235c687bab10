"""uploads: bytes a tenant uploaded for its jobs

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-05 14:10:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('uploads',
    sa.Column('tenant', sa.String(length=128), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=256), nullable=False),
    sa.Column('media_type', sa.String(length=128), nullable=False),
    sa.Column('size_bytes', sa.BigInteger(), nullable=False),
    sa.Column('pinned', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('tenant', 'sha256')
    )
    op.create_index('ix_uploads_expiry', 'uploads', ['pinned', 'expires_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_uploads_expiry', table_name='uploads')
    op.drop_table('uploads')
