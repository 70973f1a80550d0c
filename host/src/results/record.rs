//! The records a run writes — one per (problem, candidate), plus the device ceilings — and
//! their file, `results.jsonl`: [`RecordLog`] appends to it as records are measured and
//! [`read_records`] reads it back (for `--resume`, `report` and `project`).
use bench_problems::{CheckReport, Work};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// The commit the binary was built from (written into `run.json` and the summary heading).
pub(crate) const GIT_COMMIT: &str = env!("DLRM_BENCH_GIT_COMMIT");

/// What names this build in cache keys: the commit, and for a build of uncommitted changes
/// (`-dirty`, or no commit known) the binary's size and modification time too, so that a cache
/// kept from another build of the same commit is not read as this one's (an oracle changed
/// since would give wrong verdicts).
pub(crate) fn build_identity() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        if !GIT_COMMIT.ends_with("-dirty") && GIT_COMMIT != "unknown" {
            return GIT_COMMIT.to_string();
        }
        let exe = std::env::current_exe().and_then(std::fs::metadata);
        let stamp = exe
            .ok()
            .and_then(|m| Some((m.len(), m.modified().ok()?)))
            .map_or("?".to_string(), |(len, t)| format!("{len}:{t:?}"));
        format!("{GIT_COMMIT}:{stamp}")
    })
}

/// The key of a problem at a shape: `problem` for the default shape (or none), else
/// `problem@shape`. Resumes, merges and the scheduler tell measurements apart by it.
pub(crate) fn unit_key(problem: &str, shape: Option<&str>) -> String {
    match shape {
        None => problem.to_string(),
        Some(s) if s == bench_problems::DEFAULT_SHAPE => problem.to_string(),
        Some(s) => format!("{problem}@{s}"),
    }
}

/// How a candidate ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Correct on every input set and timed.
    Correct,
    /// Wrong output, poison left, or inputs modified.
    Incorrect,
    /// NVRTC or the driver refused the code.
    CompileError,
    /// A launch was refused or faulted.
    RuntimeError,
    /// Faster than the physical floor: impossible, so not a win.
    Suspect,
    /// No result within the time limit: the worker was killed.
    Timeout,
    /// Could not run here (e.g. CUDA source on the CPU emulator).
    Skipped,
    /// The manifest is invalid.
    InvalidManifest,
    /// Wrote into the guard region before or after one of its buffers.
    OutOfBoundsWrite,
}

impl Status {
    /// Every status, in the order of the enum.
    pub(crate) const ALL: [Status; 9] = [
        Status::Correct,
        Status::Incorrect,
        Status::CompileError,
        Status::RuntimeError,
        Status::Suspect,
        Status::Timeout,
        Status::Skipped,
        Status::InvalidManifest,
        Status::OutOfBoundsWrite,
    ];

    /// The status named `name` (as [`Status::name`] writes it).
    pub fn parse(name: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Status::Correct => "correct",
            Status::Incorrect => "incorrect",
            Status::CompileError => "compile_error",
            Status::RuntimeError => "runtime_error",
            Status::Suspect => "suspect",
            Status::Timeout => "timeout",
            Status::Skipped => "skipped",
            Status::InvalidManifest => "invalid_manifest",
            Status::OutOfBoundsWrite => "out_of_bounds_write",
        }
    }
}

/// One check of one output on one input set.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetCheck {
    /// `public-0`, `secret-1`, `edge-0`, `recheck-0`, ...
    pub set: String,
    pub output: String,
    #[serde(flatten)]
    pub report: CheckReport,
}

