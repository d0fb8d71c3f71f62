//! What the HTTP providers share: the client, the retry loop, error
//! statuses, and the driver that turns a streamed SSE body into [`Delta`]s.
//!
//! A request is retried (at most [`RetryPolicy::max_attempts`] times in
//! all) on 429, 500, 502, 503, 504 and 529, on a connection error, and on a
//! stream that fails before it said anything; each retry is announced with
//! a [`Delta::Retry`] before the wait. The wait honours `retry-after-ms` and
//! `retry-after` (seconds or an HTTP date), else doubles from
//! [`RetryPolicy::base_delay`].

use std::future::Future;
use std::time::{Duration, SystemTime};

use futures::channel::mpsc;
use futures::stream::{self, BoxStream, StreamExt};
use futures::{FutureExt, SinkExt};

use super::sse::{SseEvent, SseParser};
use super::{Delta, LlmError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first one included.
    pub max_attempts: u32,
    /// The first wait when the server does not say; doubled each retry.
    pub base_delay: Duration,
    /// The longest wait of the doubling, and the longest `retry-after`
    /// honoured: a server asking for more gets its error reported now.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(1000),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `failed + 1` when the server named none.
    pub fn backoff(&self, failed: u32) -> Duration {
        let factor = 1u32 << failed.saturating_sub(1).min(20);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// The client for model requests: rustls, bounded connect and idle waits.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        // Between two reads of the body, not the whole answer: a local
        // model on a small machine may think long before its first token.
        .read_timeout(Duration::from_secs(600))
        .user_agent(concat!("quorum/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

/// Turns SSE events of one provider into deltas.
pub trait EventDecoder: Send + 'static {
    /// The deltas that `event` brings. A [`Delta::Finish`] among them ends
    /// the stream.
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) -> Result<(), LlmError>;
    /// The body ended cleanly before a [`Delta::Finish`]: the last deltas,
    /// ending with one, or [`LlmError::Cut`].
    fn end(&mut self, out: &mut Vec<Delta>) -> Result<(), LlmError> {
        let _ = out;
        Err(LlmError::Cut)
    }
}

/// An SSE parser and a provider's decoder: body bytes in, deltas out.
pub struct StreamDecoder<D> {
    sse: SseParser,
    inner: D,
    finished: bool,
    /// An event failed after others in the same bytes made deltas: those
    /// went out first, the error waits for [`Self::take_error`].
    failed: Option<LlmError>,
}

impl<D: EventDecoder> StreamDecoder<D> {
    pub fn new(inner: D) -> Self {
        Self {
            sse: SseParser::new(),
            inner,
            finished: false,
            failed: None,
        }
    }

    /// A [`Delta::Finish`] was produced: nothing more is read.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The deltas that these body bytes complete. When an event fails
    /// after others in the same bytes made deltas, those deltas come back
    /// and the error is kept for [`Self::take_error`] (or the next call):
    /// what a consumer sees does not depend on where the network cut the
    /// body.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Delta>, LlmError> {
        if let Some(e) = self.take_error() {
            return Err(e);
        }
        let mut out = Vec::new();
        for event in self.sse.push(bytes) {
            if self.finished {
                break;
            }
            if let Err(e) = self.inner.event(event, &mut out) {
                if out.is_empty() {
                    return Err(e);
                }
                self.failed = Some(e);
                break;
            }
            self.note_finish(&out);
        }
        Ok(out)
    }

    /// The error that ended the stream after the deltas last returned.
    pub fn take_error(&mut self) -> Option<LlmError> {
        self.failed.take()
    }

    /// The body ended cleanly: the last deltas, or [`LlmError::Cut`].
    pub fn finish(&mut self) -> Result<Vec<Delta>, LlmError> {
        if let Some(e) = self.take_error() {
            return Err(e);
        }
        let mut out = Vec::new();
        if !self.finished
            && let Some(event) = self.sse.finish()
        {
            // A last event that does not parse was cut short.
            self.inner.event(event, &mut out).map_err(|e| match e {
                LlmError::Decode(_) => LlmError::Cut,
                e => e,
            })?;
            self.note_finish(&out);
        }
        if !self.finished {
            self.inner.end(&mut out)?;
            self.note_finish(&out);
        }
        if !self.finished {
            return Err(LlmError::Cut);
        }
        Ok(out)
    }

    fn note_finish(&mut self, out: &[Delta]) {
        if matches!(out.last(), Some(Delta::Finish(_))) {
            self.finished = true;
        }
    }
}

/// Sends deltas to the consumer of a [`drive`]n stream.
pub struct DeltaSender(mpsc::Sender<Result<Delta, LlmError>>);

impl DeltaSender {
    /// False once the consumer dropped the stream: stop then.
    pub async fn send(&mut self, item: Result<Delta, LlmError>) -> bool {
        self.0.send(item).await.is_ok()
    }
}

/// A stream of what `body` emits. `body` runs only while the stream is
/// polled (no task is spawned), and dropping the stream drops it, which
/// closes its connection.
pub fn drive<F, Fut>(body: F) -> BoxStream<'static, Result<Delta, LlmError>>
where
    F: FnOnce(DeltaSender) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(8);
    let driver = body(DeltaSender(tx))
        .into_stream()
        .filter_map(|()| futures::future::ready(None));
    stream::select(rx, driver).boxed()
}

