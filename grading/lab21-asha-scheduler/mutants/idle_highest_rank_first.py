# mutant: idle workers get jobs highest rank first
# loses: driver
REPLACE = [('            w = idle.pop(0)\n', '            w = idle.pop()\n')]
