//! The internal agent's tools. Files are read and written through the
//! session's [`Root`], so nothing outside its directory is touched; shell
//! commands run in that directory, with their output captured (the newest
//! [`MAX_OUTPUT`] bytes of each stream kept while it runs, what came before
//! named) and capped for the model,
//! each in a process group of its own that is ended, with whatever it left
//! running in the background, when the command finishes or is cancelled.

use crate::confine::lock;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;

use super::{ToolError, ToolSet};
use crate::confine::fsroot::{Exclude, FsError, Root};
use crate::confine::limits::{MAX_OUTPUT, Tail, approx_size, size};
use crate::llm::{ToolCall, ToolSpec};
use crate::runtime::sandbox::{self, Confined, Policy, Sandbox};
use crate::runtime::supervisor::{self, Supervisor};

/// Bytes of a tool's output the model gets back.
pub const OUTPUT_CAP: usize = 16 * 1024;
/// Matches `grep` reports at most.
const GREP_MATCHES: usize = 200;
/// How long a shell command's output may still take to arrive once its
/// process group is gone (a process that left the group may hold the pipe).
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// Cuts `text` to [`OUTPUT_CAP`] bytes, saying so.
pub fn cap(mut text: String) -> String {
    if text.len() > OUTPUT_CAP {
        let mut cut = OUTPUT_CAP;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let total = text.len();
        text.truncate(cut);
        text.push_str(&format!(
            "\n[output cut: {total} bytes, showing the first {cut}]"
        ));
    }
    text
}

/// Cuts `text` to [`OUTPUT_CAP`] bytes by its middle, saying so: a
/// command's result keeps its start (the exit status, what was cut
/// before) and its end (where the errors and the summary are).
pub fn cap_middle(text: String) -> String {
    if text.len() <= OUTPUT_CAP {
        return text;
    }
    let mut head = OUTPUT_CAP / 4;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (OUTPUT_CAP - head);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[output cut: {} bytes, showing the first {head} and the last {}]\n{}",
        &text[..head],
        text.len(),
        text.len() - tail,
        &text[tail..]
    )
}

