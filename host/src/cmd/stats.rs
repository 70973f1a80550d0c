//! `dlrm-bench stats`: the input statistics of a table-set preset's generated batch or of a
//! lookup trace — over all tables, with rows numbered over the concatenated tables, and
//! optionally per table — as text or JSON.
use anyhow::Context;
use data_gen::InputStats;
use std::fmt::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct StatsArgs {
    /// A table-set preset: criteo-kaggle, criteo-terabyte, mlperf-dlrmv2.
    #[arg(long, conflicts_with = "trace")]
    pub table_set: Option<String>,
    /// A trace instead (safetensors or a directory of .npy).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Samples in the generated batch.
    #[arg(long, default_value_t = 65536, value_parser = crate::cmd::arg_bounds::batch)]
    pub batch: usize,
    /// Cap every table at this many rows.
    #[arg(long)]
    pub row_cap: Option<u64>,
    /// Multiply every table's rows by this factor.
    #[arg(long)]
    pub scale: Option<f64>,
    /// Zipf exponent of the generated lookups.
    #[arg(long, default_value_t = 1.15)]
    pub alpha: f64,
    /// Log-normal bag lengths with this σ around each table's hotness (default: fixed hotness).
    #[arg(long)]
    pub pooling_sigma: Option<f64>,
    /// The seed the generated batch is drawn from (the same seed, the same batch).
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Also print one line per table.
    #[arg(long)]
    pub per_table: bool,
    /// Print the statistics as JSON instead.
    #[arg(long)]
    pub json: bool,
}

/// One table's bags, its indices local to the table.
struct Table {
    label: String,
    rows: u64,
    indices: Vec<i64>,
    offsets: Vec<i64>,
}

impl Table {
    fn stats(&self) -> InputStats {
        data_gen::bag_stats(&self.indices, &self.offsets, self.rows)
    }
}

/// A whole set's lookups: per table, and over all tables (rows numbered over the concatenated
/// tables).
struct Lookups {
    title: String,
    tables: Vec<Table>,
    all: Table,
}

/// The tables of a trace.
fn trace_lookups(path: &Path) -> anyhow::Result<Lookups> {
    let t = data_gen::Trace::read(path)?;
    let mut tables = Vec::new();
    let mut global = t.indices.clone();
    let mut base = 0u64;
    for table in 0..t.tables {
        let (indices, offsets) = t.table(table)?;
        let rows = t.rows_seen(table)?;
        let (a0, a1) = (
            t.offsets[table * t.batch] as usize,
            t.offsets[(table + 1) * t.batch] as usize,
        );
        global[a0..a1].iter_mut().for_each(|i| *i += base as i64);
        base += rows;
        let label = format!("table {table}");
        tables.push(Table {
            label,
            rows,
            indices,
            offsets,
        });
    }
    let title = format!(
        "trace {}: {} tables, batch {}",
        path.display(),
        t.tables,
        t.batch
    );
    let all = Table {
        label: String::new(),
        rows: base,
        indices: global,
        offsets: t.offsets,
    };
    Ok(Lookups { title, tables, all })
}

/// One generated batch of a table-set preset.
fn table_set_lookups(a: &StatsArgs) -> anyhow::Result<Lookups> {
    let name = a.table_set.as_deref().unwrap_or("mlperf-dlrmv2");
    let mut set = data_gen::TableSet::preset(name).with_context(|| {
        format!(
            "unknown table set `{name}` (one of {})",
            data_gen::tables::PRESETS.join(", ")
        )
    })?;
    if let Some(cap) = a.row_cap {
        set = set.with_row_cap(cap)?;
    }
    if let Some(f) = a.scale {
        set = set.scaled(f)?;
    }
    let recipe = data_gen::TableSetRecipe {
        alpha: a.alpha,
        pooling_sigma: a.pooling_sigma,
    };
    let b = set.generate(a.batch, &recipe, a.seed)?;
    let mut tables = Vec::new();
    for (t, spec) in set.tables.iter().enumerate() {
        let (o0, o1) = (b.offsets[t * a.batch], b.offsets[(t + 1) * a.batch]);
        let indices = b.indices[o0 as usize..o1 as usize].to_vec();
        let offsets = b.offsets[t * a.batch..=(t + 1) * a.batch]
            .iter()
            .map(|x| x - o0)
            .collect();
        let label = format!(
            "table {t} (E={} D={} hot={})",
            spec.rows, spec.dim, spec.hotness
        );
        tables.push(Table {
            label,
            rows: spec.rows,
            indices,
            offsets,
        });
    }
    let title = format!(
        "{}: {} tables, {} rows ({:.1} GB fp32), {} lookups per sample, batch {}, alpha {}",
        set.name,
        set.tables.len(),
        set.total_rows(),
        set.total_bytes(4) as f64 / 1e9,
        set.lookups_per_sample(),
        a.batch,
        a.alpha
    );
    let all = Table {
        label: String::new(),
        rows: set.total_rows(),
        indices: b.global_indices(),
        offsets: b.offsets,
    };
    Ok(Lookups { title, tables, all })
}

