//! The shipped systemd units, as tests read them: where they are, and the
//! capabilities one leaves its program — so a test can run the program with
//! exactly those (`setpriv`) and see that they are enough. systemd is not
//! PID 1 on our machines: what a test reproduces of a unit is its bounding
//! set, `NoNewPrivileges=` and (with [`NamespaceFilter`], the seccomp
//! filter systemd installs for it) `RestrictNamespaces=`; of the mount
//! sandboxing, `ProtectProc=` and `ProtectKernelTunables=` (with the
//! `ReadWritePaths=` under `/proc/sys`) are reproduced, the rest
//! (`ProtectSystem=`, `PrivateTmp=`, …) is not.

use std::path::PathBuf;

/// `dist/systemd/<name>` in this repository.
pub fn unit_path(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../dist/systemd")).join(name)
}

/// The unit's `CapabilityBoundingSet=`, lowercase without `cap_` (as
/// `setpriv` takes them); panics when the unit sets none.
pub fn unit_capabilities(name: &str) -> Vec<String> {
    let path = unit_path(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .unwrap_or_else(|| panic!("{} sets no CapabilityBoundingSet", path.display()));
    line.split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_ascii_lowercase())
        .collect()
}

/// The value of the unit's last `KEY=` line (systemd: the last one wins
/// for these settings), if any.
pub fn unit_setting(name: &str, key: &str) -> Option<String> {
    let path = unit_path(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let prefix = format!("{key}=");
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().to_owned())
}

/// A `setpriv` command line (program and arguments, ending in `--`) that
/// runs what follows with only the unit's bounding set, no inheritable
/// capabilities and, when the unit says `NoNewPrivileges=yes`, no new
/// privileges, as systemd would.
pub fn as_unit(name: &str) -> Vec<String> {
    let caps: Vec<String> = unit_capabilities(name)
        .iter()
        .map(|c| format!("+{c}"))
        .collect();
    let mut argv = vec!["setpriv".to_owned()];
    if unit_setting(name, "NoNewPrivileges").as_deref() == Some("yes") {
        argv.push("--no-new-privs".into());
    }
    argv.extend([
        "--inh-caps=-all".into(),
        format!("--bounding-set=-all,{}", caps.join(",")),
        "--".into(),
    ]);
    argv
}

/// `CLONE_NEW*` of each namespace type, by the name systemd uses.
const NAMESPACES: [(&str, u32); 8] = [
    ("cgroup", 0x0200_0000),
    ("ipc", 0x0800_0000),
    ("net", 0x4000_0000),
    ("mnt", 0x0002_0000),
    ("pid", 0x2000_0000),
    ("user", 0x1000_0000),
    ("uts", 0x0400_0000),
    ("time", 0x0000_0080),
];

