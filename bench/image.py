#!/usr/bin/env python3
"""Image benchmarks, side by side with their peers in the same run.

    python3 bench/image.py ENVCRAFT_BINARY [RESULTS_MD] [--unpack-only]

- unpacking a 200 MB layer (`envcraft image import` of an OCI layout of one uncompressed layer,
  into a fresh store on /dev/shm: the confined child, digests, the rename) vs `tar -xf` of the
  same layer into tmpfs (target: at least 0.8x its throughput);
- `envcraft exec --image NAME -- /bin/true` vs `envcraft exec -- /bin/true` on the host root
  (session create on an image vs on the host root; target: at most 1.1x), and vs `bwrap`
  with the unpacked root filesystem (`--ro-bind ROOT / --unshare-all`), rounds interleaved.

- pulling the image of that 200 MB layer from a local registry (Debian's `docker-registry` on
  127.0.0.1, storage on /dev/shm, the image pushed with `skopeo copy`, which gzips the layer as
  registries hold them) with `envcraft image pull` into a fresh store on /dev/shm (download,
  digests, unpack) vs `skopeo copy docker://... dir:` to /dev/shm (download and digest check,
  no unpacking) (target: at least 0.8x its throughput), rounds interleaved.

The image is made here from the host's own `/usr/bin/true` and its libraries (found by `ldd`),
so the benchmark needs nothing installed beyond bwrap (and docker-registry and skopeo for the
pull, skipped with a line when they are missing).

- and vs `podman run --rm --network none` of the same image (Debian's `podman`, its own storage
  on /dev/shm, the image pulled once from the same OCI layout, `--pull never`; rootless as an
  unprivileged user with subordinate ids where there is one, see bench/podman.py), skipped with
  a line when podman is missing or cannot run here.

Prints a Markdown section and appends it to RESULTS_MD when given. `--unpack-only` measures the
unpack alone (its row only), for working on it.
"""

import hashlib
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

from podman import Podman, pick_user
from report import publish, timed, verdict

LAYER_BYTES = 200 << 20
FILE_BYTES = 256 << 10
UNPACKS = 3
PULLS = 3
ROUNDS, PER_ROUND = 10, 10


