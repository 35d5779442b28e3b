//! Who the sandbox is on the host and what it can learn of the host: uid 0 inside is no host
//! root (root-only host files stay unreadable, with or without idmapped mounts), the files
//! that name the machine show the policy's values, `portable` without namespaces reaches no
//! host daemon's Unix socket and no host process in `/proc`, and the mount API's newest calls
//! are refused. Every run goes through `contained`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use common::{Template, exec_json, sandbox_ready, unique_token};
use serde_json::Value;

/// A 0600 root file under /etc holding a unique token; removed on drop.
struct RootOnlyFile {
    path: PathBuf,
    token: String,
}

impl RootOnlyFile {
    fn new() -> RootOnlyFile {
        // The name differs from the content: an error message naming the file shows no secret.
        let token = unique_token();
        let path = PathBuf::from(format!("/etc/ectest-root-only-{}", unique_token()));
        fs::write(&path, format!("secret {token}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        RootOnlyFile { path, token }
    }
}

impl Drop for RootOnlyFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// A key in host root's user keyring, described by a unique name; invalidated on drop. It
/// shows in `/proc/keys` to anyone who is host root.
struct RootKey {
    id: i64,
    name: String,
}

impl RootKey {
    fn new() -> Option<RootKey> {
        const KEY_SPEC_USER_KEYRING: i32 = -4;
        let name = format!("ectest-{}", unique_token());
        let c_name = std::ffi::CString::new(name.clone()).unwrap();
        // SAFETY: NUL-terminated strings and a 1-byte payload that outlive the call.
        let id = unsafe {
            libc::syscall(
                libc::SYS_add_key,
                c"user".as_ptr(),
                c_name.as_ptr(),
                b"x".as_ptr(),
                1usize,
                KEY_SPEC_USER_KEYRING,
            )
        };
        (id >= 0).then_some(RootKey { id, name })
    }
}

impl Drop for RootKey {
    fn drop(&mut self) {
        const KEYCTL_INVALIDATE: i32 = 21;
        // SAFETY: integer arguments only.
        unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_INVALIDATE, self.id) };
    }
}

/// An overlay mount over a copy of a root-owned template: a filesystem that refuses idmapped
/// mounts. Unmounted on drop.
struct OverlayTemplate {
    _dirs: tempfile::TempDir,
    merged: PathBuf,
}

impl OverlayTemplate {
    fn over(template: &Path) -> Option<OverlayTemplate> {
        let dirs = tempfile::Builder::new()
            .prefix("ectest-ovl-")
            .tempdir_in("/tmp")
            .unwrap();
        let (upper, work, merged) = (
            dirs.path().join("u"),
            dirs.path().join("w"),
            dirs.path().join("m"),
        );
        for d in [&upper, &work, &merged] {
            fs::create_dir(d).unwrap();
        }
        fs::set_permissions(dirs.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            template.display(),
            upper.display(),
            work.display()
        );
        let ok = std::process::Command::new("mount")
            .args(["-t", "overlay", "ectest-ovl", "-o", &opts])
            .arg(&merged)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(OverlayTemplate {
            _dirs: dirs,
            merged,
        })
    }
}

impl Drop for OverlayTemplate {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.merged, nix::mount::MntFlags::MNT_DETACH);
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn enforced(r: &common::ExecOutcome) -> &Value {
    &r.json.as_ref().expect("a JSON report")["enforced"]
}

/// The script every identity check runs: read what only host root may read, then edit and
/// delete root-owned template files.
fn probe_script(secret: &RootOnlyFile) -> String {
    format!(
        "cat {secret} 2>&1; echo secret-rc=$?; \
         head -c 200 /proc/slabinfo 2>&1; echo slab-rc=$?; \
         cat /proc/keys 2>&1; echo keys-rc=$?; \
         echo agent-edit >> README.txt && echo edit-ok; \
         rm run.sh && echo rm-ok",
        secret = secret.path.display()
    )
}

