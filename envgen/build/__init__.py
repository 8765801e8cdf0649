"""A Stack -> its build context -> a BuildKit-built image."""
