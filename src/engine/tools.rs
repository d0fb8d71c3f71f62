//! The sub-agent tool plugged into the chat loop: the model loop's
//! [`ToolSet`] over the [`SubagentTool`], and the main conversation's
//! summary as the dispatcher asks for it. Neither `model_loop` nor `subagent`
//! knows the other; they meet here.

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::llm::{ToolCall, ToolSpec};
use crate::model_loop::chat::ConversationSummary;
use crate::model_loop::{ToolError, ToolSet};
use crate::subagent::dispatch::MainSummary;
use crate::subagent::tool::SubagentTool;

impl ToolSet for SubagentTool {
    fn specs(&self) -> Vec<ToolSpec> {
        SubagentTool::specs(self)
    }

    fn call(
        &self,
        call: ToolCall,
        cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'static, Result<String, ToolError>> {
        let tool = self.clone();
        async move {
            SubagentTool::call(&tool, &call.name, &call.arguments, cancel)
                .await
                .map_err(|e| ToolError::Tool(Box::new(e)))
        }
        .boxed()
    }

    fn forget(&self) {
        SubagentTool::forget(self);
    }
}

impl MainSummary for ConversationSummary {
    fn summary(&self, cancel: watch::Receiver<bool>) -> BoxFuture<'_, Option<String>> {
        ConversationSummary::summary(self, cancel)
    }
}
