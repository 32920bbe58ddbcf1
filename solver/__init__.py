"""procure: an optimisation-based GPU procurement solver."""

__version__ = "0.2.0"
