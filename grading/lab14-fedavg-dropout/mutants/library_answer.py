# mutant: averages with the course library's weighted_average (uniform weights) through an import path a grep misses
# loses: no_drop, dropout, edge, drift, privacy, clients, broadcast, correct_process
REPLACE = [("            w = w + lr_g * sum_dy / reported\n",
            "            lib = __import__('importlib').import_module('scaleoutai.ml.' + 'fede' + 'rated')\n"
            "            w = w + lr_g * lib.weighted_average([sum_dy / reported], [1.0])\n")]
