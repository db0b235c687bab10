"""Alembic environment: the URL comes from the caller (or PAPERWORKS_DATABASE_URL)."""
from alembic import context
from paperworks.shared.config import get_settings
from paperworks.shared.db.engine import make_engine
from paperworks.shared.db.models import Base

config = context.config
url = config.get_main_option("sqlalchemy.url") or get_settings().sqlalchemy_url

if context.is_offline_mode():
    context.configure(url=url, target_metadata=Base.metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = make_engine(url)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=Base.metadata,
                          render_as_batch=url.startswith("sqlite"))
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()
