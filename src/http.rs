//! The HTTP clients Groundwork builds for its endpoints: chat, embeddings, rerank and
//! discovery. A client whose endpoints are all plain `http://` (a local server, the usual
//! case) is built without TLS roots. Loading the platform's roots costs milliseconds of
//! CPU per client on every command. Worse, on a system without CA certificates (a slim
//! container), reqwest refuses to build a client that would need them, so no local server
//! could be reached at all. Such a client cannot follow a redirect to `https://`: it
//! stops there with [`RedirectedToHttps`], which names the address to use instead.

/// How many redirects a client follows (reqwest's default).
const MAX_REDIRECTS: usize = 10;

/// A client builder for talking to `urls`. TLS roots are loaded only when one of them is
/// not plain `http://`.
pub fn builder_for<'a>(urls: impl IntoIterator<Item = &'a str>) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    if urls.into_iter().all(is_plain_http) {
        builder
            .tls_certs_only(std::iter::empty())
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                if attempt.url().scheme() != "http" {
                    let error = RedirectedToHttps {
                        from: attempt.previous().last().map(redacted).unwrap_or_default(),
                        to: redacted(attempt.url()),
                    };
                    attempt.error(error)
                } else if attempt.previous().len() > MAX_REDIRECTS {
                    attempt.error("too many redirects")
                } else {
                    attempt.follow()
                }
            }))
    } else {
        builder
    }
}

/// A plain-`http://` endpoint answered with a redirect to another scheme (a server behind
/// a proxy that upgrades to TLS): the client, built without TLS roots, does not follow it.
#[derive(Debug, thiserror::Error)]
#[error("{from} redirects to {to}; give the https:// address as the endpoint")]
pub struct RedirectedToHttps {
    /// The address that answered with the redirect.
    pub from: String,
    /// Where it pointed.
    pub to: String,
}

/// `url` without its credentials and query (either may hold a key).
fn redacted(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
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
