//! What the fleet report reads of each instance's diagnosis: a few counts, the incidents'
//! times and classes, the timeline, the re-query period and what decides whether the
//! diagnosis stands. `resolvelab merge` deserializes only this from each partial (serde passes
//! over the rest without building it), so merging a thousand partials costs the digests, not
//! the diagnoses.

use crate::Diagnosis;
use crate::classes::Class;
use crate::verdict::{DiagnosisStatus, FileFacts};
use serde::{Deserialize, Serialize};

/// One instance's diagnosis, as far as the fleet report reads it (field names as in
/// `resolvelab.diagnosis/v1`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Digest {
    /// The time range the diagnosis speaks for (a time slice), if any.
    #[serde(default)]
    pub range: Option<crate::TimeRange>,
    /// First request, epoch ms.
    pub start_ms: Option<i64>,
    /// Last request, epoch ms.
    pub end_ms: Option<i64>,
    /// `completed` or `partial`.
    #[serde(default)]
    pub status: Option<DiagnosisStatus>,
    /// Requests read.
    pub requests: u64,
    /// Failed requests.
    pub failures: u64,
    /// NLU counts (only the total is read).
    pub nlu: NluTotal,
    /// The incidents.
    pub incidents: Vec<IncidentDigest>,
    /// Classes found.
    pub classes: Vec<ClassDigest>,
    /// The re-query period its logs showed.
    pub requery_period_ms: Option<f64>,
    /// Requests per bin (the outcomes; latency is not read).
    pub timeline: Lane,
    /// The inputs (only whether access logs and mixed streams were given).
    pub inputs: InputsDigest,
    /// Parse accounting.
    pub parse: ParseDigest,
    /// What the inputs can show (only the configuration's re-query period is read).
    #[serde(default)]
    pub evidence: EvidenceDigest,
}

/// An instance's requests per bin by outcome: its `timeline` without the latency.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lane {
    /// Bin width, ms.
    pub bin_ms: i64,
    /// The bins in time order.
    pub points: Vec<LanePoint>,
}

/// One bin of a [`Lane`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LanePoint {
    /// Bin start, epoch ms.
    pub t_ms: i64,
    /// Requests that did not fail.
    pub ok: u64,
    /// Failures that are not NLU.
    pub failed: u64,
    /// NLU failures.
    pub nlu: u64,
}

/// `nlu.total`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct NluTotal {
    /// NLU failures.
    pub total: u64,
}

/// An incident's identity, place and size.
#[derive(Debug, Clone, Deserialize)]
pub struct IncidentDigest {
    /// Its id in the instance's diagnosis.
    pub id: usize,
    /// Its class.
    pub class: Class,
    /// Its upstream.
    pub upstream: String,
    /// First failure, epoch ms.
    pub start_ms: i64,
    /// Last failure, epoch ms.
    pub end_ms: i64,
    /// Failed requests.
    pub count: u64,
}

/// A class's counts.
#[derive(Debug, Clone, Deserialize)]
pub struct ClassDigest {
    /// The class.
    pub class: Class,
    /// Its incidents.
    pub incidents: u64,
    /// Its failed requests.
    pub requests: u64,
}

/// The inputs given.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct InputsDigest {
    /// Access logs.
    #[serde(default)]
    pub access: Vec<String>,
    /// Mixed streams.
    #[serde(default)]
    pub mixed: Vec<String>,
}

/// Parse accounting, per file.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ParseDigest {
    /// The files.
    pub files: Vec<FileDigest>,
}

/// One file's accounting.
#[derive(Debug, Clone, Deserialize)]
pub struct FileDigest {
    /// The file.
    pub path: String,
    /// Its kind.
    pub kind: String,
    /// Lines parsed.
    pub parsed: u64,
    /// What stopped reading it.
    pub error: Option<String>,
}

/// `evidence.config.requery_ms`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EvidenceDigest {
    /// The configuration's facts.
    pub config: Option<ConfigDigest>,
}

/// `requery_ms` of the configuration's facts.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConfigDigest {
    /// `valid=` + 1 s.
    #[serde(default)]
    pub requery_ms: Option<u64>,
}

impl Digest {
    /// Why the diagnosis does not stand ([`Diagnosis::unusable`]).
    pub fn unusable(&self) -> Option<String> {
        crate::verdict::unusable(
            self.requests,
            self.status,
            (
                !self.inputs.access.is_empty(),
                !self.inputs.mixed.is_empty(),
            ),
            self.parse.files.iter().map(|f| FileFacts {
                path: &f.path,
                kind: &f.kind,
                parsed: f.parsed,
                error: f.error.as_deref(),
            }),
        )
    }

    /// The re-query period: from the logs, else the configuration's `valid=`.
    pub fn requery_ms(&self) -> Option<f64> {
        self.requery_period_ms.or_else(|| {
            let c = self.evidence.config.as_ref()?;
            c.requery_ms.map(|ms| ms as f64)
        })
    }
}

impl From<&Diagnosis> for Digest {
    fn from(d: &Diagnosis) -> Digest {
        Digest {
            range: d.range,
            start_ms: d.start_ms,
            end_ms: d.end_ms,
            status: d.status,
            requests: d.requests,
            failures: d.failures,
            nlu: NluTotal { total: d.nlu.total },
            incidents: d
                .incidents
                .iter()
                .map(|i| IncidentDigest {
                    id: i.id,
                    class: i.class,
                    upstream: i.upstream.clone(),
                    start_ms: i.start_ms,
                    end_ms: i.end_ms,
                    count: i.count,
                })
                .collect(),
            classes: d
                .classes
                .iter()
                .map(|c| ClassDigest {
                    class: c.class,
                    incidents: c.incidents,
                    requests: c.requests,
                })
                .collect(),
            requery_period_ms: d.requery_period_ms,
            timeline: Lane {
                bin_ms: d.timeline.bin_ms,
                points: d
                    .timeline
                    .points
                    .iter()
                    .map(|p| LanePoint {
                        t_ms: p.t_ms,
                        ok: p.ok,
                        failed: p.failed,
                        nlu: p.nlu,
                    })
                    .collect(),
            },
            inputs: InputsDigest {
                access: d.inputs.access.clone(),
                mixed: d.inputs.mixed.clone(),
            },
            parse: ParseDigest {
                files: d
                    .parse
                    .files
                    .iter()
                    .map(|f| FileDigest {
                        path: f.path.clone(),
                        kind: f.kind.clone(),
                        parsed: f.parsed,
                        error: f.error.clone(),
                    })
                    .collect(),
            },
            evidence: EvidenceDigest {
                config: d.evidence.config.as_ref().map(|c| ConfigDigest {
                    requery_ms: c.requery_ms,
                }),
            },
        }
    }
}
