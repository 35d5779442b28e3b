"""Podman as a benchmark peer (Debian's `podman`): a store of its own on /dev/shm, rootless as
an unprivileged user when one with /etc/subuid and /etc/subgid entries exists, and the runtime
that works on this machine. Used by bench/image.py and bench/openclaw.py.

Two facts of this kind of host that the peer works around, each said in `describe()`:
- crun 1.8 refuses rootless containers on a cgroup v1 host whose controllers sit on v2
  ("cgroups in hybrid mode not supported"): runc is tried next;
- root podman raises RLIMIT_NOFILE and RLIMIT_NPROC in the container, which needs
  CAP_SYS_RESOURCE (a VM's root may lack it): as root, the limits this process has are kept.
"""

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

DEFAULT_USER = "envcraft-bench"


def subuid_user(name):
    """`name` if it is a user with subordinate uids and gids (rootless podman needs both)."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        return None
    for table in ("/etc/subuid", "/etc/subgid"):
        try:
            lines = Path(table).read_text().splitlines()
        except OSError:
            return None
        if not any(line.split(":")[0] == name for line in lines):
            return None
    return name


def pick_user(explicit=None):
    """Who podman runs as: (user or None for this process, None) or (None, why not)."""
    if os.geteuid() != 0:
        return None, None  # rootless as whoever runs this
    if explicit is not None:
        if subuid_user(explicit) is None:
            return None, f"user {explicit} has no /etc/subuid and /etc/subgid entries"
        return explicit, None
    names = (os.environ.get("SUDO_USER"), DEFAULT_USER)
    return next(filter(None, (subuid_user(n) for n in names if n)), None), None


class Podman:
    """One peer: its store, the user it runs as, the runtime that works here."""

    def __init__(self, user):
        self.user = user  # None: podman runs as whoever runs this script
        self.root = Path(tempfile.mkdtemp(prefix="envcraft-bench-podman-", dir="/dev/shm"))
        self.runtime = []
        self.ulimits = []
        if user:
            entry = pwd.getpwnam(user)
            (self.root / "xdg").mkdir(mode=0o700)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            os.chown(self.root / "xdg", entry.pw_uid, entry.pw_gid)
        elif os.geteuid() == 0:
            nofile = subprocess.run(["sh", "-c", "ulimit -Hn"], capture_output=True, text=True).stdout.strip()
            self.ulimits = ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", "nproc=4096:4096"]

    @property
    def rootless(self):
        return self.user is not None or os.geteuid() != 0

    def give(self, path):
        """Let the user podman runs as read `path` (a directory tree this script made)."""
        if self.user:
            entry = pwd.getpwnam(self.user)
            for dirpath, dirnames, filenames in os.walk(path):
                for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                    os.lchown(name, entry.pw_uid, entry.pw_gid)

    def cmd(self, *args):
        base = ["podman", "--root", str(self.root / "root"), "--runroot", str(self.root / "run"),
                "--storage-driver", "overlay", *self.runtime]
        if self.user:
            home = pwd.getpwnam(self.user).pw_dir
            return ["runuser", "-u", self.user, "--", "env", f"HOME={home}",
                    f"XDG_RUNTIME_DIR={self.root / 'xdg'}", *base, *args]
        return [*base, *args]

    def run_cmd(self, *args):
        """`podman run --rm --pull never` with the limits this host allows, then `args`."""
        return self.cmd("run", "--rm", "--pull", "never", *self.ulimits, *args)

    def find_runtime(self, *probe):
        """Pick the runtime that starts `podman run ... PROBE` here: None, or why none does."""
        errors = []
        for runtime in ([], ["--runtime", "runc"]):
            if runtime and not shutil.which("runc"):
                continue
            self.runtime = runtime
            ran = subprocess.run(self.run_cmd(*probe), capture_output=True, text=True)
            if ran.returncode == 0:
                return None
            last = (ran.stderr.strip().splitlines() or [f"exit {ran.returncode}"])[-1]
            errors.append(f"{runtime[-1] if runtime else 'crun'}: {last}")
        return "; ".join(errors)

    def describe(self):
        version = subprocess.run(["podman", "--version"], capture_output=True, text=True).stdout.split()[-1]
        who = f"rootless as user `{self.user}`" if self.user else ("rootless" if self.rootless else "as root")
        runtime = self.runtime[-1] if self.runtime else "crun"
        limits = ""
        if self.rootless and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
            limits = ", no memory or process limits (rootless on a cgroup v1 host)"
        return f"podman {version}, {who}, {runtime}, overlay store on /dev/shm{limits}"

    def close(self):
        subprocess.run(self.cmd("system", "reset", "--force"), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(self.root, ignore_errors=True)
