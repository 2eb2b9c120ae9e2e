# mutant: the driver hands out one job and waits for its result before the next: no parallel training
# loses: driver
REPLACE = [
    ('        while idle:\n            job = sched.next_job()',
     '        while idle and not busy:\n            job = sched.next_job()'),
]
