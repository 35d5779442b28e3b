"""What the Python benchmarks share: timing a command, the target verdict, and publishing a
Markdown section (printed, and appended to the results file when one is given)."""

import subprocess
import time


def timed(cmd, **kw):
    """Seconds `cmd` took (its output discarded; a failure raises)."""
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t


def verdict(ok):
    return "met" if ok else "**not met**"


def publish(lines, results):
    """Print the section `lines` and append it to `results` (a path, or None)."""
    text = "\n".join(lines) + "\n"
    print(text)
    if results:
        with open(results, "a") as f:
            f.write("\n" + text)
