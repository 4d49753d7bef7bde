//! Signal globs and cycle windows.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::{Result, SignalDecl, WaveError};

/// Which signals and which cycles to write.
///
/// Globs match the full dotted signal name OR any enclosing scope name, so
/// `top.mesh.r_3_*` selects every signal below scopes `r_3_0..r_3_7`. `*` does not cross
/// '.', `**` (as a whole path component, e.g. `top.**.occ`) does. An empty glob list
/// selects everything. `window` is in cycles: inclusive start, exclusive end.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct WaveFilter {
    pub globs: Vec<String>,
    pub window: Option<(u64, u64)>,
}

impl WaveFilter {
    /// Parses `START..END` (cycles, END exclusive). Either side may be left out:
    /// `..END` starts at 0, `START..` runs to the end of the simulation.
    pub fn parse_window(s: &str) -> Result<(u64, u64)> {
        let bad = |why: &str| WaveError::Filter {
            what: format!("window `{s}`: {why}"),
        };
        let (a, b) = s
            .trim()
            .split_once("..")
            .ok_or_else(|| bad("expected START..END"))?;
        let num = |t: &str, default: u64| -> Result<u64> {
            let t = t.trim();
            if t.is_empty() {
                Ok(default)
            } else {
                t.parse()
                    .map_err(|_| bad(&format!("`{t}` is not a cycle number")))
            }
        };
        let (start, end) = (num(a, 0)?, num(b, u64::MAX)?);
        if start >= end {
            return Err(bad("start must be below end"));
        }
        Ok((start, end))
    }

    pub fn compile(&self) -> Result<CompiledFilter> {
        let globs = if self.globs.is_empty() {
            None
        } else {
            let mut b = GlobSetBuilder::new();
            for g in &self.globs {
                // globset only knows '/' as a separator; scope paths use '.'.
                let glob = GlobBuilder::new(&g.replace('.', "/"))
                    .literal_separator(true)
                    .build()
                    .map_err(|e| WaveError::Filter {
                        what: format!("glob `{g}`: {}", e.kind()),
                    })?;
                b.add(glob);
            }
            let set = b.build().map_err(|e| WaveError::Filter {
                what: format!("globs {:?}: {e}", self.globs),
            })?;
            Some(set)
        };
        Ok(CompiledFilter {
            globs,
            window: self.window.unwrap_or((0, u64::MAX)),
        })
    }
}

/// A [`WaveFilter`] ready to use.
#[derive(Debug, Clone)]
pub struct CompiledFilter {
    globs: Option<GlobSet>,
    window: (u64, u64),
}

impl CompiledFilter {
    /// True if a glob matches the signal's full name or one of its enclosing scopes.
    /// Called once per signal at writer creation, not per value change.
    pub fn selects(&self, d: &SignalDecl) -> bool {
        let Some(set) = &self.globs else { return true };
        let mut path = String::new();
        for part in d.scope.iter().chain(std::iter::once(&d.name)) {
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(part);
            if set.is_match(&path) {
                return true;
            }
        }
        false
    }

    #[inline]
    pub fn in_window(&self, cycle: u64) -> bool {
        self.window.0 <= cycle && cycle < self.window.1
    }

    /// (inclusive start, exclusive end) in cycles; `(0, u64::MAX)` without a window.
    pub fn window(&self) -> (u64, u64) {
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(globs: &[&str], scope: &[&str], name: &str) -> bool {
        let f = WaveFilter {
            globs: globs.iter().map(|s| s.to_string()).collect(),
            window: None,
        };
        f.compile()
            .unwrap()
            .selects(&SignalDecl::new(scope.iter().copied(), name, 1))
    }

    #[test]
    fn scope_globs() {
        let r34 = ["top", "mesh", "r_3_4", "in_p0", "vc0"];
        assert!(sel(&["top.mesh.r_3_*"], &r34, "occ"));
        assert!(!sel(&["top.mesh.r_4_*"], &r34, "occ"));
        // '*' does not cross '.', '**' does.
        assert!(!sel(&["top.*.occ"], &r34, "occ"));
        assert!(sel(&["top.**.occ"], &r34, "occ"));
        assert!(sel(&["top.mesh.r_3_4.in_p0.vc0.occ"], &r34, "occ"));
        assert!(!sel(&["top.mesh.r_3_4.in_p0.vc0.oc"], &r34, "occ"));
        assert!(sel(&["nope", "top.mesh"], &r34, "occ"));
        assert!(sel(&[], &r34, "occ"));
    }

    #[test]
    fn bad_glob_is_named() {
        let f = WaveFilter {
            globs: vec!["top.[r".into()],
            window: None,
        };
        let e = f.compile().unwrap_err().to_string();
        assert!(e.contains("top.[r"), "{e}");
    }

    #[test]
    fn windows() {
        assert_eq!(
            WaveFilter::parse_window("1000..5000").unwrap(),
            (1000, 5000)
        );
        assert_eq!(WaveFilter::parse_window("..5").unwrap(), (0, 5));
        assert_eq!(WaveFilter::parse_window("7..").unwrap(), (7, u64::MAX));
        for bad in ["1000", "5..5", "9..3", "a..3", "1...3"] {
            let e = WaveFilter::parse_window(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
        let f = WaveFilter {
            globs: vec![],
            window: Some((10, 20)),
        }
        .compile()
        .unwrap();
        assert!(!f.in_window(9) && f.in_window(10) && f.in_window(19) && !f.in_window(20));
    }
}
