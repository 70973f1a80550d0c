use bench_problems::*;
use std::time::Instant;
fn main() {
    let name = std::env::args().nth(1).unwrap();
    let p = find_problem(&name).unwrap();
    let preset = Preset::Full;
    let sizes = p.sizes(preset);
    println!("{sizes:?}");
    for s in 0..2u64 {
        let t = Instant::now();
        let input = p.generate(preset, &sizes, Seeds::from(11 + s)).unwrap();
        let g = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let o = p.oracle(&input).unwrap();
        let oc = t.elapsed().as_secs_f64();
        println!(
            "set {s}: generate {g:.2} s, oracle {oc:.2} s, outputs {:?}",
            o.iter()
                .map(|(k, v)| (k.clone(), v.len()))
                .collect::<Vec<_>>()
        );
    }
}
