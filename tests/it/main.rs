//! quorum's integration tests: one test program, a module per feature.
//!
//! One program links quorum once (each of the ~50 programs this used to be
//! linked it again), and its tests run side by side on the test threads.
//! What a test changes of the process itself is therefore everyone's:
//!
//! - The environment is made hermetic once, before `main` and so before any
//!   test thread starts ([`BEFORE_MAIN`]): `HOME`, `XDG_CONFIG_HOME`,
//!   `XDG_STATE_HOME` and git's global config in a folder of this program's
//!   own, no system git config, none of the inherited `GIT_*` variables.
//!   No test sets a variable of the process.
//! - No chat unless a test chooses one: `QUORUM_MODEL` is `none`
//!   ([`common::NO_CHAT`], set there and on every quorum a test starts
//!   through [`common::quorum`]) and no provider's API key is inherited
//!   ([`common::NO_KEYS`]). Without it, quorum's default chat (the first
//!   agent installed) would be whichever agent a test configures, or one
//!   the machine has on `PATH`. The tests of that default (`default_chat`)
//!   remove it from the quorum they start.
//! - Most tests wait on other processes (agents, ssh, git, a terminal):
//!   unless told otherwise (`--test-threads`, `RUST_TEST_THREADS`), the
//!   program runs three tests per core.
//! - A test that acts on every process the test program started (the
//!   supervisor's `kill_all_blocking`, the panic hook that calls it) runs
//!   in a process of its own: [`common::in_a_process_of_its_own`].
//! - insta names a snapshot after its module (`it::screen` →
//!   `snapshots/it__screen__NAME.snap`, beside these files); proptest keeps
//!   a module's failures in `MODULE.proptest-regressions` beside it.
//!
//! Run one feature with `cargo test --test it remote::`, one test with
//! `cargo test --test it -- --exact remote::a_call_runs_on_the_host_its_files_and_commands_there`.

#[path = "../common/mod.rs"]
mod common;

mod acp_agent;
mod acp_content;
mod acp_errors;
mod acp_hosts;
mod acp_labels;
mod acp_sessions;
mod agent_commands;
mod agent_double;
mod app_loop;
mod arena;
mod batch;
mod batch_screen;
mod budget;
mod call_cli;
mod cli;
mod composer_pty;
mod conductor;
mod continued;
mod default_chat;
mod detail_window;
mod dispatch;
mod docs;
mod doctor;
mod elicitation;
mod findings_view;
mod frames;
mod fuzz_props;
mod hardening;
mod import;
mod interop_arena;
mod interop_budget;
mod interop_claude;
mod interop_codex;
mod interop_fast_agent;
mod interop_opencode;
mod interop_review;
mod layers;
mod layout;
mod llm_providers;
mod mcp_cli;
mod mcp_endpoint;
mod mcp_server;
mod mcp_servers;
mod notify;
mod orphans;
mod panic;
mod picker;
mod remote;
mod review_cli;
mod review_formats;
mod run_cli;
mod sandbox;
mod screen;
mod sessions_cli;
mod steer;
mod steer_app;
mod supervisor;
mod svg_raster;
mod terminals;
mod tiny_screens;
mod transcript;
mod watch;
mod worktree;

/// Before `main`, while the process has one thread (a constructor the
/// loader runs): makes the environment hermetic ([`common::hermetic_process`]),
/// so no test ever sees it change under it (setting a variable while
/// another thread reads the environment is what `set_var` cannot make
/// safe), and sets how many tests run at once, unless the person did:
/// three per core, for tests that mostly wait.
#[used]
#[cfg_attr(not(target_vendor = "apple"), unsafe(link_section = ".init_array"))]
#[cfg_attr(
    target_vendor = "apple",
    unsafe(link_section = "__DATA,__mod_init_func")
)]
static BEFORE_MAIN: extern "C" fn() = {
    extern "C" fn before_main() {
        common::hermetic_process();
        if std::env::var_os("RUST_TEST_THREADS").is_none() {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            // SAFETY: before `main`, on the only thread (see above).
            unsafe { std::env::set_var("RUST_TEST_THREADS", (3 * cores).to_string()) };
        }
    }
    before_main
};
