"""Part III, Distributed Machine Learning (Chapters 10-14): the modules a chapter of Part III teaches.

NumPy, the communicator and the shared layers only; the production libraries (torch DDP hooks, Ray,
scikit-learn, LightGBM, PyTorch Geometric, Opacus) run beside these in the chapters and the tests.
"""