/// Installs a seccomp filter on the calling thread (inherited across
/// `execve`). Async-signal-safe.
#[allow(unsafe_code)]
fn install_bpf(program: &[libc::sock_filter]) -> std::io::Result<()> {
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at a valid BPF program that outlives the call.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &prog as *const libc::sock_fprog,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The namespace types a `RestrictNamespaces=` value forbids, as a
/// `CLONE_NEW*` mask: `yes` all, `no` (or none) nothing, `a b` all but
/// those, `~a b` those.
pub fn forbidden_namespaces(value: Option<&str>) -> u32 {
    let all = NAMESPACES.iter().fold(0, |m, (_, f)| m | f);
    let mask_of = |list: &str| {
        list.split_whitespace().fold(0, |m, n| {
            m | NAMESPACES.iter().find(|(name, _)| *name == n).map_or_else(
                || panic!("RestrictNamespaces: unknown type `{n}`"),
                |(_, f)| *f,
            )
        })
    };
    match value.map(str::trim) {
        None | Some("no" | "false") => 0,
        Some("yes" | "true") => all,
        Some(v) => match v.strip_prefix('~') {
            Some(list) => mask_of(list),
            None => all & !mask_of(v),
        },
    }
}

/// The seccomp filter systemd installs for `RestrictNamespaces=`
/// (`seccomp_restrict_namespaces`): `unshare(2)` and `clone(2)` with a
/// forbidden `CLONE_NEW*` flag and `setns(2)` into a forbidden type (or
/// with type 0, or at all when every type is forbidden) fail with `EPERM`;
/// `clone3(2)` fails with `ENOSYS` (so the C library falls back to
/// `clone`); a foreign architecture's call fails (`SystemCallArchitectures=native`).
/// x86-64 only.
#[derive(Debug)]
pub struct NamespaceFilter {
    program: Vec<libc::sock_filter>,
}

impl NamespaceFilter {
    /// The filter for unit `name`'s `RestrictNamespaces=`; `None` when it
    /// forbids nothing.
    pub fn of_unit(name: &str) -> Option<Self> {
        Self::forbidding(forbidden_namespaces(
            unit_setting(name, "RestrictNamespaces").as_deref(),
        ))
    }

    /// The filter forbidding the `CLONE_NEW*` types in `forbidden`.
    pub fn forbidding(forbidden: u32) -> Option<Self> {
        if forbidden == 0 {
            return None;
        }
        const LD: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
        const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
        const JSET: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
        const RET: u16 = 0x06; // BPF_RET | BPF_K
        const NR: u32 = 0;
        const ARCH: u32 = 4;
        const ARG0: u32 = 16;
        const ARG1: u32 = 24;
        const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
        let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        let allow = libc::SECCOMP_RET_ALLOW;
        let all = NAMESPACES.iter().fold(0, |m, (_, f)| m | f);
        let mut p = vec![
            ins(LD, 0, 0, ARCH),
            ins(JEQ, 1, 0, AUDIT_ARCH_X86_64),
            ins(RET, 0, 0, eperm),
            ins(LD, 0, 0, NR),
            ins(JEQ, 0, 1, libc::SYS_clone3 as u32),
            ins(RET, 0, 0, enosys),
        ];
        if forbidden & all == all {
            p.extend([
                ins(LD, 0, 0, NR),
                ins(JEQ, 0, 1, libc::SYS_setns as u32),
                ins(RET, 0, 0, eperm),
            ]);
        } else {
            p.extend([
                ins(LD, 0, 0, NR),
                ins(JEQ, 0, 5, libc::SYS_setns as u32),
                ins(LD, 0, 0, ARG1),
                ins(JEQ, 1, 0, 0),
                ins(JSET, 0, 1, forbidden),
                ins(RET, 0, 0, eperm),
                ins(RET, 0, 0, allow),
            ]);
        }
        for nr in [libc::SYS_unshare, libc::SYS_clone] {
            p.extend([
                ins(LD, 0, 0, NR),
                ins(JEQ, 0, 4, nr as u32),
                ins(LD, 0, 0, ARG0),
                ins(JSET, 0, 1, forbidden),
                ins(RET, 0, 0, eperm),
                ins(RET, 0, 0, allow),
            ]);
        }
        p.push(ins(RET, 0, 0, allow));
        Some(Self { program: p })
    }

    /// Installs the filter on the calling thread (inherited by its children
    /// and across `execve`). Async-signal-safe: callable in a `pre_exec`.
    pub fn install(&self) -> std::io::Result<()> {
        install_bpf(&self.program)
    }
}

/// The private `/proc` systemd mounts for `ProtectProc=` (`hidepid=`): a
/// new mount namespace whose `/proc` is a fresh instance with that option,
/// so processes the service may not ptrace are invisible (or not
/// accessible) to it.
#[derive(Debug)]
pub struct ProcMount {
    option: &'static std::ffi::CStr,
}

impl ProcMount {
    /// For unit `name`'s `ProtectProc=`; `None` when it is unset or
    /// `default`.
    pub fn of_unit(name: &str) -> Option<Self> {
        let option = match unit_setting(name, "ProtectProc").as_deref() {
            None | Some("default") => return None,
            Some("invisible") => c"hidepid=invisible",
            Some("noaccess") => c"hidepid=noaccess",
            Some("ptraceable") => c"hidepid=ptraceable",
            Some(other) => panic!("{name}: ProtectProc={other} is not reproduced"),
        };
        Some(Self { option })
    }

    /// Enters a new mount namespace (mounts private, as `PrivateMounts=`)
    /// and mounts `/proc` again with the option. Async-signal-safe:
    /// callable in a `pre_exec`, before [`NamespaceFilter::install`] (which
    /// may forbid the new mount namespace).
    #[allow(unsafe_code)]
    pub fn install(&self) -> std::io::Result<()> {
        let check = |r: libc::c_int| {
            if r == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        };
        // SAFETY: plain syscalls on static, NUL-terminated strings.
        unsafe {
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            check(libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                self.option.as_ptr().cast(),
            ))
        }
    }
}