/// One provider request, ready to send (again).
pub struct Call {
    pub client: reqwest::Client,
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    pub retry: RetryPolicy,
}

impl Call {
    fn request(&self) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(self.body.clone());
        for (name, value) in &self.headers {
            req = req.header(*name, value);
        }
        req
    }
}

/// What went wrong with one attempt.
enum Failure {
    /// Worth another attempt, after `wait` if the server named one.
    Retry {
        reason: String,
        wait: Option<Duration>,
        last: LlmError,
    },
    Fatal(LlmError),
    /// The consumer is gone.
    Gone,
}

/// Sends `call`, retrying as [`RetryPolicy`] says, and streams the deltas
/// that `decoder()` makes of the body into `tx`.
pub async fn run<D: EventDecoder>(call: Call, decoder: impl Fn() -> D, mut tx: DeltaSender) {
    let max = call.retry.max_attempts.max(1);
    let mut attempt = 1;
    loop {
        let failure = attempt_once(&call, decoder(), &mut tx).await;
        let Some(failure) = failure else { return };
        let (reason, wait, last) = match failure {
            Failure::Gone => return,
            Failure::Fatal(e) => {
                tx.send(Err(e)).await;
                return;
            }
            Failure::Retry { reason, wait, last } => (reason, wait, last),
        };
        let too_long = wait.is_some_and(|w| w > call.retry.max_delay);
        if attempt >= max || too_long {
            let last = match last {
                LlmError::RateLimited {
                    status, message, ..
                } => LlmError::RateLimited {
                    status,
                    attempts: attempt,
                    message,
                },
                other => other,
            };
            tx.send(Err(last)).await;
            return;
        }
        let wait = wait.unwrap_or_else(|| call.retry.backoff(attempt));
        attempt += 1;
        tracing::debug!(url = %call.url, attempt, ?wait, %reason, "retrying model request");
        let retry = Delta::Retry {
            attempt,
            wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            reason,
        };
        if !tx.send(Ok(retry)).await {
            return;
        }
        tokio::time::sleep(wait).await;
    }
}

/// One attempt; `None` when the stream was delivered to its end.
async fn attempt_once<D: EventDecoder>(
    call: &Call,
    decoder: D,
    tx: &mut DeltaSender,
) -> Option<Failure> {
    let response = match call.request().send().await {
        Ok(r) => r,
        Err(e) => return Some(unsent(call, e)),
    };
    if !response.status().is_success() {
        return Some(refused(response).await);
    }
    let json_answer = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json_answer {
        return Some(not_a_stream(response).await);
    }
    stream(call, response, decoder, tx).await
}

/// The request could not be sent: a bad one is fatal, a server out of
/// reach worth another attempt.
fn unsent(call: &Call, e: reqwest::Error) -> Failure {
    if e.is_builder() {
        return Failure::Fatal(LlmError::Config(format!(
            "bad request to {}: {}",
            call.url,
            error_chain(&e)
        )));
    }
    // The URL is said once, by the error around this message.
    let message = error_chain(&e.without_url());
    Failure::Retry {
        reason: format!("cannot reach the server: {message}"),
        wait: None,
        last: LlmError::Connect {
            url: call.url.clone(),
            message,
        },
    }
}

