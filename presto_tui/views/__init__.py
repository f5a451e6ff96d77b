"""Textual screens and widgets (the only package that may import Textual)."""
