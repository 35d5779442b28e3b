//! The escape suite: real attacks run inside `envcraft exec` (always through
//! `shared/tools/contained`), each asserting that the attack failed in the
//! specific way it should AND that the host is untouched (the template's
//! full snapshot, host marker files, host sockets, host processes, host
//! settings).
//!
//! Conventions of the attack scripts: each attempt prints `NAME OK ...` or
//! `NAME FAILED ...`, and scripts end with `ATTACK_DONE`, so a test never
//! passes only because the attack did not run. Never run these scripts
//! outside `contained` + `envcraft exec`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::Duration;

use common::{
    Exec, ExecOutcome, ForbiddenPaths, FreeSpaceWatch, HostDir, HostProcess, Pty, RunAs, Template,
    exec_json, exec_json_as, file_digest, heavy_test_lock, host_lines, host_pids_with_arg,
    nobody_ready, read_available, sandbox_ready, skip, unique_token, user_namespaces_available,
};

/// A wall-clock bound for attacks that should finish at once; only a broken
/// sandbox ever reaches it.
const QUICK: &[&str] = &["--timeout", "10"];
const PYTHON: &str = "/usr/bin/python3";
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Helpers every Python attack starts with.
const PRELUDE: &str = r#"
import ctypes, errno, os, socket, struct, subprocess, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    conv = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *conv)
    return r, ctypes.get_errno()
def report(name, r, e=0):
    if r is None or r < 0:
        print(f"{name} FAILED errno={e} {errno.errorcode.get(e, '?')}", flush=True)
    else:
        print(f"{name} OK r={r}", flush=True)
def attempt(name, fn):
    try:
        r = fn()
    except BaseException as ex:
        print(f"{name} FAILED {type(ex).__name__}: {ex}"[:300], flush=True)
        return None
    print(f"{name} OK {r!r}"[:2000], flush=True)
    return r
def write_file(path, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        return os.write(fd, data.encode())
    finally:
        os.close(fd)
def run_cmd(name, argv):
    try:
        rc = subprocess.run(argv, capture_output=True, timeout=5, stdin=subprocess.DEVNULL).returncode
    except Exception as ex:
        print(f"{name} FAILED {type(ex).__name__}: {ex}"[:300], flush=True)
        return
    print(f"{name}", "OK" if rc == 0 else "FAILED", f"rc={rc}", flush=True)
def read_file(path):
    with open(path, "rb") as f:
        return f.read(4096).decode(errors="replace")
"#;

// ---------------------------------------------------------------------------
// Small helpers of this suite.

fn ready(who: RunAs) -> bool {
    match who {
        RunAs::Caller => sandbox_ready(),
        RunAs::Nobody => nobody_ready(),
    }
}

/// `template` with `@KEY@` placeholders replaced.
fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    let mut s = template.to_string();
    for (k, v) in vars {
        s = s.replace(k, v);
    }
    s
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

fn py(code: &str) -> Vec<String> {
    vec![PYTHON.into(), "-c".into(), format!("{PRELUDE}\n{code}")]
}

fn run(who: RunAs, tpl: &Template, args: &[&str], cmd: Vec<String>) -> ExecOutcome {
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    exec_json_as(who, tpl.path(), None, args, &cmd)
}

/// `NAME FAILED` was printed and `NAME OK` was not.
fn assert_denied(out: &ExecOutcome, name: &str) {
    out.assert_saw(&format!("{name} FAILED"));
    out.assert_not_saw(&format!("{name} OK"), &format!("{name} succeeded"));
}

/// No line `PREFIX... OK` in the output.
fn assert_none_ok(out: &ExecOutcome, prefix: &str) {
    for line in out.output().lines() {
        let mut words = line.split_whitespace();
        if let (Some(name), Some("OK")) = (words.next(), words.next()) {
            assert!(
                !name.starts_with(prefix),
                "attack step succeeded: {line}\n{}",
                out.describe()
            );
        }
    }
}

fn assert_host_lines_absent(out: &ExecOutcome, file: &str) {
    for line in host_lines(Path::new(file)) {
        assert!(
            !out.output().contains(&line),
            "a line of the host's {file} was read inside the sandbox: {line:?}\n{}",
            out.describe()
        );
    }
}

/// The host's own address on its default route, if it has one.
fn host_ip() -> Option<String> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then(|| ip.to_string())
}

fn assert_no_connection(listener: &TcpListener) {
    listener.set_nonblocking(true).unwrap();
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("the host listener accepted a connection from {peer}"),
        Err(e) => panic!("accept on the host listener: {e}"),
    }
}

fn host_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(rc, 0);
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn restore_hostname(name: &str) {
    // SAFETY: name points to name.len() readable bytes.
    unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) };
}

/// Asserts a host sysctl is unchanged; restores it if the sandbox changed it.
fn assert_sysctl_unchanged(path: &str, before: &Option<String>) {
    let after = fs::read_to_string(path).ok();
    if after != *before {
        if let Some(b) = before {
            let _ = fs::write(path, b.trim_end());
        }
        panic!("the sandbox changed the host's {path}: {before:?} -> {after:?}");
    }
}

// ===========================================================================
// Filesystem: writing and reading outside the workspace.

fn write_outside_via_absolute_paths(who: RunAs) {
    if !ready(who) {
        return;
    }
    let tpl = Template::for_user(who);
    let host = HostDir::new();
    let t = unique_token();
    let etc = format!("/etc/ectest-{t}");
    let usr = format!("/usr/ectest-{t}");
    let created = [
        etc.clone(),
        usr.clone(),
        format!("/ectest-{t}"),
        format!("/var/tmp/ectest-{t}"),
        format!("/root/ectest-{t}"),
        format!("{}/new-{t}", host.p()),
    ];
    let forbidden = ForbiddenPaths::new(&created);
    let script = r#"for p in "$@"; do if echo pwn >> "$p" 2>/dev/null; then echo "WROTE $p"; else echo "DENIED $p"; fi; done; echo ATTACK_DONE"#;
    let mut cmd = sh(script);
    cmd.push("sh".into());
    cmd.push(host.marker_path().display().to_string());
    cmd.extend(created.iter().cloned());
    let out = run(who, &tpl, QUICK, cmd);
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_saw(&format!("DENIED {etc}"));
    out.assert_saw(&format!("DENIED {usr}"));
    forbidden.check();
    host.assert_unchanged();
    tpl.assert_unchanged();
}

#[test]
fn write_outside_workspace_via_absolute_paths_does_not_reach_host() {
    write_outside_via_absolute_paths(RunAs::Caller);
}

