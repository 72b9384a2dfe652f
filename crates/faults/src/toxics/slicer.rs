//! `slicer:average_size=N,size_variation=N,delay=DUR` — cut chunks into small pieces with a
//! delay between them (exercises partial reads).

use super::{Step, Toxic, ToxicConn, dur_key, u64_key};
use bytes::Bytes;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use resolvelab_core::{dur, spec::Spec};
use std::time::{Duration, Instant};

/// Split every chunk into slices of `average_size ± size_variation` bytes, `delay` apart.
#[derive(Debug, Clone)]
pub struct Slicer {
    /// Mean slice size in bytes.
    pub average_size: u64,
    /// Half-width of the uniform size variation.
    pub size_variation: u64,
    /// Delay between slices.
    pub delay: Duration,
}

impl Slicer {
    pub(crate) const KEYS: &'static [&'static str] = &["average_size", "size_variation", "delay"];

    pub(crate) fn from_spec(spec: &Spec) -> Result<Slicer, String> {
        let average_size = u64_key(spec, "average_size", Some(64))?;
        let size_variation = u64_key(spec, "size_variation", Some(0))?;
        if average_size == 0 || size_variation >= average_size {
            return Err(format!(
                "`slicer`: average_size must be > 0 and size_variation below it (got {average_size}, {size_variation})"
            ));
        }
        Ok(Slicer {
            average_size,
            size_variation,
            delay: dur_key(spec, "delay", Some(Duration::ZERO))?,
        })
    }
}

impl Toxic for Slicer {
    fn kind(&self) -> &'static str {
        "slicer"
    }
    fn params(&self) -> Vec<String> {
        vec![
            format!("average_size={}", self.average_size),
            format!("size_variation={}", self.size_variation),
            format!("delay={}", dur::format(self.delay)),
        ]
    }
    fn connect(&self, _now: Instant) -> Box<dyn ToxicConn> {
        Box::new(self.clone())
    }
}

impl ToxicConn for Slicer {
    fn data(
        &mut self,
        mut data: Bytes,
        _arrived: Instant,
        rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool {
        let mut first = true;
        while !data.is_empty() {
            let lo = self.average_size - self.size_variation;
            let hi = self.average_size + self.size_variation;
            let size = rng.random_range(lo..=hi) as usize;
            if !first && !self.delay.is_zero() {
                out.push(Step::Wait(self.delay));
            }
            first = false;
            out.push(Step::Data(data.split_to(size.min(data.len()))));
        }
        true
    }
}
