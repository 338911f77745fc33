//! Figures read from RocksDB's own statistics text (`rocksdb.stats`,
//! `rocksdb.levelstats`).

use crate::engine::Level;

/// Parses "... <number> GB" after `label` in RocksDB's stats text.
pub(super) fn gb_after(text: &str, label: &str) -> f64 {
    text.lines()
        .find_map(|l| l.find(label).map(|i| &l[i + label.len()..]))
        .and_then(|rest| rest.split_whitespace().find_map(|w| w.trim_end_matches(',').parse::<f64>().ok()))
        .unwrap_or(0.0)
}

/// "Cumulative stall: 00:00:1.234 H:M:S, ..." in microseconds.
pub(super) fn stall_micros(text: &str) -> u64 {
    let Some(hms) = text.lines().find_map(|l| l.trim().strip_prefix("Cumulative stall: ")) else {
        return 0;
    };
    let hms = hms.split_whitespace().next().unwrap_or("");
    let parts: Vec<f64> = hms.split(':').filter_map(|p| p.parse().ok()).collect();
    match parts.as_slice() {
        [h, m, s] => ((h * 3600.0 + m * 60.0 + s) * 1e6) as u64,
        _ => 0,
    }
}

/// `rocksdb.levelstats`: "Level Files Size(MB)" rows.
pub(super) fn level_stats(text: &str) -> Vec<Level> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                [level, files, mb] => Some(Level {
                    level: level.parse().ok()?,
                    files: files.parse().ok()?,
                    bytes: (mb.parse::<f64>().ok()? * 1_048_576.0) as u64,
                }),
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_text_parsers() {
        let text =
            "Cumulative compaction: 0.06 GB write, 8.20 MB/s write\nCumulative stall: 00:01:2.500 H:M:S, 3.0 percent\n";
        assert_eq!(gb_after(text, "Cumulative compaction:"), 0.06);
        assert_eq!(stall_micros(text), 62_500_000);
        assert_eq!(stall_micros("nothing"), 0);
        let lv =
            level_stats("Level Files Size(MB)\n--------------------\n  0        2        6\n  1        1       18\n");
        assert_eq!(lv.len(), 2);
        assert_eq!((lv[1].level, lv[1].files, lv[1].bytes), (1, 1, 18 * 1_048_576));
    }
}