fn args<T: for<'de> Deserialize<'de>>(call: &ToolCall) -> Result<T, ToolError> {
    let text = if call.arguments.trim().is_empty() {
        "{}"
    } else {
        &call.arguments
    };
    serde_json::from_str(text).map_err(|source| ToolError::BadArguments {
        tool: call.name.clone(),
        source,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    /// First line to return, from 1.
    start_line: Option<u32>,
    /// Last line to return, inclusive.
    end_line: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    #[serde(default)]
    path: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrepArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    old: String,
    new: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellArgs {
    command: String,
}

/// The file and shell tools of an internal agent.
#[derive(Clone)]
pub struct FileTools {
    root: Root,
    supervisor: Supervisor,
    /// Paths kept out of `read`, `list`, `grep`, `write` and `edit`
    /// (`exclude_files_pattern`; the shell is not covered).
    exclude: Option<Exclude>,
    /// How shell commands are confined.
    shell: Policy,
    /// Where to ask the person before writing a file other programs run
    /// in their own tree; `None`: refused with how to allow it.
    asker: Option<tokio::sync::mpsc::UnboundedSender<WriteQuestion>>,
}

/// quorum's question to the person: may the agent write `path`, a file
/// other programs run (`why`), in their own tree? The answer is `true`
/// for yes; a question dropped unanswered is a no.
pub struct WriteQuestion {
    /// As the agent named it.
    pub path: String,
    /// Where it lands, below the session directory.
    pub below: PathBuf,
    pub why: &'static str,
    /// What is there now, and what would be written (`None`: nothing to
    /// show).
    pub old: Option<String>,
    pub new: Option<String>,
    pub reply: tokio::sync::oneshot::Sender<bool>,
}

impl FileTools {
    /// Tools on `root`; shell commands are started by `supervisor`, under
    /// bubblewrap when it is installed, without the network.
    pub fn new(root: Root, supervisor: Supervisor) -> Self {
        Self {
            root,
            supervisor,
            exclude: None,
            shell: Policy {
                setting: "terminal_sandbox",
                ..Policy::default()
            },
            asker: None,
        }
    }

    /// Asks through `asker` before writing a file other programs run in
    /// the person's own tree (else such a write is refused).
    pub fn asking(mut self, asker: tokio::sync::mpsc::UnboundedSender<WriteQuestion>) -> Self {
        self.asker = Some(asker);
        self
    }

    /// Confines shell commands as `policy` says.
    pub fn with_shell(mut self, policy: Policy) -> Self {
        self.shell = policy;
        self
    }

    /// Keeps paths matching `exclude` out of what the tools read.
    pub fn excluding(mut self, exclude: Option<Exclude>) -> Self {
        self.exclude = exclude;
        self
    }

    /// Whether `path` (inside the root) is kept out.
    fn hidden(&self, path: &Path) -> bool {
        self.exclude
            .as_ref()
            .is_some_and(|e| self.root.excluded(path, e))
    }

    pub fn specs() -> Vec<ToolSpec> {
        let spec = |name: &str, description: &str, parameters: serde_json::Value| ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
        };
        let path =
            json!({"type": "string", "description": "a path relative to the session directory"});
        vec![
            spec(
                "read",
                "Read a text file, or some of its lines.",
                json!({"type": "object", "properties": {"path": path, "start_line": {"type": "integer", "minimum": 1}, "end_line": {"type": "integer", "minimum": 1}}, "required": ["path"]}),
            ),
            spec(
                "list",
                "List a directory (default: the session directory).",
                json!({"type": "object", "properties": {"path": path}}),
            ),
            spec(
                "grep",
                "Search files for a regular expression; prints path:line: text.",
                json!({"type": "object", "properties": {"pattern": {"type": "string"}, "path": path}, "required": ["pattern"]}),
            ),
            spec(
                "write",
                "Write a whole file, creating it (and its directories) if needed.",
                json!({"type": "object", "properties": {"path": path, "content": {"type": "string"}}, "required": ["path", "content"]}),
            ),
            spec(
                "edit",
                "Replace the one occurrence of `old` in a file with `new`.",
                json!({"type": "object", "properties": {"path": path, "old": {"type": "string"}, "new": {"type": "string"}}, "required": ["path", "old", "new"]}),
            ),
            spec(
                "shell",
                "Run a shell command in the session directory; returns its exit status and output.",
                json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
            ),
        ]
    }

    fn rel(&self, path: &Path) -> String {
        path.strip_prefix(self.root.path())
            .unwrap_or(path)
            .display()
            .to_string()
    }

    pub async fn run(
        &self,
        call: ToolCall,
        cancel: watch::Receiver<bool>,
    ) -> Result<String, ToolError> {
        if call.name == "shell" {
            let a: ShellArgs = args(&call)?;
            return shell(
                &a.command,
                self.root.path(),
                (&self.supervisor, &self.shell),
                cancel,
            )
            .await;
        }
        // File tools touch the disk: on a blocking thread, never an async
        // worker.
        let first = self.blocking(call.clone()).await;
        let Err(ToolError::Fs(FsError::Unasked { path, below, why })) = &first else {
            return first;
        };
        let Some(asker) = &self.asker else {
            return first;
        };
        let (old, new) = {
            let tools = self.clone();
            let (call, below) = (call.clone(), below.clone());
            tokio::task::spawn_blocking(move || tools.proposed(&call, &below))
                .await
                .unwrap_or((None, None))
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        let question = WriteQuestion {
            path: path.display().to_string(),
            below: below.clone(),
            why,
            old,
            new,
            reply,
        };
        if asker.send(question).is_err() || !answer.await.unwrap_or(false) {
            return Err(ToolError::Fs(FsError::Protected {
                path: path.clone(),
                why: format!("{why}, and you did not allow the agent to write it"),
            }));
        }
        let mut allowed = self.clone();
        allowed.root = self.root.with_consent(below);
        allowed.blocking(call).await
    }

    /// [`FileTools::file_tool`] on a blocking thread.
    async fn blocking(&self, call: ToolCall) -> Result<String, ToolError> {
        let tools = self.clone();
        let name = call.name.clone();
        tokio::task::spawn_blocking(move || tools.file_tool(call))
            .await
            .map_err(|e| ToolError::Failed(format!("the {name} tool stopped: {e}")))?
    }

    /// What `call` (a `write` or an `edit`) finds at `below` and would
    /// write there, to show the person who is asked.
    fn proposed(&self, call: &ToolCall, below: &Path) -> (Option<String>, Option<String>) {
        let old = self.root.read(below, None, None).ok();
        let new = match call.name.as_str() {
            "write" => args::<WriteArgs>(call).ok().map(|a| a.content),
            "edit" => args::<EditArgs>(call).ok().and_then(|a| {
                let text = old.as_ref()?;
                (text.matches(&a.old).count() == 1).then(|| text.replacen(&a.old, &a.new, 1))
            }),
            _ => None,
        };
        (old, new)
    }

    fn file_tool(&self, call: ToolCall) -> Result<String, ToolError> {
        let root = &self.root;
        match call.name.as_str() {
            "read" => {
                let a: ReadArgs = args(&call)?;
                let start = a.start_line.unwrap_or(1).max(1);
                let limit = a.end_line.map(|end| end.saturating_sub(start) + 1);
                root.check(Path::new(&a.path), self.exclude.as_ref())
                    .map_err(ToolError::Fs)?;
                root.read(Path::new(&a.path), Some(start), limit)
                    .map(cap)
                    .map_err(ToolError::Fs)
            }
            "list" => {
                let a: PathArgs = args(&call)?;
                let dir = root
                    .resolve_existing(Path::new(a.path.as_deref().unwrap_or(".")))
                    .map_err(ToolError::Fs)?;
                let mut entries: Vec<String> = std::fs::read_dir(&dir)
                    .map_err(|e| ToolError::Failed(format!("{}: {e}", self.rel(&dir))))?
                    .filter_map(Result::ok)
                    .filter(|e| !self.hidden(&e.path()))
                    .map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        if e.file_type().is_ok_and(|t| t.is_dir()) {
                            format!("{name}/")
                        } else {
                            name
                        }
                    })
                    .collect();
                entries.sort();
                Ok(cap(entries.join("\n")))
            }
            "grep" => {
                let a: GrepArgs = args(&call)?;
                let re = regex::Regex::new(&a.pattern)
                    .map_err(|e| ToolError::Failed(format!("bad pattern: {e}")))?;
                let start = root
                    .resolve_existing(Path::new(a.path.as_deref().unwrap_or(".")))
                    .map_err(ToolError::Fs)?;
                let mut out = Vec::new();
                if !self.hidden(&start) {
                    grep(&re, &start, root, self.exclude.as_ref(), &mut out);
                }
                let more = out.len() >= GREP_MATCHES;
                let mut text = out
                    .into_iter()
                    .map(|(p, n, l)| format!("{}:{n}: {l}", self.rel(&p)))
                    .collect::<Vec<_>>()
                    .join("\n");
                if more {
                    text.push_str(&format!("\n[stopped at {GREP_MATCHES} matches]"));
                }
                if text.is_empty() {
                    text = "no matches".into();
                }
                Ok(cap(text))
            }
            "write" => {
                let a: WriteArgs = args(&call)?;
                root.check(Path::new(&a.path), self.exclude.as_ref())
                    .and_then(|()| root.write(Path::new(&a.path), &a.content))
                    .map_err(ToolError::Fs)?;
                Ok(format!("wrote {} ({} bytes)", a.path, a.content.len()))
            }
            "edit" => {
                let a: EditArgs = args(&call)?;
                root.check(Path::new(&a.path), self.exclude.as_ref())
                    .map_err(ToolError::Fs)?;
                let text = root
                    .read(Path::new(&a.path), None, None)
                    .map_err(ToolError::Fs)?;
                match text.matches(&a.old).count() {
                    0 => Err(ToolError::Failed(format!(
                        "{}: `old` was not found",
                        a.path
                    ))),
                    1 => {
                        root.write(Path::new(&a.path), &text.replacen(&a.old, &a.new, 1))
                            .map_err(ToolError::Fs)?;
                        Ok(format!("edited {}", a.path))
                    }
                    n => Err(ToolError::Failed(format!(
                        "{}: `old` occurs {n} times; give more context so it is unique",
                        a.path
                    ))),
                }
            }
            other => Err(ToolError::Unknown(other.to_string())),
        }
    }
}

/// Searches `path` (a file, or a folder walked in name order) for `re`.
/// A folder's walk skips `.git` and whatever the project's `.gitignore`
/// files ignore (those of the folders walked and of the folders above
/// them, in a git repository or not), as git would; nothing else is
/// skipped by its name. Links are not followed; every file is read
/// through the root, so nothing outside it is read.
fn grep(
    re: &regex::Regex,
    path: &Path,
    root: &Root,
    exclude: Option<&Exclude>,
    out: &mut Vec<(PathBuf, usize, String)>,
) {
    // Never follow a path out of the root.
    let Ok(real) = root.resolve_existing(path) else {
        return;
    };
    let walk = ignore::WalkBuilder::new(&real)
        .standard_filters(false)
        .git_ignore(true)
        .git_exclude(true)
        .require_git(false)
        .parents(true)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| !(e.file_name() == ".git" && e.file_type().is_some_and(|t| t.is_dir())))
        .build();
    for entry in walk.flatten() {
        if out.len() >= GREP_MATCHES {
            return;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let file = entry.path();
        if exclude.is_some_and(|x| root.excluded(file, x)) {
            continue;
        }
        // Only regular UTF-8 files within the read limit: a FIFO or a
        // device is skipped, never waited on.
        let Ok(text) = root.read(file, None, None) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if re.is_match(line) {
                out.push((file.to_path_buf(), i + 1, line.chars().take(300).collect()));
                if out.len() >= GREP_MATCHES {
                    return;
                }
            }
        }
    }
}

