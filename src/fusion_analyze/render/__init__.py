"""Render: the Mode-A Markdown report (Jinja2 templates under templates/)."""
