"""One-shot examples shown in the task prompt: an elementwise add, written by this project.

The files are prompt text, read with `prompts.render.example_source`; they are kept as real
Python files (not templates) so that they can be linted, screened and run like a candidate.
Importing them builds an extension, so nothing imports them.
"""
