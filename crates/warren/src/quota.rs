//! Per-zone disk quota (`disk.max`).

/// The smallest `disk.max`: the capped filesystem needs room for its own metadata.
pub const MIN_SIZE: u64 = 16 << 20;