/// The note a shell result carries when no sandbox keeps its writes in.
pub const UNSANDBOXED: &str = "[not sandboxed: bubblewrap (bwrap) is not installed, so this command could write outside the session directory]";
/// The same when the config turned the sandbox off.
pub const UNSANDBOXED_BY_CONFIG: &str = "[not sandboxed: terminal_sandbox = \"none\" under [internal], so this command could write outside the session directory]";

/// Runs `sh -c command` in `dir`, confined as `policy` says (under
/// bubblewrap when it is installed: the file system read-only except `dir`
/// and a private `/tmp`, no network unless allowed; see `runtime::sandbox`,
/// shared with ACP agents' terminals), in a process group of its own. When
/// the shell ends, is cancelled, or has run for a day, its whole group is
/// terminated: nothing it started in the background outlives the call (nor
/// keeps its output pipes open).
async fn shell(
    command: &str,
    dir: &Path,
    (supervisor, policy): (&Supervisor, &Policy),
    mut cancel: watch::Receiver<bool>,
) -> Result<String, ToolError> {
    let Confined {
        mut cmd,
        sandboxed,
        weaker,
    } = sandbox::command(
        "sh",
        ["-c", command],
        (dir, dir),
        policy,
        sandbox::Env::Command(&[]),
    )
    .map_err(|e| ToolError::Failed(e.to_string()))?;
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let (mut child, group) = supervisor
        .spawn(cmd, "shell")
        .map_err(|e| ToolError::Failed(format!("cannot run sh: {e}")))?;
    let stdout = Collector::start(child.stdout.take());
    let stderr = Collector::start(child.stderr.take());
    let ended = tokio::select! {
        status = child.wait() => Ok(status),
        _ = super::cancelled(&mut cancel) => Err(ToolError::Cancelled),
        _ = tokio::time::sleep(Duration::from_secs(24 * 3600)) => {
            Err(ToolError::Failed("ran for a day; stopped".to_string()))
        }
    };
    supervisor.terminate(&group, supervisor::GRACE).await;
    let status = ended?.map_err(|e| ToolError::Failed(format!("cannot run sh: {e}")))?;
    let (stdout, stderr) = (stdout.finish().await, stderr.finish().await);
    let stderr = (!stderr.text.is_empty() || stderr.cut > 0).then(|| stderr.shown());
    let mut text = format!(
        "{}exit status: {}\n",
        match (sandboxed, policy.mode) {
            (true, _) => weaker.map(|w| format!("[{w}]\n")).unwrap_or_default(),
            (false, Some(Sandbox::None)) => format!("{UNSANDBOXED_BY_CONFIG}\n"),
            (false, _) => format!("{UNSANDBOXED}\n"),
        },
        status
            .code()
            .map_or("killed".to_string(), |c| c.to_string())
    );
    text.push_str(&stdout.shown());
    if let Some(stderr) = stderr {
        text.push_str("\n[stderr]\n");
        text.push_str(&stderr);
    }
    if sandboxed && !policy.network && !status.success() {
        let setting = "terminal_network = true under [internal]";
        if let Some(note) = sandbox::no_network_note(&text, setting) {
            text.push('\n');
            text.push_str(&note);
            text.push('\n');
        }
    }
    Ok(cap_middle(text))
}