/// A figure written as `null` (serde_json writes a NaN so) read back as NaN: a record whose
/// statistics are undefined is kept, not lost to a parse error (a reference timed zero times
/// once was).
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Timing of one kernel (milliseconds).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Timing {
    #[serde(deserialize_with = "nan_if_null")]
    pub median_ms: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p10_ms: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub p90_ms: f64,
    pub samples: usize,
    /// Compulsory bytes / median time.
    #[serde(deserialize_with = "nan_if_null")]
    pub compulsory_gbps: f64,
    /// Logical bytes / median time.
    #[serde(deserialize_with = "nan_if_null")]
    pub logical_gbps: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub gflops: f64,
    /// Physical floor / median time (share of the limit reached), when ceilings are known.
    pub floor_fraction: Option<f64>,
    /// Gather floor / median time ([`Ceilings::gather_floor_ms`]), for a problem that gathers
    /// rows when the gather ceilings are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gather_floor_fraction: Option<f64>,
}

/// A speedup: the median of paired ratios (the basis's time / the candidate's, interleaved on
/// the same inputs) with its bootstrap 95% interval. [`Record::speedup`] is over the reference,
/// [`Record::speedup_eager`] over PyTorch eager.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Speedup {
    #[serde(deserialize_with = "nan_if_null")]
    pub median: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub ci_low: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub ci_high: f64,
    pub pairs: usize,
}

/// One shape's figures on a record of all the shapes of its problem.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShapeFigure {
    pub shape: String,
    pub status: Status,
    pub median_ms: Option<f64>,
    /// Over the reference, paired, with its interval.
    pub speedup: Option<Speedup>,
    /// Over PyTorch eager and the `torch.compile`d Model (unpaired ratios), when measured.
    pub over_eager: Option<f64>,
    pub over_compile: Option<f64>,
    pub floor_fraction: Option<f64>,
}

/// PyTorch's time on the same inputs (from `tools/torch_peer.py`): eager's, or the
/// `torch.compile`d Model's.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PeerTime {
    pub median_ms: f64,
    /// Reference median / PyTorch's median (> 1: the reference is slower).
    pub reference_over_pytorch: f64,
    pub source: String,
    /// The spread of PyTorch's times (its 10th and 90th percentiles), when the peer gave it:
    /// an unpaired win needs the candidate's slow end faster than PyTorch's fast end
    /// ([`crate::report::metrics::Basis::win`]). Records written before it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p10_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_ms: Option<f64>,
}

/// One (problem, candidate) result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub problem: String,
    /// The problem's shape the record measured ([`bench_problems::Shape`]); records written
    /// before shapes existed have none, which means the default shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    pub candidate: String,
    pub group: String,
    pub origin: String,
    pub status: Status,
    /// Why, for anything but `correct` (compiler log, fault, failing check).
    pub message: String,
    pub checks: Vec<SetCheck>,
    pub work: Option<Work>,
    pub floor_ms: Option<f64>,
    pub timing: Option<Timing>,
    /// The reference's timing measured alongside this candidate.
    pub reference_timing: Option<Timing>,
    pub speedup: Option<Speedup>,
    pub win: bool,
    /// PyTorch eager's time on the same inputs, measured in another process
    /// (`tools/torch_peer.py`); a native run puts it on the reference's record only (see
    /// [`crate::report::metrics::with_reference_peers`]).
    pub pytorch: Option<PeerTime>,
    /// The `torch.compile`d Model's time on the same inputs (reference records of a run with
    /// `--torch compile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pytorch_compile: Option<PeerTime>,
    /// Why the Model has no `torch.compile` time (it failed to compile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pytorch_compile_error: Option<String>,
    /// Speedup over PyTorch eager measured paired, interleaved with eager in one process, with
    /// its bootstrap 95% interval (KernelBench answers evaluated in Python). Native runs leave
    /// it `None`; [`crate::report::metrics::Basis::Eager`] then uses the unpaired ratio from `pytorch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_eager: Option<Speedup>,
    /// The status the candidate's manifest says it must end with (exploits), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_status: Option<String>,
    /// Statistics of the timed input sets (reference records only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_stats: Option<serde_json::Value>,
    /// Seconds of each phase: the record's own (a reference's load, check and timing; a
    /// candidate's load, check, timing and recheck), plus the work for the problem done since
    /// the previous record and in none (a worker's preparation of the input sets, PyTorch's
    /// peer): so the first record of each worker carries that worker's preparation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<crate::runner::activity::PhaseTimes>,
    /// What KernelBench's own protocol said of this answer (KernelBench answers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernelbench: Option<KernelBenchVerdict>,
    /// Each protocol's own account of a KernelBench answer's seconds (`ours`, `kernelbench`:
    /// stage name to seconds, as the answer's process reported them: CUDA's start, the sets,
    /// the oracles, the import, the checks, the timing; the phases above hold the same time,
    /// bounded by the wall clock), and `hidden_work`: our timing's medians of host span less
    /// event span for the answer and eager, and the bound their difference must keep (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_stages: Option<BTreeMap<String, BTreeMap<String, f64>>>,
    /// How a KernelBench answer's processes were isolated (answers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::toolchain::sandbox::Isolation>,
    /// Timed runs of the candidate whose outputs were checked (every one of them, warm-up
    /// included: its outputs against the reference's on the same inputs, its module's globals
    /// as loaded); absent from reference records and records written before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_runs_checked: Option<usize>,
    /// Each shape's figures, on a record that stands for all the shapes of its problem
    /// ([`crate::report::shapes::by_problem`]; never in `results.jsonl`, which holds a record
    /// per shape).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shapes: Vec<ShapeFigure>,
    /// The ordinal of the GPU (or emulated device) that measured the record (`run --devices`);
    /// absent from records written before the field existed and from invalid manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<usize>,
}

