"""A spec and a host's constraints -> a fully pinned Stack, with reasons, and its hash-
pinned closure."""
