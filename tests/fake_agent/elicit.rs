//! The fake agent's questions for the person (elicitation): a form, a URL
//! it completes itself, and a form sent whatever the client advertised
//! (as the scripted agent of issue 18 did). See README.md next to it.

use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    BooleanPropertySchema, ClientCapabilities, CompleteElicitationNotification,
    CreateElicitationRequest, CreateElicitationResponse, ElicitationAction, ElicitationFormMode,
    ElicitationSchema, ElicitationSessionScope, ElicitationUrlMode, EnumOption,
    IntegerPropertySchema, MultiSelectPropertySchema, NumberPropertySchema, StopReason,
    StringPropertySchema,
};

use super::{Turn, log, request_in_background};

/// What the client advertised in `initialize`: form and URL elicitation.
static ADVERTISED: OnceLock<(bool, bool)> = OnceLock::new();

/// `--answers FILE`: every elicitation answer the agent receives is
/// appended to FILE, one line each (`form: accept {...}`), also when its
/// turn was cancelled (so a test sees what came back then too).
pub(super) static ANSWERS: OnceLock<std::path::PathBuf> = OnceLock::new();

/// Notes what the client advertised (called from `initialize`).
pub(super) fn note_capabilities(capabilities: &ClientCapabilities) {
    let e = capabilities.elicitation.as_ref();
    let _ = ADVERTISED.set((
        e.is_some_and(|e| e.supports_form()),
        e.is_some_and(|e| e.supports_url()),
    ));
}

/// An answer in one line: `accept {"a":1}`, `decline`, `cancel`.
fn describe(answer: &CreateElicitationResponse) -> String {
    match &answer.action {
        ElicitationAction::Accept(a) => match &a.content {
            Some(content) => format!(
                "accept {}",
                serde_json::to_string(content).unwrap_or_default()
            ),
            None => "accept".into(),
        },
        ElicitationAction::Decline => "decline".into(),
        ElicitationAction::Cancel => "cancel".into(),
        other => format!("{other:?}"),
    }
}

fn record(what: &str, answer: &str) {
    log(format!("{what}: {answer}"));
    if let Some(file) = ANSWERS.get() {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(format!("{what}: {answer}\n").as_bytes()));
        if let Err(e) = written {
            log(format!("--answers: {}: {e}", file.display()));
        }
    }
}

/// The form: a name (required, 1–20 characters), how many (integer 1–9,
/// default 3), a ratio (number 0–1), verbose (boolean, default false) and
/// a colour (enum red/green/blue with titles, required, default green)
/// and tags (a multi-select of fast/Fast, safe/Safe, cheap/Cheap, at most
/// two).
/// `defaults`: the name has a default too (`Ada`), so every required
/// field has one.
fn schema(defaults: bool) -> ElicitationSchema {
    let name = StringPropertySchema::new()
        .title("Your name")
        .description("as it should appear in the report")
        .min_length(1)
        .max_length(20)
        .default_value(defaults.then(|| "Ada".to_string()));
    let colour = StringPropertySchema::new()
        .title("Colour")
        .one_of(vec![
            EnumOption::new("red", "Red"),
            EnumOption::new("green", "Green"),
            EnumOption::new("blue", "Blue"),
        ])
        .default_value("green".to_string());
    ElicitationSchema::new()
        .property("name", name, true)
        .property(
            "count",
            IntegerPropertySchema::new()
                .title("How many")
                .minimum(1)
                .maximum(9)
                .default_value(3),
            false,
        )
        .property(
            "ratio",
            NumberPropertySchema::new()
                .title("Ratio")
                .description("a fraction")
                .minimum(0.0)
                .maximum(1.0),
            false,
        )
        .property(
            "verbose",
            BooleanPropertySchema::new()
                .title("Verbose")
                .default_value(false),
            false,
        )
        .property("colour", colour, true)
        .property(
            "tags",
            MultiSelectPropertySchema::titled(vec![
                EnumOption::new("fast", "Fast"),
                EnumOption::new("safe", "Safe"),
                EnumOption::new("cheap", "Cheap"),
            ])
            .title("Tags")
            .max_items(2),
            false,
        )
}

/// Waits for the answer to `request`; on a cancel of the turn it still
/// waits (a little) for the answer the client owes, and records it.
async fn ask(
    turn: &mut Turn,
    what: &str,
    request: CreateElicitationRequest,
    cancelled: impl std::future::Future<Output = ()>,
    complete: Option<&str>,
) -> Result<Result<CreateElicitationResponse, Error>, StopReason> {
    let mut answer = request_in_background(&turn.cx, request).map_err(|e| {
        log(format!("{what}: cannot ask: {e:?}"));
        StopReason::EndTurn
    })?;
    if let Some(id) = complete {
        let cx = turn.cx.clone();
        let id = id.to_string();
        let _ = turn.cx.spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            log(format!("completing {id}"));
            cx.send_notification(CompleteElicitationNotification::new(id))
        });
    }
    tokio::select! {
        () = cancelled => {
            match tokio::time::timeout(Duration::from_secs(5), answer).await {
                Ok(Ok(Ok(a))) => record(what, &describe(&a)),
                Ok(Ok(Err(e))) => record(what, &format!("error {}", e.message)),
                _ => record(what, "no answer"),
            }
            Err(StopReason::Cancelled)
        }
        a = &mut answer => Ok(a.unwrap_or_else(|_| Err(Error::internal_error()))),
    }
}

