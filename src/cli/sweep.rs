//! `waferstream sweep GRID.toml`: a grid of package scenarios, the points spread over the
//! cores (each point single-threaded), one JSON line per point written as soon as it
//! finishes. The grid format, its points, sharding, resume and the run are
//! `testbenches::run::sweep` (its module doc has the format); this module parses flags,
//! lists points, prints the summary and draws the plot.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use testbenches::run::sweep::{self as engine, Grid, Point, MAX_THREADS};

use super::{check_writable, CliResult};

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Grid file: a package scenario plus a grid table of axes (docs/user-guide.md).
    pub grid: PathBuf,
    /// JSON-lines output; points already in it are skipped. Default out/sweep-STEM.jsonl (STEM: the grid file's name)
    /// (out/sweep-STEM-IofN.jsonl with --shard I/N).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run only the points whose index % N == I-1 (I in 1..=N) (default: every point).
    #[arg(long)]
    pub shard: Option<String>,
    /// Points run at once, 1..=1024 (default: the available cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print the points (id, key) of the grid (or shard) and exit without running.
    #[arg(long)]
    pub list: bool,
    /// After the run, plot latency against tokens per strategy (one panel per model) from
    /// every line of the output file (SVG) (default: no plot).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// No summary line, progress bar or repair note.
    #[arg(long)]
    pub quiet: bool,
    /// Merge shard outputs of this grid (`--shard I/N` runs, e.g. from a SLURM array job or
    /// GNU parallel) into --out, one line per point in id order; nothing runs. Exit 3 when
    /// some points are in no shard.
    #[arg(long, num_args = 1.., value_name = "SHARD.jsonl")]
    pub merge: Vec<PathBuf>,
}

