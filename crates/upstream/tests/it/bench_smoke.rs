//! The bench helpers run (tiny sizes).

use sessionwatch_upstream::bench;

#[test]
fn bench_runs_on_small_inputs() {
    let rates = bench::jsonl_rates(2).unwrap();
    assert_eq!(rates.len(), 3);
    for r in &rates {
        assert!(r.bytes >= 2 * 1024 * 1024 && r.humans > 0, "{r:?}");
    }
    let o = bench::opencode_rate(200).unwrap();
    assert_eq!(o.human_turns, 100);
    assert!(bench::run(1, 50).unwrap().contains("opencode"));
}
