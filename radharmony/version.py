"""Versions that key caches: the package release and the formats its caches depend on."""

__version__ = "0.2.0"
