"""envgen.lock: writing it, reading and checking it, verifying images against it."""