/// What the probe must show: nothing root-only, and the agent's edits done.
fn assert_probe_held(r: &common::ExecOutcome, secret: &RootOnlyFile, key: &Option<RootKey>) {
    r.assert_ran();
    assert!(
        !r.stdout.contains(&secret.token),
        "a 0600 root file of /etc was readable inside:\n{}",
        r.describe()
    );
    assert!(
        !r.stdout.contains("slabinfo - version"),
        "/proc/slabinfo (0400 root) was readable inside:\n{}",
        r.describe()
    );
    if let Some(key) = key {
        assert!(
            !r.stdout.contains(&key.name),
            "host root's key showed in /proc/keys inside:\n{}",
            r.describe()
        );
    }
    assert!(
        r.stdout.contains("edit-ok") && r.stdout.contains("rm-ok"),
        "the agent could not edit the root-owned template:\n{}",
        r.describe()
    );
    let changes = r.changes.as_ref().unwrap();
    assert_eq!(changes["modified"], serde_json::json!(["README.txt"]));
    assert_eq!(changes["deleted"], serde_json::json!(["run.sh"]));
}

#[test]
fn root_only_host_files_were_readable_as_root_over_a_root_owned_template() {
    if !sandbox_ready() || !is_root() {
        return;
    }
    let secret = RootOnlyFile::new();
    let key = RootKey::new();
    if key.is_none() {
        common::skip("add_key refused: /proc/keys is not checked");
    }
    let t = Template::new();
    let r = exec_json(t.path(), None, &[], &["sh", "-c", &probe_script(&secret)]);
    assert_probe_held(&r, &secret, &key);
    let e = enforced(&r);
    assert_eq!(e["uid_mapping"], "idmapped", "{}", r.describe());
    assert_eq!(e["template_owner_mapped"], true);
    assert_ne!(e["sandbox_uid_maps_to"], 0, "uid 0 inside is host root");
    t.assert_unchanged();
}

#[test]
fn root_only_host_files_were_readable_where_idmapped_mounts_are_refused() {
    if !sandbox_ready() || !is_root() {
        return;
    }
    let secret = RootOnlyFile::new();
    let key = RootKey::new();
    let t = Template::new();
    let Some(overlay) = OverlayTemplate::over(t.path()) else {
        common::skip("cannot mount an overlay to hold the template");
        return;
    };
    let r = exec_json(
        &overlay.merged,
        None,
        &[],
        &["sh", "-c", &probe_script(&secret)],
    );
    assert_probe_held(&r, &secret, &key);
    let e = enforced(&r);
    assert_eq!(e["uid_mapping"], "template_owner", "{}", r.describe());
    assert_eq!(e["sandbox_uid_maps_to"], 0);
    drop(overlay);
    t.assert_unchanged();
}

#[test]
fn root_only_host_files_that_vanish_while_a_sandbox_starts_do_not_fail_it() {
    if !sandbox_ready() || !is_root() {
        return;
    }
    let t = Template::new();
    let Some(overlay) = OverlayTemplate::over(t.path()) else {
        common::skip("cannot mount an overlay to hold the template");
        return;
    };
    // Root-only files come and go in /etc while sandboxes start (another process's, as a
    // parallel test's were): one scanned for a mask and removed before the mask is mounted
    // left the sandbox's setup failing with ENOENT.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let f = RootOnlyFile::new();
                std::thread::sleep(std::time::Duration::from_micros(300));
                drop(f);
            }
        })
    };
    let runs: Vec<_> = (0..15)
        .map(|_| exec_json(&overlay.merged, None, &[], &["true"]))
        .collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
    for r in &runs {
        r.assert_ran();
        assert_eq!(r.exit_code, Some(0), "{}", r.describe());
    }
    drop(overlay);
    t.assert_unchanged();
}

fn host_file(path: &str) -> Option<String> {
    fs::read_to_string(path).ok()
}