#[test]
fn read_of_host_file_via_absolute_path_reveals_nothing() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let host = HostDir::new();
    let script = fill(
        "cat @SECRET@; cat /work/main/Cargo.toml; cat @TPL@/README.txt; echo ATTACK_DONE",
        &[
            ("@SECRET@", &host.secret_path().display().to_string()),
            ("@TPL@", &tpl.path().display().to_string()),
        ],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, sh(&script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw(host.secret(), "host secret read through its absolute path");
    out.assert_not_saw("name = \"envcraft\"", "the host's /work was readable");
    host.assert_unchanged();
    tpl.assert_unchanged();
}

fn dotdot_read_and_write(who: RunAs) {
    if !ready(who) {
        return;
    }
    let tpl = Template::for_user(who);
    let host = HostDir::new();
    let base = host
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // Relative to the template's own host location (a sibling under /tmp)
    // and climbing to the root, from /workspace, its subdir and the alias.
    let script = fill(
        r#"for start in /workspace /workspace/sub/deeper /root/.openclaw/workspace; do
  cd "$start" || continue
  for rel in "../@BASE@" "../../@BASE@" "../../../../../../..@HOST@"; do
    cat "$rel/secret.txt" 2>/dev/null
    if echo pwn >> "$rel/marker.txt" 2>/dev/null; then echo "WROTE $start $rel"; fi
    touch "$rel/new-dotdot" 2>/dev/null
  done
done
echo ATTACK_DONE"#,
        &[("@BASE@", &base), ("@HOST@", &host.p())],
    );
    let forbidden = ForbiddenPaths::new(&[host.path().join("new-dotdot")]);
    let out = run(who, &tpl, QUICK, sh(&script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw(host.secret(), "host secret read through ..");
    forbidden.check();
    host.assert_unchanged();
    tpl.assert_unchanged();
}

#[test]
fn dotdot_paths_from_workspace_do_not_reach_host_files() {
    dotdot_read_and_write(RunAs::Caller);
}

fn symlink_out(who: RunAs) {
    if !ready(who) {
        return;
    }
    let host = HostDir::new();
    let base = host
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let tpl = Template::build_as(who, |root| {
        use std::os::unix::fs::symlink;
        symlink(host.secret_path(), root.join("out-secret")).unwrap();
        symlink(host.marker_path(), root.join("out-marker")).unwrap();
        symlink(format!("../{base}/secret.txt"), root.join("rel-secret")).unwrap();
        symlink(format!("../{base}/marker.txt"), root.join("rel-marker")).unwrap();
        symlink(host.path(), root.join("out-dir")).unwrap();
    });
    let script = r#"cat out-secret rel-secret out-dir/secret.txt
echo pwn > out-marker; echo pwn > rel-marker; echo pwn >> out-dir/marker.txt
touch out-dir/new-via-link
cat sub/../out-secret
echo ATTACK_DONE"#;
    let forbidden = ForbiddenPaths::new(&[host.path().join("new-via-link")]);
    let out = run(who, &tpl, QUICK, sh(script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw(
        host.secret(),
        "a symlink in the workspace led to the host file",
    );
    forbidden.check();
    host.assert_unchanged();
    tpl.assert_unchanged();
}

#[test]
fn symlink_in_workspace_to_host_file_is_not_followed_out() {
    symlink_out(RunAs::Caller);
}

#[test]
fn symlink_in_workspace_to_etc_shadow_reveals_nothing() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::build(|root| {
        std::os::unix::fs::symlink("/etc/shadow", root.join("shadow-link")).unwrap();
        std::os::unix::fs::symlink("/etc/gshadow", root.join("gshadow-link")).unwrap();
        std::os::unix::fs::symlink("/etc/shadow-", root.join("shadow-backup-link")).unwrap();
    });
    let script = r#"cat shadow-link gshadow-link shadow-backup-link
echo "SHADOW_BYTES=$(cat shadow-link 2>/dev/null | wc -c)"
echo ATTACK_DONE"#;
    let out = run(RunAs::Caller, &tpl, QUICK, sh(script));
    out.assert_ran()
        .assert_saw("ATTACK_DONE")
        .assert_saw("SHADOW_BYTES=0");
    assert_host_lines_absent(&out, "/etc/shadow");
    assert_host_lines_absent(&out, "/etc/gshadow");
    assert_host_lines_absent(&out, "/etc/shadow-");
    tpl.assert_unchanged();
}

#[test]
fn symlink_created_at_runtime_to_host_path_is_not_followed_out() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let host = HostDir::new();
    let script = fill(
        r#"ln -s @HOST@/secret.txt s && cat s
ln -s @HOST@/marker.txt m && echo pwn > m
ln -s / rootlink && cat rootlink@HOST@/secret.txt
ln -s @HOST@ d && touch d/new-runtime-link
echo ATTACK_DONE"#,
        &[("@HOST@", &host.p())],
    );
    let forbidden = ForbiddenPaths::new(&[host.path().join("new-runtime-link")]);
    let out = run(RunAs::Caller, &tpl, QUICK, sh(&script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw(host.secret(), "a runtime symlink led to the host file");
    forbidden.check();
    host.assert_unchanged();
    tpl.assert_unchanged();
}

#[test]
fn template_hard_link_to_host_file_is_copied_up_not_written_through() {
    if !sandbox_ready() {
        return;
    }
    let mut host = HostDir::build(|root| {
        fs::write(root.join("linked.txt"), "linked original\n").unwrap();
    });
    let tpl = Template::build(|root| {
        fs::hard_link(host.path().join("linked.txt"), root.join("hl.txt")).unwrap();
    });
    // Building the template chmods the shared inode: take the host baseline now.
    host.rebaseline();
    let script = r#"cat hl.txt
echo pwn >> hl.txt && echo APPENDED
echo pwn > hl.txt; truncate -s 0 hl.txt; chmod 777 hl.txt
echo ATTACK_DONE"#;
    let out = run(RunAs::Caller, &tpl, QUICK, sh(script));
    out.assert_ran()
        .assert_saw("ATTACK_DONE")
        .assert_saw("linked original");
    assert_eq!(
        fs::read_to_string(host.path().join("linked.txt")).unwrap(),
        "linked original\n",
        "writing the workspace file wrote through the hard link to the host file"
    );
    host.assert_unchanged();
    tpl.assert_unchanged();
}

#[test]
fn hard_link_from_workspace_to_outside_file_gives_no_write_access() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let host = HostDir::new();
    let passwd = file_digest(Path::new("/etc/passwd"));
    let script = fill(
        r#"ln /etc/passwd pw && echo LINK_PASSWD OK && echo 'ectest::0:0::/:/bin/sh' >> pw
ln /etc/hostname hn && echo LINK_HOSTNAME OK && echo pwn >> hn
ln @HOST@/marker.txt mk && echo LINK_MARKER OK && echo pwn >> mk
ln /proc/self/root/etc/passwd pw2 && echo LINK_PROC OK
echo ATTACK_DONE"#,
        &[("@HOST@", &host.p())],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, sh(&script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_none_ok(&out, "LINK_PASSWD");
    assert_none_ok(&out, "LINK_HOSTNAME");
    assert_none_ok(&out, "LINK_PROC");
    assert_eq!(
        file_digest(Path::new("/etc/passwd")),
        passwd,
        "host /etc/passwd changed"
    );
    host.assert_unchanged();
    tpl.assert_unchanged();
}

// ===========================================================================
// Filesystem: /proc tricks.

#[test]
fn proc_self_root_does_not_lead_to_host() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let host = HostDir::new();
    let script = fill(
        r#"cat /proc/self/root@HOST@/secret.txt
echo pwn > /proc/self/root@HOST@/marker.txt
cat /proc/self/root/../../..@HOST@/secret.txt
test -e /proc/self/root/work && echo WORK_VISIBLE
echo pwn > /proc/self/root@TPL@/README.txt && echo TPL_WRITE OK
touch /proc/self/root@TPL@/new-via-proc && echo TPL_CREATE OK
echo ATTACK_DONE"#,
        &[
            ("@HOST@", &host.p()),
            ("@TPL@", &tpl.path().display().to_string()),
        ],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, sh(&script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw(host.secret(), "host secret read via /proc/self/root");
    out.assert_not_saw("WORK_VISIBLE", "/work visible via /proc/self/root");
    assert_none_ok(&out, "TPL_");
    host.assert_unchanged();
    tpl.assert_unchanged();
}

#[test]
fn proc_pid_cwd_and_root_of_every_visible_process_do_not_lead_to_host() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let host = HostDir::new();
    let code = fill(
        r#"
host = "@HOST@"
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    for link in ("root", "cwd"):
        base = f"/proc/{pid}/{link}"
        try:
            print("LINK", base, os.readlink(base))
        except OSError as ex:
            print("LINK", base, "unreadable", ex.errno)
        for rel in (host + "/secret.txt", "/../../../.." + host + "/secret.txt"):
            try:
                print("READ", base + rel, read_file(base + rel))
            except OSError:
                pass
        try:
            write_file(base + host + "/marker.txt", "pwn")
            print("WRITE_MARKER OK", base)
        except OSError:
            pass
print("ATTACK_DONE")
"#,
        &[("@HOST@", &host.p())],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, py(&code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_saw("LINK /proc/1/root");
    out.assert_not_saw(host.secret(), "host secret read via /proc/<pid>/{root,cwd}");
    assert_none_ok(&out, "WRITE_MARKER");
    host.assert_unchanged();
    tpl.assert_unchanged();
}

/// The init keeps its sandbox's workspace descriptors (the layer tmpfs, the workspace root, the
/// template view) to hand them to the server again (`sandbox::handback`): a command must not
/// borrow them, by `/proc/1/fd`, by `pidfd_getfd`, or by `ptrace`.
#[test]
fn the_inits_kept_workspace_descriptors_cannot_be_borrowed() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
attempt("LIST_INIT_FDS", lambda: os.listdir("/proc/1/fd"))
for n in range(64):
    try:
        fd = os.open(f"/proc/1/fd/{n}", os.O_RDONLY)
        print("OPEN_INIT_FD OK", n, os.readlink(f"/proc/self/fd/{fd}"))
    except OSError as ex:
        pass
print("OPEN_INIT_FD FAILED all")
pidfd, e = sc(434, 1, 0)
report("PIDFD_OPEN_INIT", pidfd, e)
if pidfd >= 0:
    for n in range(64):
        got, e = sc(438, pidfd, n, 0)
        if got >= 0:
            print("GETFD_INIT OK", n, os.readlink(f"/proc/self/fd/{got}"))
        elif n == 3:
            print("GETFD_INIT FAILED errno", e, errno.errorcode.get(e, "?"))
r, e = sc(101, 16, 1, 0, 0)  # ptrace(PTRACE_ATTACH, 1)
report("PTRACE_ATTACH_INIT", r, e)
attempt("INIT_ROOT_LISTING", lambda: os.listdir("/proc/1/root/"))
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "LIST_INIT_FDS");
    assert_denied(&out, "OPEN_INIT_FD");
    assert_none_ok(&out, "GETFD_INIT");
    assert_denied(&out, "PTRACE_ATTACH_INIT");
    tpl.assert_unchanged();
}

#[test]
fn proc_self_fd_holds_no_host_directory() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let host = HostDir::new();
    let code = fill(
        r#"
host = "@HOST@"
hosty = ("@TPL@", host, "/work/")
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        t = os.readlink(f"/proc/self/fd/{fd}")
    except OSError as ex:
        t = f"? {ex}"
    print("FD", fd, t)
    if t == "/work" or any(t.startswith(h) for h in hosty):
        print("HOSTFD", fd, t)
    for up in range(0, 8):
        p = f"/proc/self/fd/{fd}/" + "../" * up + host.lstrip("/") + "/secret.txt"
        try:
            print("READ", p, read_file(p))
        except OSError:
            pass
print("ATTACK_DONE")
"#,
        &[
            ("@HOST@", &host.p()),
            ("@TPL@", &tpl.path().display().to_string()),
        ],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, py(&code));
    out.assert_ran()
        .assert_saw("ATTACK_DONE")
        .assert_saw("FD 0");
    out.assert_not_saw("HOSTFD", "a host file descriptor leaked into the sandbox");
    // Only stdin/stdout/stderr are open (fd 3 was listdir's own, closed).
    for line in out.stdout.lines().filter(|l| l.starts_with("FD ")) {
        let mut w = line.split_whitespace().skip(1);
        let fd: u32 = w.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        let target = w.collect::<Vec<_>>().join(" ");
        assert!(
            fd <= 2 || target.starts_with('?'),
            "an extra descriptor is open in the sandbox: {line}\n{}",
            out.describe()
        );
    }
    out.assert_not_saw(host.secret(), "host secret read through an inherited fd");
    host.assert_unchanged();
    tpl.assert_unchanged();
}

#[test]
fn o_path_fd_reopened_via_proc_self_fd_does_not_escape() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let host = HostDir::new();
    let t = unique_token();
    let etc_new = format!("/etc/ectest-opath-{t}");
    let forbidden = ForbiddenPaths::new(&[&etc_new]);
    let code = fill(
        r#"
host = "@HOST@"
fd = os.open("/", os.O_PATH | os.O_DIRECTORY)
attempt("READ_VIA_OPATH_ROOT", lambda: read_file(f"/proc/self/fd/{fd}" + host + "/secret.txt"))
attempt("READ_VIA_OPATH_UP", lambda: read_file(f"/proc/self/fd/{fd}/../../.." + host + "/secret.txt"))
sfd = os.open("/etc/shadow", os.O_PATH)
attempt("REOPEN_SHADOW", lambda: read_file(f"/proc/self/fd/{sfd}"))
efd = os.open("/etc", os.O_PATH | os.O_DIRECTORY)
attempt("CREATE_IN_ETC", lambda: os.open(f"/proc/self/fd/{efd}/" + "@ETCNAME@", os.O_CREAT | os.O_WRONLY, 0o644))
attempt("OPENAT_ETC_CREATE", lambda: os.open("@ETCNAME@", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=efd))
wfd = os.open("/workspace", os.O_PATH | os.O_DIRECTORY)
attempt("OPENAT_UP", lambda: os.read(os.open("../../../.." + host + "/secret.txt", os.O_RDONLY, dir_fd=wfd), 200))
pfd = os.open("/proc/self/root", os.O_PATH | os.O_DIRECTORY)
attempt("OPENAT_PROC_ROOT", lambda: os.read(os.open(host.lstrip("/") + "/secret.txt", os.O_RDONLY, dir_fd=pfd), 200))
print("ATTACK_DONE")
"#,
        &[
            ("@HOST@", &host.p()),
            ("@ETCNAME@", etc_new.trim_start_matches("/etc/")),
        ],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, py(&code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw(host.secret(), "host secret read through an O_PATH fd");
    assert_host_lines_absent(&out, "/etc/shadow");
    assert_denied(&out, "CREATE_IN_ETC");
    assert_denied(&out, "OPENAT_ETC_CREATE");
    forbidden.check();
    host.assert_unchanged();
    tpl.assert_unchanged();
}

#[test]
fn open_by_handle_at_cannot_open_the_host_root() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let host = HostDir::new();
    // The "shocker" attack: a handle for inode 2 (the root) of the host
    // filesystem that /usr lives on, opened relative to /usr.
    let code = fill(
        r#"
class FH(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int), ("f_handle", ctypes.c_ubyte * 128)]
h = FH(); h.handle_bytes = 128; mid = ctypes.c_int(0)
r, e = sc(303, -100, b"/usr", ctypes.byref(h), ctypes.byref(mid), 0)
report("NAME_TO_HANDLE", r, e)
mfd = os.open("/usr", os.O_RDONLY | os.O_DIRECTORY)
if r == 0:
    r2, e2 = sc(304, mfd, ctypes.byref(h), os.O_RDONLY | os.O_DIRECTORY)
    report("OBH_USR", r2, e2)
else:
    print("OBH_USR FAILED (no handle)")
root = FH(); root.handle_bytes = 8; root.handle_type = 1
root.f_handle[0] = 2
r3, e3 = sc(304, mfd, ctypes.byref(root), os.O_RDONLY | os.O_DIRECTORY)
report("OBH_HOST_ROOT", r3, e3)
if r3 >= 0:
    print("HOST_ROOT_LISTING", os.listdir(f"/proc/self/fd/{r3}"))
    attempt("READ_VIA_HANDLE", lambda: read_file(f"/proc/self/fd/{r3}" + "@HOST@/secret.txt"))
print("ATTACK_DONE")
"#,
        &[("@HOST@", &host.p())],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, py(&code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "OBH_HOST_ROOT");
    assert_denied(&out, "OBH_USR");
    out.assert_not_saw(host.secret(), "host secret read via open_by_handle_at");
    host.assert_unchanged();
    tpl.assert_unchanged();
}

#[test]
fn writing_proc_pid_exe_cannot_overwrite_a_host_binary() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let bin = common::envcraft();
    let before = fs::metadata(&bin).map(|m| m.ino()).ok();
    let digest = file_digest(&bin);
    let code = r#"
for p in sorted(x for x in os.listdir("/proc") if x.isdigit()):
    try:
        target = os.readlink(f"/proc/{p}/exe")
    except OSError as ex:
        print("EXE", p, "unreadable", ex.errno)
        continue
    print("EXE", p, target)
    try:
        fd = os.open(f"/proc/{p}/exe", os.O_WRONLY | os.O_APPEND)
        print("EXE_WRITE_OPEN OK", p, target)
        os.close(fd)
    except OSError as ex:
        print("EXE_WRITE_OPEN FAILED", p, ex.errno)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_none_ok(&out, "EXE_WRITE_OPEN");
    // (A concurrent `cargo build` may replace the binary: compare only the
    // same inode.)
    if fs::metadata(&bin).map(|m| m.ino()).ok() == before {
        assert_eq!(file_digest(&bin), digest, "the envcraft binary changed");
    }
    tpl.assert_unchanged();
}

// ===========================================================================
// Filesystem: secrets and host state that must be invisible.

#[test]
fn etc_shadow_gshadow_and_their_backups_are_masked() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let script = r#"for f in /etc/shadow /etc/gshadow /etc/shadow- /etc/gshadow- /etc/sudoers; do
  echo "BYTES $f=$(cat $f 2>/dev/null | wc -c)"
  cat "$f" 2>/dev/null
done
echo ATTACK_DONE"#;
    let out = run(RunAs::Caller, &tpl, QUICK, sh(script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_saw("BYTES /etc/shadow=0")
        .assert_saw("BYTES /etc/gshadow=0");
    for f in [
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/shadow-",
        "/etc/gshadow-",
    ] {
        assert_host_lines_absent(&out, f);
    }
    tpl.assert_unchanged();
}

#[test]
fn etc_ssh_is_masked_and_host_keys_are_not_readable() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let script = r#"cat /etc/ssh/*_key /etc/ssh/*/*_key 2>/dev/null
for f in /etc/ssh/* /etc/ssh/.[!.]*; do [ -e "$f" ] && echo "SSH_ENTRY $f"; done
echo ATTACK_DONE"#;
    let out = run(RunAs::Caller, &tpl, QUICK, sh(script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw("PRIVATE KEY", "an ssh private key was readable");
    out.assert_not_saw("SSH_ENTRY", "/etc/ssh is not masked (empty)");
    tpl.assert_unchanged();
}

#[test]
fn host_home_files_are_not_visible_or_writable() {
    if !sandbox_ready() {
        return;
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let marker_dir = tempfile::Builder::new()
        .prefix(".ectest-home-")
        .tempdir_in(&home)
        .expect("marker dir in the host home");
    let home_secret = format!("ECTEST-HOME-SECRET-{}", unique_token());
    fs::write(marker_dir.path().join("secret.txt"), &home_secret).unwrap();
    let bashrc_line = host_lines(Path::new("/root/.bashrc"))
        .into_iter()
        .filter(|l| l.len() >= 20)
        .max_by_key(|l| l.len());
    let t = unique_token();
    let new_file = format!("/root/.ectest-new-{t}");
    let forbidden = ForbiddenPaths::new(&[&new_file, &format!("{home}/.ectest-new2-{t}")]);
    let script = fill(
        r#"cat /root/.bashrc; cat @MARKER@/secret.txt; ls -la /root @HOME@
echo pwn > @NEW@; echo pwn > @HOME@/.ectest-new2-@T@
echo ATTACK_DONE"#,
        &[
            ("@MARKER@", &marker_dir.path().display().to_string()),
            ("@HOME@", &home),
            ("@NEW@", &new_file),
            ("@T@", &t),
        ],
    );
    let tpl = Template::new();
    let out = run(RunAs::Caller, &tpl, QUICK, sh(&script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw(&home_secret, "a file in the host home was readable");
    if let Some(line) = bashrc_line {
        out.assert_not_saw(&line, "the host /root/.bashrc was readable");
    }
    forbidden.check();
    tpl.assert_unchanged();
}

#[test]
fn envcraft_state_directories_are_not_reachable() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let mut candidates: Vec<String> = vec![
        "/var/lib/envcraft".into(),
        "/run/envcraft".into(),
        "/var/run/envcraft".into(),
        "/var/tmp/envcraft".into(),
        format!("{home}/.local/share/envcraft"),
        format!("{home}/.local/state/envcraft"),
        format!("{home}/.cache/envcraft"),
        format!("{home}/.envcraft"),
        "/work/main/target".into(),
    ];
    for var in [
        "TMPDIR",
        "XDG_RUNTIME_DIR",
        "XDG_STATE_HOME",
        "XDG_DATA_HOME",
    ] {
        if let Ok(v) = std::env::var(var) {
            candidates.push(format!("{v}/envcraft"));
            if var == "TMPDIR" {
                candidates.push(v);
            }
        }
    }
    // Whatever envcraft keeps under /tmp on the host right now.
    for entry in fs::read_dir("/tmp").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("envcraft") || name.starts_with(".envcraft") {
            candidates.push(format!("/tmp/{name}"));
        }
    }
    let t = unique_token();
    let probes: Vec<String> = candidates
        .iter()
        .filter(|c| Path::new(c).is_dir())
        .map(|c| format!("{c}/ectest-state-{t}"))
        .collect();
    let forbidden = ForbiddenPaths::new(&probes);
    let code = fill(
        r#"
import glob
cands = @CANDS@ + glob.glob("/tmp/envcraft*") + glob.glob("/tmp/.envcraft*")
for c in cands:
    if os.path.lexists(c):
        print("VISIBLE", c)
    try:
        fd = os.open(c + "/ectest-state-@T@", os.O_CREAT | os.O_WRONLY, 0o644)
        os.close(fd)
        print("STATE_WRITE OK", c)
    except OSError:
        pass
# /.envcraft holds the frozen-clock shim, on purpose and read-only (checked below).
skip = {"/proc", "/sys", "/dev", "/usr", "/workspace", "/root/.openclaw/workspace", "/etc", "/.envcraft"}
for p in ("/.envcraft/ectest-@T@", "/.envcraft/libenvcraft_clock.so"):
    try:
        fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
        os.close(fd)
        print("STATE_WRITE OK", p)
    except OSError:
        pass
for top, dirs, files in os.walk("/", topdown=True):
    dirs[:] = [d for d in dirs if os.path.join(top, d) not in skip and top.count("/") < 6]
    for n in dirs + files:
        if "envcraft" in n.lower() or n in ("upper", "upperdir", "overlay-work", "work"):
            print("STATE_VISIBLE", os.path.join(top, n))
print("ATTACK_DONE")
"#,
        &[("@CANDS@", &format!("{candidates:?}")), ("@T@", &t)],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, py(&code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw("VISIBLE", "an envcraft state directory is visible inside");
    assert_none_ok(&out, "STATE_WRITE");
    forbidden.check();
    tpl.assert_unchanged();
}

#[test]
fn template_host_path_is_not_writable_from_inside() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let script = fill(
        r#"test -e @TPL@ && echo TPL_VISIBLE
echo pwn > @TPL@/README.txt && echo TPL_WRITE OK
touch @TPL@/new-file && echo TPL_CREATE OK
test -e @TPL@/run.sh && rm -f @TPL@/run.sh && test ! -e @TPL@/run.sh && echo TPL_RM OK
mkdir @TPL@/newdir && echo TPL_MKDIR OK
chmod 777 @TPL@/ro.txt && echo TPL_CHMOD OK
mv @TPL@/sub @TPL@/moved && echo TPL_MV OK
echo ATTACK_DONE"#,
        &[("@TPL@", &tpl.path().display().to_string())],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, sh(&script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_none_ok(&out, "TPL_");
    tpl.assert_unchanged();
}

#[test]
fn overlay_lower_dir_named_in_mountinfo_is_not_writable() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
dirs = []
for l in open("/proc/self/mountinfo").read().splitlines():
    f = l.split(" ")
    mnt_root, mnt_point = f[3], f[4]
    opts = l.split(" - ", 1)[-1].split(" ")[-1]
    if mnt_point in ("/workspace", "/root/.openclaw/workspace"):
        print("MOUNT", l)
        dirs.append(("root", mnt_root))
    for opt in opts.split(","):
        if "=" in opt:
            k, v = opt.split("=", 1)
            if k in ("lowerdir", "lowerdir+", "datadir+"):
                for d in v.split(":"):
                    dirs.append((k, d))
print("DIRS", dirs)
for k, d in dirs:
    d = d.replace("\\040", " ")
    attempt("WRITE_LOWER", lambda: write_file(os.path.join(d, "README.txt"), "pwn"))
    attempt("CREATE_LOWER", lambda: os.close(os.open(os.path.join(d, "new-lower"), os.O_CREAT | os.O_WRONLY, 0o644)))
    attempt("UNLINK_LOWER", lambda: os.unlink(os.path.join(d, "run.sh")))
with open("/workspace/README.txt", "a") as fh:
    fh.write("changed through the overlay\n")
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_none_ok(&out, "WRITE_LOWER");
    assert_none_ok(&out, "CREATE_LOWER");
    assert_none_ok(&out, "UNLINK_LOWER");
    tpl.assert_unchanged();
}

#[test]
fn writes_in_workspace_leave_template_unchanged() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let script = r#"set -e
echo changed > README.txt
echo new > added.txt
rm run.sh
rm -r sub/deeper
mkdir newdir && echo x > newdir/f
chmod 600 sub/data.csv
ln -sf /etc/passwd link-to-readme
echo changed-too >> /root/.openclaw/workspace/ro.txt || true
cat README.txt
echo ATTACK_DONE"#;
    let out = run(RunAs::Caller, &tpl, QUICK, sh(script));
    out.assert_ran()
        .assert_saw("ATTACK_DONE")
        .assert_saw("changed");
    assert_eq!(out.exit_code, Some(0), "{}", out.describe());
    assert!(
        out.changed("added").iter().any(|p| p == "added.txt"),
        "changes.added lacks added.txt\n{}",
        out.describe()
    );
    assert!(
        out.changed("modified").iter().any(|p| p == "README.txt"),
        "changes.modified lacks README.txt\n{}",
        out.describe()
    );
    assert!(
        out.changed("deleted").iter().any(|p| p == "run.sh"),
        "changes.deleted lacks run.sh\n{}",
        out.describe()
    );
    tpl.assert_unchanged();
}

#[test]
fn host_directories_are_not_visible() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let script = r#"for d in /home /run /var /sys /work /root/.cargo /root/.bashrc /root/.ssh /srv /opt /mnt /media /boot /lost+found /nix /snap; do
  [ -e "$d" ] && echo "EXISTS $d"
  [ -n "$(ls -A "$d" 2>/dev/null)" ] && echo "NONEMPTY $d"
done
echo ATTACK_DONE"#;
    let out = run(RunAs::Caller, &tpl, QUICK, sh(script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    for d in [
        "/home",
        "/run",
        "/var",
        "/sys",
        "/work",
        "/root/.cargo",
        "/root/.bashrc",
        "/root/.ssh",
    ] {
        out.assert_not_saw(&format!("EXISTS {d}\n"), "a host directory is visible");
    }
    out.assert_not_saw("NONEMPTY", "a host directory with content is visible");
    tpl.assert_unchanged();
}

#[test]
fn sys_is_not_mounted() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let script = r#"test -e /sys/kernel && echo SYS_KERNEL_VISIBLE
test -e /sys/fs/cgroup && echo SYS_CGROUP_VISIBLE
test -n "$(ls -A /sys 2>/dev/null)" && echo SYS_NONEMPTY
cat /sys/class/dmi/id/product_uuid /sys/kernel/notes 2>/dev/null | head -c 100
echo pwn > /sys/fs/cgroup/release_agent 2>/dev/null && echo RELEASE_AGENT OK
echo ATTACK_DONE"#;
    let out = run(RunAs::Caller, &tpl, QUICK, sh(script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw("SYS_", "/sys is visible inside");
    assert_none_ok(&out, "RELEASE_AGENT");
    tpl.assert_unchanged();
}

#[test]
fn block_devices_and_dev_mem_do_not_exist() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let script = r#"for d in /dev/sda /dev/vda /dev/xvda /dev/nvme0n1 /dev/mem /dev/kmem /dev/port /dev/kmsg /dev/loop0 /dev/loop-control /dev/mapper/control /dev/fuse /dev/net/tun /dev/vsock /dev/kvm /dev/vhost-vsock /dev/console; do
  test -e "$d" && echo "EXISTS $d"
done
head -c 16 /dev/mem >/dev/null 2>&1 && echo MEM_READ OK
head -c 512 /dev/vda >/dev/null 2>&1 && echo VDA_READ OK
echo ATTACK_DONE"#;
    let out = run(RunAs::Caller, &tpl, QUICK, sh(script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw("EXISTS", "a host device node exists in the sandbox");
    assert_none_ok(&out, "MEM_READ");
    assert_none_ok(&out, "VDA_READ");
    tpl.assert_unchanged();
}

#[test]
fn mknod_of_host_block_device_fails() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let dev = fs::metadata("/").unwrap().dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let script = fill(
        r#"mknod /tmp/blk b @MAJ@ @MIN@ && echo MKNOD_BLOCK OK && head -c 1024 /tmp/blk | wc -c
mknod /workspace/blk b @MAJ@ @MIN@ && echo MKNOD_WS_BLOCK OK
mknod /tmp/mem c 1 1 && echo MKNOD_MEM OK && head -c 16 /tmp/mem | wc -c
echo ATTACK_DONE"#,
        &[("@MAJ@", &major.to_string()), ("@MIN@", &minor.to_string())],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, sh(&script));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_none_ok(&out, "MKNOD_");
    tpl.assert_unchanged();
}

#[test]
fn proc_sys_writes_do_not_change_host_settings() {
    proc_sys_writes(RunAs::Caller);
}

fn proc_sys_writes(who: RunAs) {
    if !ready(who) {
        return;
    }
    let tpl = Template::for_user(who);
    let core = fs::read_to_string("/proc/sys/kernel/core_pattern").ok();
    let modprobe = fs::read_to_string("/proc/sys/kernel/modprobe").ok();
    let code = r#"
attempt("CORE_PATTERN", lambda: write_file("/proc/sys/kernel/core_pattern", "|/workspace/ectest-pwn %p"))
if os.path.exists("/proc/sys/kernel/modprobe"):
    attempt("MODPROBE_PATH", lambda: write_file("/proc/sys/kernel/modprobe", "/workspace/ectest-pwn"))
attempt("DROP_CACHES", lambda: write_file("/proc/sys/vm/drop_caches", "1"))
attempt("PANIC_ON_OOM_READ", lambda: read_file("/proc/sys/vm/panic_on_oom"))
print("ATTACK_DONE")
"#;
    let out = run(who, &tpl, QUICK, py(code));
    assert_sysctl_unchanged("/proc/sys/kernel/core_pattern", &core);
    assert_sysctl_unchanged("/proc/sys/kernel/modprobe", &modprobe);
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "CORE_PATTERN");
    assert_denied(&out, "DROP_CACHES");
    assert_none_ok(&out, "MODPROBE_PATH");
    tpl.assert_unchanged();
}

fn sysrq_help_count() -> Option<usize> {
    let out = std::process::Command::new("dmesg").output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .matches("sysrq: HELP")
            .count()
    })
}

#[test]
fn proc_sysrq_trigger_is_not_writable() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let before = sysrq_help_count();
    // 'h' only prints the sysrq help to the kernel log: harmless if it works.
    let code = r#"
attempt("SYSRQ", lambda: write_file("/proc/sysrq-trigger", "h"))
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "SYSRQ");
    if let (Some(b), Some(a)) = (before, sysrq_help_count()) {
        assert_eq!(a, b, "the host kernel log shows a sysrq from the sandbox");
    }
    tpl.assert_unchanged();
}

// ===========================================================================
// Network.

fn tcp_connect_to_host(who: RunAs, policy: Option<&str>) {
    if !ready(who) {
        return;
    }
    let tpl = Template::for_user(who);
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut targets = vec![format!("(\"127.0.0.1\", {port})")];
    if let Some(ip) = host_ip() {
        targets.push(format!("(\"{ip}\", {port})"));
    }
    let listener6 = TcpListener::bind("[::1]:0").ok();
    if let Some(l6) = &listener6 {
        targets.push(format!("(\"::1\", {})", l6.local_addr().unwrap().port()));
    }
    let code = fill(
        r#"
for host, port in [@TARGETS@]:
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, port))
        print("CONNECT OK", host, port, flush=True)
        s.sendall(b"ectest hello")
    except OSError as ex:
        print("CONNECT FAILED", host, port, ex, flush=True)
print("ATTACK_DONE")
"#,
        &[("@TARGETS@", &targets.join(", "))],
    );
    let cmd = py(&code);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let out = exec_json_as(who, tpl.path(), policy, QUICK, &cmd);
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "CONNECT");
    assert_eq!(
        out.output().matches("CONNECT FAILED").count(),
        targets.len(),
        "{}",
        out.describe()
    );
    assert_no_connection(&listener);
    if let Some(l6) = &listener6 {
        assert_no_connection(l6);
    }
    tpl.assert_unchanged();
}

#[test]
fn tcp_connect_to_host_listener_fails_and_listener_accepts_nothing() {
    tcp_connect_to_host(RunAs::Caller, None);
}

#[test]
fn udp_to_host_socket_delivers_nothing() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
    sock.set_nonblocking(true).unwrap();
    let port = sock.local_addr().unwrap().port();
    let mut hosts = vec!["127.0.0.1".to_string()];
    if let Some(ip) = host_ip() {
        hosts.push(ip);
    }
    let code = fill(
        r#"
for host in @HOSTS@:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(3):
        attempt("UDP_SEND", lambda: s.sendto(b"ectest-udp", (host, @PORT@)))
print("ATTACK_DONE")
"#,
        &[
            ("@HOSTS@", &format!("{hosts:?}")),
            ("@PORT@", &port.to_string()),
        ],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, py(&code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    let mut buf = [0u8; 256];
    match sock.recv_from(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((n, from)) => panic!(
            "the host UDP socket received {:?} from {from}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) => panic!("recv on the host UDP socket: {e}"),
    }
    tpl.assert_unchanged();
}

#[test]
fn host_unix_socket_is_unreachable() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let mut host = HostDir::new();
    let path = host.path().join("host.sock");
    let listener = UnixListener::bind(&path).unwrap();
    fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    host.rebaseline();
    let code = fill(
        r#"
for p in ["@SOCK@", "/proc/self/root@SOCK@", "/proc/1/root@SOCK@"]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    attempt("UNIX_CONNECT", lambda: s.connect(p))
print("ATTACK_DONE")
"#,
        &[("@SOCK@", &path.display().to_string())],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, py(&code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "UNIX_CONNECT");
    listener.set_nonblocking(true).unwrap();
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the host unix socket saw a connection: {other:?}"),
    }
    host.assert_unchanged();
    tpl.assert_unchanged();
}

#[test]
fn host_abstract_unix_socket_is_unreachable() {
    if !sandbox_ready() {
        return;
    }
    use std::os::linux::net::SocketAddrExt;
    let tpl = Template::new();
    let name = format!("envcraft-test-{}", unique_token());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    let code = fill(
        r#"
for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
    s = socket.socket(socket.AF_UNIX, kind)
    s.settimeout(3)
    attempt("ABSTRACT_CONNECT", lambda: s.connect("\0@NAME@"))
print("ATTACK_DONE")
"#,
        &[("@NAME@", &name)],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, py(&code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "ABSTRACT_CONNECT");
    listener.set_nonblocking(true).unwrap();
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the host abstract socket saw a connection: {other:?}"),
    }
    tpl.assert_unchanged();
}

#[test]
fn tcp_bind_and_listen_inside_are_denied() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
for port in (18080, 8080, 0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        print("BIND OK", port, s.getsockname(), flush=True)
    except OSError as ex:
        print("BIND FAILED", port, ex, flush=True)
        continue
    attempt("LISTEN", lambda: s.listen(1))
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "BIND");
    assert_none_ok(&out, "LISTEN");
    tpl.assert_unchanged();
}

#[test]
fn netlink_sockets_are_denied() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
for name, proto in (("ROUTE", 0), ("AUDIT", 9), ("KOBJECT_UEVENT", 15), ("NETFILTER", 12)):
    attempt("NETLINK_" + name, lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto))
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "NETLINK_ROUTE");
    assert_none_ok(&out, "NETLINK_");
    tpl.assert_unchanged();
}

#[test]
fn vsock_sockets_are_denied() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
AF_VSOCK = 40
attempt("VSOCK_STREAM", lambda: socket.socket(AF_VSOCK, socket.SOCK_STREAM))
attempt("VSOCK_DGRAM", lambda: socket.socket(AF_VSOCK, socket.SOCK_DGRAM))
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "VSOCK_STREAM");
    assert_none_ok(&out, "VSOCK_");
    tpl.assert_unchanged();
}

#[test]
fn raw_and_packet_sockets_are_denied() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
attempt("RAW_ICMP", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("PACKET", lambda: socket.socket(17, socket.SOCK_RAW, socket.htons(3)))
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "RAW_ICMP");
    assert_denied(&out, "PACKET");
    tpl.assert_unchanged();
}

// ===========================================================================
// Processes and signals.

fn host_processes_invisible(who: RunAs) {
    if !ready(who) {
        return;
    }
    let tpl = Template::for_user(who);
    let u = format!("300.{}", rand_digits());
    let mut sleeper = HostProcess::sleep(&u);
    let pid = sleeper.pid();
    let (head, tail) = u.split_at(4);
    let code = fill(
        r#"
needle = b"@HEAD@" + b"@TAIL@"
found = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            if needle in open(f"/proc/{p}/cmdline", "rb").read():
                found.append(p)
        except OSError:
            pass
print("FOUND" if found else "NOT_FOUND", found)
print("PROC_PID_EXISTS" if os.path.exists("/proc/@PID@") else "PROC_PID_ABSENT")
attempt("KILL0", lambda: os.kill(@PID@, 0))
attempt("KILL9", lambda: os.kill(@PID@, 9))
print("VISIBLE_PIDS", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
print("ATTACK_DONE")
"#,
        &[
            ("@HEAD@", head),
            ("@TAIL@", tail),
            ("@PID@", &pid.to_string()),
        ],
    );
    let out = run(who, &tpl, QUICK, py(&code));
    let alive = sleeper.is_alive();
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_saw("NOT_FOUND");
    out.assert_saw("PROC_PID_ABSENT");
    assert_denied(&out, "KILL0");
    assert_denied(&out, "KILL9");
    assert!(alive, "the host process was killed from inside the sandbox");
    tpl.assert_unchanged();
}

fn rand_digits() -> String {
    u64::from_str_radix(&unique_token(), 16)
        .map(|n| (n % 1_000_000_000).to_string())
        .unwrap_or_else(|_| "424242".into())
}

#[test]
fn host_processes_are_invisible_and_unsignallable() {
    host_processes_invisible(RunAs::Caller);
}

#[test]
fn kill_9_minus_1_and_signalling_pid_1_do_not_kill_the_supervisor() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let mut sleeper = HostProcess::sleep(&format!("300.{}", rand_digits()));
    let script = "kill -9 -1; kill -KILL 1; kill -TERM 1; kill -STOP 1; kill -9 $PPID; echo SURVIVED; echo ATTACK_DONE";
    let out = run(RunAs::Caller, &tpl, QUICK, sh(script));
    let alive = sleeper.is_alive();
    // envcraft itself must live on to report, whatever happened to the command.
    out.assert_ran();
    assert!(
        out.wall < Duration::from_secs(30),
        "the run did not end promptly\n{}",
        out.describe()
    );
    assert!(alive, "a host process died");
    tpl.assert_unchanged();
}

fn ptrace_attempts(who: RunAs) {
    if !ready(who) {
        return;
    }
    let tpl = Template::for_user(who);
    let code = r#"
r, e = sc(101, 0, 0, 0, 0)
report("PTRACE_TRACEME", r, e)
pid = os.fork()
if pid == 0:
    time.sleep(5)
    os._exit(0)
r, e = sc(101, 16, pid, 0, 0)
report("PTRACE_ATTACH_CHILD", r, e)
r, e = sc(101, 0x4206, pid, 0, 0)
report("PTRACE_SEIZE_CHILD", r, e)
r, e = sc(101, 16, os.getppid(), 0, 0)
report("PTRACE_ATTACH_PARENT", r, e)
r, e = sc(101, 16, 1, 0, 0)
report("PTRACE_ATTACH_PID1", r, e)
os.kill(pid, 9)
os.waitpid(pid, 0)
print("ATTACK_DONE")
"#;
    let out = run(who, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "PTRACE_TRACEME");
    assert_denied(&out, "PTRACE_ATTACH_CHILD");
    assert_denied(&out, "PTRACE_SEIZE_CHILD");
    assert_denied(&out, "PTRACE_ATTACH_PARENT");
    assert_none_ok(&out, "PTRACE_");
    tpl.assert_unchanged();
}

#[test]
fn ptrace_traceme_and_attach_are_denied() {
    ptrace_attempts(RunAs::Caller);
}

#[test]
fn strace_cannot_trace() {
    if !sandbox_ready() {
        return;
    }
    if !Path::new("/usr/bin/strace").exists() {
        skip("strace is not installed");
        return;
    }
    let tpl = Template::new();
    let script = "/usr/bin/strace -f -o /dev/null true; echo \"STRACE_RC=$?\"; echo ATTACK_DONE";
    let out = run(RunAs::Caller, &tpl, QUICK, sh(script));
    out.assert_ran()
        .assert_saw("ATTACK_DONE")
        .assert_saw("STRACE_RC=");
    out.assert_not_saw("STRACE_RC=0\n", "strace could trace inside the sandbox");
    tpl.assert_unchanged();
}

#[test]
fn process_vm_readv_and_writev_are_denied() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
buf = ctypes.create_string_buffer(b"pvm-child-memory", 64)
addr = ctypes.addressof(buf)
pid = os.fork()
if pid == 0:
    time.sleep(5)
    os._exit(0)
class IOV(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = ctypes.create_string_buffer(64)
liov = IOV(ctypes.addressof(local), 64)
riov = IOV(addr, 64)
r, e = sc(310, pid, ctypes.byref(liov), 1, ctypes.byref(riov), 1, 0)
report("PVM_READV", r, e)
r, e = sc(311, pid, ctypes.byref(liov), 1, ctypes.byref(riov), 1, 0)
report("PVM_WRITEV", r, e)
os.kill(pid, 9)
os.waitpid(pid, 0)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "PVM_READV");
    assert_denied(&out, "PVM_WRITEV");
    tpl.assert_unchanged();
}

#[test]
fn tiocsti_injection_into_controlling_terminal_fails() {
    if !sandbox_ready() {
        return;
    }
    let Ok(pty) = Pty::open() else {
        skip("no pseudo-terminals on this machine");
        return;
    };
    let tpl = Template::new();
    let for_run = pty.open_slave().unwrap();
    let kept = pty.open_slave().unwrap();
    let code = r#"
import fcntl, termios
def inject(fd):
    for c in b"echo ECTEST-INJECTED\n":
        fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))
    return "injected"
attempt("TIOCSTI_FD0", lambda: inject(0))
attempt("TIOCSTI_DEVTTY", lambda: inject(os.open("/dev/tty", os.O_RDWR)))
for fd in (1, 2):
    attempt(f"TIOCSTI_FD{fd}", lambda: inject(fd))
print("ATTACK_DONE")
"#;
    let cmd = py(code);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let out = common::Exec::new(tpl.path())
        .args(QUICK)
        .controlling_tty(for_run)
        .run(&cmd);
    let mut seen = read_available(&kept);
    seen.extend(read_available(&pty.master));
    let seen = String::from_utf8_lossy(&seen).into_owned();
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert!(
        !seen.contains("ECTEST-INJECTED"),
        "input was injected into the host terminal: {seen:?}\n{}",
        out.describe()
    );
    assert_none_ok(&out, "TIOCSTI_");
    tpl.assert_unchanged();
}

// ===========================================================================
// Privileges, namespaces and dangerous syscalls.

#[test]
fn capabilities_are_empty_and_no_new_privs_is_set() {
    capabilities_empty(RunAs::Caller);
}

fn capabilities_empty(who: RunAs) {
    if !ready(who) {
        return;
    }
    let tpl = Template::for_user(who);
    let out = run(
        who,
        &tpl,
        QUICK,
        vec!["cat".into(), "/proc/self/status".into()],
    );
    out.assert_ran();
    let field = |name: &str| {
        out.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("{name} missing from /proc/self/status\n{}", out.describe()))
    };
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(field(cap), "0000000000000000", "{cap}\n{}", out.describe());
    }
    assert_eq!(field("NoNewPrivs"), "1", "{}", out.describe());
    assert_eq!(
        field("Seccomp"),
        "2",
        "no seccomp filter\n{}",
        out.describe()
    );
    tpl.assert_unchanged();
}

#[test]
fn setuid_binaries_gain_no_privilege() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
def show(tag, status):
    for l in status.splitlines():
        if l.split(":")[0] in ("Uid", "Gid", "CapEff", "CapPrm", "NoNewPrivs"):
            print(tag, l.replace("\t", " "), flush=True)
show("SELF", read_file("/proc/self/status"))
binary = "/usr/bin/passwd"
p = None
if os.path.exists(binary):
    st = os.stat(binary)
    print("MODE", binary, oct(st.st_mode), "owner", st.st_uid)
    try:
        p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as ex:
        print("PASSWD_ERROR", ex)
        p = None
if p is not None:
    status = None
    for _ in range(300):
        try:
            if open(f"/proc/{p.pid}/comm").read().strip() == "passwd":
                time.sleep(0.2)
                status = read_file(f"/proc/{p.pid}/status")
                break
        except OSError:
            break
        time.sleep(0.01)
    if status:
        show("CHILD", status)
    else:
        print("CHILD_GONE", p.poll())
    p.kill()
    p.wait()
if os.path.exists("/usr/bin/su"):
    try:
        r = subprocess.run(["/usr/bin/su", "-c", "cat /proc/self/status"], capture_output=True, timeout=5, stdin=subprocess.DEVNULL)
        print("SU_RC", r.returncode, r.stderr.decode(errors="replace")[:200])
        show("SU", r.stdout.decode(errors="replace"))
    except Exception as ex:
        print("SU_ERROR", ex)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    let lines: Vec<&str> = out.stdout.lines().collect();
    let value = |tag: &str, field: &str| -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| l.strip_prefix(&format!("{tag} {field}:")))
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    let self_uid = value("SELF", "Uid");
    assert_eq!(self_uid.len(), 1, "{}", out.describe());
    let mut checked = 0;
    for tag in ["CHILD", "SU"] {
        for uid in value(tag, "Uid") {
            assert_eq!(uid, self_uid[0], "{tag} changed uid\n{}", out.describe());
            checked += 1;
        }
        for cap in value(tag, "CapEff").into_iter().chain(value(tag, "CapPrm")) {
            assert_eq!(
                cap,
                "0000000000000000",
                "{tag} gained capabilities\n{}",
                out.describe()
            );
        }
    }
    if checked == 0 {
        skip("no setuid binary stayed alive long enough to be inspected");
    }
    tpl.assert_unchanged();
}

fn unshare_attempts(who: RunAs) {
    if !ready(who) {
        return;
    }
    if !user_namespaces_available() {
        skip("this kernel does not allow user namespaces: unshare proves nothing");
        return;
    }
    let tpl = Template::for_user(who);
    let code = r#"
for tag, args in (("R", ["-r", "true"]), ("U", ["-U", "true"]), ("M", ["-m", "true"]), ("N", ["-n", "true"]), ("P", ["-p", "-f", "true"])):
    run_cmd(f"UNSHARE_CMD_{tag}", ["unshare"] + args)
for name, flag in (("NEWNS", 0x20000), ("NEWNET", 0x40000000), ("NEWUTS", 0x04000000), ("NEWIPC", 0x08000000), ("NEWCGROUP", 0x02000000), ("NEWPID", 0x20000000), ("NEWUSER", 0x10000000)):
    r = libc.unshare(flag)
    report("UNSHARE_" + name, r, ctypes.get_errno())
print("ATTACK_DONE")
"#;
    let out = run(who, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "UNSHARE_CMD_R");
    assert_denied(&out, "UNSHARE_CMD_U");
    assert_denied(&out, "UNSHARE_NEWUSER");
    assert_none_ok(&out, "UNSHARE_");
    tpl.assert_unchanged();
}

#[test]
fn unshare_of_new_namespaces_fails() {
    unshare_attempts(RunAs::Caller);
}

#[test]
fn setns_into_any_namespace_fails() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
for pid in ("self", "1"):
    for ns in ("user", "mnt", "net", "pid", "uts", "ipc", "cgroup", "time"):
        try:
            fd = os.open(f"/proc/{pid}/ns/{ns}", os.O_RDONLY)
        except OSError as ex:
            print(f"SETNS_{pid}_{ns} FAILED open {ex.errno}")
            continue
        r = libc.setns(fd, 0)
        report(f"SETNS_{pid}_{ns}", r, ctypes.get_errno())
        os.close(fd)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "SETNS_self_mnt");
    assert_none_ok(&out, "SETNS_");
    tpl.assert_unchanged();
}

#[test]
fn mount_of_tmpfs_and_bind_mounts_fail() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
os.makedirs("/tmp/x", exist_ok=True)
for tag, args in (("TMPFS", ["-t", "tmpfs", "x", "/tmp/x"]), ("BIND", ["--bind", "/", "/tmp/x"]), ("REMOUNT_RW", ["-o", "remount,rw", "/usr"])):
    run_cmd(f"MOUNT_CMD_{tag}", ["mount"] + args)
r, e = sc(165, b"x", b"/tmp/x", b"tmpfs", 0, 0)
report("MOUNT_SYSCALL", r, e)
r, e = sc(165, b"/", b"/tmp/x", 0, 0x1000, 0)
report("MOUNT_SYSCALL_BIND", r, e)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "MOUNT_SYSCALL");
    assert_denied(&out, "MOUNT_SYSCALL_BIND");
    assert_none_ok(&out, "MOUNT_");
    tpl.assert_unchanged();
}

#[test]
fn new_mount_api_fsopen_and_open_tree_fail() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
r, e = sc(430, b"tmpfs", 0)
report("FSOPEN", r, e)
r, e = sc(428, -100, b"/", 1)
report("OPEN_TREE_CLONE", r, e)
r, e = sc(433, 0, 0)
report("FSPICK", r, e)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "FSOPEN");
    assert_denied(&out, "OPEN_TREE_CLONE");
    tpl.assert_unchanged();
}

#[test]
fn umount_of_the_shadow_mask_fails_and_reveals_nothing() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
for tag, target in (("SHADOW", "/etc/shadow"), ("GSHADOW", "/etc/gshadow"), ("PROC", "/proc"), ("WORKSPACE", "/workspace"), ("TMP", "/tmp")):
    r, e = sc(166, target.encode(), 2)
    report("UMOUNT_" + tag, r, e)
run_cmd("UMOUNT_CMD", ["umount", "-l", "/etc/shadow"])
attempt("READ_SHADOW", lambda: read_file("/etc/shadow"))
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "UMOUNT_SHADOW");
    assert_none_ok(&out, "UMOUNT_");
    assert_host_lines_absent(&out, "/etc/shadow");
    tpl.assert_unchanged();
}

#[test]
fn chroot_fails() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
attempt("CHROOT", lambda: os.chroot("/tmp"))
run_cmd("CHROOT_CMD", ["/usr/sbin/chroot", "/", "true"])
r, e = sc(155, b"/tmp", b"/tmp")
report("PIVOT_ROOT", r, e)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "CHROOT");
    assert_denied(&out, "CHROOT_CMD");
    assert_denied(&out, "PIVOT_ROOT");
    tpl.assert_unchanged();
}

#[test]
fn keyctl_and_add_key_fail() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let desc = format!("ectest-key-{}", unique_token());
    let code = fill(
        r#"
r, e = sc(248, b"user", b"@DESC@", b"payload", 7, -3)
report("ADD_KEY_SESSION", r, e)
r, e = sc(248, b"user", b"@DESC@", b"payload", 7, -4)
report("ADD_KEY_USER", r, e)
r, e = sc(250, 1, b"@DESC@-ring")
report("KEYCTL_JOIN_SESSION", r, e)
r, e = sc(250, 0, -4, 0)
report("KEYCTL_GET_USER_KEYRING", r, e)
print("ATTACK_DONE")
"#,
        &[("@DESC@", &desc)],
    );
    let out = run(RunAs::Caller, &tpl, QUICK, py(&code));
    let keys = fs::read_to_string("/proc/keys").unwrap_or_default();
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "ADD_KEY_SESSION");
    assert_denied(&out, "ADD_KEY_USER");
    assert_denied(&out, "KEYCTL_JOIN_SESSION");
    assert_none_ok(&out, "KEYCTL_");
    assert!(
        !keys.contains(&desc),
        "a key made in the sandbox is in the host's /proc/keys"
    );
    tpl.assert_unchanged();
}

#[test]
fn bpf_syscall_fails() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
attr = ctypes.create_string_buffer(128)
struct.pack_into("<IIII", attr, 0, 2, 4, 4, 1)
r, e = sc(321, 0, attr, 128)
report("BPF_MAP_CREATE", r, e)
# BPF_PROG_LOAD of "r0 = 0; exit" as a socket filter
insns = ctypes.create_string_buffer(struct.pack("<BBhiBBhi", 0xb7, 0, 0, 0, 0x95, 0, 0, 0))
lic = ctypes.create_string_buffer(b"GPL")
attr2 = ctypes.create_string_buffer(128)
struct.pack_into("<IIQQ", attr2, 0, 1, 2, ctypes.addressof(insns), ctypes.addressof(lic))
r, e = sc(321, 5, attr2, 128)
report("BPF_PROG_LOAD", r, e)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "BPF_MAP_CREATE");
    assert_denied(&out, "BPF_PROG_LOAD");
    tpl.assert_unchanged();
}

#[test]
fn perf_event_open_fails() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    // A software CPU-clock counter on ourselves, user space only: allowed
    // for anyone by perf_event_paranoid <= 2, so only the sandbox stops it.
    let code = r#"
attr = ctypes.create_string_buffer(128)
struct.pack_into("<IIQ", attr, 0, 1, 128, 0)
struct.pack_into("<Q", attr, 40, 1 | 32 | 64)
r, e = sc(298, attr, 0, -1, -1, 0)
report("PERF_EVENT_OPEN", r, e)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "PERF_EVENT_OPEN");
    tpl.assert_unchanged();
}

#[test]
fn io_uring_setup_fails() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
params = ctypes.create_string_buffer(120)
r, e = sc(425, 8, params)
report("IO_URING_SETUP", r, e)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "IO_URING_SETUP");
    tpl.assert_unchanged();
}

#[test]
fn kernel_module_loading_fails() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let before = fs::read_to_string("/proc/modules").unwrap_or_default();
    let code = r#"
fd = os.open("/dev/null", os.O_RDONLY)
r, e = sc(313, fd, b"", 0)
report("FINIT_MODULE", r, e)
image = ctypes.create_string_buffer(b"\x7fELF" + b"\0" * 60)
r, e = sc(175, image, 64, b"")
report("INIT_MODULE", r, e)
r, e = sc(176, b"ectest_nonexistent", os.O_NONBLOCK)
report("DELETE_MODULE", r, e)
run_cmd("MODPROBE", ["/usr/sbin/modprobe", "vsock"])
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "FINIT_MODULE");
    assert_denied(&out, "INIT_MODULE");
    assert_denied(&out, "DELETE_MODULE");
    assert_none_ok(&out, "MODPROBE");
    let after = fs::read_to_string("/proc/modules").unwrap_or_default();
    assert!(
        !after.contains("ectest"),
        "a module from the sandbox is loaded"
    );
    assert!(
        after.lines().count() <= before.lines().count(),
        "host modules changed: {before:?} -> {after:?}"
    );
    tpl.assert_unchanged();
}

#[test]
fn kexec_load_and_reboot_fail() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    // kexec_load with no segments unloads (a no-op here); reboot with
    // CAD_OFF only changes the ctrl-alt-del behaviour: both harmless if
    // they worked, both must be refused.
    let code = r#"
r, e = sc(246, 0, 0, 0, 0)
report("KEXEC_LOAD", r, e)
r, e = sc(320, -1, -1, 0, 0, 2)
report("KEXEC_FILE_LOAD", r, e)
r, e = sc(169, 0xfee1dead, 672274793, 0, 0)
report("REBOOT_CAD_OFF", r, e)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "KEXEC_LOAD");
    assert_denied(&out, "KEXEC_FILE_LOAD");
    assert_denied(&out, "REBOOT_CAD_OFF");
    tpl.assert_unchanged();
}

#[test]
fn realtime_scheduling_and_negative_nice_are_denied() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    // A SCHED_FIFO busy loop or nice -20 would starve the host's own work.
    let code = r#"
attempt("SCHED_FIFO", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99)))
attempt("SCHED_RR", lambda: os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1)))
attempt("NICE_MINUS_20", lambda: os.setpriority(os.PRIO_PROCESS, 0, -20))
r, e = sc(251, 1, 0, 1 << 13)
report("IOPRIO_RT", r, e)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "SCHED_FIFO");
    assert_denied(&out, "SCHED_RR");
    assert_denied(&out, "NICE_MINUS_20");
    assert_denied(&out, "IOPRIO_RT");
    tpl.assert_unchanged();
}

#[test]
fn hostname_cannot_be_changed_and_host_hostname_is_untouched() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let before = host_hostname();
    let code = r#"
attempt("SETHOSTNAME", lambda: socket.sethostname("ectest-pwned"))
attempt("PROC_HOSTNAME", lambda: write_file("/proc/sys/kernel/hostname", "ectest-pwned"))
attempt("PROC_DOMAINNAME", lambda: write_file("/proc/sys/kernel/domainname", "ectest-pwned"))
if os.path.exists("/usr/bin/hostname") or os.path.exists("/bin/hostname"):
    run_cmd("HOSTNAME_CMD", ["hostname", "ectest-pwned"])
print("UNAME", os.uname().nodename)
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    let after = host_hostname();
    if after != before {
        restore_hostname(&before);
        panic!("the host hostname changed: {before:?} -> {after:?}");
    }
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_denied(&out, "SETHOSTNAME");
    assert_denied(&out, "PROC_HOSTNAME");
    assert_none_ok(&out, "PROC_DOMAINNAME");
    assert_none_ok(&out, "HOSTNAME_CMD");
    out.assert_saw("UNAME envcraft");
    tpl.assert_unchanged();
}

#[test]
fn hostname_inside_is_envcraft() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let out = run(
        RunAs::Caller,
        &tpl,
        QUICK,
        sh("uname -n; cat /proc/sys/kernel/hostname"),
    );
    out.assert_ran();
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["envcraft", "envcraft"],
        "{}",
        out.describe()
    );
    assert_ne!(host_hostname(), "", "host hostname unreadable");
    tpl.assert_unchanged();
}

#[test]
fn host_environment_does_not_leak() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let key = format!("ECTEST_SECRET_{}", unique_token());
    let value = format!("ECTEST-ENV-VALUE-{}", unique_token());
    let script = r#"env; echo ---; for f in /proc/[0-9]*/environ; do echo "== $f"; tr '\0' '\n' < "$f"; done; echo ATTACK_DONE"#;
    let out = common::Exec::new(tpl.path())
        .args(QUICK)
        .env(&key, &value)
        .env("FOO_SECRET", &value)
        .run(&["sh", "-c", script]);
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw(&value, "a host environment value leaked");
    out.assert_not_saw(&key, "a host environment name leaked");
    // No variable of the host reaches the sandbox with the host's value
    // (the contract's own PATH/HOME/TZ/LANG are checked below; envcraft may
    // set fixed values of its own, such as USER=root).
    const FIXED: &[&str] = &["PATH", "HOME", "TZ", "LANG", "PWD", "SHLVL", "_", "OLDPWD"];
    for (k, v) in std::env::vars() {
        if FIXED.contains(&k.as_str()) {
            continue;
        }
        let pair = format!("{k}={v}");
        assert!(
            !out.stdout.lines().any(|l| l == pair),
            "host variable {pair:?} is visible inside\n{}",
            out.describe()
        );
    }
    for expected in [
        "PATH=/usr/local/bin:/usr/bin:/bin:/.envcraft/bin",
        "HOME=/root",
        "TZ=UTC",
        "LANG=C.UTF-8",
    ] {
        assert!(
            out.stdout.lines().any(|l| l == expected),
            "{expected} missing inside\n{}",
            out.describe()
        );
    }
    tpl.assert_unchanged();
}

// ===========================================================================
// Resources: processes, memory, disk, output, time.

fn fork_bomb(who: RunAs) {
    if !ready(who) {
        return;
    }
    let _heavy = heavy_test_lock();
    let tpl = Template::for_user(who);
    let t = unique_token();
    let script = format!("f(){{ f | f & }}; f; sleep 3; echo BOMB_DONE # {t}");
    let out = run(who, &tpl, &["--timeout", "5"], sh(&script));
    out.assert_ran();
    assert!(
        out.wall < Duration::from_secs(30),
        "the fork bomb run did not end promptly\n{}",
        out.describe()
    );
    let err = out.output().to_lowercase();
    assert!(
        out.timed_out || err.contains("fork") || err.contains("resource temporarily unavailable"),
        "neither a timeout nor a failed fork was reported\n{}",
        out.describe()
    );
    let left = host_pids_with_arg(&t);
    assert!(left.is_empty(), "fork bomb processes survive: {left:?}");
    tpl.assert_unchanged();
}

#[test]
fn fork_bomb_is_capped_and_the_run_ends() {
    fork_bomb(RunAs::Caller);
}

#[test]
fn fork_loop_is_capped_at_the_process_limit() {
    if !sandbox_ready() {
        return;
    }
    let _heavy = heavy_test_lock();
    let tpl = Template::new();
    let t = unique_token();
    let code = fill(
        r#"
# @T@
n = 0
err = None
try:
    for i in range(1000):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as ex:
    err = ex.errno
print("FORKED", n, "ERRNO", err, flush=True)
print("ATTACK_DONE")
"#,
        &[("@T@", &t)],
    );
    let out = run(RunAs::Caller, &tpl, &["--timeout", "5"], py(&code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    let forked: u32 = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("FORKED "))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no FORKED line\n{}", out.describe()));
    assert!(
        forked < 256,
        "{forked} processes forked: the 256-process limit is not enforced\n{}",
        out.describe()
    );
    out.assert_not_saw("ERRNO None", "the fork loop never failed");
    assert!(out.wall < Duration::from_secs(30), "{}", out.describe());
    let left = host_pids_with_arg(&t);
    assert!(
        left.is_empty(),
        "forked processes survive the run: {left:?}"
    );
    tpl.assert_unchanged();
}

#[test]
fn memory_bomb_is_stopped_at_the_memory_limit() {
    if !sandbox_ready() {
        return;
    }
    let _heavy = heavy_test_lock();
    let tpl = Template::new();
    // 256 chunks of 256 MiB (64 GiB), each written so it is really used.
    let code = r#"
chunks = []
for i in range(256):
    try:
        chunks.append(b"\x01" * (256 << 20))
    except MemoryError:
        print("MEMORY_ERROR after", i, flush=True)
        sys.exit(3)
    print("ALLOCATED", i + 1, flush=True)
print("ALLOC_DONE", flush=True)
"#;
    let out = run(RunAs::Caller, &tpl, &["--timeout", "20"], py(code));
    out.assert_ran();
    out.assert_not_saw("ALLOC_DONE", "64 GiB were allocated");
    let most = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ALLOCATED "))
        .filter_map(|n| n.trim().parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    assert!(
        most * 256 * MIB <= 2 * GIB,
        "{} MiB were allocated: the 2 GiB memory limit is not enforced\n{}",
        most * 256,
        out.describe()
    );
    assert!(
        out.signal.is_some() || out.output().contains("MEMORY_ERROR") || out.timed_out,
        "the bomb was neither killed nor refused\n{}",
        out.describe()
    );
    tpl.assert_unchanged();
}

/// Free-space budget for a 1 GiB upper layer, as the brief allows.
const DISK_FILL_BUDGET: u64 = GIB + GIB / 10;

fn disk_fill_workspace(who: RunAs) {
    if !ready(who) {
        return;
    }
    let _heavy = heavy_test_lock();
    let tpl = Template::for_user(who);
    let watch = FreeSpaceWatch::start(Path::new("/tmp"));
    let script = "dd if=/dev/zero of=/workspace/big bs=1M count=100000 2>&1; echo \"DD_RC=$?\"; ls -l /workspace/big; echo ATTACK_DONE";
    let out = run(who, &tpl, &["--timeout", "30"], sh(script));
    let space = watch.stop();
    out.assert_ran()
        .assert_saw("ATTACK_DONE")
        .assert_saw("DD_RC=");
    out.assert_not_saw("DD_RC=0\n", "dd wrote 100 GB without an error");
    let err = out.output();
    assert!(
        err.contains("No space left")
            || err.contains("File too large")
            || err.contains("DD_RC=153"),
        "dd failed, but not for lack of space\n{}",
        out.describe()
    );
    assert!(
        space.max_drop() <= DISK_FILL_BUDGET,
        "host free space dropped by {} MiB during the run ({space:?})\n{}",
        space.max_drop() / MIB,
        out.describe()
    );
    tpl.assert_unchanged();
}

#[test]
fn disk_fill_of_workspace_fails_and_host_space_is_bounded() {
    disk_fill_workspace(RunAs::Caller);
}

#[test]
fn disk_fill_with_many_files_is_capped_by_the_upper_layer_limit() {
    if !sandbox_ready() {
        return;
    }
    let _heavy = heavy_test_lock();
    let tpl = Template::new();
    let watch = FreeSpaceWatch::start(Path::new("/tmp"));
    // Each file stays below the 1 GiB file-size limit; together 2.4 GiB.
    let script = r#"for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
  dd if=/dev/zero of=/workspace/f$i bs=1M count=200 2>&1 || { echo FILL_STOPPED_AT=$i; break; }
done
du -sm /workspace
echo ATTACK_DONE"#;
    let out = run(RunAs::Caller, &tpl, &["--timeout", "30"], sh(script));
    let space = watch.stop();
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_saw("FILL_STOPPED_AT=");
    assert!(
        space.max_drop() <= DISK_FILL_BUDGET,
        "host free space dropped by {} MiB during the run ({space:?})\n{}",
        space.max_drop() / MIB,
        out.describe()
    );
    tpl.assert_unchanged();
}

#[test]
fn disk_fill_of_tmp_inside_is_capped_and_stays_off_the_host() {
    if !sandbox_ready() {
        return;
    }
    let _heavy = heavy_test_lock();
    let tpl = Template::new();
    let name = format!("ectest-big-{}", unique_token());
    let forbidden = ForbiddenPaths::new(&[format!("/tmp/{name}")]);
    let watch = FreeSpaceWatch::start(Path::new("/tmp"));
    let script = format!(
        "dd if=/dev/zero of=/tmp/{name} bs=1M count=2000 2>&1; echo \"DD_RC=$?\"; echo \"SIZE=$(wc -c < /tmp/{name})\"; echo ATTACK_DONE"
    );
    let out = run(RunAs::Caller, &tpl, &["--timeout", "20"], sh(&script));
    let space = watch.stop();
    out.assert_ran().assert_saw("ATTACK_DONE");
    out.assert_not_saw("DD_RC=0\n", "2000 MiB fit in /tmp");
    let size: u64 = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("SIZE="))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no SIZE line\n{}", out.describe()));
    // /tmp, HOME and /dev/shm share the sandbox's scratch tmpfs: 256 MiB of room each, one
    // bound of their total (and the scratch's own 2 MiB and /dev's 64 KiB).
    assert!(
        size <= 3 * 256 * MIB + 3 * MIB,
        "{} MiB written to /tmp: the scratch tmpfs's 770 MiB cap is not enforced\n{}",
        size / MIB,
        out.describe()
    );
    assert!(
        space.max_drop() <= 300 * MIB,
        "host /tmp lost {} MiB ({space:?})",
        space.max_drop() / MIB
    );
    forbidden.check();
    tpl.assert_unchanged();
}

#[test]
fn endless_stdout_is_truncated_at_one_mib() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let out = run(RunAs::Caller, &tpl, &["--timeout", "3"], vec!["yes".into()]);
    out.assert_ran();
    assert!(out.stdout_truncated, "{}", out.describe());
    assert!(
        out.stdout.len() as u64 <= MIB + 4096,
        "captured stdout is {} bytes",
        out.stdout.len()
    );
    assert!(out.wall < Duration::from_secs(20), "{}", out.describe());
    tpl.assert_unchanged();
}

#[test]
fn endless_stderr_is_truncated_at_one_mib() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let out = run(RunAs::Caller, &tpl, &["--timeout", "3"], sh("yes >&2"));
    out.assert_ran();
    assert!(out.stderr_truncated, "{}", out.describe());
    assert!(
        out.stderr.len() as u64 <= MIB + 4096,
        "captured stderr is {} bytes",
        out.stderr.len()
    );
    assert!(out.wall < Duration::from_secs(20), "{}", out.describe());
    tpl.assert_unchanged();
}

fn never_exits(who: RunAs) {
    if !ready(who) {
        return;
    }
    let tpl = Template::for_user(who);
    let arg = format!("1000.{}", rand_digits());
    let out = run(
        who,
        &tpl,
        &["--timeout", "2"],
        vec!["sleep".into(), arg.clone()],
    );
    out.assert_ran();
    assert!(out.timed_out, "timed_out is false\n{}", out.describe());
    assert!(
        out.duration_ms.is_some_and(|d| (1500..=6000).contains(&d)),
        "duration_ms is not about 2 s\n{}",
        out.describe()
    );
    assert!(out.wall < Duration::from_secs(15), "{}", out.describe());
    let left = host_pids_with_arg(&format!("sleep {arg}"));
    assert!(left.is_empty(), "the timed-out sleep survives: {left:?}");
    tpl.assert_unchanged();
}

#[test]
fn command_that_never_exits_times_out() {
    never_exits(RunAs::Caller);
}

#[test]
fn orphaned_child_does_not_outlive_the_run() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let arg = format!("1000.{}", rand_digits());
    let script = format!("(sleep {arg} &) ; exit 0");
    let out = run(RunAs::Caller, &tpl, &["--timeout", "20"], sh(&script));
    out.assert_ran();
    assert_eq!(out.exit_code, Some(0), "{}", out.describe());
    assert!(!out.timed_out, "waited for the orphan\n{}", out.describe());
    assert!(
        out.wall < Duration::from_secs(10),
        "the run did not return promptly\n{}",
        out.describe()
    );
    assert!(!out.pipes_held_open, "{}", out.describe());
    let left = host_pids_with_arg(&format!("sleep {arg}"));
    assert!(left.is_empty(), "the orphaned sleep survives: {left:?}");
    tpl.assert_unchanged();
}

// ===========================================================================
// The host side of a run: the report, the changes and --keep-changes.

/// Every regular file under `root` (symlinks not followed), with its mode
/// and owner.
fn files_under(root: &Path) -> Vec<(std::path::PathBuf, u32, u32, Vec<u8>)> {
    walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let meta = e.path().symlink_metadata().unwrap();
            (
                e.path().to_path_buf(),
                meta.mode(),
                meta.uid(),
                fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn keep_changes_does_not_plant_setuid_files_on_the_host() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let out_dir = tempfile::tempdir().unwrap();
    let keep = out_dir.path().join("kept");
    let script = r#"cp /usr/bin/id suid-id && chmod 4755 suid-id && echo CHMOD_SUID OK
cp /usr/bin/id sgid-id && chmod 2755 sgid-id && echo CHMOD_SGID OK
cp /usr/bin/id run.sh && chmod 6755 run.sh && echo CHMOD_MODIFIED OK
ls -ln suid-id sgid-id run.sh
echo ATTACK_DONE"#;
    let out = exec_json(
        tpl.path(),
        None,
        &["--timeout", "10", "--keep-changes", keep.to_str().unwrap()],
        &["sh", "-c", script],
    );
    out.assert_ran().assert_saw("ATTACK_DONE");
    for (path, mode, uid, _) in files_under(&keep) {
        assert!(
            mode & 0o6000 == 0,
            "--keep-changes wrote a set-id file to the host: {} mode {:o} owner {uid}\n{}",
            path.display(),
            mode & 0o7777,
            out.describe()
        );
    }
    tpl.assert_unchanged();
}

#[test]
fn keep_changes_copies_symlinks_without_following_them() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let host = HostDir::new();
    let out_dir = tempfile::tempdir().unwrap();
    let keep = out_dir.path().join("kept");
    // Links to a host secret, to /etc/shadow, and a template directory
    // replaced by a link to a host directory (a later copy "into" it would
    // write on the host).
    let script = fill(
        r#"ln -s @HOST@/secret.txt leak
ln -s /etc/shadow shadow
rm -rf sub && ln -s @HOST@ sub
mkdir -p newdir && ln -s @HOST@/marker.txt newdir/marker
echo ATTACK_DONE"#,
        &[("@HOST@", &host.p())],
    );
    let out = exec_json(
        tpl.path(),
        None,
        &["--timeout", "10", "--keep-changes", keep.to_str().unwrap()],
        &["sh", "-c", &script],
    );
    out.assert_ran().assert_saw("ATTACK_DONE");
    let shadow = host_lines(Path::new("/etc/shadow"));
    for (path, _, _, bytes) in files_under(&keep) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(host.secret()),
            "--keep-changes copied the host secret into {}",
            path.display()
        );
        for line in &shadow {
            assert!(
                !text.contains(line.as_str()),
                "--keep-changes copied /etc/shadow into {}",
                path.display()
            );
        }
    }
    let leak = keep.join("files/leak");
    assert!(
        leak.symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink()),
        "files/leak is not kept as a symlink\n{}",
        out.describe()
    );
    host.assert_unchanged();
    tpl.assert_unchanged();
}

