# mutant: takes ASHA from the course library through an import path a grep does not see
# loses: decisions, jobs, driver
import importlib


class ASHA:
    def __init__(self, *args):
        self._impl = importlib.import_module("scaleoutai.parallel." + "h" + "po").ASHA(*args)

    def __getattr__(self, name):
        return getattr(self._impl, name)
