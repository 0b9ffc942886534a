"""Lowerings: reduce."""