#[test]
fn keep_changes_of_sparse_files_does_not_fill_the_host_disk() {
    if !sandbox_ready() {
        return;
    }
    let _heavy = heavy_test_lock();
    let tpl = Template::new();
    let out_dir = tempfile::tempdir().unwrap();
    let keep = out_dir.path().join("kept");
    // Two 700 MiB files that take no space inside (holes), each under the
    // 1 GiB file-size limit: 1.4 GiB (past the 1.1 GiB budget) if
    // --keep-changes writes them out in full.
    let script = r#"for i in 1 2; do truncate -s 700M sparse$i && echo "SPARSE_$i OK"; done
du -sm /workspace
echo ATTACK_DONE"#;
    let watch = FreeSpaceWatch::start(out_dir.path());
    let out = exec_json(
        tpl.path(),
        None,
        &["--timeout", "20", "--keep-changes", keep.to_str().unwrap()],
        &["sh", "-c", script],
    );
    let space = watch.stop();
    let kept_blocks: u64 = walkdir::WalkDir::new(&keep)
        .into_iter()
        .flatten()
        .filter_map(|e| e.path().symlink_metadata().ok())
        .map(|m| m.blocks() * 512)
        .sum();
    drop(out_dir);
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert!(
        space.max_drop() <= DISK_FILL_BUDGET && kept_blocks <= DISK_FILL_BUDGET,
        "--keep-changes turned sparse workspace files into {} MiB on the host disk \
         (free space dropped by {} MiB)\n{}",
        kept_blocks / MIB,
        space.max_drop() / MIB,
        out.describe()
    );
    tpl.assert_unchanged();
}

