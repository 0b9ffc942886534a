"""Lowerings: misc."""
