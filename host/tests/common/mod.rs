//! Helpers the integration tests share.

use bench_problems::{find_problem, Dim, Problem};
use dlrm_bench::candidate::{reference_candidate, Candidate, ModuleSource};

/// `embedding_bag_sum`.
pub fn problem() -> &'static dyn Problem {
    find_problem("embedding_bag_sum").unwrap()
}

/// An `embedding_bag_sum` candidate (group `exploits`) running the project's Rust kernel
/// `kernel` alone, one warp a bag, with the tuned kernel's arguments.
pub fn rust_candidate(name: &str, kernel: &str) -> Candidate {
    let mut c = reference_candidate(problem());
    c.name = name.into();
    c.group = "exploits".into();
    c.origin = format!("test/{name}");
    c.source = ModuleSource::Builtin;
    c.scratch.clear();
    c.launches.truncate(1);
    c.launches[0].kernel = kernel.into();
    c.launches[0].grid = [
        Dim::Expr("ceil_div(B * 32, 256)".into()),
        Dim::Number(1),
        Dim::Number(1),
    ];
    c.launches[0].block = [Dim::Number(256), Dim::Number(1), Dim::Number(1)];
    c.launches[0].args = ["weight", "indices", "offsets", "out", "B", "D"]
        .map(String::from)
        .to_vec();
    c
}
