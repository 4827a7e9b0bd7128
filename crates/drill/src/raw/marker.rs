//! Unique tags carried in attack payloads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// 16 bytes no other frame carries: a fixed prefix, this process's id, a
/// per-process counter and the clock's nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker([u8; 16]);

impl Marker {
    /// A marker no earlier call in this process (or another process) made.
    pub fn fresh() -> Self {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(b"crl!");
        b[4..8].copy_from_slice(&std::process::id().to_be_bytes());
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        b[8..12].copy_from_slice(&(n as u32).to_be_bytes());
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        b[12..].copy_from_slice(&nanos.to_be_bytes());
        Self(b)
    }

    /// The bytes, to put in a payload.
    pub fn bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Whether `data` carries this marker anywhere.
    pub fn found_in(&self, data: &[u8]) -> bool {
        data.windows(self.0.len()).any(|w| w == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_differ_and_are_found() {
        let a = Marker::fresh();
        let b = Marker::fresh();
        assert_ne!(a, b);
        let mut data = vec![0u8; 40];
        data[7..23].copy_from_slice(a.bytes());
        assert!(a.found_in(&data));
        assert!(!b.found_in(&data));
    }
}