/// Reads a pipe to its end on a task of its own, keeping the newest
/// [`MAX_OUTPUT`] bytes of what it read (a command may print without end:
/// `yes`) and counting the rest.
struct Collector {
    bytes: Arc<Mutex<Tail>>,
    task: tokio::task::JoinHandle<()>,
}

/// What a [`Collector`] kept: the newest output as text, and how many
/// bytes came before it.
struct Kept {
    text: String,
    cut: u64,
}

impl Kept {
    /// The text, after a line that says what was cut, if anything was.
    fn shown(self) -> String {
        if self.cut == 0 {
            return self.text;
        }
        format!(
            "[quorum: the first {} of output were cut; the last {} follow]\n{}",
            approx_size(self.cut),
            size(MAX_OUTPUT as u64),
            self.text
        )
    }
}

impl Collector {
    fn start(pipe: Option<impl tokio::io::AsyncRead + Unpin + Send + 'static>) -> Self {
        use tokio::io::AsyncReadExt;
        let bytes = Arc::new(Mutex::new(Tail::new(MAX_OUTPUT)));
        let keep = bytes.clone();
        let task = tokio::spawn(async move {
            let Some(mut pipe) = pipe else { return };
            let mut buf = vec![0; 16 * 1024];
            while let Ok(n @ 1..) = pipe.read(&mut buf).await {
                lock(&keep).push(&buf[..n]);
            }
        });
        Self { bytes, task }
    }

