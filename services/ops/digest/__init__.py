"""ops' method: a seeded SHA-256 chain (no paper; diagnostic work for the job runtime).

Pure Python (hashlib only), no platform import: the layout every service's per-paper
subpackage follows (e.g. quantizer/rabit), here for a method that cites no paper.
"""
from paperworks.services.ops.digest.chain import digest_chain

__all__ = ["digest_chain"]