/// An answer with an error status: retried when the status says it is
/// worth it (after the wait the server named, if any).
async fn refused(response: reqwest::Response) -> Failure {
    let status = response.status();
    let wait = retry_after(response.headers());
    let body = read_capped(response, 64 << 10).await;
    let message = error_message(status, &body);
    let code = status.as_u16();
    let reason = format!("HTTP {code}: {message}");
    let error = match code {
        401 | 403 => LlmError::Auth {
            status: code,
            message,
        },
        429 => LlmError::RateLimited {
            status: code,
            attempts: 1,
            message,
        },
        _ => LlmError::Http {
            status: code,
            message,
        },
    };
    if retryable(code) {
        Failure::Retry {
            reason,
            wait,
            last: error,
        }
    } else {
        Failure::Fatal(error)
    }
}

/// A JSON answer, not a stream: an error some proxies send with a 200, or
/// a server that ignored `stream: true`.
async fn not_a_stream(response: reqwest::Response) -> Failure {
    let status = response.status();
    let body = read_capped(response, 64 << 10).await;
    let error = match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(json) if json.get("error").is_some_and(|e| !e.is_null()) => LlmError::Http {
            status: status.as_u16(),
            message: json_error_message(&json).unwrap_or_else(|| json.to_string()),
        },
        _ => LlmError::Decode(format!(
            "the server answered JSON, not an event stream: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        )),
    };
    Failure::Fatal(error)
}

/// The answer's event stream, decoded, its deltas sent on `tx`; `None`
/// when it was delivered to its end.
async fn stream<D: EventDecoder>(
    call: &Call,
    response: reqwest::Response,
    decoder: D,
    tx: &mut DeltaSender,
) -> Option<Failure> {
    let mut decoder = StreamDecoder::new(decoder);
    let mut body = response.bytes_stream();
    // Until a delta went out, a failure may be retried as a whole.
    let mut said_anything = false;
    loop {
        let deltas = match body.next().await {
            Some(Ok(bytes)) => decoder.push(&bytes),
            Some(Err(e)) => {
                tracing::debug!(url = %call.url, error = %error_chain(&e), "model stream cut");
                Err(LlmError::Cut)
            }
            None => decoder.finish(),
        };
        let deltas = match deltas {
            Ok(d) => d,
            Err(e) => return Some(failed(e, said_anything)),
        };
        for delta in deltas {
            said_anything = true;
            if !tx.send(Ok(delta)).await {
                return Some(Failure::Gone);
            }
        }
        if decoder.finished() {
            return None;
        }
        if let Some(e) = decoder.take_error() {
            return Some(failed(e, said_anything));
        }
    }
}

/// A stream that failed: retried as a whole only while nothing of it went
/// out, and when the failure is worth it (cut, or a retryable status).
fn failed(e: LlmError, said_anything: bool) -> Failure {
    let retry_status = match &e {
        LlmError::Cut => true,
        LlmError::Http { status, .. } => retryable(*status),
        _ => false,
    };
    if said_anything || !retry_status {
        Failure::Fatal(e)
    } else {
        Failure::Retry {
            reason: e.to_string(),
            wait: None,
            last: e,
        }
    }
}

fn retryable(status: u16) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504 | 529)
}

/// The wait a 429 or 503 asks for: `retry-after-ms`, or `retry-after` in
/// seconds or as an HTTP date.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = get("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = parse_http_date(value)?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form servers send.
fn parse_http_date(s: &str) -> Option<SystemTime> {
    let rest = s.split_once(", ")?.1;
    let parts: Vec<&str> = rest.split_whitespace().collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u64 = day.parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m == month)? as u64
        + 1;
    let year: u64 = year.parse().ok()?;
    let hms: Vec<u64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, sec] = hms.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || year < 1970 || *h > 23 || *m > 59 || *sec > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, mo) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    let secs = days * 86_400 + h * 3600 + m * 60 + sec;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

async fn read_capped(response: reqwest::Response, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(Ok(bytes)) = body.next().await {
        out.extend_from_slice(&bytes[..bytes.len().min(cap - out.len())]);
        if out.len() >= cap {
            break;
        }
    }
    out
}