#[test]
fn the_sandbox_showed_the_hosts_hostname_hosts_and_machine_id() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let dir = tempfile::tempdir().unwrap();
    let policy_path = dir.path().join("named.toml");
    let text =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"))
            .unwrap()
            .replace(
                "hostname = \"envcraft\"",
                "hostname = \"ectest-box\"\nmachine_id = \"0123456789abcdef0123456789abcdef\"",
            );
    fs::write(&policy_path, text).unwrap();
    let script = "for f in /etc/hostname /etc/hosts /etc/machine-id; do \
                  echo \"== $f\"; cat $f 2>/dev/null; done";
    let by_default = exec_json(t.path(), None, &[], &["sh", "-c", script]);
    let named = exec_json(
        t.path(),
        Some(policy_path.to_str().unwrap()),
        &[],
        &["sh", "-c", script],
    );
    let again = exec_json(t.path(), None, &[], &["sh", "-c", script]);
    for r in [&by_default, &named, &again] {
        r.assert_ran();
    }
    let section = |r: &common::ExecOutcome, name: &str| -> String {
        let start = r.stdout.find(&format!("== {name}\n")).unwrap() + name.len() + 4;
        let rest = &r.stdout[start..];
        rest[..rest.find("== ").unwrap_or(rest.len())].to_string()
    };
    let mut checked = 0;
    if let Some(host) = host_file("/etc/hostname") {
        assert_eq!(section(&by_default, "/etc/hostname"), "envcraft\n");
        assert_eq!(section(&named, "/etc/hostname"), "ectest-box\n");
        assert!(host.trim() == "envcraft" || !by_default.stdout.contains(host.trim()));
        checked += 1;
    }
    if host_file("/etc/hosts").is_some() {
        let hosts = section(&named, "/etc/hosts");
        assert!(hosts.contains("127.0.0.1\tlocalhost"), "{hosts}");
        assert!(hosts.contains("\tectest-box\n"), "{hosts}");
        assert_eq!(hosts.lines().count(), 3, "a minimal hosts file: {hosts}");
        checked += 1;
    }
    if let Some(host) = host_file("/etc/machine-id") {
        let id = section(&by_default, "/etc/machine-id");
        assert_ne!(id.trim(), host.trim(), "the host's machine id showed");
        assert_eq!(id.trim().len(), 32, "{id}");
        assert!(id.trim().bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        assert_eq!(id, section(&again, "/etc/machine-id"), "the id is stable");
        assert_eq!(
            section(&named, "/etc/machine-id"),
            "0123456789abcdef0123456789abcdef\n"
        );
        checked += 1;
    }
    if checked == 0 {
        common::skip("the host has none of /etc/hostname, /etc/hosts, /etc/machine-id");
    }
    for r in [&by_default, &named, &again] {
        assert_eq!(enforced(r)["identity"], "policy", "{}", r.describe());
    }
}

#[test]
fn a_bad_machine_id_is_refused_naming_the_key() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let dir = tempfile::tempdir().unwrap();
    let policy_path = dir.path().join("bad.toml");
    let text =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"))
            .unwrap()
            .replace(
                "hostname = \"envcraft\"",
                "hostname = \"envcraft\"\nmachine_id = \"not-hex\"",
            );
    fs::write(&policy_path, text).unwrap();
    let r = exec_json(
        t.path(),
        Some(policy_path.to_str().unwrap()),
        &[],
        &["true"],
    );
    assert!(r.json.is_none(), "{}", r.describe());
    assert!(
        r.envcraft_stderr.contains("environment.machine_id")
            && r.envcraft_stderr
                .contains("32 lowercase hexadecimal digits"),
        "{}",
        r.describe()
    );
}

