//! A method mix (`GET=0.8,POST=0.2`): which methods the load sends and in what shares. Parsed
//! once — from a scenario's `load.mix`, or `resolvelab load --mix` — and read by the load
//! generator and the model.
//!
//! ```
//! use resolvelab_core::spec::mix::Mix;
//! let m: Mix = "GET=3,post=1".parse().unwrap();
//! assert_eq!(m.shares(), [("GET".to_string(), 0.75), ("POST".to_string(), 0.25)]);
//! assert_eq!(m.to_string(), "GET=0.75,POST=0.25");
//! assert!("GET=x".parse::<Mix>().is_err());
//! ```

use std::fmt;

/// Methods and their shares (normalised to sum 1), in the order written.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Mix(Vec<(String, f64)>);

impl Mix {
    /// Every method with its share of the requests.
    pub fn shares(&self) -> &[(String, f64)] {
        &self.0
    }
}

impl Default for Mix {
    /// All GET.
    fn default() -> Mix {
        Mix(vec![("GET".into(), 1.0)])
    }
}

/// An HTTP method is a token (RFC 9110 §5.6.2): letters, digits and `!#$%&'*+-.^_`|~`.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl std::str::FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Mix, String> {
        let mut raw = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (m, w) = item.split_once('=').unwrap_or((item, "1"));
            let m = m.trim();
            if !is_token(m) {
                return Err(format!("`{m}` is not an HTTP method"));
            }
            let w: f64 = w.trim().parse().map_err(|_| {
                format!("weight `{w}` of {m} is not a number; write e.g. GET=0.8,POST=0.2")
            })?;
            if !w.is_finite() || w < 0.0 {
                return Err(format!("weight of {m} must be ≥ 0"));
            }
            raw.push((m.to_ascii_uppercase(), w));
        }
        let total: f64 = raw.iter().map(|(_, w)| w).sum();
        if raw.is_empty() || total <= 0.0 {
            return Err(
                "needs at least one method with a positive weight, e.g. GET=0.8,POST=0.2".into(),
            );
        }
        Ok(Mix(raw.into_iter().map(|(m, w)| (m, w / total)).collect()))
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(m, w)| format!("{m}={w}")).collect();
        f.write_str(&parts.join(","))
    }
}

serde_as_text!(Mix);
