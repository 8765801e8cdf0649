"""Stack → build context texts (Dockerfile, requirements, environment.yml). No side effects:
`render_texts` returns {filename: text}; writing them is the caller's job."""
from .env import environment, template_dir
from .views import render_texts

__all__ = ["environment", "render_texts", "template_dir"]
