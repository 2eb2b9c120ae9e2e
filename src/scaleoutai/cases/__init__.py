"""Part VIII, case studies (Chapters 36-40): the glue a case study needs of its own.

A case study is a notebook that composes the part packages (data, ml, parallel, serving, agents, infra);
this package holds only what none of them has. Like every part it imports the shared layers, never
another part.
"""
