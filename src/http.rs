//! The HTTP clients Groundwork builds for its endpoints: chat, embeddings, rerank and
//! discovery. A client whose endpoints are all plain `http://` (a local server, the usual
//! case) is built without TLS roots. Loading the platform's roots costs milliseconds of
//! CPU per client on every command. Worse, on a system without CA certificates (a slim
//! container), reqwest refuses to build a client that would need them, so no local server
//! could be reached at all. Such a client refuses any TLS connection, for instance a
//! redirect to `https://`.

/// A client builder for talking to `urls`. TLS roots are loaded only when one of them is
/// not plain `http://`.
pub fn builder_for<'a>(urls: impl IntoIterator<Item = &'a str>) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    if urls.into_iter().all(is_plain_http) {
        builder.tls_certs_only(std::iter::empty())
    } else {
        builder
    }
}

/// Whether `url` is `http://…` (any case), so that no TLS is needed to reach it.
fn is_plain_http(url: &str) -> bool {
    url.trim_start()
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_urls_skip_tls_roots() {
        assert!(is_plain_http("http://127.0.0.1:11434/v1"));
        assert!(is_plain_http("HTTP://localhost"));
        assert!(!is_plain_http("https://api.openai.com/v1"));
        assert!(!is_plain_http("httpx://x"));
        assert!(!is_plain_http("http:/x"));
        assert!(!is_plain_http(""));
    }
}
