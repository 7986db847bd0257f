//! A chat message and who says it: what datasets hold, conversations
//! accumulate and chat requests carry. Both `dataset` and `prompt` use it,
//! so it sits below them.

use serde::{Deserialize, Serialize};

/// Who says a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}
