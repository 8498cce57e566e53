//! haiku.rag's web-app session store (0.99+), read only: SQLite at
//! `<data dir>/app/sessions.db`, one table `sessions(id, title, created_at, updated_at,
//! data)` whose `data` is JSON holding the conversation as AG-UI messages and the
//! capabilities' `state`. A store is listed ([`list`]); one of its sessions is addressed
//! as `STORE#ID` and read as the host session it is (`messages` + `state`), its AG-UI
//! messages turned back into pydantic-ai's as pydantic-ai's AG-UI adapter does. Nothing
//! here ever writes: the store is opened read-only, and immutable when no writer has it
//! open (no `-wal` or `-journal` beside it), so not even a shared-memory file is made.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use serde_json::{Map, Value, json};

use super::{Session, SessionError};

/// The suffix pydantic-ai adds to a retry prompt when it sends it; AG-UI keeps the text
/// as sent, and the part gets it back when it is sent again.
const RETRY_SUFFIX: &str = "\n\nFix the errors and try again.";

/// One session of a store, as [`list`] gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub id: String,
    pub title: String,
    pub created_at: String,
    pub updated_at: String,
    /// The text of each user message, in order (the questions, and the citation
    /// policy's redirects, which the host tells apart).
    pub prompts: Vec<String>,
}

/// `STORE#ID` split, when STORE is a web-app session store.
pub fn address(path: &Path) -> Option<(PathBuf, String)> {
    let text = path.to_str()?;
    let (store, id) = text.rsplit_once('#')?;
    let store = PathBuf::from(store);
    (!id.is_empty() && is_app_store(&store)).then(|| (store, id.to_string()))
}

/// Whether `path` is a web-app session store: an SQLite file with a `sessions` table
/// that has a `data` column (Groundwork's own session files have neither).
pub fn is_app_store(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 72];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head));
    let groundwork = i32::from_be_bytes([head[68], head[69], head[70], head[71]])
        == super::store::APPLICATION_ID;
    read.is_ok()
        && &head[..16] == b"SQLite format 3\0"
        && !groundwork
        && open(path).is_ok_and(|c| {
            c.prepare("SELECT id, title, created_at, updated_at, data FROM sessions LIMIT 0")
                .is_ok()
        })
}

fn open(path: &Path) -> rusqlite::Result<Connection> {
    let beside = |suffix: &str| {
        let mut name = path.as_os_str().to_os_string();
        name.push(suffix);
        Path::new(&name).exists()
    };
    // A store no writer has open is read as immutable (SQLite then makes no file at all);
    // one a running web app writes is read as of its last commit.
    let mode = if beside("-wal") || beside("-journal") {
        "mode=ro"
    } else {
        "immutable=1"
    };
    let uri = format!("file:{}?{mode}", uri_path(path));
    let conn = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}

/// `path` as the path of an SQLite URI: absolute, `%`, `?` and `#` escaped.
fn uri_path(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = String::new();
    for c in absolute.to_string_lossy().chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}

fn unreadable(path: &Path, problem: impl std::fmt::Display) -> SessionError {
    SessionError::Damaged {
        path: path.to_path_buf(),
        problem: format!("haiku.rag's web-app session store, unreadable: {problem}")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// The sessions of the store at `path`, oldest first.
pub fn list(path: &Path) -> Result<Vec<Listed>, SessionError> {
    let conn = open(path).map_err(|e| unreadable(path, e))?;
    let mut stmt = conn
        .prepare(
            "SELECT id, title, created_at, updated_at, data FROM sessions ORDER BY created_at, id",
        )
        .map_err(|e| unreadable(path, e))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, Option<String>>(4)?,
            ))
        })
        .map_err(|e| unreadable(path, e))?;
    let mut out = Vec::new();
    for row in rows {
        let (id, title, created_at, updated_at, data) = row.map_err(|e| unreadable(path, e))?;
        let prompts = data
            .as_deref()
            .and_then(|d| serde_json::from_str::<Value>(d).ok())
            .and_then(|d| d.get("messages").and_then(Value::as_array).cloned())
            .map(|messages| {
                messages
                    .iter()
                    .filter(|m| m["role"] == "user")
                    .map(|m| user_text(&m["content"]))
                    .collect()
            })
            .unwrap_or_default();
        out.push(Listed {
            id,
            title: title.unwrap_or_default(),
            created_at: created_at.unwrap_or_default(),
            updated_at: updated_at.unwrap_or_default(),
            prompts,
        });
    }
    Ok(out)
}

