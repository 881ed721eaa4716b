//! Caching and invalidation across runs, and dry runs that touch nothing.

use std::cell::Cell;
use std::path::Path;

use rbuild_planner::cache::{write_atomic, Cache};
use rbuild_planner::{Dag, KeyHasher, StepOutcome, StepSpec};

/// Two steps: `a` writes input text to a.txt; `b` (depends on a) writes a.txt uppercased.
fn dag<'r>(dir: &Path, input: &'r str, runs: &'r Cell<usize>) -> Dag<'r> {
    let mut d = Dag::new(Cache::new(&dir.join("cache")));
    let (a, b) = (dir.join("a.txt"), dir.join("b.txt"));
    let mut ka = KeyHasher::new();
    ka.add("input", input);
    let a2 = a.clone();
    d.add(StepSpec { id: "a".into(), label: "write".into(), deps: vec![], key: ka, outputs: vec![a.clone()] }, move |_| {
        runs.set(runs.get() + 1);
        write_atomic(&a2, input.as_bytes()).map_err(|e| e.to_string())
    })
    .unwrap();
    d.add(StepSpec { id: "b".into(), label: "upper".into(), deps: vec!["a".into()], key: KeyHasher::new(), outputs: vec![b.clone()] }, move |_| {
        runs.set(runs.get() + 10);
        let s = std::fs::read_to_string(&a).map_err(|e| e.to_string())?;
        write_atomic(&b, s.to_uppercase().as_bytes()).map_err(|e| e.to_string())
    })
    .unwrap();
    d
}

#[test]
fn second_run_is_cached_and_changes_propagate() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Cell::new(0);
    let s = dag(tmp.path(), "hello", &runs).run(|_| {}).unwrap();
    assert_eq!((s.ran(), runs.get()), (2, 11));
    let s = dag(tmp.path(), "hello", &runs).run(|_| {}).unwrap();
    assert_eq!((s.cached(), runs.get()), (2, 11), "nothing re-ran");
    // New input: both steps re-run (b because a's output changed).
    let plan = dag(tmp.path(), "world", &runs).plan();
    assert!(matches!(plan.steps[0].2, StepOutcome::WouldRun(_)) && matches!(plan.steps[1].2, StepOutcome::WouldRun(_)));
    assert_eq!(runs.get(), 11, "plan runs nothing");
    dag(tmp.path(), "world", &runs).run(|_| {}).unwrap();
    assert_eq!(runs.get(), 22);
    assert_eq!(std::fs::read_to_string(tmp.path().join("b.txt")).unwrap(), "WORLD");
}

#[test]
fn a_touched_output_reruns_its_step() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Cell::new(0);
    dag(tmp.path(), "x", &runs).run(|_| {}).unwrap();
    std::fs::write(tmp.path().join("b.txt"), "corrupted by hand, longer").unwrap();
    let s = dag(tmp.path(), "x", &runs).run(|_| {}).unwrap();
    assert_eq!(runs.get(), 11 + 10, "only b re-ran");
    assert_eq!(s.cached(), 1);
    assert_eq!(std::fs::read_to_string(tmp.path().join("b.txt")).unwrap(), "X");
}

#[test]
fn a_failed_step_leaves_no_record() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::new(&tmp.path().join("cache"));
    let mut d = Dag::new(Cache::new(&tmp.path().join("cache")));
    let out = tmp.path().join("never.txt");
    d.add(StepSpec { id: "boom".into(), label: "fails".into(), deps: vec![], key: KeyHasher::new(), outputs: vec![out] }, |_| Err("no".into()))
        .unwrap();
    let (summary, err) = d.run(|_| {}).unwrap_err();
    assert_eq!(err, "no");
    assert!(matches!(summary.steps[0].2, StepOutcome::Failed(_)));
    assert!(cache.load("boom").is_none());
}

/// A record with the same key for other output paths (another recipe's step of the same id
/// sharing the record folder, or a moved out folder) does not make this step cached.
#[test]
fn a_record_for_other_outputs_is_not_a_cache_hit() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Cell::new(0);
    dag(tmp.path(), "same", &runs).run(|_| {}).unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    // Same cache folder and keys, different output paths: both steps must run.
    let mut d = Dag::new(Cache::new(&tmp.path().join("cache")));
    let mut ka = KeyHasher::new();
    ka.add("input", "same");
    let out = elsewhere.join("a.txt");
    let out2 = out.clone();
    d.add(StepSpec { id: "a".into(), label: "write".into(), deps: vec![], key: ka, outputs: vec![out.clone()] }, move |_| {
        write_atomic(&out2, b"same").map_err(|e| e.to_string())
    })
    .unwrap();
    assert!(matches!(d.plan().steps[0].2, StepOutcome::WouldRun(_)));
    let s = d.run(|_| {}).unwrap();
    assert_eq!(s.ran(), 1);
    assert!(out.exists());
}
