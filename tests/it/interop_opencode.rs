//! Interop with a second real ACP agent: opencode (npm `opencode-ai`),
//! offline, its model a loopback OpenAI-compatible server that this test
//! runs (it answers `echo: <the last user message>`).
//! `scripts/install-opencode.sh` installs opencode into `.tools/` the first
//! time; a failed install fails the test.

use crate::common;

use tokio::io::AsyncWriteExt;

/// The text of the last user message of a chat-completions request.
fn last_user_text(body: &serde_json::Value) -> String {
    let Some(messages) = body["messages"].as_array() else {
        return String::new();
    };
    let Some(user) = messages.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    match &user["content"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// A minimal OpenAI-compatible server on 127.0.0.1: streamed (or plain)
/// chat completions that echo, and a model list.
async fn serve(listener: tokio::net::TcpListener) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            let Some((head, body)) = common::models::read_request(&mut sock).await else {
                return;
            };
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let response = if head.starts_with("GET") {
                let json = r#"{"object":"list","data":[{"id":"echo-model","object":"model"}]}"#;
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}",
                    json.len()
                )
            } else {
                let text = format!("echo: {}", last_user_text(&body));
                if body["stream"] == true {
                    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
                        serde_json::json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "echo-model",
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                    };
                    let mut sse = String::new();
                    sse.push_str(&format!(
                        "data: {}\n\n",
                        chunk(
                            serde_json::json!({"role": "assistant", "content": text}),
                            serde_json::Value::Null
                        )
                    ));
                    sse.push_str(&format!(
                        "data: {}\n\n",
                        chunk(serde_json::json!({}), "stop".into())
                    ));
                    sse.push_str("data: [DONE]\n\n");
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{sse}"
                    )
                } else {
                    let json = serde_json::json!({"id": "c", "object": "chat.completion", "created": 0, "model": "echo-model",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
                    .to_string();
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}",
                        json.len()
                    )
                }
            };
            let _ = sock.write_all(response.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_answers_and_resumes_its_session() {
    let opencode = tokio::task::spawn_blocking(|| common::install("install-opencode.sh"))
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(serve(listener));

    let work = tempfile::tempdir().unwrap();
    let session = work.path().join("session");
    let home = work.path().join("home");
    std::fs::create_dir_all(&session).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let oc_config = work.path().join("opencode.json");
    std::fs::write(
        &oc_config,
        serde_json::json!({
            "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "Local echo",
                "options": {"baseURL": format!("http://127.0.0.1:{port}/v1"), "apiKey": "dummy"},
                "models": {"echo-model": {"name": "Echo model"}}}},
            "model": "local/echo-model",
            "small_model": "local/echo-model",
            "autoupdate": false,
            "share": "disabled"
        })
        .to_string(),
    )
    .unwrap();
    let config = work.path().join("quorum.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.opencode]\ncommand = {:?}\nargs = [\"acp\"]\nenv = {{ OPENCODE_CONFIG = {:?}, HOME = {:?}, OPENCODE_DISABLE_MODELS_FETCH = \"1\", OPENCODE_DISABLE_AUTOUPDATE = \"1\", OPENCODE_DISABLE_LSP_DOWNLOAD = \"1\", OPENCODE_DISABLE_SHARE = \"1\" }}\n",
            opencode.display().to_string(),
            oc_config.display().to_string(),
            home.display().to_string()
        ),
    )
    .unwrap();
    let mut cmd = common::quorum_async(&home);
    cmd.arg("--config")
        .arg(&config)
        .args(["call", "--agent", "opencode", "--json", "--cwd"])
        .arg(&session)
        .args(["--input", "hello from quorum", "--input", "and again"])
        .kill_on_drop(true);
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output())
        .await
        .expect("quorum call with opencode ends within two minutes")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let left = common::models::leftovers(&home);
    assert!(
        left.is_empty(),
        "still running after quorum exited: {left:?}; stderr: {stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let results: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(results.len(), 2, "{stderr}");
    assert_eq!(results[0]["output"], "echo: hello from quorum", "{stderr}");
    assert_eq!(results[0]["session"], "fresh");
    assert_eq!(results[1]["output"], "echo: and again");
    // Still open on opencode's connection: prompted with no resume.
    assert_eq!(results[1]["session"], "continued");
    assert_eq!(results[1]["session_id"], results[0]["session_id"]);
}