/// What systemd mounts for `ProtectKernelTunables=yes`, as far as corral's
/// services touch it: `/proc/sys` and `/sys` read-only, except the
/// unit's `ReadWritePaths=` under `/proc/sys`, which stay writable (systemd
/// makes each such path a mount of its own before it remounts the rest
/// read-only).
#[derive(Debug)]
pub struct TunablesMount {
    writable: Vec<std::ffi::CString>,
}

impl TunablesMount {
    /// For unit `name`'s `ProtectKernelTunables=`; `None` unless `yes`.
    pub fn of_unit(name: &str) -> Option<Self> {
        if unit_setting(name, "ProtectKernelTunables").as_deref() != Some("yes") {
            return None;
        }
        let path = unit_path(name);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let writable = text
            .lines()
            .filter_map(|l| l.strip_prefix("ReadWritePaths="))
            .flat_map(str::split_whitespace)
            .map(|p| p.trim_start_matches('-'))
            .filter(|p| p.starts_with("/proc/sys/"))
            .map(|p| {
                std::ffi::CString::new(p)
                    .unwrap_or_else(|e| panic!("{name}: ReadWritePaths={p}: {e}"))
            })
            .collect();
        Some(Self { writable })
    }

    /// Makes the mounts; runs in the mount namespace [`ProcMount::install`]
    /// entered (or enters one itself when `fresh_namespace`).
    /// Async-signal-safe: callable in a `pre_exec`.
    #[allow(unsafe_code)]
    pub fn install(&self, fresh_namespace: bool) -> std::io::Result<()> {
        #[repr(C)]
        struct MountAttr {
            set: u64,
            clr: u64,
            propagation: u64,
            userns_fd: u64,
        }
        const MOUNT_ATTR_RDONLY: u64 = 0x1;
        let check = |r: libc::c_long| {
            if r == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        };
        let bind = |path: &std::ffi::CStr, flags: libc::c_ulong| {
            // SAFETY: mount(2) of a path onto itself; NUL-terminated strings.
            check(libc::c_long::from(unsafe {
                libc::mount(
                    path.as_ptr(),
                    path.as_ptr(),
                    std::ptr::null(),
                    flags,
                    std::ptr::null(),
                )
            }))
        };
        if fresh_namespace {
            // SAFETY: plain syscalls on static, NUL-terminated strings.
            unsafe {
                check(libc::c_long::from(libc::unshare(libc::CLONE_NEWNS)))?;
                check(libc::c_long::from(libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                )))?;
            }
        }
        for w in &self.writable {
            bind(w, libc::MS_BIND)?;
        }
        // The writable paths come along as submounts; only the top of the
        // copy is made read-only.
        bind(c"/proc/sys", libc::MS_BIND | libc::MS_REC)?;
        bind(
            c"/proc/sys",
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
        )?;
        let attr = MountAttr {
            set: MOUNT_ATTR_RDONLY,
            clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        // SAFETY: mount_setattr(2) with a struct of the kernel's layout
        // and its size; the mount namespace is this process's own.
        check(unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                c"/sys".as_ptr(),
                libc::AT_RECURSIVE,
                &raw const attr,
                std::mem::size_of::<MountAttr>(),
            )
        })
    }
}

/// The seccomp filter systemd installs for the unit's `SystemCallFilter=`
/// lines (in order: the first decides allow-list or deny-list, later lines
/// add to or take from it) with `SystemCallErrorNumber=` (default: the
/// process is killed) — groups expanded by `systemd-analyze syscall-filter`,
/// names numbered from the kernel headers (`asm/unistd_64.h`). x86-64 only.
#[derive(Debug)]
pub struct SyscallFilter {
    program: Vec<libc::sock_filter>,
}

