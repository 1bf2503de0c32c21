"""CPU time of a process, for the benchmark scripts beside this one."""
import glob


def cpu_ns(pid):
    """The CPU time all of `pid`'s threads have run, in ns (the first field
    of each /proc/PID/task/TID/schedstat)."""
    total = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            total += int(open(f).read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total
