//! Generation rate: bounded-Zipf indices per second on one core (one rayon thread), against
//! rand_distr's rejection-inversion Zipf, plus the full index path (permutation included) and
//! the FBGEMM-compatible mode.
//!
//! `cargo bench -p data-gen --bench generation`; the `elem/s` figures are per core.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use data_gen::seed::rng;
use data_gen::{fbgemm_bag_indices, BoundedZipf, FbgemmRecipe, IndexRecipe, IndexSampler};
use rand_distr::{Distribution, Zipf};
use std::hint::black_box;

const ROWS: u64 = 8 << 20;
const DRAWS: usize = 1 << 20;

fn one_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(f)
}

fn zipf(c: &mut Criterion) {
    let mut g = c.benchmark_group("zipf_one_core");
    g.throughput(Throughput::Elements(DRAWS as u64));
    g.sample_size(20);
    for alpha in [1.05, 1.15] {
        let z = BoundedZipf::new(ROWS, alpha).unwrap();
        g.bench_function(format!("bounded_zipf_ranks/E=8M/alpha={alpha}"), |b| {
            let mut r = rng(1);
            let mut out = vec![0u64; DRAWS];
            b.iter(|| {
                for x in out.iter_mut() {
                    *x = z.sample(&mut r);
                }
                black_box(&out);
            })
        });
        let rd = Zipf::new(ROWS as f64, alpha).unwrap();
        g.bench_function(format!("rand_distr_zipf/E=8M/alpha={alpha}"), |b| {
            let mut r = rng(1);
            let mut out = vec![0u64; DRAWS];
            b.iter(|| {
                for x in out.iter_mut() {
                    *x = rd.sample(&mut r) as u64 - 1;
                }
                black_box(&out);
            })
        });
    }
    let sampler = IndexSampler::new(
        &IndexRecipe {
            rows: ROWS,
            alpha: 1.15,
            scatter_hot_rows: true,
        },
        1,
    )
    .unwrap();
    g.bench_function("lookup_indices_with_permutation/E=8M/alpha=1.15", |b| {
        b.iter(|| one_thread(|| black_box(sampler.sample(DRAWS, 2))))
    });
    g.finish();

    let mut g = c.benchmark_group("fbgemm_mode_one_core");
    let lengths = vec![20u32; 1 << 14];
    g.throughput(Throughput::Elements(20 << 14));
    g.sample_size(10);
    let recipe = FbgemmRecipe::new(1 << 20, 1.15);
    g.bench_function("fbgemm_bag_indices/E=1M/L=20/alpha=1.15", |b| {
        b.iter(|| one_thread(|| black_box(fbgemm_bag_indices(&recipe, &lengths, 3).unwrap())))
    });
    g.finish();
}

criterion_group!(benches, zipf);
criterion_main!(benches);
