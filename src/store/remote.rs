//! Object storage (`s3://`, `gs://`, `az://`) and LanceDB Cloud (`db://`): connecting, and
//! the one line a user reads when the bucket, the credentials or the endpoint are wrong.
//! S3 is in every build; Google Cloud Storage, Azure and LanceDB Cloud need the `cloud`
//! feature.
//!
//! lance reads the object store's settings from the environment itself (every `AWS_*`,
//! `GOOGLE_*` and `AZURE_*` variable its builders know, e.g. `AWS_ENDPOINT`,
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`), so nothing
//! is passed for those. LanceDB Cloud reads nothing from the environment; Groundwork passes
//! `LANCEDB_API_KEY`, `LANCEDB_REGION` and `LANCEDB_HOST_OVERRIDE` as the Python client does.
//!
//! The errors lance returns for a bad bucket carry the server's whole XML body (request
//! ids, the string that was signed); [`explain`] replaces them with one sentence naming
//! the fault and the variables to check. Secrets never appear in it: it is built from the
//! URI, the endpoint and the server's error code only.

use super::{Result, StoreError};

/// The object-store schemes lancedb's `aws`, `gcs` and `azure` features open, and LanceDB
/// Cloud's. (`memory://` is built in.)
const CLOUD_SCHEMES: [&str; 6] = ["s3", "s3+ddb", "gs", "az", "abfss", "db"];

/// The scheme of `uri` when it is an object store's or LanceDB Cloud's.
pub fn cloud_scheme(uri: &str) -> Option<&'static str> {
    let (scheme, _) = uri.split_once("://")?;
    CLOUD_SCHEMES
        .iter()
        .copied()
        .find(|s| s.eq_ignore_ascii_case(scheme))
}

/// Connects to the database at `uri` (already made absolute when local).
pub(super) async fn connect(uri: &str) -> Result<lancedb::Connection> {
    let scheme = cloud_scheme(uri);
    if let Some(scheme) = scheme.filter(|s| needs_cloud_feature(s)) {
        return Err(StoreError::Other(format!(
            "{uri} is on {}, which this build of groundwork cannot open: build it with \
             `cargo build --release --features cloud`",
            place(scheme)
        )));
    }
    let builder = lancedb::connect(uri);
    #[cfg(feature = "cloud")]
    let builder = if scheme == Some("db") {
        lancedb_cloud(builder, uri, &|k| std::env::var(k).ok())?
    } else {
        builder
    };
    builder.execute().await.map_err(|e| explain(uri, e.into()))
}

/// LanceDB Cloud's key, region and host from the environment (lancedb's Python client
/// reads the same variables; the region defaults to `us-east-1` there too).
#[cfg(feature = "cloud")]
fn lancedb_cloud(
    builder: lancedb::connection::ConnectBuilder,
    uri: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<lancedb::connection::ConnectBuilder> {
    let settings = cloud_settings(uri, var)?;
    let mut builder = builder.api_key(&settings.key).region(&settings.region);
    if let Some(host) = &settings.host {
        builder = builder.host_override(host);
    }
    Ok(builder)
}

/// What connecting to LanceDB Cloud takes from the environment.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "cloud"), allow(dead_code))]
struct CloudSettings {
    key: String,
    region: String,
    host: Option<String>,
}

/// LanceDB Cloud's key (required), region (default `us-east-1`) and host override.
#[cfg_attr(not(feature = "cloud"), allow(dead_code))]
fn cloud_settings(uri: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<CloudSettings> {
    let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    let Some(key) = set("LANCEDB_API_KEY") else {
        return Err(StoreError::Other(format!(
            "{uri} is a LanceDB Cloud database: set LANCEDB_API_KEY (and LANCEDB_REGION, \
             default us-east-1)"
        )));
    };
    Ok(CloudSettings {
        key,
        region: set("LANCEDB_REGION").unwrap_or_else(|| "us-east-1".into()),
        host: set("LANCEDB_HOST_OVERRIDE"),
    })
}

/// Whether this build lacks what opens `scheme` (S3 is in every build; the others come
/// with the `cloud` feature).
fn needs_cloud_feature(scheme: &str) -> bool {
    !cfg!(feature = "cloud") && !matches!(scheme, "s3" | "s3+ddb")
}

/// What a scheme is, for messages.
fn place(scheme: &str) -> &'static str {
    match scheme {
        "s3" | "s3+ddb" => "S3 object storage (s3://)",
        "gs" => "Google Cloud Storage (gs://)",
        "az" | "abfss" => "Azure Blob Storage (az://)",
        _ => "LanceDB Cloud (db://)",
    }
}

/// What went wrong talking to an object store, read from the error's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The bucket (container) does not exist.
    NoBucket,
    /// The server did not accept the credentials; the server's error code.
    Credentials(String),
    /// The credentials are valid but may not touch this bucket.
    Denied,
    /// No answer from the endpoint; what the connection said.
    Unreachable(String),
}

