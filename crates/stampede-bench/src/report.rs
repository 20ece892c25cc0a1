//! One JSON object per result line (docs/BENCHMARKS.md,
//! "How every benchmark measures and reports"): `{"bench": ..., "case": ..., ...}`.

use serde_json::Value;

use crate::stats::Summary;

/// One result line, built field by field and printed with [`emit`](Line::emit). Fields are
/// printed in the order they were added (`bench`, `case`, `impl` first), which serde_json's
/// sorted map would not do.
#[derive(Clone, Debug)]
pub struct Line {
    fields: Vec<(String, Value)>,
}

impl Line {
    /// A line for benchmark `bench`, case `case`, implementation `subject` (`"stampede"` or the
    /// reference's name).
    pub fn new(bench: &str, case: &str, subject: &str) -> Line {
        let fields =
            vec![("bench".into(), bench.into()), ("case".into(), case.into()), ("impl".into(), subject.into())];
        Line { fields }
    }

    /// Adds any JSON value; a float is rounded to 3 decimals (non-finite becomes `null`).
    pub fn field(mut self, key: &str, value: impl Into<Value>) -> Line {
        let value = match value.into() {
            Value::Number(n) if n.is_f64() => n.as_f64().map_or(Value::Null, |x| Value::from(round3(x))),
            other => other,
        };
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some((_, old)) => *old = value,
            None => self.fields.push((key.into(), value)),
        }
        self
    }

    /// Adds `<prefix>p50_us`, `<prefix>p99_us` and `<prefix>mean_us` from a summary in ns.
    pub fn latency_us(self, prefix: &str, summary: &Summary) -> Line {
        self.field(&format!("{prefix}p50_us"), summary.p50_ns / 1e3)
            .field(&format!("{prefix}p99_us"), summary.p99_ns / 1e3)
            .field(&format!("{prefix}mean_us"), summary.mean_ns / 1e3)
    }

    /// Adds `ratio_vs` and `ratio` (this implementation's figure over the reference's).
    pub fn ratio(self, vs: &str, ratio: f64) -> Line {
        self.field("ratio_vs", vs).field("ratio", ratio)
    }

    /// Prints the line to stdout.
    pub fn emit(self) {
        let body: Vec<String> = self.fields.iter().map(|(k, v)| format!("{}:{v}", Value::from(k.as_str()))).collect();
        println!("{{{}}}", body.join(","));
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
