//! Why the scripted server refuses a request (HTTP 400, with the sentence
//! as the error's message), as an OpenAI-compatible server would.

/// What is wrong with a request's body.
#[derive(Debug, thiserror::Error)]
pub enum BadRequest {
    #[error("invalid JSON in request body: {0}")]
    Json(#[source] serde_json::Error),
    #[error("the request body must be a JSON object")]
    NotAnObject,
    /// A field of the wrong type (`expected`: "a string", "a boolean"...).
    #[error("\"{field}\" must be {expected}")]
    Field {
        field: String,
        expected: &'static str,
    },
    #[error("\"max_tokens\" must be at least 1")]
    NoTokens,
    #[error("\"prompt\" is required")]
    NoPrompt,
    #[error("\"messages\" is required and must be an array")]
    NoMessages,
    #[error("\"messages\" must not be empty")]
    EmptyMessages,
    #[error("each message must be an object")]
    MessageNotAnObject,
    #[error("a message's \"content\" must be a string or an array")]
    Content,
    /// A required field that is absent.
    #[error("\"{0}\" is required")]
    Missing(&'static str),
    /// An image or audio part that does not decode.
    #[error("media: {0}")]
    Media(String),
}