/// Classifies an object-store error by the codes S3, GCS and Azure answer with and the
/// messages the HTTP client gives when no connection is made.
pub fn classify(text: &str) -> Option<Fault> {
    let has = |needle: &str| text.contains(needle);
    if has("NoSuchBucket") || has("ContainerNotFound") || has("The specified bucket does not exist")
    {
        return Some(Fault::NoBucket);
    }
    for code in [
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "AuthenticationFailed",
        "InvalidAuthenticationInfo",
        "invalid_grant",
    ] {
        if has(code) {
            return Some(Fault::Credentials(code.into()));
        }
    }
    if has("AccessDenied") || has("AuthorizationPermissionMismatch") || has("403 Forbidden") {
        return Some(Fault::Denied);
    }
    let lower = text.to_ascii_lowercase();
    for (needle, said) in [
        ("connection refused", "connection refused"),
        ("dns error", "the host name does not resolve"),
        ("failed to lookup address", "the host name does not resolve"),
        ("timed out", "timed out"),
        ("connection reset", "connection reset"),
        ("tcp connect error", "no connection"),
        ("error sending request", "no connection"),
        ("http error", "no connection"),
    ] {
        if lower.contains(needle) {
            return Some(Fault::Unreachable(said.into()));
        }
    }
    None
}

/// The endpoint a user configured for `scheme`, or the service's name.
fn endpoint(scheme: &str, var: &dyn Fn(&str) -> Option<String>) -> String {
    let keys: &[&str] = match scheme {
        "s3" | "s3+ddb" => &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"],
        "gs" => &["GOOGLE_SERVICE_ACCOUNT_BASE_URL"],
        "az" | "abfss" => &["AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT"],
        _ => &["LANCEDB_HOST_OVERRIDE"],
    };
    keys.iter()
        .find_map(|k| var(k).filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| {
            match scheme {
                "s3" | "s3+ddb" => "AWS S3",
                "gs" => "Google Cloud Storage",
                "az" | "abfss" => "Azure Blob Storage",
                _ => "LanceDB Cloud",
            }
            .into()
        })
}

/// The variables that hold the credentials for `scheme`.
fn credential_vars(scheme: &str) -> &'static str {
    match scheme {
        "s3" | "s3+ddb" => "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)",
        "gs" => "GOOGLE_SERVICE_ACCOUNT (or GOOGLE_APPLICATION_CREDENTIALS)",
        "az" | "abfss" => "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY",
        _ => "LANCEDB_API_KEY",
    }
}

/// The variables that hold the endpoint for `scheme`.
fn endpoint_vars(scheme: &str) -> &'static str {
    match scheme {
        "s3" | "s3+ddb" => "AWS_ENDPOINT (or AWS_ENDPOINT_URL; AWS_ALLOW_HTTP=true for http://)",
        "gs" => "GOOGLE_SERVICE_ACCOUNT_BASE_URL",
        "az" | "abfss" => "AZURE_STORAGE_ENDPOINT (AZURE_STORAGE_ALLOW_HTTP=true for http://)",
        _ => "LANCEDB_HOST_OVERRIDE and LANCEDB_REGION",
    }
}

/// The bucket (or container) of an object-store URI.
fn bucket(uri: &str) -> &str {
    let rest = uri.split_once("://").map(|(_, r)| r).unwrap_or(uri);
    let host = rest.split('/').next().unwrap_or(rest);
    // az://container@account/…
    host.split('@').next().unwrap_or(host)
}

/// The sentence for `fault` at `uri`.
pub fn describe(uri: &str, fault: &Fault, var: &dyn Fn(&str) -> Option<String>) -> String {
    let scheme = cloud_scheme(uri).unwrap_or("s3");
    let at = endpoint(scheme, var);
    match fault {
        Fault::NoBucket => format!(
            "the bucket '{}' does not exist at {at}: create it, or correct the bucket in {uri}",
            bucket(uri)
        ),
        Fault::Credentials(code) => format!(
            "{at} rejected the credentials for {uri} ({code}): check {}",
            credential_vars(scheme)
        ),
        Fault::Denied => format!(
            "{at} denied access to {uri} (AccessDenied): the credentials may not read and write \
             the bucket '{}'",
            bucket(uri)
        ),
        Fault::Unreachable(said) => format!(
            "cannot reach the object store at {at} for {uri} ({said}): check {} and the network",
            endpoint_vars(scheme)
        ),
    }
}