/// Every syscall name a `systemd-analyze syscall-filter` group holds,
/// nested groups expanded.
fn expand(item: &str, out: &mut std::collections::BTreeSet<String>) {
    if !item.starts_with('@') {
        out.insert(item.to_owned());
        return;
    }
    let listed = std::process::Command::new("systemd-analyze")
        .args(["syscall-filter", item])
        .output()
        .unwrap_or_else(|e| panic!("systemd-analyze syscall-filter {item}: {e}"));
    assert!(
        listed.status.success(),
        "systemd-analyze syscall-filter {item}: {listed:?}"
    );
    let text = String::from_utf8_lossy(&listed.stdout).into_owned();
    for line in text.lines().skip(1) {
        let name = line.trim();
        if name.is_empty() || name.starts_with('#') {
            continue;
        }
        expand(name, out);
    }
}

impl SyscallFilter {
    /// For unit `name`; `None` when it has no `SystemCallFilter=`.
    pub fn of_unit(name: &str) -> Option<Self> {
        let path = unit_path(name);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let lines: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("SystemCallFilter="))
            .collect();
        let first = lines.first()?;
        let allow_list = !first.starts_with('~');
        let mut set = std::collections::BTreeSet::new();
        for line in &lines {
            let (negated, items) = match line.strip_prefix('~') {
                Some(rest) => (true, rest),
                None => (false, *line),
            };
            let mut these = std::collections::BTreeSet::new();
            for item in items.split_whitespace() {
                expand(item, &mut these);
            }
            // In an allow-list a `~` line takes away; in a deny-list a
            // plain line does.
            if negated == allow_list {
                set.retain(|s| !these.contains(s));
            } else {
                set.extend(these);
            }
        }
        let numbers = syscall_numbers();
        let nrs: std::collections::BTreeSet<u32> =
            set.iter().filter_map(|n| numbers.get(n).copied()).collect();
        let deny = match unit_setting(name, "SystemCallErrorNumber") {
            Some(e) => libc::SECCOMP_RET_ERRNO | errno_named(&e),
            None => libc::SECCOMP_RET_KILL_PROCESS,
        };
        let allow = libc::SECCOMP_RET_ALLOW;
        let (hit, miss) = if allow_list {
            (allow, deny)
        } else {
            (deny, allow)
        };
        const LD: u16 = 0x20;
        const JEQ: u16 = 0x15;
        const RET: u16 = 0x06;
        let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        let mut p = vec![
            ins(LD, 0, 0, 4),
            ins(JEQ, 1, 0, 0xc000_003e),
            ins(RET, 0, 0, deny),
            ins(LD, 0, 0, 0),
        ];
        for nr in nrs {
            p.push(ins(JEQ, 0, 1, nr));
            p.push(ins(RET, 0, 0, hit));
        }
        p.push(ins(RET, 0, 0, miss));
        Some(Self { program: p })
    }

    /// Installs the filter (see [`NamespaceFilter::install`]).
    pub fn install(&self) -> std::io::Result<()> {
        install_bpf(&self.program)
    }
}

/// The seccomp filter systemd installs for `RestrictAddressFamilies=` (an
/// allow-list): `socket(2)` of any other family fails with
/// `EAFNOSUPPORT`. x86-64 only.
#[derive(Debug)]
pub struct FamilyFilter {
    program: Vec<libc::sock_filter>,
}

