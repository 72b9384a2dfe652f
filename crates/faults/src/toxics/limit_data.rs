//! `limit_data:bytes=N` — close the connection once N bytes went through this direction.

use super::{Step, Toxic, ToxicConn, u64_key};
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
use resolvelab_core::spec::Spec;
use std::time::Instant;

/// Forward at most `bytes` bytes, then close.
#[derive(Debug, Clone)]
pub struct LimitData {
    /// The byte budget of the direction.
    pub bytes: u64,
}

impl LimitData {
    pub(crate) const KEYS: &'static [&'static str] = &["bytes"];

    pub(crate) fn from_spec(spec: &Spec) -> Result<LimitData, String> {
        Ok(LimitData {
            bytes: u64_key(spec, "bytes", None)?,
        })
    }
}

impl Toxic for LimitData {
    fn kind(&self) -> &'static str {
        "limit_data"
    }
    fn params(&self) -> Vec<String> {
        vec![format!("bytes={}", self.bytes)]
    }
    fn connect(&self, _now: Instant) -> Box<dyn ToxicConn> {
        Box::new(LimitConn { left: self.bytes })
    }
}

struct LimitConn {
    left: u64,
}

impl ToxicConn for LimitConn {
    fn data(
        &mut self,
        mut data: Bytes,
        _arrived: Instant,
        _rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool {
        if (data.len() as u64) < self.left {
            self.left -= data.len() as u64;
            out.push(Step::Data(data));
            return false;
        }
        let keep = data.split_to(self.left as usize);
        self.left = 0;
        if !keep.is_empty() {
            out.push(Step::Data(keep));
        }
        out.push(Step::Close);
        true
    }
}