/// KernelBench's verdict on an answer under its own protocol (v0.1: the reference run first,
/// `torch.allclose(atol, rtol)` over `trials` trials of `get_inputs()`, timing by the mean of
/// 100 calls each).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelBenchVerdict {
    /// Every trial passed allclose.
    pub passed: bool,
    /// The answer imported (its kernels compiled) and `ModelNew` was built.
    pub compiled: bool,
    pub passed_trials: usize,
    pub trials: usize,
    pub atol: f64,
    pub rtol: f64,
    /// The largest |output − answer| over the trials.
    pub max_abs_diff: Option<f64>,
    /// Mean ms of the answer and of the reference `Model`, and their ratio (passed only).
    pub runtime_ms: Option<f64>,
    pub ref_runtime_ms: Option<f64>,
    pub speedup: Option<f64>,
    pub message: String,
    /// Where `ref_runtime_ms` comes from: `baseline` (the problem's eager Model timed once by
    /// the runner in a job of its own), or the answer's own job; absent from older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_runtime_source: Option<String>,
}

impl Record {
    pub fn new(problem: &str, candidate: &str, group: &str, origin: &str) -> Self {
        Record {
            problem: problem.into(),
            shape: None,
            candidate: candidate.into(),
            group: group.into(),
            origin: origin.into(),
            status: Status::Skipped,
            message: String::new(),
            checks: Vec::new(),
            work: None,
            floor_ms: None,
            timing: None,
            reference_timing: None,
            speedup: None,
            win: false,
            pytorch: None,
            pytorch_compile: None,
            pytorch_compile_error: None,
            speedup_eager: None,
            input_stats: None,
            expected_status: None,
            phases: None,
            kernelbench: None,
            answer_stages: None,
            sandbox: None,
            timed_runs_checked: None,
            shapes: Vec::new(),
            device: None,
        }
    }

    /// The shape the record measured: its `shape`, or the default one.
    pub fn shape_name(&self) -> &str {
        self.shape
            .as_deref()
            .unwrap_or(bench_problems::DEFAULT_SHAPE)
    }

    /// The key of the (problem, shape) the record measured: `problem` for the default shape,
    /// `problem@shape` for another ([`unit_key`]).
    pub(crate) fn unit_key(&self) -> String {
        unit_key(&self.problem, self.shape.as_deref())
    }