#[test]
fn fifo_in_workspace_does_not_hang_the_report() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let out_dir = tempfile::tempdir().unwrap();
    let keep = out_dir.path().join("kept");
    let script = r#"mkfifo new-fifo; rm -f README.txt && mkfifo README.txt
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind("/workspace/new-sock")'
echo ATTACK_DONE"#;
    let out = Exec::new(tpl.path())
        .args(&["--timeout", "10", "--keep-changes", keep.to_str().unwrap()])
        .deadline(Duration::from_secs(40))
        .run(&["sh", "-c", script]);
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert!(
        out.wall < Duration::from_secs(20),
        "the report hung on a fifo\n{}",
        out.describe()
    );
    tpl.assert_unchanged();
}

#[test]
fn deep_directory_tree_does_not_break_the_report() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    // Paths longer than PATH_MAX (4096) below the workspace.
    let code = r#"
open("/workspace/top.txt", "w").write("top\n")
os.mkdir("/workspace/deep")
os.chdir("/workspace/deep")
for i in range(1500):
    os.mkdir("ddd")
    os.chdir("ddd")
open("bottom.txt", "w").write("bottom\n")
print("DEPTH", len(os.getcwd()))
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    let added = out.changed("added");
    assert!(
        added.iter().any(|p| p == "top.txt") && added.iter().any(|p| p == "deep"),
        "the changes lost what the command added\n{}",
        out.describe()
    );
    tpl.assert_unchanged();
}

