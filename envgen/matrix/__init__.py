"""The compatibility matrix: loading, validation and lookups."""
from .load import bundled_path, load_matrix
from .table import Matrix

__all__ = ["Matrix", "bundled_path", "load_matrix"]