    pub(crate) fn is_reference(&self) -> bool {
        self.group == "reference"
    }

    /// Whether the status differs from the one the manifest expects.
    pub(crate) fn unexpected(&self) -> bool {
        self.expected_status
            .as_deref()
            .is_some_and(|e| e != self.status.name())
    }
}

/// Device ceilings measured at the start of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    /// Device-to-device copy, bytes read + written per second.
    pub hbm_bytes_per_s: f64,
    /// One launch re-reading an L2-resident buffer, bytes per second.
    pub l2_bytes_per_s: f64,
    /// FMA throughput, flops per second.
    pub fp32_flops_per_s: f64,
    /// The rates of random row gathers and scattered atomic adds at [`GATHER_ROW_BYTES`]
    /// (`backend::ceilings`); runs before they were measured have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gathers: Option<[GatherCeiling; GATHER_WIDTHS]>,
}

/// How many row widths the gather ceilings are measured at.
pub const GATHER_WIDTHS: usize = 5;
/// The row widths (bytes) the gather ceilings are measured at: an embedding row of D = 16 to
/// 256 fp32 (32 to 512 in 16-bit types).
pub const GATHER_ROW_BYTES: [u32; GATHER_WIDTHS] = [64, 128, 256, 512, 1024];

/// The measured rates of one access pattern at one row width, in bytes per second: uniformly
/// random rows gathered from a table far past L2 (`hbm`) and from one inside it (`l2`), and
/// scattered atomic adds into rows of the large table (`atomic`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GatherCeiling {
    pub row_bytes: u32,
    pub hbm_bytes_per_s: f64,
    pub l2_bytes_per_s: f64,
    pub atomic_bytes_per_s: f64,
}

impl Ceilings {
    /// The gather floor, in ms: the streaming floor's three bounds ([`Ceilings::floor_ms`])
    /// with the work's randomly gathered rows ([`bench_problems::Gathered`]) at the measured
    /// rates of random gathers of rows that wide (the widest measured width not above the
    /// row, else the narrowest) and the rest of its bytes streamed: compulsory — distinct rows
    /// from HBM at the gather rate plus the rest at the copy rate; logical — every lookup's
    /// row from L2 at the gather rate plus the rest at the L2 rate; flops at fp32. What the
    /// access pattern of a lookup allows, where [`Ceilings::floor_ms`] assumes everything
    /// streams. `None` without gather ceilings or gathered rows. It never decides `suspect`.
    pub(crate) fn gather_floor_ms(&self, w: &Work) -> Option<f64> {
        let (gathers, rows) = (self.gathers?, w.gathered?);
        let g = gathers
            .iter()
            .filter(|g| g.row_bytes as f64 <= rows.row_bytes)
            .max_by_key(|g| g.row_bytes)
            .or_else(|| gathers.iter().min_by_key(|g| g.row_bytes))?;
        let t = |num: f64, rate: f64| if rate > 0.0 { num.max(0.0) / rate } else { 0.0 };
        let hbm = t(rows.distinct_bytes, g.hbm_bytes_per_s)
            + t(
                w.compulsory_bytes - rows.distinct_bytes,
                self.hbm_bytes_per_s,
            );
        let l2 = t(rows.lookup_bytes, g.l2_bytes_per_s)
            + t(w.logical_bytes - rows.lookup_bytes, self.l2_bytes_per_s);
        let ms = 1e3 * hbm.max(l2).max(t(w.flops, self.fp32_flops_per_s));
        (ms > 0.0).then_some(ms)
    }

    /// max(compulsory / HBM, logical / L2, flops / fp32), in ms.
    pub(crate) fn floor_ms(&self, w: &Work) -> f64 {
        let t = |num: f64, rate: f64| if rate > 0.0 { num / rate } else { 0.0 };
        1e3 * t(w.compulsory_bytes, self.hbm_bytes_per_s)
            .max(t(w.logical_bytes, self.l2_bytes_per_s))
            .max(t(w.flops, self.fp32_flops_per_s))
    }
}

