//! Copying a host tree into the staging area without trusting its paths.
//!
//! A local user who owns part of an allowed root can swap a file for a
//! symlink (or a directory for one) while corral copies; a check-then-copy
//! by path then follows the link, as root, to whatever it names. So the
//! walk never resolves a path twice: the source is opened with `openat2`
//! (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`) from a handle on the allowed
//! root, every entry is opened relative to its parent's handle with
//! `O_NOFOLLOW` (an `O_PATH` look first, so a device or FIFO is never
//! opened for reading), the opened handle is `fstat`ed and must be the very
//! inode looked at, and contents are read from that handle. Symlinks are
//! recreated as links (they resolve inside the guest). Setuid, setgid and
//! sticky bits are never copied.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use corral_sandbox_core::sandbox::ProviderError;

fn refuse(source: &Path, reason: impl Into<String>) -> ProviderError {
    ProviderError::Mount {
        source_path: source.display().to_string(),
        reason: reason.into(),
    }
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> ProviderError {
    move |source| ProviderError::Io { context, source }
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(ret: libc::c_int) -> std::io::Result<libc::c_int> {
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    // SAFETY: a borrowed descriptor and a valid C string, alive for the call.
    let fd =
        check(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) })?;
    // SAFETY: openat just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat2(dir, path, flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`.
fn openat2_beneath(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: libc::c_int,
) -> std::io::Result<OwnedFd> {
    // SAFETY: `open_how` is plain old data; all-zero is valid (mode 0).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = u64::try_from(flags | libc::O_CLOEXEC).unwrap_or(0);
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: openat2 reads `how` (a valid open_how of the size passed) and
    // the C string; both outlive the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    let fd =
        libc::c_int::try_from(ret).map_err(|_| std::io::Error::from_raw_os_error(libc::EBADF))?;
    check(fd)?;
    // SAFETY: openat2 just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fstat(fd: BorrowedFd<'_>) -> std::io::Result<libc::stat> {
    // SAFETY: `stat` is plain old data; all-zero is valid.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is writable for the call.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

fn readlinkat(dir: BorrowedFd<'_>, name: &CStr) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: `buf` is writable for `buf.len()` bytes during the call.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).map_err(|_| std::io::Error::last_os_error())?;
    buf.truncate(n);
    Ok(buf)
}

const KIND_MASK: libc::mode_t = libc::S_IFMT;

/// Copies `source` (beneath `root`, both already resolved: `source` has no
/// symlink in it) to `to`, spending at most `budget` bytes of file data.
pub fn copy_beneath(
    root: &Path,
    source: &Path,
    to: &Path,
    budget: &mut u64,
    bound: u64,
) -> Result<(), ProviderError> {
    let root_c = cstring(root.as_os_str().as_bytes())
        .map_err(io(format!("cannot open {}", root.display())))?;
    // SAFETY: a valid C string, alive for the call.
    let root_fd = check(unsafe {
        libc::open(
            root_c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })
    .map_err(io(format!("cannot open {}", root.display())))?;
    // SAFETY: open just returned this descriptor; nothing else owns it.
    let root_fd = unsafe { OwnedFd::from_raw_fd(root_fd) };
    let rel = source
        .strip_prefix(root)
        .map_err(|_| refuse(source, format!("it is not beneath {}", root.display())))?;
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let rel_c = cstring(rel.as_os_str().as_bytes())
        .map_err(io(format!("cannot open {}", source.display())))?;
    let fd =
        openat2_beneath(root_fd.as_fd(), &rel_c, libc::O_PATH | libc::O_NOFOLLOW).map_err(|e| {
            match e.raw_os_error() {
                Some(libc::ELOOP | libc::EXDEV) => refuse(
                    source,
                    "a path component became a symlink while it was being staged",
                ),
                _ => io(format!("cannot open {}", source.display()))(e),
            }
        })?;
    let st = fstat(fd.as_fd()).map_err(io(format!("cannot inspect {}", source.display())))?;
    copy_entry(
        Entry {
            parent: root_fd.as_fd(),
            name: &rel_c,
            path: source,
            looked: fd,
            st,
        },
        to,
        budget,
        bound,
    )
}

struct Entry<'a> {
    parent: BorrowedFd<'a>,
    name: &'a CStr,
    path: &'a Path,
    /// The `O_PATH` handle looked at.
    looked: OwnedFd,
    st: libc::stat,
}

/// Reopens `entry` for reading, refusing unless it is still the inode looked at.
fn reopen(entry: &Entry<'_>, flags: libc::c_int) -> Result<(OwnedFd, libc::stat), ProviderError> {
    let path = entry.path;
    // Through the O_PATH handle's magic link: the inode already looked at,
    // never a path resolved again.
    let proc = format!("/proc/self/fd/{}", entry.looked.as_raw_fd());
    let proc_c = cstring(proc.as_bytes()).map_err(io(format!("cannot open {}", path.display())))?;
    // SAFETY: a valid C string, alive for the call. (No O_NOFOLLOW: the
    // magic link itself must be followed, to the inode it stands for.)
    let fd = match check(unsafe { libc::open(proc_c.as_ptr(), flags | libc::O_CLOEXEC) }) {
        // SAFETY: open just returned this descriptor; nothing else owns it.
        Ok(raw) => unsafe { OwnedFd::from_raw_fd(raw) },
        // Without /proc: relative to the parent handle, never following.
        Err(_) => openat(entry.parent, entry.name, flags | libc::O_NOFOLLOW)
            .map_err(io(format!("cannot open {}", path.display())))?,
    };
    let st = fstat(fd.as_fd()).map_err(io(format!("cannot inspect {}", path.display())))?;
    if (st.st_dev, st.st_ino) != (entry.st.st_dev, entry.st.st_ino) {
        return Err(refuse(path, "it was replaced while it was being staged"));
    }
    Ok((fd, st))
}

fn copy_entry(
    entry: Entry<'_>,
    to: &Path,
    budget: &mut u64,
    bound: u64,
) -> Result<(), ProviderError> {
    let path = entry.path;
    match entry.st.st_mode & KIND_MASK {
        libc::S_IFLNK => {
            let target = readlinkat(entry.parent, entry.name)
                .map_err(io(format!("cannot read link {}", path.display())))?;
            std::os::unix::fs::symlink(OsStr::from_bytes(&target), to)
                .map_err(io(format!("cannot create link {}", to.display())))
        }
        libc::S_IFDIR => {
            let (dir, st) = reopen(&entry, libc::O_RDONLY | libc::O_DIRECTORY)?;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(to)
                .map_err(io(format!("cannot create {}", to.display())))?;
            // The open directory's entries, listed through its handle.
            let listing = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))
                .map_err(io(format!("cannot list {}", path.display())))?;
            for item in listing {
                let item = item.map_err(io(format!("cannot list {}", path.display())))?;
                let name = item.file_name();
                let name_c = cstring(name.as_bytes())
                    .map_err(io(format!("cannot list {}", path.display())))?;
                let child_path = path.join(&name);
                let looked = match openat(dir.as_fd(), &name_c, libc::O_PATH | libc::O_NOFOLLOW) {
                    Ok(fd) => fd,
                    // Gone since the listing: nothing to copy.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io(format!("cannot open {}", child_path.display()))(e)),
                };
                let st = fstat(looked.as_fd())
                    .map_err(io(format!("cannot inspect {}", child_path.display())))?;
                copy_entry(
                    Entry {
                        parent: dir.as_fd(),
                        name: &name_c,
                        path: &child_path,
                        looked,
                        st,
                    },
                    &to.join(&name),
                    budget,
                    bound,
                )?;
            }
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(st.st_mode & 0o777))
                .map_err(io(format!("cannot set mode on {}", to.display())))
        }
        libc::S_IFREG => {
            let (fd, st) = reopen(&entry, libc::O_RDONLY | libc::O_NONBLOCK)?;
            let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
            let over = || {
                refuse(
                    path,
                    format!(
                        "read-only mounts are copied and this one exceeds the {bound}-byte bound"
                    ),
                )
            };
            if size > *budget {
                return Err(over());
            }
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(to)
                .map_err(io(format!("cannot create {}", to.display())))?;
            // The file may grow while it is read: never past the budget.
            let mut limited = File::from(fd).take(*budget + 1);
            let copied = std::io::copy(&mut limited, &mut out)
                .map_err(io(format!("cannot copy {}", path.display())))?;
            if copied > *budget {
                return Err(over());
            }
            *budget -= copied;
            out.flush()
                .map_err(io(format!("cannot write {}", to.display())))?;
            // Permission bits only: setuid, setgid and sticky are dropped.
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(st.st_mode & 0o777))
                .map_err(io(format!("cannot set mode on {}", to.display())))
        }
        // Devices, sockets, FIFOs: never opened, never copied.
        _ => Ok(()),
    }
}