/// The message of an error body, as OpenAI, Anthropic, llama.cpp, Ollama,
/// vLLM and FastAPI servers shape it; else the body's text, or the status.
pub fn error_message(status: reqwest::StatusCode, body: &[u8]) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body)
        && let Some(message) = json_error_message(&json)
    {
        return message;
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return status
            .canonical_reason()
            .unwrap_or("no message")
            .to_string();
    }
    if text.chars().count() > 500 {
        let mut cut: String = text.chars().take(500).collect();
        cut.push('…');
        return cut;
    }
    text.to_string()
}

/// `error.message`, `error` (a string), `message`, or `detail`.
pub fn json_error_message(json: &serde_json::Value) -> Option<String> {
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
    let error = json.get("error");
    error
        .and_then(|e| e.get("message"))
        .and_then(text)
        .or_else(|| error.and_then(text))
        .or_else(|| json.get("message").and_then(text))
        .or_else(|| json.get("detail").and_then(text))
        .or_else(|| {
            json.get("detail")
                .filter(|d| !d.is_null())
                .map(|d| d.to_string())
        })
}

/// An error and its causes, `: `-joined (reqwest's own message is terse).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// `base` without trailing slashes, joined with `path`.
pub fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// What a provider is configured with.
pub struct Endpoint {
    pub model: String,
    /// Without a trailing `/`.
    pub base_url: String,
    /// `None` (or empty) sends no key: a local server, or a proxy that adds it.
    pub api_key: Option<String>,
    /// The retry policy (tests shorten the waits).
    pub retry: RetryPolicy,
    pub client: reqwest::Client,
}

impl Endpoint {
    pub fn new(model: &str, base_url: &str, api_key: Option<String>) -> Self {
        Self {
            model: model.to_string(),
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key: api_key.filter(|k| !k.is_empty()),
            retry: RetryPolicy::default(),
            client: client(),
        }
    }

    /// A provider's request as a stream of deltas: `body` sent to `url`
    /// with the provider's `headers` on this endpoint's client, retried as
    /// its policy says, each attempt's answer read by a new decoder `D`.
    pub fn stream<D: EventDecoder + Default>(
        &self,
        url: String,
        headers: Vec<(&'static str, String)>,
        body: &serde_json::Value,
    ) -> BoxStream<'static, Result<Delta, LlmError>> {
        let call = Call {
            client: self.client.clone(),
            url,
            headers,
            body: body.to_string().into_bytes(),
            retry: self.retry.clone(),
        };
        drive(move |tx| run(call, D::default, tx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(250),
        };
        assert_eq!(p.backoff(1), Duration::from_millis(100));
        assert_eq!(p.backoff(2), Duration::from_millis(200));
        assert_eq!(p.backoff(3), Duration::from_millis(250));
        assert_eq!(p.backoff(40), Duration::from_millis(250));
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after", HeaderValue::from_static("0.5"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(500)));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
        // A date in the past means now.
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn http_dates() {
        let t = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs, 784_111_777);
        let t = parse_http_date("Thu, 29 Feb 2024 00:00:00 GMT").unwrap();
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs, 1_709_164_800);
        assert_eq!(parse_http_date("Sun, 06 Foo 1994 08:49:37 GMT"), None);
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
    }

    #[test]
    fn error_messages_of_known_servers() {
        let s = reqwest::StatusCode::BAD_REQUEST;
        let cases: [(&str, &str); 7] = [
            (
                r#"{"error":{"message":"Invalid model","type":"invalid_request_error","code":null}}"#,
                "Invalid model",
            ),
            (
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: required"}}"#,
                "max_tokens: required",
            ),
            (r#"{"error":"model 'x' not found"}"#, "model 'x' not found"),
            (
                r#"{"object":"error","message":"too long","type":"BadRequestError","code":400}"#,
                "too long",
            ),
            (r#"{"detail":"Not Found"}"#, "Not Found"),
            ("<html>bad gateway</html>\n", "<html>bad gateway</html>"),
            ("", "Bad Request"),
        ];
        for (body, want) in cases {
            assert_eq!(error_message(s, body.as_bytes()), want, "{body}");
        }
    }

    #[test]
    fn urls_join_without_double_slashes() {
        assert_eq!(
            join_url("http://h:1/v1/", "/chat/completions"),
            "http://h:1/v1/chat/completions"
        );
        assert_eq!(join_url("http://h", "v1/messages"), "http://h/v1/messages");
    }
}
