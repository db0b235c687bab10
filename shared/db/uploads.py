"""Uploads in the database: who uploaded which bytes, until when, and how much each tenant holds.

An upload belongs to one tenant; the same bytes uploaded by two tenants are two rows over one
blob (content-addressed), and neither can name the other's. An upload expires unless a job
pinned it by using it; the sweep deletes expired rows and returns the blobs nothing else names,
so the caller can delete those from the artifact store.
"""
from __future__ import annotations

from datetime import timedelta

from paperworks.shared.db.engine import Database
from paperworks.shared.db.jobs import _dialect
from paperworks.shared.db.models import JobArtifact, Upload, utcnow
from paperworks.shared.errors import NotFound, QuotaExceeded
from sqlalchemy import and_, delete, func, select, update

UPLOADS = Upload.__table__


def check_quota(tenant: str, held: int, size: int, quota_bytes: int) -> None:
    """QuotaExceeded when `size` more bytes would put the tenant past its upload quota (0: none)."""
    if quota_bytes and held + size > quota_bytes:
        raise QuotaExceeded(f"tenant:{tenant}/uploads",
                            f"tenant {tenant!r} holds {held} bytes of uploads; {size} more would pass the "
                            f"quota (PAPERWORKS_UPLOAD_QUOTA_BYTES={quota_bytes}); wait for older ones "
                            "to expire")


class UploadStore:
    def __init__(self, db: Database):
        self.db = db

    def held_bytes(self, tenant: str) -> int:
        with self.db.read_rows() as conn:
            return self._held(conn, tenant)

    @staticmethod
    def _held(conn, tenant: str) -> int:
        return int(conn.execute(select(func.coalesce(func.sum(UPLOADS.c.size_bytes), 0))
                                .where(UPLOADS.c.tenant == tenant)).scalar_one())

    def record(self, tenant: str, sha256: str, name: str, media_type: str, size: int, ttl_s: float,
               quota_bytes: int = 0) -> Upload:
        """Records (or refreshes) the tenant's upload; refuses past the tenant's quota (0: none)."""
        now = utcnow()
        expires = now + timedelta(seconds=ttl_s)
        with self.db.write() as conn:
            held = conn.execute(select(UPLOADS.c.sha256).where(
                and_(UPLOADS.c.tenant == tenant, UPLOADS.c.sha256 == sha256))).first()
            if held is None and quota_bytes:
                check_quota(tenant, self._held(conn, tenant), size, quota_bytes)
            conn.execute(_dialect(conn).insert(UPLOADS)
                         .values(tenant=tenant, sha256=sha256, name=name, media_type=media_type,
                                 size_bytes=size, pinned=False, created_at=now, expires_at=expires)
                         .on_conflict_do_update(index_elements=["tenant", "sha256"],
                                                set_={"name": name, "media_type": media_type,
                                                      "expires_at": expires}))
        with self.db.read() as session:
            return session.get(Upload, (tenant, sha256))

    def get(self, tenant: str, sha256: str, field: str) -> Upload:
        """The tenant's live upload; NOT_FOUND for anyone else's or an expired one."""
        with self.db.read() as s:
            row = s.get(Upload, (tenant, sha256))
        if row is None or (not row.pinned and _aware(row.expires_at) < utcnow()):
            raise NotFound(f"no upload {sha256!r} (uploads are per tenant and expire unless a job uses them)",
                           field)
        return row

    def pin(self, tenant: str, sha256: str) -> None:
        """A job uses the upload: it no longer expires."""
        with self.db.write() as conn:
            conn.execute(update(UPLOADS).where(and_(UPLOADS.c.tenant == tenant, UPLOADS.c.sha256 == sha256))
                         .values(pinned=True))

    def sweep_expired(self) -> list[str]:
        """Deletes expired, unpinned uploads; returns the sha256s no upload or job artifact names any
        more (their blobs may go)."""
        now = utcnow()
        with self.db.write() as conn:
            gone = [r[0] for r in conn.execute(select(UPLOADS.c.sha256).where(
                and_(UPLOADS.c.pinned.is_(False), UPLOADS.c.expires_at < now)))]
            if not gone:
                return []
            conn.execute(delete(UPLOADS).where(and_(UPLOADS.c.pinned.is_(False), UPLOADS.c.expires_at < now)))
            still = select(UPLOADS.c.sha256).where(UPLOADS.c.sha256.in_(gone))
            used = select(JobArtifact.sha256).where(JobArtifact.sha256.in_(gone))
            named = {r[0] for r in conn.execute(still)} | {r[0] for r in conn.execute(used)}
        return sorted(set(gone) - named)



def _aware(moment):
    """SQLite hands back naive datetimes (stored as UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=utcnow().tzinfo)
