"""The built-in queries (`--query nearest-landmark|frequent-routes`); the contract is in `jobs/query.py`."""