/// `form [defaults]`: asks the form (only when the client advertised form
/// elicitation) and reports the answer: `form answered: accept {...}`.
pub(super) async fn form(
    turn: &mut Turn,
    rest: &str,
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<StopReason, Error> {
    if !ADVERTISED.get().is_some_and(|(form, _)| *form) {
        turn.chunk("no elicitation: the client did not advertise form elicitation")?;
        return Ok(StopReason::EndTurn);
    }
    let request = CreateElicitationRequest::new(
        ElicitationFormMode::new(
            ElicitationSessionScope::new(turn.session_id.clone()),
            schema(rest.trim() == "defaults"),
        ),
        "A few details, please",
    );
    turn.chunk("Asking.\n")?;
    match ask(turn, "form", request, cancelled, None).await {
        Err(stop) => Ok(stop),
        Ok(Ok(answer)) => {
            let said = describe(&answer);
            record("form", &said);
            turn.chunk(format!("form answered: {said}"))?;
            Ok(StopReason::EndTurn)
        }
        Ok(Err(e)) => {
            record("form", &format!("error {}", e.message));
            turn.chunk(format!("form failed: {}", e.message))?;
            Ok(StopReason::EndTurn)
        }
    }
}

/// `url [complete]`: asks the person to visit a URL (only when the client
/// advertised URL elicitation); with `complete`, says it is done 300 ms
/// later (`elicitation/complete`). Reports `url answered: accept`.
pub(super) async fn url(
    turn: &mut Turn,
    rest: &str,
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<StopReason, Error> {
    if !ADVERTISED.get().is_some_and(|(_, url)| *url) {
        turn.chunk("no elicitation: the client did not advertise URL elicitation")?;
        return Ok(StopReason::EndTurn);
    }
    let id = "fake-url-1";
    let request = CreateElicitationRequest::new(
        ElicitationUrlMode::new(
            ElicitationSessionScope::new(turn.session_id.clone()),
            id,
            "https://example.com/fake-login?\u{1b}]8;;evil\u{7}session=1",
        ),
        "Sign in to the fake service",
    );
    let complete = (rest.trim() == "complete").then_some(id);
    turn.chunk("Asking.\n")?;
    match ask(turn, "url", request, cancelled, complete).await {
        Err(stop) => Ok(stop),
        Ok(Ok(answer)) => {
            let said = describe(&answer);
            record("url", &said);
            turn.chunk(format!("url answered: {said}"))?;
            Ok(StopReason::EndTurn)
        }
        Ok(Err(e)) => {
            record("url", &format!("error {}", e.message));
            turn.chunk(format!("url failed: {}", e.message))?;
            Ok(StopReason::EndTurn)
        }
    }
}

/// `ask-anyway`: sends the form whatever the client advertised, as the
/// scripted agent of issue 18 did; an error answer fails the turn with
/// that error (what quorum showed before it took elicitations:
/// `Invalid params`).
pub(super) async fn ask_anyway(
    turn: &mut Turn,
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<StopReason, Error> {
    let request = CreateElicitationRequest::new(
        ElicitationFormMode::new(
            ElicitationSessionScope::new(turn.session_id.clone()),
            schema(false),
        ),
        "A few details, please",
    );
    match ask(turn, "ask-anyway", request, cancelled, None).await {
        Err(stop) => Ok(stop),
        Ok(Ok(answer)) => {
            let said = describe(&answer);
            record("ask-anyway", &said);
            turn.chunk(format!("form answered: {said}"))?;
            Ok(StopReason::EndTurn)
        }
        Ok(Err(e)) => Err(e),
    }
}

/// `child-form`: announces a child session (`scout`, as `nested` does;
/// only when the client advertised `subagents` and form elicitation), and
/// the child asks the form; the parent reports `child form answered: …`.
pub(super) async fn child_form(
    turn: &mut Turn,
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<StopReason, Error> {
    use agent_client_protocol::v1::schema::{
        RunningStateUpdate, SessionId, SessionUpdate, StateUpdate, SubagentUpdate,
    };
    if !super::SUBAGENTS.get().copied().unwrap_or(false)
        || !ADVERTISED.get().is_some_and(|(form, _)| *form)
    {
        turn.chunk("no child form: the client did not advertise subagents and forms")?;
        return Ok(StopReason::EndTurn);
    }
    let child = SessionId::new(format!("{}-child-1", turn.session_id));
    turn.update(SessionUpdate::SubagentUpdate(
        SubagentUpdate::new(child.clone())
            .title("scout")
            .state(StateUpdate::Running(RunningStateUpdate::new())),
    ))?;
    let request = CreateElicitationRequest::new(
        ElicitationFormMode::new(ElicitationSessionScope::new(child), schema(true)),
        "Which colour?",
    );
    match ask(turn, "child-form", request, cancelled, None).await {
        Err(stop) => Ok(stop),
        Ok(Ok(answer)) => {
            let said = describe(&answer);
            record("child-form", &said);
            turn.chunk(format!("child form answered: {said}"))?;
            Ok(StopReason::EndTurn)
        }
        Ok(Err(e)) => {
            turn.chunk(format!("child form failed: {}", e.message))?;
            Ok(StopReason::EndTurn)
        }
    }
}
