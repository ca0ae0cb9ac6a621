"""Canary audits: kits made before publication, tested with an exact p-value (docs/canary.md)."""