def add(tar, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 1_700_000_000
    tar.addfile(info, io.BytesIO(data))


def add_dir(tar, name):
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    tar.addfile(info)


def big_layer():
    """A 200 MB tar: 800 files of 256 KiB (pseudo-random, so nothing is sparse)."""
    buf = io.BytesIO()
    seed = os.urandom(FILE_BYTES)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        add_dir(tar, "data")
        for i in range(LAYER_BYTES // FILE_BYTES):
            add_dir(tar, f"data/{i // 100}") if i % 100 == 0 else None
            add(tar, f"data/{i // 100}/{i}", seed[i:] + seed[:i])
    return buf.getvalue()


def tools_layer():
    """/usr/bin/true and what it links, under the same paths, `bin` and `lib` as links."""
    buf = io.BytesIO()
    files = {"/usr/bin/true"}
    out = subprocess.run(["ldd", "/usr/bin/true"], capture_output=True, text=True).stdout
    files.update(w for line in out.splitlines() for w in line.split() if w.startswith("/"))
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        # Mountpoints bwrap needs in a read-only root (envcraft makes its own).
        made = {"dev", "proc"}
        for d in sorted(made):
            add_dir(tar, d)
        for f in sorted(files):
            name = f.lstrip("/")
            if name.startswith("lib/"):
                name = "usr/" + name
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in made:
                    made.add(d)
                    add_dir(tar, d)
            with open(os.path.realpath(f), "rb") as fh:
                add(tar, name, fh.read(), 0o755)
        for link, target in [("bin", "usr/bin"), ("lib", "usr/lib")]:
            info = tarfile.TarInfo(link)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return buf.getvalue()


def oci_layout(dirpath, layer):
    blobs = os.path.join(dirpath, "blobs", "sha256")
    os.makedirs(blobs)

    def put(data):
        digest = hashlib.sha256(data).hexdigest()
        with open(os.path.join(blobs, digest), "wb") as f:
            f.write(data)
        return "sha256:" + digest, len(data)

    layer_digest, layer_size = put(layer)
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Env": ["PATH=/usr/bin:/bin"]},
                         "rootfs": {"type": "layers", "diff_ids": [layer_digest]}}).encode()
    config_digest, config_size = put(config)
    manifest = json.dumps({"schemaVersion": 2,
                           "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": config_digest, "size": config_size},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                                       "digest": layer_digest, "size": layer_size}]}).encode()
    manifest_digest, manifest_size = put(manifest)
    with open(os.path.join(dirpath, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json",
             "digest": manifest_digest, "size": manifest_size}]}, f)
    with open(os.path.join(dirpath, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
    return layer_digest


def unpack_times(binary, root, layer):
    layout = os.path.join(root, "big")
    oci_layout(layout, layer)
    tar_path = os.path.join(root, "big.tar")
    with open(tar_path, "wb") as f:
        f.write(layer)
    ours, peer = [], []
    for _ in range(UNPACKS):
        state = tempfile.mkdtemp(prefix="envcraft-bench-img-", dir="/dev/shm")
        dest = tempfile.mkdtemp(prefix="envcraft-bench-tar-", dir="/dev/shm")
        try:
            subprocess.run(["sync"], check=True)
            ours.append(timed([binary, "image", "import", layout, "--name", "big",
                               "--state-dir", state]))
            subprocess.run(["sync"], check=True)
            peer.append(timed(["tar", "-xf", tar_path, "-C", dest]))
        finally:
            shutil.rmtree(state, ignore_errors=True)
            shutil.rmtree(dest, ignore_errors=True)
    return statistics.median(ours), statistics.median(peer)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pull_times(binary, root):
    """Median seconds of `envcraft image pull` and of `skopeo copy ... dir:` of the image of
    the 200 MB layer (the layout `root/big` that unpack_times wrote), or None without the peers."""
    registry_bin, skopeo = shutil.which("docker-registry"), shutil.which("skopeo")
    if not registry_bin or not skopeo:
        return None
    storage = tempfile.mkdtemp(prefix="envcraft-bench-registry-", dir="/dev/shm")
    port = free_port()
    config = os.path.join(storage, "config.yml")
    with open(config, "w") as f:
        f.write(f"version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
                f"storage:\n  filesystem:\n    rootdirectory: {storage}/data\n"
                f"http:\n  addr: 127.0.0.1:{port}\n")
    server = subprocess.Popen([registry_bin, "serve", config],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ours, peer = [], []
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("docker-registry did not start")
                time.sleep(0.05)
        ref = f"127.0.0.1:{port}/big:1"
        subprocess.run([skopeo, "copy", "--quiet", "--dest-tls-verify=false",
                        "oci:" + os.path.join(root, "big"), "docker://" + ref], check=True)
        for _ in range(PULLS):
            state = tempfile.mkdtemp(prefix="envcraft-bench-img-", dir="/dev/shm")
            dest = tempfile.mkdtemp(prefix="envcraft-bench-dir-", dir="/dev/shm")
            try:
                ours.append(timed([binary, "image", "pull", ref, "--name", "big",
                                   "--state-dir", state]))
                peer.append(timed([skopeo, "copy", "--quiet", "--src-tls-verify=false",
                                   "docker://" + ref, "dir:" + dest]))
            finally:
                shutil.rmtree(state, ignore_errors=True)
                shutil.rmtree(dest, ignore_errors=True)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(storage, ignore_errors=True)
    return statistics.median(ours), statistics.median(peer)


def start_times(binary, root):
    state = tempfile.mkdtemp(prefix="envcraft-bench-img-", dir="/dev/shm")
    layout = os.path.join(root, "tools")
    diff_id = oci_layout(layout, tools_layer())
    subprocess.run([binary, "image", "import", layout, "--name", "tools", "--state-dir", state],
                   check=True, stdout=subprocess.DEVNULL)
    rootfs = os.path.join(state, "images", "layers", diff_id[7:], "root")
    workspace = os.path.join(root, "ws")
    os.makedirs(workspace)
    env = dict(os.environ, ENVCRAFT_STATE_DIR=state)
    cmds = {
        "image": [binary, "exec", "--image", "tools", "--workspace", workspace, "--", "/bin/true"],
        "host": [binary, "exec", "--workspace", workspace, "--", "/bin/true"],
        "bwrap": ["bwrap", "--ro-bind", rootfs, "/", "--dev", "/dev", "--proc", "/proc",
                  "--unshare-all", "--die-with-parent", "--", "/bin/true"],
    }
    peer, skipped = podman_peer(layout, root)
    if peer:
        cmds["podman"] = peer.run_cmd("--network", "none", peer.image, "/bin/true")
    times = {k: [] for k in cmds}
    try:
        for _ in range(ROUNDS):
            for name, cmd in cmds.items():
                for _ in range(PER_ROUND):
                    times[name].append(timed(cmd, env=env))
    finally:
        shutil.rmtree(state, ignore_errors=True)
        if peer:
            peer.close()
    medians = {k: statistics.median(v) for k, v in times.items()}
    medians["podman_said"] = peer.describe() if peer else skipped
    return medians


def podman_peer(layout, root):
    """A Podman holding the image of `layout` and a runtime that starts it: (peer, None), or
    (None, why it is skipped). Rootless as an unprivileged user where one has subordinate ids."""
    if not shutil.which("podman"):
        return None, "skipped: podman missing"
    user, why = pick_user()
    if why:
        return None, f"skipped: {why}"
    peer = Podman(user)
    # The layout is read by the user podman runs as.
    os.chmod(root, 0o755)
    peer.give(layout)
    # Podman names an image pulled from a layout after its path, which must then be a valid
    # reference (a temporary directory's random name may not be): a link of a plain name.
    link = f"/tmp/envcraft-bench-layout-{os.getpid()}"
    os.symlink(layout, link)
    try:
        pulled = subprocess.run(peer.cmd("pull", "-q", "oci:" + link), capture_output=True, text=True)
    finally:
        os.unlink(link)
    if pulled.returncode != 0:
        peer.close()
        return None, f"skipped: podman cannot load the image ({pulled.stderr.strip()[-200:]})"
    peer.image = pulled.stdout.split()[-1]
    why = peer.find_runtime("--network", "none", peer.image, "/bin/true")
    if why:
        peer.close()
        return None, f"skipped: podman cannot start the image here ({why})"
    return peer, None


def pull_row(pulls, mb):
    if pulls is None:
        return ("| pull the image of that layer from a local registry | skipped: docker-registry "
                "or skopeo missing | | | | >= 0.8x: not measured |")
    ours, peer = pulls
    ratio = peer / ours
    return (f"| pull the image of that layer from a local registry (`image pull`, gzip layer) "
            f"| {ours:.2f} s | `skopeo copy docker://... dir:` | {peer:.2f} s "
            f"| {ratio:.2f}x its throughput | >= 0.8x: {verdict(ratio >= 0.8)} |")


def podman_row(image, podman, said):
    if podman is None:
        return f"| `exec --image -- true` | | `podman run --rm` | {said} | | |"
    return (f"| `exec --image -- true` | {image:.2f} ms | `podman run --rm --network none` "
            f"({said}) | {podman * 1e3:.1f} ms | {image / (podman * 1e3):.3f}x | |")


def unpack_row(ours, peer):
    mb = LAYER_BYTES / 1e6
    ratio = peer / ours
    return (f"| unpack a {mb:.0f} MB layer (import into a store on tmpfs) | {ours:.2f} s "
            f"({mb / ours:.0f} MB/s) | `tar -xf` into tmpfs | {peer:.2f} s ({mb / peer:.0f} MB/s) "
            f"| {ratio:.2f}x its throughput | >= 0.8x: {verdict(ratio >= 0.8)} |")


def main():
    args = [a for a in sys.argv[1:] if a != "--unpack-only"]
    unpack_only = len(args) < len(sys.argv) - 1
    binary = os.path.abspath(args[0])
    results = args[1] if len(args) > 1 else None
    root = tempfile.mkdtemp(prefix="envcraft-bench-image-")
    try:
        layer = big_layer()
        ours, peer = unpack_times(binary, root, layer)
        del layer
        if unpack_only:
            publish(["### I. Images: unpack only (medians, one run)", "",
                     "| Operation | envcraft | Peer | Peer figure | Ratio | Target |",
                     "| --- | ---: | --- | ---: | ---: | --- |", unpack_row(ours, peer), "",
                     f"Unpacks: {UNPACKS} of each, interleaved."], results)
            return 0
        pulls = pull_times(binary, root)
        starts = start_times(binary, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    image, host, bwrap = starts["image"] * 1e3, starts["host"] * 1e3, starts["bwrap"] * 1e3
    out = ["### I. Images (medians, one run)", "",
           "| Operation | envcraft | Peer | Peer figure | Ratio | Target |",
           "| --- | ---: | --- | ---: | ---: | --- |",
           unpack_row(ours, peer),
           pull_row(pulls, LAYER_BYTES / 1e6),
           f"| `exec --image -- true` | {image:.2f} ms | `exec -- true` on the host root | {host:.2f} ms "
           f"| {image / host:.2f}x | <= 1.1x: {verdict(image <= 1.1 * host)} |",
           f"| `exec --image -- true` | {image:.2f} ms | `bwrap --ro-bind ROOTFS / --unshare-all true` | {bwrap:.2f} ms "
           f"| {image / bwrap:.2f}x | |",
           podman_row(image, starts.get("podman"), starts["podman_said"]),
           "",
           f"Unpacks: {UNPACKS} of each; pulls: {PULLS} interleaved of each; starts: {ROUNDS} "
           f"interleaved rounds of {PER_ROUND}."]
    publish(out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
