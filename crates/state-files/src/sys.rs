//! The few system calls the state directory needs that `std` does not
//! offer relative to a directory handle. Each wrapper checks its return
//! value and hands back owned descriptors.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `path` as a C string (refuses interior NUL bytes).
pub(crate) fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path holds a NUL byte"))
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `open(2)` relative to `dir` (or the working directory when `None`).
pub(crate) fn openat(
    dir: Option<BorrowedFd<'_>>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `name` is a valid NUL-terminated string that outlives the
    // call; `dirfd` is AT_FDCWD or a descriptor borrowed for the call.
    let fd = check(unsafe {
        libc::openat(
            dirfd,
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    })?;
    // SAFETY: openat just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `mkdirat(2)`.
pub(crate) fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: a borrowed descriptor and a valid C string, both alive for the call.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) }).map(|_| ())
}

/// `fstat(2)`.
pub(crate) fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: `stat` is plain old data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable `stat` for the duration of the call.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// `renameat(2)` within one directory.
pub(crate) fn renameat(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    let d = dir.as_raw_fd();
    // SAFETY: both names are valid C strings alive for the call.
    check(unsafe { libc::renameat(d, from.as_ptr(), d, to.as_ptr()) }).map(|_| ())
}

/// `unlinkat(2)`; `flags` may be `AT_REMOVEDIR`.
pub(crate) fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: a borrowed descriptor and a valid C string, both alive for the call.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) }).map(|_| ())
}

/// `fchmod(2)`.
pub(crate) fn fchmod(fd: BorrowedFd<'_>, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: plain integers.
    check(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }).map(|_| ())
}

/// `flock(2)`, retried when a signal interrupts the wait.
pub(crate) fn flock(fd: BorrowedFd<'_>, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: plain integers.
        match check(unsafe { libc::flock(fd.as_raw_fd(), op) }) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other.map(|_| ()),
        }
    }
}

/// Eight random bytes from the kernel.
pub(crate) fn random_u64() -> io::Result<u64> {
    let mut buf = [0u8; 8];
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: `rest` is a valid writable buffer of `rest.len()` bytes.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        match usize::try_from(n) {
            Ok(n) => filled += n,
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(u64::from_ne_bytes(buf))
}

/// This process's effective uid.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}
