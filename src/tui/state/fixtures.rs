//! Events and look-ups that the state's tests share.

use super::*;
use crate::event::build;
use crate::event::{Activity, AgentRef, ChildState, Event, Stamped, Summary, TaskState};

pub(super) fn apply(state: &mut State, t: u64, event: Event) {
    state.apply(&Stamped::new(t, event));
}

pub(super) fn started(background: bool) -> Event {
    let call = build::started("c1", AgentRef::Acp("fake\x1b[31m".into()))
        .input("\nreview it\nplease")
        .review();
    if background {
        call.background("t1").event()
    } else {
        call.event()
    }
}

/// A box of batch `b1`: call `call`, on agent `agent`, maybe queued.
pub(super) fn member(call: &str, agent: &str, queued: bool) -> Event {
    let member = build::started(call, AgentRef::Acp(agent.into()))
        .input("review it")
        .review()
        .background(format!("t-{call}"))
        .batch("b1");
    if queued {
        member.queued().event()
    } else {
        member.event()
    }
}

pub(super) fn batch_started() -> Event {
    Event::BatchStarted {
        batch_id: "b1".into(),
        tasks: 3,
        review: true,
        arena: false,
    }
}

pub(super) fn header(state: &State) -> &BatchHeader {
    state
        .cells
        .iter()
        .find_map(|c| match &c.kind {
            CellKind::Batch(h) => Some(&**h),
            _ => None,
        })
        .expect("a batch header")
}

pub(super) fn box_of<'a>(state: &'a State, call: &str) -> &'a SubagentBox {
    state
        .cells
        .iter()
        .find_map(|c| match &c.kind {
            CellKind::Subagent(b) if b.call_id == call => Some(&**b),
            _ => None,
        })
        .expect("the box")
}

pub(super) fn activity(activity: Activity) -> Event {
    Event::SubagentActivity {
        call_id: "c1".into(),
        activity,
    }
}

pub(super) fn the_box(state: &State) -> &SubagentBox {
    state
        .cells
        .iter()
        .find_map(|c| match &c.kind {
            CellKind::Subagent(b) => Some(&**b),
            _ => None,
        })
        .expect("a box")
}

pub(super) fn snapshot(tool_calls: u32, state: TaskState, waiting: bool) -> Event {
    Event::TaskProgress {
        call_id: "c1".into(),
        task_id: Some("t1".into()),
        summary: Summary {
            state,
            tool_calls,
            last_activity: Some("⚙ Read a.rs".into()),
            severity: None,
            waiting,
            cancelling: false,
            usage: None,
            share: None,
        },
    }
}

pub(super) fn child(title: Option<&str>, state: Option<ChildState>, can_cancel: bool) -> Event {
    Event::SubagentChild {
        call_id: "c1".into(),
        child_id: "s-1-child".into(),
        title: title.map(Into::into),
        description: Some("finds\x1b[2J tests".into()),
        state,
        can_cancel,
    }
}