/// What `dlrm-bench stats` prints.
pub fn render(a: &StatsArgs) -> anyhow::Result<String> {
    let lookups = match &a.trace {
        Some(path) => trace_lookups(path)?,
        None => table_set_lookups(a)?,
    };
    let whole = lookups.all.stats();
    if a.json {
        let tables: Vec<_> = if a.per_table {
            let table = |t: &Table| serde_json::json!({"table": t.label, "stats": t.stats()});
            lookups.tables.iter().map(table).collect()
        } else {
            vec![]
        };
        let v = serde_json::json!({"source": lookups.title, "all_tables": whole, "tables": tables});
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    let mut text = format!(
        "{}\nall tables (rows numbered over the concatenated tables):\n{whole}\n",
        lookups.title
    );
    if a.per_table {
        for t in &lookups.tables {
            let s = t.stats();
            writeln!(
                text,
                "{}: N={} unique {:.2}% top1% {:.2}% top10% {:.2}% reuse {:.2} once {:.2}%",
                t.label,
                s.lookups,
                100.0 * s.unique_fraction,
                100.0 * s.top1pct_share,
                100.0 * s.top10pct_share,
                s.mean_reuse,
                100.0 * s.rows_touched_once
            )?;
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use data_gen::{HostTensor, TensorSet};

    fn args() -> StatsArgs {
        StatsArgs {
            table_set: Some("criteo-kaggle".into()),
            trace: None,
            batch: 64,
            row_cap: Some(1000),
            scale: None,
            alpha: 1.15,
            pooling_sigma: None,
            seed: 1,
            per_table: true,
            json: false,
        }
    }

    #[test]
    fn a_table_set_gives_a_title_the_whole_set_and_a_line_per_table() {
        let text = render(&args()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("criteo-kaggle@cap=1000: 26 tables"),
            "{}",
            lines[0]
        );
        assert!(lines[0].ends_with("batch 64, alpha 1.15"), "{}", lines[0]);
        assert_eq!(
            lines[1],
            "all tables (rows numbered over the concatenated tables):"
        );
        let per_table = lines.iter().filter(|l| l.starts_with("table ")).count();
        assert_eq!(per_table, 26);
        let json: serde_json::Value = serde_json::from_str(
            &render(&StatsArgs {
                json: true,
                per_table: false,
                ..args()
            })
            .unwrap(),
        )
        .unwrap();
        assert_eq!(json["tables"], serde_json::json!([]));
        assert_eq!(json["source"].as_str(), lines.first().copied());
        let err = render(&StatsArgs {
            table_set: Some("nope".into()),
            ..args()
        })
        .unwrap_err();
        assert!(err.to_string().starts_with("unknown table set `nope`"));
    }

    #[test]
    fn a_traces_rows_are_numbered_over_its_tables() {
        // Two tables of two bags: table 0 looks up rows 0..=2, table 1 rows 0 and 4.
        let dir = std::env::temp_dir().join(format!("dlrm-stats-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.safetensors");
        let mut set = TensorSet::new();
        let indices = vec![0, 1, 2, 2, 4, 0, 4];
        let offsets = vec![0, 2, 4, 5, 7];
        set.tensors.insert(
            "indices".into(),
            HostTensor::from_i64(vec![7], indices).unwrap(),
        );
        set.tensors.insert(
            "offsets".into(),
            HostTensor::from_i64(vec![5], offsets).unwrap(),
        );
        set.metadata.insert("tables".into(), "2".into());
        set.metadata.insert("batch_size".into(), "2".into());
        set.write(&path).unwrap();
        let a = StatsArgs {
            trace: Some(path.clone()),
            table_set: None,
            json: true,
            ..args()
        };
        let json: serde_json::Value = serde_json::from_str(&render(&a).unwrap()).unwrap();
        let all = &json["all_tables"];
        // Rows 0, 1, 2 of table 0 and rows 3 + 0, 3 + 4 of table 1: 5 distinct of 8.
        assert_eq!(
            (all["lookups"].as_u64(), all["rows"].as_u64()),
            (Some(7), Some(8))
        );
        assert_eq!(all["distinct_rows"].as_u64(), Some(5));
        assert_eq!(json["tables"][1]["table"], "table 1");
        assert_eq!(
            json["tables"][1]["stats"]["distinct_rows"].as_u64(),
            Some(2)
        );
        let text = render(&StatsArgs { json: false, ..a }).unwrap();
        assert!(text.starts_with(&format!("trace {}: 2 tables, batch 2\n", path.display())));
        std::fs::remove_dir_all(&dir).ok();
    }
}