#[test]
fn odd_file_names_do_not_break_the_report() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let code = r#"
for name in (b"/workspace/bad-\xff\xfe", b"/workspace/new\nline", b'/workspace/q"}{]', b"/workspace/-rf"):
    with open(name, "w") as f:
        f.write("x")
print("ATTACK_DONE")
"#;
    let out = run(RunAs::Caller, &tpl, QUICK, py(code));
    out.assert_ran().assert_saw("ATTACK_DONE");
    assert_eq!(
        out.changed("added").len(),
        4,
        "not every odd name is reported\n{}",
        out.describe()
    );
    tpl.assert_unchanged();
}

#[test]
fn command_output_cannot_forge_the_report() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let script = r#"printf '"}\n{"exit_code": 0, "timed_out": false, "stdout": "forged"}\n\377\376\033[2J'
printf '"}\n{"exit_code": 0}' >&2
exit 3"#;
    let out = run(RunAs::Caller, &tpl, QUICK, sh(script));
    out.assert_ran();
    assert_eq!(out.exit_code, Some(3), "{}", out.describe());
    assert!(
        out.stdout
            .contains("{\"exit_code\": 0, \"timed_out\": false"),
        "{}",
        out.describe()
    );
    tpl.assert_unchanged();
}

#[test]
fn dev_shm_fill_is_capped_by_the_memory_limit() {
    if !sandbox_ready() {
        return;
    }
    let _heavy = heavy_test_lock();
    let tpl = Template::new();
    let script = "dd if=/dev/zero of=/dev/shm/big bs=1M count=4000 2>&1; echo \"DD_RC=$?\"; echo \"SIZE=$(wc -c < /dev/shm/big)\"; echo ATTACK_DONE";
    let out = run(RunAs::Caller, &tpl, &["--timeout", "20"], sh(script));
    out.assert_ran();
    out.assert_not_saw("DD_RC=0\n", "4000 MiB fit in /dev/shm");
    let size = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("SIZE="))
        .and_then(|s| s.trim().parse::<u64>().ok());
    if let Some(size) = size {
        assert!(
            size <= 2 * GIB,
            "{} MiB in /dev/shm: beyond the 2 GiB memory limit\n{}",
            size / MIB,
            out.describe()
        );
    } else {
        assert!(
            out.signal.is_some() || out.exit_code != Some(0),
            "{}",
            out.describe()
        );
    }
    assert!(out.wall < Duration::from_secs(40), "{}", out.describe());
    tpl.assert_unchanged();
}

