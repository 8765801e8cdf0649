"""In-container smoke-training payloads envgen copies into images (stdlib + framework only)."""
