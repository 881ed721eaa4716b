//! Steps and their order. A step's full key is its own inputs plus the content hashes of its
//! dependencies' outputs, so a change anywhere re-runs exactly what it reaches.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use crate::cache::{Cache, Record};
use crate::hash::KeyHasher;

/// What a step is: its id, dependencies, the inputs its key is made of, and its outputs.
pub struct StepSpec {
    pub id: String,
    /// One-line description for summaries.
    pub label: String,
    pub deps: Vec<String>,
    pub key: KeyHasher,
    pub outputs: Vec<PathBuf>,
}

/// What a running step can see: its dependencies' outputs.
pub struct StepCtx<'a> {
    pub id: &'a str,
    pub deps: &'a HashMap<String, Record>,
}

type RunFn<'r> = Box<dyn FnOnce(&StepCtx<'_>) -> Result<(), String> + 'r>;

#[derive(Clone, Debug, PartialEq)]
pub enum StepOutcome {
    /// Key and outputs unchanged: nothing done.
    Cached,
    Ran { seconds: f64 },
    /// Dry run: the step would run, and why.
    WouldRun(String),
    Failed(String),
}

#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// (step id, label, outcome, key)
    pub steps: Vec<(String, String, StepOutcome, String)>,
}

impl Summary {
    pub fn cached(&self) -> usize {
        self.steps.iter().filter(|s| s.2 == StepOutcome::Cached).count()
    }
    pub fn ran(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s.2, StepOutcome::Ran { .. })).count()
    }
}

pub struct Dag<'r> {
    steps: Vec<(StepSpec, RunFn<'r>)>,
    cache: Cache,
}

/// Events for progress display.
pub enum Event<'a> {
    Start(&'a StepSpec),
    Done(&'a StepSpec, &'a StepOutcome),
}

impl<'r> Dag<'r> {
    pub fn new(cache: Cache) -> Self {
        Dag { steps: Vec::new(), cache }
    }

    /// Adds a step after its dependencies (which must already be in the DAG).
    pub fn add(&mut self, spec: StepSpec, run: impl FnOnce(&StepCtx<'_>) -> Result<(), String> + 'r) -> Result<(), String> {
        for d in &spec.deps {
            if !self.steps.iter().any(|(s, _)| &s.id == d) {
                return Err(format!("step {} depends on unknown step {d}", spec.id));
            }
        }
        if self.steps.iter().any(|(s, _)| s.id == spec.id) {
            return Err(format!("step {} added twice", spec.id));
        }
        self.steps.push((spec, Box::new(run)));
        Ok(())
    }

    pub fn specs(&self) -> impl Iterator<Item = &StepSpec> {
        self.steps.iter().map(|(s, _)| s)
    }

    fn full_key(spec: &StepSpec, records: &HashMap<String, Record>) -> Option<String> {
        let mut k = spec.key.clone();
        for d in &spec.deps {
            let r = records.get(d)?;
            for (p, (_, _, h)) in &r.outputs {
                k.add(&format!("dep {d} {}", p.display()), h);
            }
        }
        Some(k.finish())
    }

    /// Dry run: which steps are cached and which would run, touching nothing.
    pub fn plan(&self) -> Summary {
        let mut records = HashMap::new();
        let mut summary = Summary::default();
        for (spec, _) in &self.steps {
            let outcome = match Self::full_key(spec, &records) {
                None => StepOutcome::WouldRun("an input step will run".into()),
                Some(key) => match self.cache.valid(&spec.id, &key, &spec.outputs) {
                    Some(r) => {
                        records.insert(spec.id.clone(), r);
                        StepOutcome::Cached
                    }
                    None => StepOutcome::WouldRun(match self.cache.load(&spec.id) {
                        None => "never built".into(),
                        Some(r) if r.key != key => "inputs changed".into(),
                        Some(_) => "outputs changed or missing".into(),
                    }),
                },
            };
            let key = Self::full_key(spec, &records).unwrap_or_default();
            summary.steps.push((spec.id.clone(), spec.label.clone(), outcome, key));
        }
        summary
    }

    /// Runs what is not cached, in order; stops at the first failure (the summary so far is
    /// returned with the error).
    pub fn run(self, mut progress: impl FnMut(Event<'_>)) -> Result<Summary, (Summary, String)> {
        let mut records: HashMap<String, Record> = HashMap::new();
        let mut summary = Summary::default();
        for (spec, run) in self.steps {
            let key = Self::full_key(&spec, &records).expect("dependencies ran before");
            if let Some(r) = self.cache.valid(&spec.id, &key, &spec.outputs) {
                records.insert(spec.id.clone(), r);
                progress(Event::Done(&spec, &StepOutcome::Cached));
                summary.steps.push((spec.id, spec.label, StepOutcome::Cached, key));
                continue;
            }
            progress(Event::Start(&spec));
            // Forget the old record first: if we are interrupted mid-step, nothing vouches for
            // half-updated outputs.
            self.cache.invalidate(&spec.id);
            hold_for_tests(&spec.id);
            let t = Instant::now();
            let ctx = StepCtx { id: &spec.id, deps: &records };
            let result = run(&ctx).and_then(|()| {
                for o in &spec.outputs {
                    if !o.exists() {
                        return Err(format!("step {} did not produce {}", spec.id, o.display()));
                    }
                }
                self.cache.store(&spec.id, &key, &spec.outputs).map_err(|e| format!("cache: {e}"))
            });
            match result {
                Ok(r) => {
                    records.insert(spec.id.clone(), r);
                    let outcome = StepOutcome::Ran { seconds: t.elapsed().as_secs_f64() };
                    progress(Event::Done(&spec, &outcome));
                    summary.steps.push((spec.id, spec.label, outcome, key));
                }
                Err(e) => {
                    let outcome = StepOutcome::Failed(e.clone());
                    progress(Event::Done(&spec, &outcome));
                    summary.steps.push((spec.id, spec.label, outcome, key));
                    return Err((summary, e));
                }
            }
        }
        Ok(summary)
    }
}

/// Interruption tests set `RBUILD_TEST_HOLD=<step id>` to stop a build inside that step (after
/// its cache record is gone, before its outputs exist) long enough to kill it there.
fn hold_for_tests(step: &str) {
    if std::env::var("RBUILD_TEST_HOLD").is_ok_and(|s| s == step) {
        eprintln!("holding in step {step} (RBUILD_TEST_HOLD)");
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}
