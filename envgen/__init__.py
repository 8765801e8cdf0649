"""envgen: certified GPU training environments from a compatibility matrix."""
__version__ = "0.2.0"
# The distribution's name on the package index (pyproject.toml): every install hint uses it,
# since the index's "envgen" is another project.
DISTRIBUTION = "envgen-gpu"
