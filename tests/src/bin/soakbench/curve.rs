//! The memory curve: resident memory sampled against the passes run, and the verdict on it
//! (after warm-up, no sample more than [`FLAT_WITHIN`] above the first one after warm-up).

/// How far above the first sample after warm-up a later sample may be for the curve to count
/// as flat.
pub const FLAT_WITHIN: f64 = 0.10;

/// One sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub passes: u64,
    pub seconds: f64,
    pub rss_bytes: u64,
    /// Cinders in the cluster when sampled (terminating ones included).
    pub cinders: usize,
    /// Pipeline records the admin endpoint lists.
    pub pipelines: usize,
}

/// The verdict over a curve.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The first sample after warm-up.
    pub baseline: u64,
    /// The highest sample after warm-up.
    pub peak: u64,
    /// The last sample.
    pub last: u64,
    /// `peak / baseline - 1`.
    pub growth: f64,
    pub flat: bool,
}

/// The verdict on `samples` when the first `warmup_passes` passes are warm-up; `None` when no
/// sample falls after warm-up.
pub fn verdict(samples: &[Sample], warmup_passes: u64) -> Option<Verdict> {
    let after: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.passes >= warmup_passes)
        .collect();
    let baseline = after.first()?.rss_bytes;
    let peak = after.iter().map(|s| s.rss_bytes).max()?;
    let last = after.last()?.rss_bytes;
    let growth = peak as f64 / baseline.max(1) as f64 - 1.0;
    Some(Verdict {
        baseline,
        peak,
        last,
        growth,
        flat: growth <= FLAT_WITHIN,
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The curve as a table, one line per sample.
pub fn table(samples: &[Sample]) -> String {
    let mut out = format!(
        "{:>8} {:>9} {:>9} {:>8} {:>10}\n",
        "passes", "seconds", "rss_MiB", "cinders", "pipelines"
    );
    for s in samples {
        out.push_str(&format!(
            "{:>8} {:>9.0} {:>9.1} {:>8} {:>10}\n",
            s.passes,
            s.seconds,
            mib(s.rss_bytes),
            s.cinders,
            s.pipelines
        ));
    }
    out
}

/// The verdict as one line.
pub fn verdict_line(v: &Verdict) -> String {
    format!(
        "{}: resident memory after warm-up {:.1} MiB, peak {:.1} MiB ({:+.1}%), last {:.1} MiB (flat means at most {:+.0}%)",
        if v.flat { "PASS" } else { "MISS" },
        mib(v.baseline),
        mib(v.peak),
        v.growth * 100.0,
        mib(v.last),
        FLAT_WITHIN * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(passes: u64, mib: u64) -> Sample {
        Sample {
            passes,
            seconds: 0.0,
            rss_bytes: mib << 20,
            cinders: 0,
            pipelines: 0,
        }
    }

    #[test]
    fn warm_up_is_left_out_and_growth_is_measured_from_the_first_sample_after_it() {
        let curve = [at(0, 30), at(100, 50), at(200, 52), at(300, 54)];
        let v = verdict(&curve, 100).unwrap();
        assert_eq!(v.baseline, 50 << 20);
        assert_eq!(v.peak, 54 << 20);
        assert!((v.growth - 0.08).abs() < 1e-9);
        assert!(v.flat);
        let growing = [at(100, 50), at(200, 60)];
        assert!(!verdict(&growing, 100).unwrap().flat, "20% is not flat");
        assert_eq!(verdict(&curve, 1_000), None);
    }
}
