"""Rendering: a resolved job → scheduler directives → a batch script from the layered templates."""