/// The title the web app gave the session `path` names (`STORE#ID`), when it has one.
pub fn title_of(path: &Path) -> Option<String> {
    let (store, id) = address(path)?;
    list(&store)
        .ok()?
        .into_iter()
        .find(|s| s.id == id)
        .map(|s| s.title)
        .filter(|t| !t.trim().is_empty())
}

/// The session `id` of the store at `store`, as a host session.
pub fn load(store: &Path, id: &str) -> Result<Session, SessionError> {
    let conn = open(store).map_err(|e| unreadable(store, e))?;
    let data: Option<String> = conn
        .query_row("SELECT data FROM sessions WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .map_err(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => SessionError::AppStore {
                path: store.to_path_buf(),
                message: format!(
                    "{} holds no session '{id}' (`groundwork inspect {}` lists its sessions)",
                    store.display(),
                    store.display()
                ),
            },
            e => unreadable(store, e),
        })?;
    let data: Value = serde_json::from_str(data.as_deref().unwrap_or("null"))
        .map_err(|e| unreadable(store, format!("session '{id}': {e}")))?;
    let messages = data
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| unreadable(store, format!("session '{id}' has no messages")))?;
    let state = data.get("state").cloned().unwrap_or_else(|| json!({}));
    let host = json!({ "messages": to_pydantic(messages), "state": state });
    let text = serde_json::to_string(&host)?;
    let path = PathBuf::from(format!("{}#{id}", store.display()));
    Session::parse(&text, &path).map(|(s, _)| s)
}

/// The store at `path` named without a session: its one session, else a one-line
/// refusal saying how to name one.
pub fn load_only(path: &Path) -> Result<Session, SessionError> {
    let sessions = list(path)?;
    match sessions.as_slice() {
        [one] => load(path, &one.id),
        _ => Err(SessionError::AppStore {
            path: path.to_path_buf(),
            message: format!(
                "{} is haiku.rag's web-app session store with {} sessions: name one as {}#ID (`groundwork inspect {}` lists them)",
                path.display(),
                sessions.len(),
                path.display(),
                path.display()
            ),
        }),
    }
}

/// Where questions asked over a web-app session go, when `path` names one (`STORE#ID`, or
/// a store of one session): never into the store, which is haiku.rag's; into the SQLite
/// file beside it named after the session (`sessions-ID.sqlite`), which continues it
/// from then on.
pub fn continue_at(path: &Path) -> Option<super::Continued> {
    let (store, id) = match address(path) {
        Some(at) => at,
        None if is_app_store(path) => {
            let only = list(path).ok().filter(|l| l.len() == 1);
            let id = only.map_or_else(|| "session".into(), |l| l[0].id.clone());
            (path.to_path_buf(), id)
        }
        None => return None,
    };
    let stem = store
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sessions".into());
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let beside = store.with_file_name(format!("{stem}-{safe}.sqlite"));
    if super::store::is_database(&beside) {
        return Some(super::continuing(beside, path));
    }
    Some(super::Continued {
        read: Some(path.to_path_buf()),
        note: Some(format!(
            "{} is haiku.rag's and is kept as it was; the session continues in {}",
            store.display(),
            beside.display()
        )),
        write: beside,
    })
}

