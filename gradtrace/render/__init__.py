"""Renderers: each reads a Trace and returns a value (text or a rich renderable); none prints."""
