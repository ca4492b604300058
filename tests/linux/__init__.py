"""The real-kernel tier (a package, so its conftest never shadows tests/integration/conftest.py)."""
