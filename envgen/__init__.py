"""envgen: certified GPU training environments from a compatibility matrix."""
__version__ = "0.1.0"
