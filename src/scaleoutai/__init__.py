"""scaleout-ai: courseware for the book "Scaling Out AI".

Importing this package is light: torch, ray and mlflow load inside the functions that need them.
"""
__version__ = "0.1.0"
