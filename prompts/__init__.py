"""Prompt text: jinja2 templates (`*.j2`) and one-shot examples, rendered by one `render()`."""

from prompts.render import example_source, render, template_hashes, template_set_hash

__all__ = ["example_source", "render", "template_hashes", "template_set_hash"]
