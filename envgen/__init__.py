"""envgen: certified GPU training environments from a compatibility matrix."""
__version__ = "0.2.0"