/// A short legend name for an axis value: a table with `rows` and `cols` as RxC (a PE
/// array or a chiplet array), an empty table as the axis's default, scalars as they are.
fn variant(axis: &str, v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(o) if o.is_empty() => format!("{}=default", axis.rsplit('.').next().unwrap_or(axis)),
        serde_json::Value::Object(o) => match (o.get("rows"), o.get("cols")) {
            (Some(r), Some(c)) => format!("{r}x{c}"),
            _ => serde_json::to_string(o).unwrap_or_default(),
        },
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The latency-vs-tokens points of a sweep output (lines that carry model, tokens, strategy
/// and latency; others are skipped).
fn latency_points(out: &Path) -> CliResult<Vec<super::plot::LatencyPoint>> {
    use std::io::BufRead;
    let f = std::fs::File::open(out).map_err(|e| format!("cannot read {}: {e}", out.display()))?;
    let mut v = Vec::new();
    // Line by line, as the resume reads it: a long sweep's output need not fit in memory.
    for line in std::io::BufReader::new(f).lines() {
        let line = line.map_err(|e| format!("cannot read {}: {e}", out.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(j) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        if let (Some(m), Some(t), Some(s), Some(l)) = (j["model"].as_str(), j["tokens"].as_u64(), j["strategy"].as_str(), j["latency_cycles"].as_u64()) {
            // One series per strategy and setting of the grid's other axes (a PE array,
            // a loader rule), so points of different machines are not joined.
            let mut label = s.to_string();
            if let Some(pt) = j["point"].as_object() {
                for (k, val) in pt.iter().filter(|(k, _)| !matches!(k.as_str(), "workload.model" | "workload.tokens" | "strategy")) {
                    label.push(' ');
                    label.push_str(&variant(k, val));
                }
            }
            v.push(super::plot::LatencyPoint { model: m.into(), tokens: t as u32, strategy: label, latency_cycles: l });
        }
    }
    Ok(v)
}

pub fn run(a: SweepArgs) -> CliResult<ExitCode> {
    let shard = a.shard.as_deref().map(engine::parse_shard).transpose().map_err(|e| e.to_string())?;
    let threads = match a.threads {
        Some(0) => return Err("--threads: at least 1".into()),
        Some(t) if t > MAX_THREADS => return Err(format!("--threads: at most {MAX_THREADS} (got {t})")),
        Some(t) => t,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let origin = a.grid.display().to_string();
    let text = std::fs::read_to_string(&a.grid).map_err(|e| format!("cannot read {origin}: {e}"))?;
    let grid = Grid::parse(&text, &origin).map_err(|e| e.to_string())?;
    // The points' configs only: listing them and checking the output must not wait for
    // every workload to be generated.
    let points = grid.points_unrun(&origin).map_err(|e| e.to_string())?;
    let (si, sn) = shard.unwrap_or((1, 1));
    let mine = |p: &&Point| p.index % sn == si - 1;
    if a.list {
        // Nothing runs, so nothing is written: an output flag would be silently ignored.
        for (flag, given) in [("--out", a.out.is_some()), ("--plot", a.plot.is_some()), ("--threads", a.threads.is_some())] {
            if given {
                return Err(format!("{flag}: --list only prints the points; nothing runs, nothing is written"));
            }
        }
        for p in points.iter().filter(mine) {
            println!("{}\t{}", p.index, p.key);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let out = a.out.clone().unwrap_or_else(|| engine::default_out(&a.grid, shard));
    check_writable(&out).map_err(|e| format!("--out: {e}"))?;
    if !a.merge.is_empty() {
        for (flag, given) in [("--shard", a.shard.is_some()), ("--plot", a.plot.is_some()), ("--threads", a.threads.is_some())] {
            if given {
                return Err(format!("{flag}: --merge only merges shard files; nothing runs"));
            }
        }
        if a.out.is_none() {
            return Err("--merge: give --out for the merged file".into());
        }
        let rep = engine::merge_shards(&points, &origin, &a.merge, &out).map_err(|e| e.to_string())?;
        println!("merged {} shard(s): {} line(s) to {}", a.merge.len(), rep.lines, out.display());
        if !rep.missing.is_empty() {
            let ids: Vec<String> = rep.missing.iter().take(10).map(|i| i.to_string()).collect();
            eprintln!("error: {} of {} points are in no shard (first: {}); the merge is partial", rep.missing.len(), points.len(), ids.join(", "));
            return Ok(ExitCode::from(super::EXIT_PARTIAL));
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(p) = &a.plot {
        check_writable(p).map_err(|e| format!("--plot: {e}"))?;
    }
    let done = engine::resume(&out, &points, &origin, a.quiet).map_err(|e| e.to_string())?;
    engine::check_workloads(&points, &origin).map_err(|e| e.to_string())?;
    let pending: Vec<&Point> = points.iter().filter(mine).filter(|p| !done.contains(&p.index)).collect();
    let mut file = engine::open_output(&out).map_err(|e| e.to_string())?;
    let threads = threads.min(pending.len()).max(1);
    let in_shard = points.iter().filter(mine).count();
    if !a.quiet {
        let name = grid.base.get("scenario").and_then(|s| s.get("name")).and_then(toml::Value::as_str).unwrap_or("");
        let sh = shard.map_or(String::new(), |(i, n)| format!(", shard {i}/{n}: {in_shard}"));
        println!("sweep `{name}`: {} points{sh}, {} done in {}, {} to run on {threads} thread(s)", points.len(), in_shard - pending.len(), out.display(), pending.len());
    }

    let rep = engine::run_points(&pending, threads, &mut file, &out, !a.quiet).map_err(|e| e.to_string())?;
    let (written, failed, differ) = (rep.written, rep.failed, rep.differ);
    println!("wrote {written} line(s) to {}", out.display());
    if let Some(p) = &a.plot {
        super::plot::latency_vs_tokens(p, &latency_points(&out)?)?;
        println!("wrote {}", p.display());
    }
    if let Some((i, key, e)) = failed.first() {
        // The finished points are written: a partial sweep, not bad input.
        eprintln!("error: {} of {} points failed (first: point {i} ({key}): {e}); the others are written, a rerun retries the failed", failed.len(), pending.len());
        return Ok(ExitCode::from(super::EXIT_PARTIAL));
    }
    if differ > 0 {
        eprintln!("error: functional outputs differ from the reference at {differ} point(s)");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