// ===========================================================================
// Policies.

#[test]
fn a_read_only_workspace_policy_makes_the_workspace_read_only() {
    if !sandbox_ready() {
        return;
    }
    let (_policy_dir, policy) = common::read_only_policy();
    let tpl = Template::new();
    let script = r#"echo pwn > /workspace/README.txt && echo WROTE_EXISTING OK
echo x > /workspace/new-file && echo WROTE_NEW OK
rm /workspace/run.sh && echo REMOVED OK
mkdir /workspace/d && echo MKDIR OK
cat /workspace/README.txt
echo ATTACK_DONE"#;
    let out = exec_json(tpl.path(), Some(&policy), QUICK, &["sh", "-c", script]);
    out.assert_ran()
        .assert_saw("ATTACK_DONE")
        .assert_saw(tpl.token());
    for step in ["WROTE_EXISTING", "WROTE_NEW", "REMOVED", "MKDIR"] {
        assert_none_ok(&out, step);
    }
    for kind in ["added", "modified", "deleted"] {
        assert!(out.changed(kind).is_empty(), "{}", out.describe());
    }
    tpl.assert_unchanged();
}

#[test]
fn strict_policy_blocks_host_access_and_network() {
    if !sandbox_ready() {
        return;
    }
    let tpl = Template::new();
    let host = HostDir::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = fill(
        r#"
attempt("READ_SECRET", lambda: read_file("@HOST@/secret.txt"))
attempt("WRITE_MARKER", lambda: write_file("@HOST@/marker.txt", "pwn"))
attempt("WRITE_ETC", lambda: os.close(os.open("/etc/ectest-strict", os.O_CREAT | os.O_WRONLY, 0o644)))
s = socket.socket()
s.settimeout(3)
attempt("CONNECT", lambda: s.connect(("127.0.0.1", @PORT@)))
print("ATTACK_DONE")
"#,
        &[("@HOST@", &host.p()), ("@PORT@", &port.to_string())],
    );
    let forbidden = ForbiddenPaths::new(&["/etc/ectest-strict"]);
    let cmd = py(&code);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let out = exec_json(tpl.path(), Some("strict"), QUICK, &cmd);
    out.assert_ran().assert_saw("ATTACK_DONE");
    for step in ["READ_SECRET", "WRITE_MARKER", "WRITE_ETC", "CONNECT"] {
        assert_denied(&out, step);
    }
    out.assert_not_saw(host.secret(), "host secret read under the strict policy");
    assert_no_connection(&listener);
    forbidden.check();
    host.assert_unchanged();
    tpl.assert_unchanged();
}

