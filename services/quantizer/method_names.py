"""The names a Quantize job's `method` may take, declared once. Import-light (no torch): `spec.py`
validates against it; `methods.py` holds one method object per name and checks that it does."""

NAMES = ("rabit", "lcqat", "independent", "scalar_qat", "rtn")