/// Appends records to `results.jsonl`, one line each, flushed at once so nothing measured is
/// lost if the run stops.
pub(crate) struct RecordLog {
    file: File,
    /// Every record of the file, in file order: those it held when opened, then each appended.
    records: Vec<Record>,
    /// The file, for messages.
    path: std::path::PathBuf,
}

impl RecordLog {
    /// Opens the run's `results.jsonl` for appending. A torn last line (a crash or a full disk
    /// while it was written) is cut off first, so the next record starts on a line of its
    /// own; the torn bytes are kept in `results.jsonl.torn` and the cut is reported.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        let path = dir.join("results.jsonl");
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)?;
        let text = std::fs::read(&path)?;
        let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if whole < text.len() {
            let torn = path.with_extension("jsonl.torn");
            std::fs::write(&torn, &text[whole..])?;
            file.set_len(whole as u64)?;
            eprintln!(
                "warning: {}: its last line was torn ({} bytes, not a whole record): cut off, \
                 kept in {}",
                path.display(),
                text.len() - whole,
                torn.display()
            );
        }
        let records = read_records(&path);
        Ok(RecordLog {
            file,
            records,
            path,
        })
    }

    /// Appends one record as one whole line, in a single write.
    pub(crate) fn append(&mut self, rec: &Record) -> std::io::Result<()> {
        let mut line = serde_json::to_string(rec).map_err(std::io::Error::other)?;
        line.push('\n');
        let named = |e: std::io::Error| {
            std::io::Error::new(
                e.kind(),
                format!("{}: cannot append a record: {e}", self.path.display()),
            )
        };
        self.file.write_all(line.as_bytes()).map_err(named)?;
        self.file.flush().map_err(named)?;
        self.records.push(rec.clone());
        Ok(())
    }

    /// The file's records, in file order (so the end of a run never reads the file back).
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// The file's records, the log closed.
    pub(crate) fn into_records(self) -> Vec<Record> {
        self.records
    }
}

