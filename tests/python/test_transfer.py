"""``Session.upload`` and ``Session.download`` against the real server: a local directory in,
a tar out, a refusal as a typed error that leaves nothing behind."""

import io
import os
import tarfile

import pytest

import envcraft

TASK = "example/archive-read-mail"


def _tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_directory_goes_in_and_comes_out(real_server, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    os.chmod(src / "run.sh", 0o755)
    (src / "sub" / "data.txt").write_text("data\n")
    os.symlink("sub/data.txt", src / "link")
    client = envcraft.Client(real_server.url)
    with client.create(TASK) as s:
        up = s.upload(src, "/workspace/tests")
        assert up == {"path": "tests", "entries": 4, "bytes": len("#!/bin/sh\necho ran\n") + 5}
        ran = s.call("exec", command="./tests/run.sh && cat tests/link")
        assert ran["stdout"] == "ran\ndata\n", ran
        got = s.download("tests", dest=tmp_path / "out")
        assert got["kind"] == "directory" and got["skipped"] == 0
        assert sorted(os.listdir(tmp_path / "out")) == ["link", "run.sh", "sub"]
        assert (tmp_path / "out" / "sub" / "data.txt").read_text() == "data\n"
        assert os.readlink(tmp_path / "out" / "link") == "sub/data.txt"
        one = s.download("tests/sub/data.txt")
        assert one["kind"] == "file" and one["entries"] == 1


def test_refusals_are_typed_and_leave_nothing(real_server):
    client = envcraft.Client(real_server.url)
    with client.create(TASK) as s:
        before = s.call("exec", command="find . | sort")["stdout"]
        with pytest.raises(envcraft.PermissionDenied) as e:
            s.upload(_tar([("ok.txt", b"ok"), ("../out.txt", b"x")]), "in")
        assert "`..` is refused" in str(e.value)
        with pytest.raises(envcraft.BadRequest):
            s.upload(b"this is not a tar" * 100, "in")
        with pytest.raises(envcraft.NotFound):
            s.download("no/such/file")
        assert s.call("exec", command="find . | sort")["stdout"] == before