impl FamilyFilter {
    /// For unit `name`; `None` when it restricts no family (or uses the
    /// `~` deny form, which this does not reproduce).
    pub fn of_unit(name: &str) -> Option<Self> {
        let value = unit_setting(name, "RestrictAddressFamilies")?;
        if value.starts_with('~') || value == "none" {
            return None;
        }
        let families: Vec<u32> = value
            .split_whitespace()
            .map(|f| match f {
                "AF_UNIX" => libc::AF_UNIX as u32,
                "AF_INET" => libc::AF_INET as u32,
                "AF_INET6" => libc::AF_INET6 as u32,
                "AF_NETLINK" => libc::AF_NETLINK as u32,
                "AF_PACKET" => libc::AF_PACKET as u32,
                other => panic!("{name}: RestrictAddressFamilies {other} is not reproduced"),
            })
            .collect();
        const LD: u16 = 0x20;
        const JEQ: u16 = 0x15;
        const RET: u16 = 0x06;
        let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        let allow = libc::SECCOMP_RET_ALLOW;
        let refuse = libc::SECCOMP_RET_ERRNO | libc::EAFNOSUPPORT as u32;
        let mut p = vec![
            ins(LD, 0, 0, 0),
            ins(JEQ, 1, 0, libc::SYS_socket as u32),
            ins(RET, 0, 0, allow),
            ins(LD, 0, 0, 16),
        ];
        for f in families {
            p.push(ins(JEQ, 0, 1, f));
            p.push(ins(RET, 0, 0, allow));
        }
        p.push(ins(RET, 0, 0, refuse));
        Some(Self { program: p })
    }

    /// Installs the filter (see [`NamespaceFilter::install`]).
    pub fn install(&self) -> std::io::Result<()> {
        install_bpf(&self.program)
    }
}

fn syscall_numbers() -> std::collections::BTreeMap<String, u32> {
    let header = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";
    let text = std::fs::read_to_string(header)
        .unwrap_or_else(|e| panic!("{header} (package linux-libc-dev): {e}"));
    text.lines()
        .filter_map(|l| l.strip_prefix("#define __NR_"))
        .filter_map(|l| {
            let (name, nr) = l.split_once(' ')?;
            Some((name.to_owned(), nr.trim().parse().ok()?))
        })
        .collect()
}

fn errno_named(name: &str) -> u32 {
    match name {
        "EPERM" => libc::EPERM as u32,
        "EACCES" => libc::EACCES as u32,
        "ENOSYS" => libc::ENOSYS as u32,
        other => panic!("SystemCallErrorNumber={other} is not reproduced"),
    }
}

/// What systemd does to a root service's privileges before its seccomp
/// filters, without `setpriv` (whose own `capset` a unit's filter may
/// forbid): the bounding set cut to the unit's, ambient and inheritable
/// capabilities cleared, `NoNewPrivileges=` set.
#[derive(Debug)]
pub struct Privileges {
    keep: u64,
    no_new_privs: bool,
}

impl Privileges {
    /// For unit `name`; without a `CapabilityBoundingSet=` every
    /// capability of the running kernel is kept, as systemd keeps them.
    pub fn of_unit(name: &str) -> Self {
        let keep = match unit_setting(name, "CapabilityBoundingSet") {
            Some(_) => unit_capabilities(name)
                .iter()
                .map(|c| 1u64 << capability_number(c))
                .fold(0, |m, b| m | b),
            None => std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
                .map_or(u64::MAX, |last| (1u64 << (last + 1)) - 1),
        };
        Self {
            keep,
            no_new_privs: unit_setting(name, "NoNewPrivileges").as_deref() == Some("yes"),
        }
    }

    /// The kept capabilities as a mask (`CapBnd` in /proc/PID/status).
    pub fn mask(&self) -> u64 {
        self.keep
    }

    /// Applies them to the calling process. Async-signal-safe.
    #[allow(unsafe_code)]
    pub fn install(&self) -> std::io::Result<()> {
        let fail = || Err(std::io::Error::last_os_error());
        // SAFETY: prctl and capget/capset with valid, local buffers.
        unsafe {
            for cap in 0..64u64 {
                if self.keep & (1 << cap) == 0
                    && libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong) == 1
                    && libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong) != 0
                {
                    return fail();
                }
            }
            if libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            ) != 0
            {
                return fail();
            }
            // _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set.
            let mut header = [0x2008_0522u32, 0];
            let mut data = [0u32; 6];
            if libc::syscall(libc::SYS_capget, header.as_mut_ptr(), data.as_mut_ptr()) != 0 {
                return fail();
            }
            data[2] = 0;
            data[5] = 0;
            if libc::syscall(libc::SYS_capset, header.as_mut_ptr(), data.as_ptr()) != 0 {
                return fail();
            }
            if self.no_new_privs && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return fail();
            }
        }
        Ok(())
    }
}

