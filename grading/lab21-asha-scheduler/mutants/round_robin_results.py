# mutant: the driver collects results from the lowest busy worker instead of in order of finish time
# loses: driver
REPLACE = [("        clock, worker, trial, rung = heapq.heappop(running)",
            "        running.sort(key=lambda j: j[1])\n        clock, worker, trial, rung = running.pop(0)\n"
            "        heapq.heapify(running)")]
