//! Why a client could not be built for a target: a base URL, header, key
//! or CA certificate the HTTP stack refuses. A request's own failures are
//! not errors here: they are counted by class in its record
//! ([`crate::ErrorClass`]).

/// A client that could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("invalid CA certificate: {0}")]
    CaCert(#[source] reqwest::Error),
    #[error("invalid base_url \"{url}\": {source}")]
    BaseUrl {
        url: String,
        #[source]
        source: url::ParseError,
    },
    #[error("invalid header name \"{0}\"")]
    HeaderName(String),
    #[error("invalid value for header \"{0}\"")]
    HeaderValue(String),
    #[error("the API key is not a valid header value")]
    ApiKey,
}
