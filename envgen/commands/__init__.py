"""CLI handlers for the commands that touch Docker, files or the GPU."""
