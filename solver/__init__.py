"""procure: an optimisation-based GPU procurement solver."""

__version__ = "0.1.0"
