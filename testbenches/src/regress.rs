//! The regression runner: cases, filters, a pass/fail table, JUnit XML.

use std::fmt::Write as _;
use std::time::Instant;

/// A self-checking testbench: `Ok` with a one-line measurement, or `Err` saying what broke.
pub struct Case {
    pub name: &'static str,
    pub about: &'static str,
    pub run: fn() -> Result<String, String>,
}

pub struct CaseResult {
    pub name: String,
    pub ok: bool,
    pub message: String,
    pub seconds: f64,
}

pub struct Report {
    pub results: Vec<CaseResult>,
}

pub use crate::cases::cases;

/// Runs the cases whose name contains any of `filters` (all when empty), catching panics so
/// one broken case does not hide the others.
pub fn run(cases: &[Case], filters: &[String], on_done: &mut dyn FnMut(&str, bool, f64)) -> Report {
    let mut results = Vec::new();
    for c in cases {
        if !filters.is_empty() && !filters.iter().any(|f| c.name.contains(f.as_str())) {
            continue;
        }
        let t = Instant::now();
        let r = std::panic::catch_unwind(c.run);
        let (ok, message) = match r {
            Ok(Ok(m)) => (true, m),
            Ok(Err(e)) => (false, e),
            Err(p) => (false, format!("panicked: {}", p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default())),
        };
        let seconds = t.elapsed().as_secs_f64();
        on_done(c.name, ok, seconds);
        results.push(CaseResult { name: c.name.into(), ok, message, seconds });
    }
    Report { results }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

impl Report {
    pub fn failed(&self) -> usize {
        self.results.iter().filter(|r| !r.ok).count()
    }

    /// Pass/fail table; its last line is `N passed, M failed`.
    pub fn table(&self) -> String {
        let w = self.results.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
        let mut s = String::new();
        let _ = writeln!(s, "{:<w$}  {:<4}  {:>8}  detail", "case", "res", "seconds");
        for r in &self.results {
            let _ = writeln!(s, "{:<w$}  {:<4}  {:>8.2}  {}", r.name, if r.ok { "PASS" } else { "FAIL" }, r.seconds, r.message);
        }
        let _ = writeln!(s, "{} passed, {} failed", self.results.len() - self.failed(), self.failed());
        s
    }

    pub fn junit_xml(&self) -> String {
        let total: f64 = self.results.iter().map(|r| r.seconds).sum();
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            s,
            "<testsuites><testsuite name=\"waferstream-regress\" tests=\"{}\" failures=\"{}\" time=\"{:.3}\">",
            self.results.len(),
            self.failed(),
            total
        );
        for r in &self.results {
            let _ = write!(s, "  <testcase classname=\"regress\" name=\"{}\" time=\"{:.3}\"", xml_escape(&r.name), r.seconds);
            if r.ok {
                let _ = writeln!(s, "><system-out>{}</system-out></testcase>", xml_escape(&r.message));
            } else {
                let _ = writeln!(s, "><failure message=\"{}\"/></testcase>", xml_escape(&r.message));
            }
        }
        s.push_str("</testsuite></testsuites>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Result<String, String> {
        Ok("fine".into())
    }
    fn bad() -> Result<String, String> {
        Err("broken <x>".into())
    }
    fn boom() -> Result<String, String> {
        panic!("kaboom")
    }

    #[test]
    fn filters_table_and_junit() {
        let cases = [
            Case { name: "a_ok", about: "", run: ok },
            Case { name: "b_bad", about: "", run: bad },
            Case { name: "c_boom", about: "", run: boom },
        ];
        let r = run(&cases, &[], &mut |_, _, _| {});
        assert_eq!(r.failed(), 2);
        assert!(r.table().ends_with("1 passed, 2 failed\n"));
        let x = r.junit_xml();
        assert!(x.contains("failures=\"2\"") && x.contains("broken &lt;x&gt;") && x.contains("kaboom"));
        let r = run(&cases, &["a_".into()], &mut |_, _, _| {});
        assert_eq!(r.results.len(), 1);
    }
}
