//! Seeds for requests that give none, and the random ids calls and responses carry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// A seed for requests that give none, so unseeded requests differ.
pub fn fresh_seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ COUNTER.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
}

/// 24 hex digits, unique enough for response ids.
pub fn short_id() -> String {
    let a = fresh_seed();
    let b = fresh_seed();
    format!("{a:016x}{:08x}", b as u32)
}

/// A tool call's id (`call_` and 12 hex digits).
pub fn call_id() -> String {
    format!("call_{:012x}", fresh_seed() & 0xffff_ffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_shape_and_differ() {
        let (a, b) = (short_id(), short_id());
        assert_eq!(a.len(), 24);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        let c = call_id();
        assert!(c.starts_with("call_") && c.len() == 17, "{c}");
    }
}