/// Records already in a `results.jsonl` (unreadable lines are reported and skipped).
pub(crate) fn read_records(path: &Path) -> Vec<Record> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .filter_map(|(i, l)| match serde_json::from_str(l) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("warning: {}:{}: skipped ({e})", path.display(), i + 1);
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_cut_off_and_kept_before_appending() {
        // Issue 13: a full disk left a torn line, and the resumed run appended onto it.
        let dir = std::env::temp_dir().join(format!("dlrm-record-torn-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut log = RecordLog::open(&dir).unwrap();
        log.append(&Record::new("p", "a", "g", "o")).unwrap();
        drop(log);
        let path = dir.join("results.jsonl");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text += "{\"problem\":\"p\",\"candi";
        std::fs::write(&path, &text).unwrap();
        let mut log = RecordLog::open(&dir).unwrap();
        log.append(&Record::new("p", "b", "g", "o")).unwrap();
        let names: Vec<String> = read_records(&path)
            .into_iter()
            .map(|r| r.candidate)
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            std::fs::read_to_string(dir.join("results.jsonl.torn")).unwrap(),
            "{\"problem\":\"p\",\"candi"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_record_with_undefined_statistics_reads_back_with_nan_not_an_error() {
        let mut r = Record::new("p", "reference", "reference", "reference");
        r.timing = Some(Timing {
            median_ms: f64::NAN,
            p10_ms: f64::NAN,
            samples: 0,
            ..Timing::default()
        });
        r.speedup = Some(Speedup {
            median: f64::NAN,
            ..Speedup::default()
        });
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains("\"median_ms\":null"), "{line}");
        let back: Record = serde_json::from_str(&line).unwrap();
        let t = back.timing.unwrap();
        assert!(t.median_ms.is_nan() && t.p10_ms.is_nan() && t.samples == 0);
        assert_eq!(t.p90_ms, 0.0);
        assert!(back.speedup.unwrap().median.is_nan());
    }

    #[test]
    fn speedup_eager_is_optional_in_results_files() {
        let line = serde_json::to_string(&Record::new("p", "a", "g", "o")).unwrap();
        assert!(!line.contains("speedup_eager"), "{line}");
        // A line written before the field existed reads, with it None.
        let r: Record = serde_json::from_str(&line).unwrap();
        assert!(r.speedup_eager.is_none());
        let mut r = Record::new("p", "a", "g", "o");
        r.speedup_eager = Some(Speedup {
            median: 1.5,
            ci_low: 1.25,
            ci_high: 1.75,
            pairs: 50,
        });
        let back: Record = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        let s = back.speedup_eager.unwrap();
        assert_eq!(
            (s.median, s.ci_low, s.ci_high, s.pairs),
            (1.5, 1.25, 1.75, 50)
        );
    }

    #[test]
    fn appended_records_read_back_and_bad_lines_are_skipped() {
        let dir = std::env::temp_dir().join(format!("dlrm-record-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let _ = std::fs::remove_file(dir.join("results.jsonl"));
        let mut log = RecordLog::open(&dir).unwrap();
        let mut a = Record::new("embedding_bag_sum", "reference", "reference", "reference");
        a.status = Status::Correct;
        log.append(&a).unwrap();
        drop(log);
        // A torn line (a run stopped mid-write) and a blank line, then a later append.
        let mut text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
        text += "{\"problem\": \"kjt_per\n\n";
        std::fs::write(dir.join("results.jsonl"), text).unwrap();
        let b = Record::new(
            "kjt_permute",
            "x",
            "examples",
            "candidates/examples/kjt_permute",
        );
        RecordLog::open(&dir).unwrap().append(&b).unwrap();
        let got = read_records(&dir.join("results.jsonl"));
        let got: Vec<(&str, Status)> = got.iter().map(|r| (r.problem.as_str(), r.status)).collect();
        assert_eq!(
            got,
            [
                ("embedding_bag_sum", Status::Correct),
                ("kjt_permute", Status::Skipped)
            ]
        );
        assert!(read_records(&dir.join("missing.jsonl")).is_empty());
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Every number of every committed record reads back as the exact f64 it was written with,
    /// so re-writing a record (a merge, a pooled report) keeps its text: each committed line,
    /// parsed and written again, has the same value at every key it had.
    #[test]
    fn committed_records_round_trip_bit_for_bit() {
        fn same(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
            use serde_json::Value::*;
            match (a, b) {
                (Object(x), Object(y)) => {
                    for (k, v) in x {
                        if let Some(w) = y.get(k) {
                            same(v, w, &format!("{at}.{k}"));
                        }
                    }
                }
                (Array(x), Array(y)) => {
                    assert_eq!(x.len(), y.len(), "{at}");
                    for (i, (v, w)) in x.iter().zip(y).enumerate() {
                        same(v, w, &format!("{at}[{i}]"));
                    }
                }
                (Number(x), Number(y)) if x.is_f64() || y.is_f64() => {
                    let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                    assert_eq!(x.to_bits(), y.to_bits(), "{at}: {x} became {y}");
                }
                _ => assert_eq!(a, b, "{at}"),
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
        let mut files = vec![root];
        let mut lines = 0;
        while let Some(p) = files.pop() {
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
            } else if p.file_name().is_some_and(|n| n == "results.jsonl") {
                for line in std::fs::read_to_string(&p).unwrap().lines() {
                    let Ok(rec) = serde_json::from_str::<Record>(line) else {
                        continue;
                    };
                    let written: serde_json::Value = serde_json::to_value(&rec).unwrap();
                    let original: serde_json::Value = serde_json::from_str(line).unwrap();
                    same(&original, &written, &p.display().to_string());
                    lines += 1;
                }
            }
        }
        assert!(lines > 500, "only {lines} committed records");
    }
}
