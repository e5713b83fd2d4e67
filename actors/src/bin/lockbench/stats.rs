//! Small measurement helpers: percentiles of latencies, resident memory of this process.

use std::time::Duration;

/// p-th percentile (0..=100, nearest rank) of `samples` in milliseconds; 0 when empty.
pub fn percentile_ms(samples: &mut [Duration], p: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    let index = rank.clamp(1, samples.len()) - 1;
    ms(samples[index])
}

/// Duration as fractional milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Resident set size of this process in bytes (VmRSS of /proc/self/status), if readable.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// CPU time (user + system) used so far by the calling thread, from /proc/thread-self/stat
/// (clock ticks of 10 ms), if readable.
pub fn thread_cpu() -> Option<Duration> {
    stat_cpu(&std::fs::read_to_string("/proc/thread-self/stat").ok()?)
}

/// CPU time used so far by every thread of this process named `name`, from
/// /proc/self/task/*/stat, if readable.
pub fn named_threads_cpu(name: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        if comm.trim_end() != name {
            continue;
        }
        if let Some(cpu) = std::fs::read_to_string(path.join("stat"))
            .ok()
            .and_then(|stat| stat_cpu(&stat))
        {
            total += cpu;
        }
    }
    Some(total)
}

/// utime + stime of one /proc stat line (clock ticks of 10 ms).
fn stat_cpu(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// The 1-minute load average (/proc/loadavg), to show how shared the machine was.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A small deterministic generator (no `rand` in a bin): splitmix64.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_below(&mut self, bound: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z % bound.max(1) as u64) as usize
    }
}