/// A policy like `default` that also shows envcraft's binary and `extra` read-only: envcraft
/// run inside it meets a machine without user namespaces (the outer seccomp filter refuses
/// them), so `--policy portable` takes its no-namespace path there.
fn nested_policy(dir: &Path, extra: &Path) -> String {
    let bin_dir = common::envcraft().parent().unwrap().to_path_buf();
    let text =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"))
            .unwrap()
            .replace(
                "read_only = [\"/usr\"",
                &format!(
                    "read_only = [\"{}\", \"{}\", \"/usr\"",
                    bin_dir.display(),
                    extra.display()
                ),
            );
    let path = dir.join("outer.toml");
    fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn portable_without_namespaces_reached_host_unix_sockets_and_host_processes() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let dir = tempfile::tempdir().unwrap();
    let socket_dir = tempfile::Builder::new()
        .prefix("ectest-sock-")
        .tempdir_in("/tmp")
        .unwrap();
    fs::set_permissions(socket_dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let socket = socket_dir.path().join("daemon.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    // Anyone may connect (as a daemon's socket often allows): only the sandbox may refuse.
    fs::set_permissions(&socket, fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let outer = nested_policy(dir.path(), socket_dir.path());
    let connect = format!(
        "import socket\n\
         try:\n    s = socket.socket(socket.AF_UNIX); s.connect('{sock}'); print('connected')\n\
         except OSError as e:\n    print('refused', e.errno)\n",
        sock = socket.display()
    );
    // The command itself (no shell in between) reads its own /proc entry and PID 1's.
    let inner_code = format!(
        "{connect}\
         a, b = socket.socketpair(); a.send(b'p'); print('pair', b.recv(1).decode())\n\
         print('self', 'Name:' in open('/proc/self/status').read())\n\
         try:\n    open('/proc/1/cmdline').read(); print('pid1 readable')\n\
         except OSError as e:\n    print('pid1 refused', e.errno)\n"
    );
    let bin = common::envcraft();
    let script = format!(
        "{bin} exec --workspace /workspace --policy portable --json -- python3 -c \"$INNER\"; \
         echo; python3 -c \"$CONNECT\" | sed 's/^/outer-/'",
        bin = bin.display()
    );
    let r = common::Exec::new(t.path()).policy(Some(&outer)).run(&[
        "env",
        &format!("INNER={inner_code}"),
        &format!("CONNECT={connect}"),
        "sh",
        "-c",
        &script,
    ]);
    r.assert_ran();
    let inner: Value = serde_json::from_str(r.stdout.lines().next().unwrap_or(""))
        .unwrap_or_else(|e| panic!("the inner run printed no report ({e}):\n{}", r.describe()));
    let inner_out = inner["stdout"].as_str().unwrap();
    assert_eq!(inner["enforced"]["user_namespace"], false, "{inner}");
    assert!(
        inner_out.contains(&format!("refused {}", libc::EPERM)),
        "portable reached a host Unix socket by path:\n{inner_out}"
    );
    assert!(
        inner_out.contains("pair p"),
        "socketpair failed:\n{inner_out}"
    );
    assert!(
        inner_out.contains("self True"),
        "no own /proc entry:\n{inner_out}"
    );
    assert!(
        inner_out.contains("pid1 refused"),
        "a host process showed in /proc:\n{inner_out}"
    );
    // The socket was reachable from where the inner run stood: only the policy refused it.
    assert!(r.stdout.contains("outer-connected"), "{}", r.describe());
    let mut pending = 0;
    loop {
        match listener.accept() {
            Ok(_) => pending += 1,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => panic!("accept: {e}"),
        }
    }
    assert_eq!(
        pending, 1,
        "only the outer control connection reached the socket"
    );
    assert_eq!(inner["enforced"]["identity"], "host", "{inner}");
    assert_eq!(inner["enforced"]["uid_mapping"], "host", "{inner}");
}

#[test]
fn the_newest_mount_api_calls_were_not_refused_by_seccomp() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    // open_tree_attr("/", no flags) opens a path descriptor where it is allowed; statmount and
    // listmount with no buffers fail with EFAULT/EINVAL where they are allowed.
    let code = "import ctypes, os\n\
                libc = ctypes.CDLL(None, use_errno=True)\n\
                for name, nr, args in (('open_tree_attr', 467, (-100, b'/', 0, None, 0)),\n\
                                       ('statmount', 457, (None, None, 0, 0)),\n\
                                       ('listmount', 458, (None, None, 0, 0))):\n\
                \x20   r = libc.syscall(nr, *args)\n\
                \x20   print(name, r if r >= 0 else -ctypes.get_errno())\n";
    let r = exec_json(t.path(), None, &[], &["python3", "-c", code]);
    r.assert_ran();
    for name in ["open_tree_attr", "statmount", "listmount"] {
        assert!(
            r.stdout.contains(&format!("{name} -{}\n", libc::EPERM)),
            "{name} was not refused with EPERM:\n{}",
            r.describe()
        );
    }
}
