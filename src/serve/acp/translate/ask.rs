//! What a call's agent asks the person (a permission, a question), as
//! requests for the host: made at the flush, unless answered by then, and
//! withdrawn once answered otherwise.

use agent_client_protocol::v1::schema::{
    SessionId, SessionNotification, SessionUpdate, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields,
};

use super::call::CallView;
use super::{Ask, AskKind, Out, note};
use crate::event::ToolDetail;
use crate::event::form::FormField;

/// Where one call's requests go: on its child session when it has one
/// (its tool call, the agent's own), else on the session (a tool call of
/// the request's own); none is made while a history is replayed.
pub(super) struct Asking<'a> {
    pub(super) call_id: &'a str,
    pub(super) session: &'a SessionId,
    pub(super) child: Option<&'a SessionId>,
    pub(super) replay: bool,
    /// The requests waiting for the flush.
    pub(super) asks: &'a mut Vec<Ask>,
}

impl Asking<'_> {
    /// A permission request: the call's line, and the request.
    pub(super) fn permission(
        &mut self,
        call: &mut CallView,
        id: &str,
        (title, options, detail): (&str, &[String], &ToolDetail),
    ) {
        call.push_line(format!("? {title}"));
        call.asked
            .insert(id.to_string(), format!("{}: {title}", call.agent));
        if self.replay {
            return;
        }
        let (tool_call, on) = match self.child {
            Some(child) => (id.to_string(), child.clone()),
            None => (format!("{}/{id}", self.call_id), self.session.clone()),
        };
        self.asks.push(Ask {
            call_id: self.call_id.to_string(),
            request_id: id.to_string(),
            session: on,
            tool_call,
            agent: call.agent.clone(),
            what: AskKind::Permission {
                title: title.to_string(),
                options: options.to_vec(),
                detail: Box::new(detail.clone()),
            },
        });
    }

    /// A permission request answered: withdrawn from the host, unless it
    /// was never asked; and the request's own tool call (a child's is its
    /// agent's) completed, or failed when it was refused.
    pub(super) fn permission_resolved(
        &mut self,
        call: &mut CallView,
        out: &mut Vec<Out>,
        id: &str,
        outcome: &str,
    ) {
        call.push_line(format!("→ {outcome}"));
        let never_asked = self.unasked(id);
        if !never_asked {
            out.push(Out::Withdraw {
                call_id: self.call_id.to_string(),
                request_id: id.to_string(),
            });
        }
        if self.child.is_some() || self.replay || never_asked {
            return;
        }
        let lower = outcome.to_lowercase();
        let refused = ["cancel", "reject", "deny", "refuse", "no"]
            .iter()
            .any(|w| lower.starts_with(w));
        out.push(note(SessionNotification::new(
            self.session.clone(),
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                format!("{}/{id}", self.call_id),
                ToolCallUpdateFields::new()
                    .title(call.asked.get(id).cloned())
                    .status(if refused {
                        ToolCallStatus::Failed
                    } else {
                        ToolCallStatus::Completed
                    }),
            )),
        )));
    }

    /// A question: the call's line, and the request.
    pub(super) fn question(
        &mut self,
        call: &mut CallView,
        id: &str,
        (message, form, url): (&str, &Option<Vec<FormField>>, &Option<String>),
    ) {
        call.push_line(format!("? {message}"));
        if self.replay {
            return;
        }
        self.asks.push(Ask {
            call_id: self.call_id.to_string(),
            request_id: id.to_string(),
            session: self.child.cloned().unwrap_or_else(|| self.session.clone()),
            tool_call: self.call_id.to_string(),
            agent: call.agent.clone(),
            what: AskKind::Question {
                message: message.to_string(),
                form: form.clone(),
                url: url.clone(),
            },
        });
    }

    /// A question answered: withdrawn from the host, unless it was never
    /// asked.
    pub(super) fn question_resolved(
        &mut self,
        call: &mut CallView,
        out: &mut Vec<Out>,
        id: &str,
        outcome: &str,
    ) {
        call.push_line(format!("→ {outcome}"));
        if !self.unasked(id) {
            out.push(Out::Withdraw {
                call_id: self.call_id.to_string(),
                request_id: id.to_string(),
            });
        }
    }

    /// Drops request `id` if it still waits for the flush: true when it
    /// did (the host was never asked).
    fn unasked(&mut self, id: &str) -> bool {
        let call_id = self.call_id;
        let before = self.asks.len();
        self.asks
            .retain(|a| !(a.call_id == call_id && a.request_id == id));
        self.asks.len() < before
    }
}
