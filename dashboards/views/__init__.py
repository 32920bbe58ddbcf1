"""The dashboard pages, one module each, each with a ``render()`` function."""
