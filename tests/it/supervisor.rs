//! `kill_all_blocking` ends the groups of every supervisor in the process.
//! In a process of its own: it kills every group its process started.
#![cfg(target_os = "linux")]

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use quorum::runtime::supervisor::{Supervisor, kill_all_blocking};
use tokio::io::AsyncBufReadExt;

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test]
async fn kill_all_blocking_ends_the_groups_of_every_supervisor() {
    if !crate::common::in_a_process_of_its_own(
        "supervisor::kill_all_blocking_ends_the_groups_of_every_supervisor",
    ) {
        return;
    }
    let mut started = Vec::new();
    for (sup, script) in [
        (Supervisor::new(), "sleep 600 & echo $!; wait"),
        (Supervisor::new(), "trap '' TERM; sleep 600 & echo $!; wait"),
    ] {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .stdout(std::process::Stdio::piped());
        let (mut child, group) = sup.spawn(cmd, "test").unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        assert!(alive(grandchild));
        started.push((sup, child, group, grandchild));
    }
    kill_all_blocking();
    for (sup, mut child, group, grandchild) in started {
        assert!(!alive(grandchild), "{} survived", group.label());
        assert!(group.is_empty() && sup.groups().is_empty());
        let status = child.wait().await.unwrap();
        assert!(status.signal().is_some(), "{status}");
    }
}