/// `e` explained in one sentence when `uri` is on object storage and the fault is one
/// [`classify`] knows; otherwise `e` as it is. The original is logged (redacted).
pub(super) fn explain(uri: &str, e: StoreError) -> StoreError {
    if cloud_scheme(uri).is_none() {
        return e;
    }
    let StoreError::Lance(inner) = &e else {
        return e;
    };
    let mut text = inner.to_string();
    let mut source = std::error::Error::source(inner);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    match classify(&text) {
        Some(fault) => {
            tracing::warn!(uri, error = %text, "object store error");
            StoreError::Other(describe(uri, &fault, &|k| std::env::var(k).ok()))
        }
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn schemes_that_need_the_cloud_feature() {
        assert_eq!(cloud_scheme("s3://b/kb.lancedb"), Some("s3"));
        assert_eq!(cloud_scheme("S3://b/kb"), Some("s3"));
        assert_eq!(cloud_scheme("gs://b/kb"), Some("gs"));
        assert_eq!(cloud_scheme("az://c/kb"), Some("az"));
        assert_eq!(cloud_scheme("db://my-db"), Some("db"));
        assert_eq!(cloud_scheme("memory://x"), None);
        assert_eq!(cloud_scheme("/tmp/kb.lancedb"), None);
        assert_eq!(cloud_scheme("file:///tmp/kb"), None);
    }

    #[test]
    fn lancedb_cloud_needs_a_key_and_defaults_the_region() {
        let err = cloud_settings("db://my-database", &vars(&[("LANCEDB_API_KEY", " ")]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "db://my-database is a LanceDB Cloud database: set LANCEDB_API_KEY (and \
             LANCEDB_REGION, default us-east-1)"
        );
        assert_eq!(
            cloud_settings("db://x", &vars(&[("LANCEDB_API_KEY", "k-123")])).unwrap(),
            CloudSettings {
                key: "k-123".into(),
                region: "us-east-1".into(),
                host: None
            }
        );
        let all = vars(&[
            ("LANCEDB_API_KEY", "k-123"),
            ("LANCEDB_REGION", "eu-west-1"),
            ("LANCEDB_HOST_OVERRIDE", "http://127.0.0.1:9"),
        ]);
        assert_eq!(
            cloud_settings("db://x", &all).unwrap().host.as_deref(),
            Some("http://127.0.0.1:9")
        );
    }

    #[test]
    fn the_default_build_opens_s3_and_names_the_feature_for_the_rest() {
        assert!(!needs_cloud_feature("s3"));
        assert!(!needs_cloud_feature("s3+ddb"));
        for scheme in ["gs", "az", "abfss", "db"] {
            assert_eq!(
                needs_cloud_feature(scheme),
                !cfg!(feature = "cloud"),
                "{scheme}"
            );
        }
    }

    #[test]
    fn faults_are_read_from_the_servers_codes() {
        let body = "Generic S3 error: Error performing list request: Client error with \
                    status 404 Not Found: <?xml version=\"1.0\"?><Error><Code>NoSuchBucket\
                    </Code></Error>";
        assert_eq!(classify(body), Some(Fault::NoBucket));
        assert_eq!(
            classify("status 403 Forbidden: <Code>SignatureDoesNotMatch</Code>"),
            Some(Fault::Credentials("SignatureDoesNotMatch".into()))
        );
        assert_eq!(
            classify("<Code>InvalidAccessKeyId</Code>"),
            Some(Fault::Credentials("InvalidAccessKeyId".into()))
        );
        assert_eq!(
            classify("status 403 Forbidden: <Code>AccessDenied</Code>"),
            Some(Fault::Denied)
        );
        assert_eq!(
            classify(
                "error sending request: client error (Connect): tcp connect error: Connection refused (os error 111)"
            ),
            Some(Fault::Unreachable("connection refused".into()))
        );
        assert_eq!(classify("Table 'chunks' was not found"), None);
    }

    #[test]
    fn messages_name_the_bucket_the_endpoint_and_what_to_check() {
        let env = vars(&[("AWS_ENDPOINT", "http://127.0.0.1:9000")]);
        let uri = "s3://research/kb.lancedb";
        assert_eq!(
            describe(uri, &Fault::NoBucket, &env),
            "the bucket 'research' does not exist at http://127.0.0.1:9000: create it, or \
             correct the bucket in s3://research/kb.lancedb"
        );
        let m = describe(
            uri,
            &Fault::Credentials("SignatureDoesNotMatch".into()),
            &env,
        );
        assert!(m.contains("AWS_SECRET_ACCESS_KEY"), "{m}");
        let m = describe(
            uri,
            &Fault::Unreachable("connection refused".into()),
            &vars(&[]),
        );
        assert!(
            m.starts_with("cannot reach the object store at AWS S3"),
            "{m}"
        );
        assert!(m.contains("AWS_ENDPOINT"), "{m}");
        let m = describe("az://docs@acct/kb", &Fault::NoBucket, &vars(&[]));
        assert!(m.contains("'docs'") && m.contains("Azure"), "{m}");
    }
}
