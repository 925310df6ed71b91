//! What KSM saves a zone that merges (`memory.merge = true`): its processes'
//! `/proc/PID/ksm_stat` summed. `ksm_merging_pages` counts the zone's pages that point
//! at a shared KSM page; `ksm_process_profit` is the kernel's estimate of the bytes
//! saved minus the bookkeeping (rmap items) spent, so it can be negative.

use std::path::Path;

use serde::Serialize;

/// KSM figures summed over a zone's processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Ksm {
    /// Pages of the zone's processes merged into shared KSM pages.
    pub merging_pages: u64,
    /// Bytes saved minus KSM's own metadata (`ksm_process_profit`).
    pub profit_bytes: i64,
    /// Processes whose ksm_stat was read.
    pub processes: u64,
}

/// (`ksm_merging_pages`, `ksm_process_profit`) of a /proc/PID/ksm_stat text (pure).
pub fn parse(text: &str) -> Option<(u64, i64)> {
    let get = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse::<i64>().ok())
    };
    Some((
        get("ksm_merging_pages ")?.max(0) as u64,
        get("ksm_process_profit ")?,
    ))
}

/// Sum over `pids`; `None` when none could be read (an old kernel without ksm_stat).
pub fn of_pids(proc_root: &Path, pids: &[i32]) -> Option<Ksm> {
    let mut k = Ksm::default();
    for pid in pids {
        let Ok(text) = std::fs::read_to_string(proc_root.join(format!("{pid}/ksm_stat"))) else {
            continue;
        };
        if let Some((pages, profit)) = parse(&text) {
            k.merging_pages += pages;
            k.profit_bytes += profit;
            k.processes += 1;
        }
    }
    (k.processes > 0).then_some(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ksm_stat_is_parsed_as_the_kernel_writes_it() {
        let text = "ksm_rmap_items 2560\nksm_zero_pages 0\nksm_merging_pages 2048\nksm_process_profit 8224768\nksm_merge_any: yes\nksm_mergeable: yes\n";
        assert_eq!(parse(text), Some((2048, 8_224_768)));
        let cost =
            "ksm_rmap_items 100\nksm_zero_pages 0\nksm_merging_pages 0\nksm_process_profit -6400\n";
        assert_eq!(parse(cost), Some((0, -6400)));
        assert_eq!(parse("garbage\n"), None);
    }
}
