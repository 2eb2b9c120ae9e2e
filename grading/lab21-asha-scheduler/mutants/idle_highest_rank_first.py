# mutant: idle workers get jobs highest rank first
# loses: driver, protocol
REPLACE = [("            worker = free.pop(0)\n", "            worker = free.pop()\n")]