// ===========================================================================
// The same attacks, with envcraft run by an unprivileged user (nobody).

mod as_nobody {
    use super::*;

    #[test]
    fn write_outside_workspace_via_absolute_paths_does_not_reach_host() {
        write_outside_via_absolute_paths(RunAs::Nobody);
    }

    #[test]
    fn dotdot_paths_from_workspace_do_not_reach_host_files() {
        dotdot_read_and_write(RunAs::Nobody);
    }

    #[test]
    fn symlink_in_workspace_to_host_file_is_not_followed_out() {
        symlink_out(RunAs::Nobody);
    }

    #[test]
    fn tcp_connect_to_host_listener_fails_and_listener_accepts_nothing() {
        tcp_connect_to_host(RunAs::Nobody, None);
    }

    #[test]
    fn ptrace_traceme_and_attach_are_denied() {
        ptrace_attempts(RunAs::Nobody);
    }

    #[test]
    fn unshare_of_new_namespaces_fails() {
        unshare_attempts(RunAs::Nobody);
    }

    #[test]
    fn fork_bomb_is_capped_and_the_run_ends() {
        fork_bomb(RunAs::Nobody);
    }

    #[test]
    fn disk_fill_of_workspace_fails_and_host_space_is_bounded() {
        disk_fill_workspace(RunAs::Nobody);
    }

    #[test]
    fn command_that_never_exits_times_out() {
        never_exits(RunAs::Nobody);
    }

    #[test]
    fn host_processes_are_invisible_and_unsignallable() {
        host_processes_invisible(RunAs::Nobody);
    }

    #[test]
    fn capabilities_are_empty_and_no_new_privs_is_set() {
        capabilities_empty(RunAs::Nobody);
    }

    #[test]
    fn proc_sys_writes_do_not_change_host_settings() {
        proc_sys_writes(RunAs::Nobody);
    }
}