/// A user message's text (AG-UI content is a string or a list of parts).
fn user_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// AG-UI messages as pydantic-ai's (the JSON `ModelMessagesTypeAdapter` reads): user,
/// system and tool messages are parts of requests, assistant messages responses;
/// consecutive parts of one side are one message, as pydantic-ai's adapter builds them.
/// A tool message with an `error` is a retry prompt; reasoning and activity messages,
/// which carry nothing a request is made of, are left out.
fn to_pydantic(messages: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut tool_names: Map<String, Value> = Map::new();
    let push = |out: &mut Vec<Value>, kind: &str, part: Value| match out.last_mut() {
        Some(last) if last["kind"] == kind => {
            if let Some(parts) = last["parts"].as_array_mut() {
                parts.push(part);
            }
        }
        _ => out.push(json!({ "kind": kind, "parts": [part] })),
    };
    for m in messages {
        match m["role"].as_str().unwrap_or("") {
            "user" => {
                let content = match &m["content"] {
                    Value::String(s) => json!(s),
                    Value::Array(parts) => Value::Array(
                        parts
                            .iter()
                            .filter_map(|p| p.get("text").and_then(Value::as_str))
                            .map(|t| json!(t))
                            .collect(),
                    ),
                    _ => json!(""),
                };
                push(
                    &mut out,
                    "request",
                    json!({"part_kind": "user-prompt", "content": content}),
                );
            }
            "system" | "developer" => push(
                &mut out,
                "request",
                json!({"part_kind": "system-prompt", "content": m["content"].as_str().unwrap_or("")}),
            ),
            "assistant" => {
                if let Some(text) = m["content"].as_str().filter(|t| !t.is_empty()) {
                    push(
                        &mut out,
                        "response",
                        json!({"part_kind": "text", "content": text}),
                    );
                }
                for call in m["toolCalls"].as_array().into_iter().flatten() {
                    let id = call["id"].as_str().unwrap_or("").to_string();
                    let name = call["function"]["name"].clone();
                    tool_names.insert(id.clone(), name.clone());
                    push(
                        &mut out,
                        "response",
                        json!({
                            "part_kind": "tool-call",
                            "tool_name": name,
                            "args": call["function"]["arguments"].as_str().unwrap_or("{}"),
                            "tool_call_id": id,
                        }),
                    );
                }
            }
            "tool" => {
                let id = m["toolCallId"].as_str().unwrap_or("");
                let name = tool_names.get(id).cloned().unwrap_or(Value::Null);
                let part = match m.get("error").and_then(Value::as_str) {
                    Some(error) => json!({
                        "part_kind": "retry-prompt",
                        "content": error.strip_suffix(RETRY_SUFFIX).unwrap_or(error),
                        "tool_name": name,
                        "tool_call_id": id,
                    }),
                    None => json!({
                        "part_kind": "tool-return",
                        "tool_name": name,
                        "content": m["content"].clone(),
                        "tool_call_id": id,
                    }),
                };
                push(&mut out, "request", part);
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ag_ui_messages_become_the_requests_and_responses_they_were() {
        let messages = vec![
            json!({"id": "1", "role": "user", "content": "What is the lamp?"}),
            json!({"id": "2", "role": "assistant", "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"query\":\"lamp\"}"}}
            ]}),
            json!({"id": "3", "role": "tool", "content": "[ab] [rank 1 of 1]", "toolCallId": "c1"}),
            json!({"id": "4", "role": "assistant", "content": "The lamp [1].", "toolCalls": [
                {"id": "c2", "type": "function", "function": {"name": "cite", "arguments": "{\"chunk_ids\":[\"ab\"]}"}}
            ]}),
            json!({"id": "5", "role": "tool", "content": "{\"ok\":true}", "toolCallId": "c2"}),
            json!({"id": "6", "role": "tool", "content": "bad\n\nFix the errors and try again.",
                   "toolCallId": "c3", "error": "bad\n\nFix the errors and try again."}),
            json!({"id": "7", "role": "reasoning", "content": "hmm"}),
            json!({"id": "8", "role": "assistant", "content": "Done."}),
        ];
        let out = to_pydantic(&messages);
        let kinds: Vec<&str> = out.iter().map(|m| m["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "request", "response", "request", "response", "request", "response"
            ]
        );
        assert_eq!(out[1]["parts"][0]["tool_name"], "search");
        assert_eq!(out[2]["parts"][0]["tool_name"], "search");
        assert_eq!(out[3]["parts"][0]["content"], "The lamp [1].");
        assert_eq!(out[3]["parts"][1]["tool_call_id"], "c2");
        // The two tool messages are one request: a return and a retry (without the suffix
        // pydantic-ai adds again when it sends it).
        assert_eq!(out[4]["parts"][0]["part_kind"], "tool-return");
        assert_eq!(out[4]["parts"][0]["tool_name"], "cite");
        assert_eq!(out[4]["parts"][1]["part_kind"], "retry-prompt");
        assert_eq!(out[4]["parts"][1]["content"], "bad");
        let history: Vec<crate::engine::messages::ModelMessage> =
            serde_json::from_value(Value::Array(out)).expect("pydantic-ai's messages");
        assert_eq!(history.len(), 6);
    }

    #[test]
    fn a_path_with_a_hash_is_a_uri_path() {
        assert!(uri_path(Path::new("/a b/s#1?.db")).ends_with("/a b/s%231%3f.db"));
    }
}
