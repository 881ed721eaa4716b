//! Version probes remembered between runs, and forgotten when the program changes. The only
//! test in its binary: it writes and runs scripts, and a concurrent fork in another test thread
//! could hold a script's write descriptor open at exec ("Text file busy").

use std::path::Path;
use std::time::{Duration, SystemTime};

use rbuild_recipe::{Platform, Probes};

/// A fake tool that records each run in `runs` and prints `version`.
fn write_tool(path: &Path, runs: &Path, version: &str) {
    let script = format!("#!/bin/sh\necho run >> '{}'\necho '{version}'\n", runs.display());
    std::fs::write(path, script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn runs(path: &Path) -> usize {
    std::fs::read_to_string(path).map(|t| t.lines().count()).unwrap_or(0)
}

#[cfg(unix)]
#[test]
fn probes_are_reused_until_the_program_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (tool, counter, cache) = (dir.path().join("fake-cc"), dir.path().join("runs"), dir.path().join("cache/tool-probes.json"));
    write_tool(&tool, &counter, "fake-cc 1.0");
    let text = format!("target \"host\"\nrun \"native\"\ntool \"fake-cc\" {{ command \"{}\"; }}\n", tool.display());
    let platform = Platform::from_source("fake.kdl", text).unwrap();
    let version = |probes: &Probes| platform.check_with(probes)[0].found.clone().unwrap().1;

    assert_eq!(version(&Probes::at(&cache)), "fake-cc 1.0");
    assert_eq!(runs(&counter), 1);
    assert!(cache.is_file());
    // A later run (a new cache object reading the file) does not start the program.
    assert_eq!(version(&Probes::at(&cache)), "fake-cc 1.0");
    assert_eq!(runs(&counter), 1, "the unchanged tool was probed again");

    // A new binary of another size is probed again.
    write_tool(&tool, &counter, "fake-cc 2.0.1");
    assert_eq!(version(&Probes::at(&cache)), "fake-cc 2.0.1");
    assert_eq!(runs(&counter), 2);

    // Same size, only the modification time differs: probed again.
    write_tool(&tool, &counter, "fake-cc 3.0.1");
    let later = SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options().write(true).open(&tool).unwrap().set_modified(later).unwrap();
    assert_eq!(version(&Probes::at(&cache)), "fake-cc 3.0.1");
    assert_eq!(runs(&counter), 3);
    assert_eq!(version(&Probes::at(&cache)), "fake-cc 3.0.1");
    assert_eq!(runs(&counter), 3);

    // Without a file nothing is kept between cache objects, and a corrupt file is ignored.
    assert_eq!(version(&Probes::in_memory()), "fake-cc 3.0.1");
    assert_eq!(runs(&counter), 4);
    std::fs::write(&cache, "{ not json").unwrap();
    assert_eq!(version(&Probes::at(&cache)), "fake-cc 3.0.1");
    assert_eq!(runs(&counter), 5);
}
