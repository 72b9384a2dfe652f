//! `bandwidth:rate=KB/s` — limit the throughput of a direction (Toxiproxy's unit: KB/s).

use super::{Step, Toxic, ToxicConn, u64_key};
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
use resolvelab_core::spec::Spec;
use std::time::{Duration, Instant};

/// Pace the stream at `rate` kilobytes per second.
#[derive(Debug, Clone)]
pub struct Bandwidth {
    /// KB (1000 bytes) per second.
    pub rate_kb: u64,
}

impl Bandwidth {
    pub(crate) const KEYS: &'static [&'static str] = &["rate"];

    pub(crate) fn from_spec(spec: &Spec) -> Result<Bandwidth, String> {
        let rate_kb = u64_key(spec, "rate", None)?;
        if rate_kb == 0 {
            return Err(
                "`bandwidth`: rate=0 would stall forever; use `timeout:timeout=0` for a blackhole"
                    .into(),
            );
        }
        Ok(Bandwidth { rate_kb })
    }
}

impl Toxic for Bandwidth {
    fn kind(&self) -> &'static str {
        "bandwidth"
    }
    fn params(&self) -> Vec<String> {
        vec![format!("rate={}", self.rate_kb)]
    }
    fn connect(&self, _now: Instant) -> Box<dyn ToxicConn> {
        Box::new(self.clone())
    }
}

impl ToxicConn for Bandwidth {
    fn data(
        &mut self,
        mut data: Bytes,
        _arrived: Instant,
        _rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool {
        let bytes_per_sec = self.rate_kb * 1000;
        // Pieces of ~10 ms keep the pacing smooth for large chunks.
        let piece = (bytes_per_sec / 100).max(1) as usize;
        while !data.is_empty() {
            let part = data.split_to(piece.min(data.len()));
            out.push(Step::Wait(Duration::from_secs_f64(
                part.len() as f64 / bytes_per_sec as f64,
            )));
            out.push(Step::Data(part));
        }
        true
    }
}
