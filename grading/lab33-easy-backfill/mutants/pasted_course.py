# mutant: the chapter's simulate_easy and _shadow (one resource, jobs end at their runtime) adapted by hand:
# the fit test looks at CPUs and GPUs, but the shadow time and the extra count CPUs only, a tie at the shadow
# stops at the first job, and a started job ends at t + runtime
# loses: two_resources, kills, legal, cluster
# says: EASY over two resources
# score-at-most: 50
REPLACE = [("            comm.send(np.array([t + min(runtimes[r].item(), jobs[r, 4].item())]), 0)",
            "            comm.send(np.array([t + runtimes[r].item()]), 0)"),
           ("            return t + min(runtimes[r].item(), jobs[r, 4].item())",
            "            return t + runtimes[r].item()")]
import bisect  # noqa: E402


class EasyBackfill2:
    def __init__(self, cpus, gpus):
        self.capacity, self.free, self.free_g = int(cpus), int(cpus), int(gpus)
        self.size, self.gpus, self.est, self.start = {}, {}, {}, {}
        self.by_est, self.queue = [], []

    def submit(self, job, t, cpus, gpus, limit):
        self.size[job], self.gpus[job], self.est[job] = int(cpus), int(gpus), limit
        self.queue.append(job)

    def finish(self, job, t):
        self.free += self.size[job]
        self.free_g += self.gpus[job]
        del self.by_est[bisect.bisect_left(self.by_est, (self.start[job] + self.est[job], job))]

    def begin(self, j, now):
        self.free -= self.size[j]
        self.free_g -= self.gpus[j]
        self.start[j] = now
        bisect.insort(self.by_est, (now + self.est[j], j))

    def _shadow(self, head):
        avail, need = self.free, self.size[head]
        for t, j in self.by_est:
            avail += self.size[j]
            if avail >= need:
                return t, avail - need
        raise RuntimeError("the head never fits")

    def decide(self, now):
        q, out = self.queue, []
        k = 0
        while k < len(q) and self.size[q[k]] <= self.free and self.gpus[q[k]] <= self.free_g:
            self.begin(q[k], now)
            out.append(q[k])
            k += 1
        del q[:k]
        if not q:
            return out
        shadow, extra = self._shadow(q[0])
        k = 1
        while k < len(q) and self.free > 0:
            j = q[k]
            if self.size[j] <= self.free and self.gpus[j] <= self.free_g:
                if now + self.est[j] <= shadow:
                    self.begin(j, now)
                    out.append(j)
                    del q[k]
                    continue
                if self.size[j] <= extra:
                    extra -= self.size[j]
                    self.begin(j, now)
                    out.append(j)
                    del q[k]
                    continue
            k += 1
        return out


def replay(cpus, gpus, jobs, runtimes):
    jobs = np.asarray(jobs).reshape(-1, 4)  # noqa: F821
    sub, run = jobs[:, 0].tolist(), np.asarray(runtimes).reshape(-1).tolist()  # noqa: F821
    n, i, heap = len(sub), 0, []
    s = EasyBackfill2(cpus, gpus)
    start = np.full(n, np.nan)  # noqa: F821
    while i < n or heap:
        now = min(sub[i] if i < n else float("inf"), heap[0][0] if heap else float("inf"))
        while heap and heap[0][0] <= now:
            t, j = heapq.heappop(heap)  # noqa: F821
            s.finish(j, t)
        while i < n and sub[i] <= now:
            s.submit(i, sub[i], jobs[i, 1], jobs[i, 2], jobs[i, 3].item())
            i += 1
        for j in s.decide(now):
            start[j] = now
            heapq.heappush(heap, (now + run[j], j))  # noqa: F821
    return start