/// Everything of a unit these helpers reproduce, applied to a child in
/// systemd's order: the private `/proc` ([`ProcMount`]), the read-only
/// kernel tunables ([`TunablesMount`]), the privileges
/// ([`Privileges`]), then the seccomp filters ([`NamespaceFilter`],
/// [`FamilyFilter`], [`SyscallFilter`]).
#[derive(Debug)]
pub struct UnitSandbox {
    /// The unit's privileges.
    pub privileges: Privileges,
    /// `ProtectProc=`.
    pub proc_mount: Option<ProcMount>,
    /// `ProtectKernelTunables=` with `ReadWritePaths=` under `/proc/sys`.
    pub tunables: Option<TunablesMount>,
    /// `RestrictNamespaces=`.
    pub namespaces: Option<NamespaceFilter>,
    /// `RestrictAddressFamilies=`.
    pub families: Option<FamilyFilter>,
    /// `SystemCallFilter=`.
    pub syscalls: Option<SyscallFilter>,
}

impl UnitSandbox {
    /// What unit `name` says.
    pub fn of_unit(name: &str) -> Self {
        Self {
            privileges: Privileges::of_unit(name),
            proc_mount: ProcMount::of_unit(name),
            tunables: TunablesMount::of_unit(name),
            namespaces: NamespaceFilter::of_unit(name),
            families: FamilyFilter::of_unit(name),
            syscalls: SyscallFilter::of_unit(name),
        }
    }

    /// How many seccomp filters it installs (`Seccomp_filters` in
    /// /proc/PID/status).
    pub fn filters(&self) -> usize {
        usize::from(self.namespaces.is_some())
            + usize::from(self.families.is_some())
            + usize::from(self.syscalls.is_some())
    }

    /// Makes `cmd` run its program under all of it (a `pre_exec`).
    #[allow(unsafe_code)]
    pub fn apply_to(self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: every install only makes syscalls (async-signal-safe).
        unsafe {
            cmd.pre_exec(move || {
                if let Some(p) = &self.proc_mount {
                    p.install()?;
                }
                if let Some(t) = &self.tunables {
                    t.install(self.proc_mount.is_none())?;
                }
                self.privileges.install()?;
                if let Some(f) = &self.namespaces {
                    f.install()?;
                }
                if let Some(f) = &self.families {
                    f.install()?;
                }
                if let Some(f) = &self.syscalls {
                    f.install()?;
                }
                Ok(())
            });
        }
    }

    /// Checks that process `pid` holds what was applied (capability sets,
    /// no new privileges, the number of seccomp filters, the `/proc`
    /// mount); a message for each difference.
    pub fn check(&self, pid: u32) -> Vec<String> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{k}:")))
                .map(|v| v.trim().to_owned())
                .unwrap_or_default()
        };
        let mut bad = Vec::new();
        let mask = self.privileges.mask();
        for key in ["CapBnd", "CapEff", "CapPrm"] {
            let have = u64::from_str_radix(&field(key), 16).unwrap_or(u64::MAX);
            if have != mask {
                bad.push(format!("{key} {have:#x}, the unit gives {mask:#x}"));
            }
        }
        for key in ["CapInh", "CapAmb"] {
            if u64::from_str_radix(&field(key), 16) != Ok(0) {
                bad.push(format!("{key} {}", field(key)));
            }
        }
        let nnp = if self.privileges.no_new_privs {
            "1"
        } else {
            "0"
        };
        if field("NoNewPrivs") != nnp {
            bad.push(format!(
                "NoNewPrivs {}, the unit says {nnp}",
                field("NoNewPrivs")
            ));
        }
        let n = self.filters();
        let (mode, count) = (field("Seccomp"), field("Seccomp_filters"));
        if (n > 0 && (mode != "2" || count != n.to_string())) || (n == 0 && mode != "0") {
            bad.push(format!("Seccomp {mode} with {count} filters, {n} applied"));
        }
        if self.proc_mount.is_some() {
            let mounts =
                std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap_or_default();
            if !mounts
                .lines()
                .any(|l| l.contains(" /proc ") && l.contains("hidepid="))
            {
                bad.push("its /proc has no hidepid=".to_owned());
            }
        }
        if self.tunables.is_some() {
            let mounts =
                std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap_or_default();
            if !mounts.lines().any(|l| l.contains(" /proc/sys ro,")) {
                bad.push("its /proc/sys is not read-only".to_owned());
            }
        }
        bad
    }
}

