//! A panic that ends quorum (one on its main thread) ends every process it
//! started first. In a process of its own: the hook kills every group its
//! process started.
#![cfg(target_os = "linux")]

use std::time::Duration;

use quorum::runtime::supervisor::{Supervisor, kill_all_on_panic};
use tokio::io::AsyncBufReadExt;

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test]
async fn a_panic_on_the_main_thread_ends_every_group() {
    if !crate::common::in_a_process_of_its_own("panic::a_panic_on_the_main_thread_ends_every_group")
    {
        return;
    }
    let sup = Supervisor::new();
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg("sleep 600 & echo $!; wait")
        .stdout(std::process::Stdio::piped());
    let (mut child, group) = sup.spawn(cmd, "agent").unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let grandchild: i32 = line.trim().parse().unwrap();
    assert!(alive(grandchild));
    kill_all_on_panic();
    // A panic elsewhere (a task's, which the session survives) leaves the
    // agents alone.
    let other = std::thread::Builder::new()
        .name("worker".into())
        .spawn(|| panic!("a task's bug"))
        .unwrap();
    assert!(other.join().is_err());
    assert!(alive(grandchild), "a worker's panic killed the agents");
    // quorum's commands run on the thread called "main".
    let main = std::thread::Builder::new()
        .name("main".into())
        .spawn(|| panic!("quorum's bug"))
        .unwrap();
    assert!(main.join().is_err());
    assert!(!alive(grandchild), "the agent's child outlived the panic");
    assert!(group.is_empty());
}
