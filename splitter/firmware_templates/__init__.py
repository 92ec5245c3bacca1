"""Jinja2 templates and C sources rendered into firmware projects."""
