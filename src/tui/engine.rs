//! The engine behind the interactive TUI, for now: it turns the screen's
//! commands into sub-agent calls.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::app::Op;
use crate::event::{Emitter, Event, NoticeLevel};
use crate::subagent::dispatch::Dispatcher;
use crate::subagent::types::SubAgentCallInput;

/// The engine for now: `@NAME message` goes straight to an ACP agent
/// (`@NAME!` in the background, `@NAME?` as a code review); the chat model
/// that answers plain messages is not built yet.
pub async fn run(
    mut ops: mpsc::UnboundedReceiver<Op>,
    emitter: Emitter,
    dispatcher: Arc<Dispatcher>,
) {
    while let Some(op) = ops.recv().await {
        match op {
            Op::Submit(text) => {
                emitter.emit(Event::UserMessage { text: text.clone() });
                match super::app::parse_mention(&text) {
                    Some(mention) => {
                        let dispatcher = dispatcher.clone();
                        let emitter = emitter.clone();
                        tokio::spawn(async move {
                            let call = SubAgentCallInput {
                                agent: Some(mention.agent),
                                input: Some(mention.message),
                                code_review: mention.review,
                                continue_session: true,
                                run_in_background: mention.background,
                            };
                            if let Err(e) = dispatcher.call(call).await {
                                emitter.emit(Event::Error {
                                    text: e.to_string(),
                                });
                            }
                        });
                    }
                    None => emitter.emit(Event::Notice {
                        level: NoticeLevel::Warning,
                        text: "No chat model is connected in this build of quorum. Talk to an \
                               agent directly with `@NAME message` (`@NAME!` runs it in the \
                               background, `@NAME?` asks for a code review)."
                            .into(),
                    }),
                }
            }
            Op::Cancel(call_id) => {
                dispatcher.cancel(&call_id);
            }
            Op::Answer {
                call_id,
                request_id,
                option,
            } => {
                dispatcher.answer(
                    &call_id,
                    crate::acp::client::PermissionAnswer { request_id, option },
                );
            }
        }
    }
}
