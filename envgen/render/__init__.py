"""Stack → build context texts (Dockerfile, requirements, environment.yml): `render_texts`
returns {filename: text}; writing them is the caller's job (render.cache keeps texts it
rendered under ENVGEN_HOME, and writes nothing else)."""
from .env import environment, template_dir
from .views import render_texts

__all__ = ["environment", "render_texts", "template_dir"]