    /// What was kept, once the pipe ends or [`PIPE_GRACE`] has passed.
    async fn finish(mut self) -> Kept {
        if tokio::time::timeout(PIPE_GRACE, &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
        let tail = std::mem::replace(&mut *lock(&self.bytes), Tail::new(0));
        let (text, cut) = tail.into_text();
        Kept { text, cut }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ToolSet for FileTools {
    fn specs(&self) -> Vec<ToolSpec> {
        Self::specs()
    }

    fn call(
        &self,
        call: ToolCall,
        cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'static, Result<String, ToolError>> {
        let this = self.clone();
        async move { this.run(call, cancel).await }.boxed()
    }
}

/// A tool set made of others, tried in order.
pub struct Union(pub Vec<Arc<dyn ToolSet>>);

impl ToolSet for Union {
    fn specs(&self) -> Vec<ToolSpec> {
        self.0.iter().flat_map(|t| t.specs()).collect()
    }

    fn call(
        &self,
        call: ToolCall,
        cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'static, Result<String, ToolError>> {
        for set in &self.0 {
            if set.specs().iter().any(|s| s.name == call.name) {
                return set.call(call, cancel);
            }
        }
        let name = call.name.clone();
        async move { Err(ToolError::Unknown(name)) }.boxed()
    }

    fn forget(&self) {
        for set in &self.0 {
            set.forget();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments: args.to_string(),
        }
    }

    fn tools() -> (
        tempfile::TempDir,
        FileTools,
        watch::Sender<bool>,
        watch::Receiver<bool>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(
            dir.path().join("src/lib.rs"),
            "fn main() {}\nfn helper() {}\n",
        )
        .unwrap();
        let (tx, rx) = watch::channel(false);
        let tools = FileTools::new(Root::new(dir.path()).unwrap(), Supervisor::new());
        (dir, tools, tx, rx)
    }

    /// The internal agent's `write`, `edit`, `read` and `grep` go through
    /// the same walk: no write out through a dangling link, and a FIFO is
    /// skipped, never waited on (on a multi-thread runtime, as quorum runs).
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn dangling_links_and_fifos_in_the_file_tools() {
        let (dir, t, _tx, rx) = tools();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("planted.txt");
        std::os::unix::fs::symlink(&target, dir.path().join("link")).unwrap();
        let e = t
            .run(
                call("write", json!({"path": "link", "content": "x"})),
                rx.clone(),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("link: outside the session directory"), "{e}");
        let e = t
            .run(
                call("edit", json!({"path": "link", "old": "a", "new": "b"})),
                rx.clone(),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("link"), "{e}");
        assert!(!target.exists());
        nix::unistd::mkfifo(&dir.path().join("src/fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = t
            .run(call("read", json!({"path": "src/fifo"})), rx.clone())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file (a FIFO)"), "{e}");
        assert_eq!(
            t.run(call("grep", json!({"pattern": "helper"})), rx.clone())
                .await
                .unwrap(),
            "src/lib.rs:2: fn helper() {}"
        );
    }

    /// `grep` skips what the project's `.gitignore` ignores (here a
    /// `build/` folder and `*.log` files, and a nested `.gitignore`), and
    /// searches a folder that merely has a special name (`.tools`, as in
    /// this repository) when the project does not ignore it.
    #[tokio::test]
    async fn grep_skips_what_gitignore_ignores_and_nothing_else() {
        let (dir, t, _tx, rx) = tools();
        let p = dir.path();
        std::fs::write(p.join(".gitignore"), "build/\n*.log\n").unwrap();
        for d in ["build", ".tools", "src/gen"] {
            std::fs::create_dir_all(p.join(d)).unwrap();
        }
        std::fs::write(p.join("src/gen/.gitignore"), "out.rs\n").unwrap();
        for f in [
            "build/x.rs",
            "run.log",
            ".tools/y.rs",
            "src/gen/out.rs",
            "src/gen/kept.rs",
        ] {
            std::fs::write(p.join(f), "needle\n").unwrap();
        }
        let found = t
            .run(call("grep", json!({"pattern": "needle"})), rx.clone())
            .await
            .unwrap();
        assert_eq!(
            found, ".tools/y.rs:1: needle\nsrc/gen/kept.rs:1: needle",
            "{found}"
        );
        // From a folder below, the root's rules still hold.
        std::fs::write(p.join("src/gen/trace.log"), "needle\n").unwrap();
        let found = t
            .run(
                call("grep", json!({"pattern": "needle", "path": "src"})),
                rx.clone(),
            )
            .await
            .unwrap();
        assert_eq!(found, "src/gen/kept.rs:1: needle", "{found}");
    }

    /// `edit` and `write` replace a file that is a hard link to one
    /// outside; the outside file is never written through.
    #[tokio::test]
    async fn edit_and_write_never_write_through_a_hard_link() {
        let (dir, t, _tx, rx) = tools();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "alpha\n").unwrap();
        std::fs::hard_link(&secret, dir.path().join("linked.txt")).unwrap();
        t.run(
            call(
                "edit",
                json!({"path": "linked.txt", "old": "alpha", "new": "beta"}),
            ),
            rx.clone(),
        )
        .await
        .unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "alpha\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("linked.txt")).unwrap(),
            "beta\n"
        );
        std::fs::remove_file(dir.path().join("linked.txt")).unwrap();
        std::fs::hard_link(&secret, dir.path().join("linked.txt")).unwrap();
        t.run(
            call("write", json!({"path": "linked.txt", "content": "gamma"})),
            rx.clone(),
        )
        .await
        .unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "alpha\n");
    }

    #[tokio::test]
    async fn read_list_grep_write_edit() {
        let (dir, t, _tx, rx) = tools();
        assert_eq!(
            t.run(
                call(
                    "read",
                    json!({"path": "a.txt", "start_line": 2, "end_line": 3})
                ),
                rx.clone()
            )
            .await
            .unwrap(),
            "two\nthree\n"
        );
        assert_eq!(
            t.run(call("list", json!({})), rx.clone()).await.unwrap(),
            "a.txt\nsrc/"
        );
        assert_eq!(
            t.run(
                call("grep", json!({"pattern": "fn \\w+\\(", "path": "src"})),
                rx.clone()
            )
            .await
            .unwrap(),
            "src/lib.rs:1: fn main() {}\nsrc/lib.rs:2: fn helper() {}"
        );
        t.run(
            call("write", json!({"path": "new/b.txt", "content": "hello"})),
            rx.clone(),
        )
        .await
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("new/b.txt")).unwrap(),
            "hello"
        );
        t.run(
            call("edit", json!({"path": "a.txt", "old": "two", "new": "2"})),
            rx.clone(),
        )
        .await
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "one\n2\nthree\n"
        );
        let e = t
            .run(
                call(
                    "edit",
                    json!({"path": "src/lib.rs", "old": "fn", "new": "x"}),
                ),
                rx.clone(),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("occurs 2 times"), "{e}");
    }

    #[tokio::test]
    async fn excluded_files_stay_out_of_read_list_grep_and_edit() {
        let (dir, t, _tx, rx) = tools();
        std::fs::write(dir.path().join("secret.txt"), "the password is swordfish\n").unwrap();
        std::fs::create_dir(dir.path().join("private")).unwrap();
        std::fs::write(dir.path().join("private/notes.md"), "swordfish again\n").unwrap();
        let t = t.excluding(Some(Exclude::new("secret|^private").unwrap()));
        let e = t
            .run(call("read", json!({"path": "secret.txt"})), rx.clone())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("exclude_files_pattern \"secret|^private\""),
            "{e}"
        );
        let e = t
            .run(
                call(
                    "edit",
                    json!({"path": "secret.txt", "old": "pass", "new": "x"}),
                ),
                rx.clone(),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("exclude_files_pattern"), "{e}");
        assert_eq!(
            t.run(call("list", json!({})), rx.clone()).await.unwrap(),
            "a.txt\nsrc/"
        );
        assert_eq!(
            t.run(call("grep", json!({"pattern": "swordfish"})), rx.clone())
                .await
                .unwrap(),
            "no matches"
        );
        assert_eq!(
            t.run(
                call("grep", json!({"pattern": "swordfish", "path": "private"})),
                rx.clone()
            )
            .await
            .unwrap(),
            "no matches"
        );
        // Files that do not match are read as before.
        assert_eq!(
            t.run(call("read", json!({"path": "a.txt"})), rx.clone())
                .await
                .unwrap(),
            "one\ntwo\nthree\n"
        );
    }

    #[tokio::test]
    async fn nothing_outside_the_root() {
        let (_dir, t, _tx, rx) = tools();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("s.txt");
        std::fs::write(&secret, "secret").unwrap();
        let e = t
            .run(call("read", json!({"path": secret})), rx.clone())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the session directory"), "{e}");
        let e = t
            .run(
                call("write", json!({"path": "../x.txt", "content": "x"})),
                rx.clone(),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside"), "{e}");
        let e = t
            .run(call("list", json!({"path": ".."})), rx.clone())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside"), "{e}");
        let e = t
            .run(call("read", json!({"paht": "a.txt"})), rx.clone())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bad arguments for read") && e.contains("paht"),
            "{e}"
        );
    }

    /// The shell's writes stay in the session directory: the outside
    /// target is in a directory that exists outside the sandbox too (not
    /// under `/tmp`, which the sandbox replaces), so only confinement keeps
    /// the write out.
    #[tokio::test]
    async fn shell_writes_stay_inside_when_sandboxed() {
        assert!(
            crate::runtime::path::locate("bwrap").is_some(),
            "the sandbox tests need bubblewrap: apt-get install bubblewrap"
        );
        let (dir, t, _tx, rx) = tools();
        let outside = tempfile::tempdir_in("/var/tmp").unwrap();
        let target = outside.path().join("planted.txt");
        let command = format!("echo in > inside.txt; echo out > {}", target.display());
        let out = t
            .run(call("shell", json!({"command": command})), rx.clone())
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("inside.txt")).unwrap(),
            "in\n"
        );
        assert!(!target.exists(), "a sandboxed shell wrote outside: {out}");
        assert!(out.contains("Read-only file system"), "{out}");
        // Unsandboxed by the config, the same command writes there and says so.
        let t = t.with_shell(Policy {
            mode: Some(Sandbox::None),
            ..Policy::default()
        });
        let out = t
            .run(call("shell", json!({"command": command})), rx.clone())
            .await
            .unwrap();
        assert!(out.starts_with(UNSANDBOXED_BY_CONFIG), "{out}");
        assert!(target.exists(), "{out}");
    }

    /// The shell's commands have no network by default: a connection to a
    /// listener on loopback outside fails, and the result says why; with
    /// `terminal_network = true` it goes through.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shell_commands_have_no_network_unless_allowed() {
        assert!(
            crate::runtime::path::locate("bwrap").is_some(),
            "the sandbox tests need bubblewrap: apt-get install bubblewrap"
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (_dir, t, _tx, rx) = tools();
        // bash's /dev/tcp would do, but sh may be dash: python3 connects.
        let command = format!(
            "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2); print(\"connected\")'"
        );
        let out = t
            .run(call("shell", json!({"command": command})), rx.clone())
            .await
            .unwrap();
        assert!(!out.contains("connected\n"), "{out}");
        assert!(out.contains("Connection refused"), "{out}");
        assert!(
            out.contains("[quorum: this command ran without network access")
                && out.contains("terminal_network = true under [internal]"),
            "{out}"
        );
        let t = t.with_shell(Policy {
            network: true,
            ..Policy::default()
        });
        let out = t
            .run(call("shell", json!({"command": command})), rx.clone())
            .await
            .unwrap();
        assert!(out.contains("connected\n"), "{out}");
    }

    #[tokio::test]
    async fn shell_runs_in_the_root_capped_and_cancellable() {
        let (dir, t, tx, rx) = tools();
        let out = t
            .run(
                call("shell", json!({"command": "pwd; echo err >&2; exit 3"})),
                rx.clone(),
            )
            .await
            .unwrap();
        let out = out.trim_start_matches(&format!("{UNSANDBOXED}\n"));
        let root = dir.path().canonicalize().unwrap();
        assert!(
            out.starts_with(&format!("exit status: 3\n{}\n", root.display())),
            "{out}"
        );
        assert!(out.contains("[stderr]\nerr"), "{out}");
        let big = t
            .run(
                call(
                    "shell",
                    json!({"command": "head -c 100000 /dev/zero | tr '\\0' x"}),
                ),
                rx.clone(),
            )
            .await
            .unwrap();
        assert!(
            big.len() < OUTPUT_CAP + 200 && big.contains("[output cut: "),
            "{}",
            big.len()
        );
        let started = std::time::Instant::now();
        let run = t.run(call("shell", json!({"command": "sleep 30"})), rx.clone());
        tokio::pin!(run);
        tokio::select! {
            _ = &mut run => panic!("sleep 30 returned early"),
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        tx.send(true).unwrap();
        assert_eq!(run.await.unwrap_err().to_string(), "cancelled");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    /// Live (not zombie) processes whose command line holds `marker`, as
    /// seen in /proc (also those in a sandbox's pid namespace).
    #[cfg(target_os = "linux")]
    fn live_with(marker: &str) -> Vec<u32> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
                found.push(pid);
            }
        }
        found
    }

    /// A `sleep` duration no other process uses: it marks the sleep.
    #[cfg(target_os = "linux")]
    fn marker() -> String {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        format!(
            "1000.{}{:03}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        )
    }

    /// Waits (at most 10 s) until `done` holds.
    #[cfg(target_os = "linux")]
    async fn until(mut done: impl FnMut() -> bool) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            if std::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Kills what a failed test leaves behind.
    #[cfg(target_os = "linux")]
    struct Sweep(String);

    #[cfg(target_os = "linux")]
    impl Drop for Sweep {
        fn drop(&mut self) {
            for pid in live_with(&self.0) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_cancelled_shell_command_leaves_no_background_process() {
        let (_dir, t, tx, rx) = tools();
        let marker = marker();
        let _sweep = Sweep(marker.clone());
        let command = format!("sleep {marker} & echo $!; wait");
        let run = t.run(call("shell", json!({"command": command})), rx);
        tokio::pin!(run);
        let started = tokio::select! {
            r = &mut run => panic!("the command returned early: {r:?}"),
            started = until(|| !live_with(&marker).is_empty()) => started,
        };
        assert!(started, "the background sleep never started");
        tx.send(true).unwrap();
        let result = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .expect("the cancelled command returns");
        assert_eq!(result.unwrap_err().to_string(), "cancelled");
        assert!(
            until(|| live_with(&marker).is_empty()).await,
            "the background sleep outlived the cancelled command: {:?}",
            live_with(&marker)
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_finished_shell_command_leaves_no_background_process() {
        let (_dir, t, _tx, rx) = tools();
        let marker = marker();
        let _sweep = Sweep(marker.clone());
        let command = format!("sleep {marker} & echo $!");
        // The sleep holds the output pipe: the call must not wait for it.
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            t.run(call("shell", json!({"command": command})), rx),
        )
        .await
        .expect("the command returns when the shell exits")
        .unwrap();
        let out = out.trim_start_matches(&format!("{UNSANDBOXED}\n"));
        assert!(out.starts_with("exit status: 0\n"), "{out}");
        let pid = out.lines().nth(1).unwrap_or_default();
        assert!(
            pid.trim().parse::<u32>().is_ok(),
            "the sleep started: {out}"
        );
        assert!(
            until(|| live_with(&marker).is_empty()).await,
            "the background sleep outlived its command: {:?}",
            live_with(&marker)
        );
    }

    /// The `yes` probe, ended: a command that prints far more than quorum
    /// keeps. Its first bytes are let go as they come, and the result says
    /// how many (the shell used to keep all of it until the command ended:
    /// `yes` alone grew quorum by gigabytes).
    #[tokio::test]
    async fn a_command_printing_more_than_the_cap_says_what_was_cut() {
        let (_dir, t, _tx, rx) = tools();
        let total = 30_000_008;
        let out = t
            .run(
                call(
                    "shell",
                    json!({"command": "yes | head -c 30000000; echo the end"}),
                ),
                rx,
            )
            .await
            .unwrap();
        let out = out.trim_start_matches(&format!("{UNSANDBOXED}\n"));
        let cut = total - MAX_OUTPUT as u64;
        let note = format!(
            "exit status: 0\n[quorum: the first {} of output were cut; the last {} follow]\ny\ny\n",
            approx_size(cut),
            size(MAX_OUTPUT as u64)
        );
        assert!(out.starts_with(&note), "{}", &out[..200]);
        assert!(out.len() < OUTPUT_CAP + 200, "{}", out.len());
        // The model sees the command's end too, where its errors are.
        assert!(out.ends_with("y\nthe end\n"), "{}", &out[out.len() - 200..]);
        assert!(out.contains("[output cut: "), "{out}");
    }

    /// What a pipe's reader keeps: at most the last [`MAX_OUTPUT`] bytes,
    /// and how many came before them.
    #[tokio::test]
    async fn a_collector_keeps_the_last_bytes_only() {
        use tokio::io::AsyncWriteExt;
        let (mut w, r) = tokio::io::duplex(64 * 1024);
        let collector = Collector::start(Some(r));
        let total = 3 * MAX_OUTPUT + 5;
        let writer = tokio::spawn(async move {
            let block = vec![b'a'; 1 << 20];
            let mut left = total - 3;
            while left > 0 {
                let n = left.min(block.len());
                w.write_all(&block[..n]).await.unwrap();
                left -= n;
            }
            w.write_all(b"end").await.unwrap();
        });
        writer.await.unwrap();
        let kept = collector.finish().await;
        assert_eq!(kept.text.len(), MAX_OUTPUT);
        assert!(kept.text.ends_with("aaend"));
        assert_eq!(kept.cut, (total - MAX_OUTPUT) as u64);
    }
}
