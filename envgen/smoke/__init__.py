"""In-container smoke-training payloads that envgen copies into images (standard library + framework only)."""
