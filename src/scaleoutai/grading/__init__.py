"""The autograder: lab releases, a sandbox for student code, checks in the grader, Gradescope results.

``scaleout assign LAB`` and ``scaleout grade LAB SUBMISSION...``; see grading/README.md for the model.
"""