/// `CAP_*` numbers by `setpriv`'s lowercase names.
fn capability_number(name: &str) -> u32 {
    const NAMES: [&str; 41] = [
        "chown",
        "dac_override",
        "dac_read_search",
        "fowner",
        "fsetid",
        "kill",
        "setgid",
        "setuid",
        "setpcap",
        "linux_immutable",
        "net_bind_service",
        "net_broadcast",
        "net_admin",
        "net_raw",
        "ipc_lock",
        "ipc_owner",
        "sys_module",
        "sys_rawio",
        "sys_chroot",
        "sys_ptrace",
        "sys_pacct",
        "sys_admin",
        "sys_boot",
        "sys_nice",
        "sys_resource",
        "sys_time",
        "sys_tty_config",
        "mknod",
        "lease",
        "audit_write",
        "audit_control",
        "setfcap",
        "mac_override",
        "mac_admin",
        "syslog",
        "wake_alarm",
        "block_suspend",
        "audit_read",
        "perfmon",
        "bpf",
        "checkpoint_restore",
    ];
    NAMES
        .iter()
        .position(|n| *n == name)
        .map_or_else(|| panic!("unknown capability `{name}`"), |i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restrict_namespaces_values() {
        assert_eq!(forbidden_namespaces(None), 0);
        assert_eq!(forbidden_namespaces(Some("no")), 0);
        assert_eq!(forbidden_namespaces(Some("~net")), 0x4000_0000);
        let all_but_net = forbidden_namespaces(Some("net"));
        assert_eq!(all_but_net & 0x4000_0000, 0);
        assert_eq!(all_but_net | 0x4000_0000, forbidden_namespaces(Some("yes")));
    }

    /// The filter does what systemd's does, in a child process: unshare of
    /// a forbidden type fails with EPERM, of an allowed type it succeeds
    /// (control), and clone3 says ENOSYS.
    #[test]
    #[allow(unsafe_code)]
    fn the_namespace_filter_forbids_what_it_says() {
        if !crate::gate::netns() {
            return;
        }
        // SAFETY: fork in a test; the child only makes syscalls and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let f = NamespaceFilter::forbidding(forbidden_namespaces(Some("net"))).unwrap();
            let code = (|| {
                f.install().ok()?;
                // SAFETY: raw syscalls; results checked.
                unsafe {
                    let uts = libc::unshare(libc::CLONE_NEWUTS);
                    let uts_err = *libc::__errno_location();
                    let net = libc::unshare(libc::CLONE_NEWNET);
                    let clone3 = libc::syscall(libc::SYS_clone3, 0, 0);
                    let clone3_err = *libc::__errno_location();
                    let ok = uts == -1
                        && uts_err == libc::EPERM
                        && net == 0
                        && clone3 == -1
                        && clone3_err == libc::ENOSYS;
                    Some(if ok { 0 } else { 1 })
                }
            })()
            .unwrap_or(2);
            // SAFETY: leave the forked child without running the harness.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "child died: {status}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "1: a syscall was not filtered; 2: install failed"
        );
    }

    #[test]
    fn corralds_unit_parses() {
        let caps = unit_capabilities("corrald.service");
        assert!(caps.contains(&"net_admin".to_owned()), "{caps:?}");
        let argv = as_unit("corrald.service");
        assert_eq!(argv[0], "setpriv");
        assert!(
            argv[3].starts_with("--bounding-set=-all,+net_admin"),
            "{argv:?}"
        );
    }
}
