//! A session's private MCP endpoint, as a conductor agent reaches it and
//! as another local process cannot: its socket is the owner's alone, a
//! client without the session's secret (or with a wrong one) is dropped
//! before it can list or call a tool, and `quorum mcp-connect` started
//! with the spec's environment reaches the session's tools (its calls are
//! the session's boxes). The endpoint ends with its value.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use quorum::acp::mcp::McpTransport;
use quorum::acp::registry::Registry;
use quorum::confine::fsroot::Root;
use quorum::engine::{Session, SessionConfig};
use quorum::event::Event;
use quorum::serve::endpoint::{CONNECT_COMMAND, SECRET_ENV, SOCKET_ENV};
use quorum::serve::{Endpoint, McpOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
const CALL: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"subagent","arguments":{"agent":"fake","input":"echo through the socket"}}}"#;

fn session(
    dir: &std::path::Path,
) -> (
    Session,
    tokio::sync::mpsc::UnboundedReceiver<quorum::event::Stamped>,
) {
    let config = dir.join("q.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.fake]\ncommand = {:?}\n",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    let registry = Registry::load_only(&config).unwrap();
    let config = SessionConfig::new(registry, Root::new(dir).unwrap());
    Session::start(config, Instant::now()).unwrap()
}

/// What a raw client of the socket gets back for `lines` (sent after
/// `hello`, if any) before the server closes or 5 s pass.
async fn raw(socket: &std::path::Path, hello: Option<&str>, lines: &[&str]) -> String {
    let mut stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    if let Some(hello) = hello {
        stream
            .write_all(format!("{hello}\n").as_bytes())
            .await
            .unwrap();
    }
    for line in lines {
        // A dropped client may find the socket closed meanwhile.
        let _ = stream.write_all(format!("{line}\n").as_bytes()).await;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => {
                got.extend_from_slice(&buf[..n]);
                if String::from_utf8_lossy(&got).contains("\"id\":2") && got.ends_with(b"\n") {
                    break;
                }
            }
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// `quorum mcp-connect` with `env`, fed `lines` then its stdin closed:
/// what it printed (killed, and the test failed, past 30 s).
async fn connect(env: &[(&str, &str)], lines: &[&str], wait_for: &str) -> String {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_quorum"))
        .arg(CONNECT_COMMAND)
        .env_remove(SOCKET_ENV)
        .env_remove(SECRET_ENV)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    for line in lines {
        let _ = stdin.write_all(format!("{line}\n").as_bytes()).await;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    // Read until the awaited answer (or the end), then close stdin.
    loop {
        match tokio::time::timeout_at(deadline, stdout.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Err(_) => panic!("mcp-connect is wedged: {}", String::from_utf8_lossy(&got)),
            Ok(Ok(n)) => {
                got.extend_from_slice(&buf[..n]);
                if String::from_utf8_lossy(&got).contains(wait_for) && got.ends_with(b"\n") {
                    break;
                }
            }
        }
    }
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("mcp-connect ends once its stdin closes")
        .unwrap();
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err).await;
    format!("{}{}status: {status}", String::from_utf8_lossy(&got), err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_client_with_the_sessions_secret_reaches_its_tools() {
    let dir = tempfile::tempdir().unwrap();
    let (session, mut events) = session(dir.path());
    let endpoint = Endpoint::for_session(&session, McpOptions::default()).unwrap();
    let socket = endpoint.socket().to_path_buf();

    // The socket is its owner's alone, in a directory of its own.
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(socket.parent().unwrap()), 0o700);
    assert_eq!(mode(&socket), 0o600);
    assert_eq!(endpoint.secret().len(), 64);

    // What an agent is told to start: quorum itself, the socket and the
    // secret in its environment, none of it on its command line.
    let spec = endpoint.server_spec().unwrap();
    assert_eq!(spec.name, "quorum");
    let McpTransport::Stdio { command, args, env } = &spec.transport else {
        panic!("{spec:?}")
    };
    assert_eq!(
        std::path::PathBuf::from(command),
        std::env::current_exe().unwrap()
    );
    assert_eq!(args, &["mcp-connect"]);
    assert_eq!(env[SOCKET_ENV], socket.to_str().unwrap());
    assert_eq!(env[SECRET_ENV], endpoint.secret());
    assert!(!args.iter().any(|a| a.contains(endpoint.secret())));
    assert!(matches!(
        endpoint.mcp_server().unwrap(),
        agent_client_protocol::v1::schema::McpServer::Stdio(_)
    ));

    // Without the secret, with a wrong one, with one cut short: dropped,
    // nothing answered.
    let wrong = "0".repeat(64);
    let short = &endpoint.secret()[..63];
    for hello in [None, Some(wrong.as_str()), Some(short)] {
        let got = raw(&socket, hello, &[INITIALIZE, INITIALIZED, LIST]).await;
        assert_eq!(got, "", "{hello:?} got an answer");
    }
    // Another process with a wrong secret: the same.
    let socket_str = socket.to_str().unwrap();
    let got = connect(
        &[(SOCKET_ENV, socket_str), (SECRET_ENV, &wrong)],
        &[INITIALIZE, INITIALIZED, LIST],
        "\"id\":2",
    )
    .await;
    assert!(
        !got.contains("subagent") && !got.contains("serverInfo"),
        "{got}"
    );
    // And one without any: it says what it needs.
    let got = connect(&[], &[INITIALIZE], "\"id\":1").await;
    assert!(got.contains("QUORUM_MCP_SOCKET is not set"), "{got}");

    // With it, directly: the tools.
    let got = raw(
        &socket,
        Some(endpoint.secret()),
        &[INITIALIZE, INITIALIZED, LIST],
    )
    .await;
    assert!(got.contains("\"name\":\"subagent\""), "{got}");
    assert!(got.contains("\"name\":\"subagent_status\""), "{got}");

    // Through `quorum mcp-connect`, as an agent starts it: a call runs on
    // the session, drawn as one of its boxes.
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let got = connect(&env, &[INITIALIZE, INITIALIZED, CALL], "\"id\":3").await;
    assert!(
        got.contains(r#"{\"output\":\"through the socket\",\"stop_reason\":\"end_turn\"}"#),
        "{got}"
    );
    let mut boxes = Vec::new();
    while let Ok(stamped) = events.try_recv() {
        if let Event::SubagentStarted { input, .. } = stamped.event {
            boxes.push(input);
        }
    }
    assert_eq!(boxes, ["echo through the socket"]);

    // The endpoint ends with the session: its socket and directory go.
    drop(endpoint);
    assert!(!socket.exists());
    assert!(!socket.parent().unwrap().exists());
    assert!(tokio::net::UnixStream::connect(&socket).await.is_err());
    session.shutdown();
}
