//! The capsule of cited evidence (SPEC §8.2, §8.5): the evidence views compaction reads,
//! the entries in capsule order, the capsule text and its pictures, and the key that says
//! whether a capsule built earlier in the run still holds.

use std::collections::HashSet;

use super::{CompactionError, ENTRY_SEPARATOR, capsule_header, group_label, picture_label};
use crate::capabilities::state::{CapabilityEvidenceRecord, Citation, EvidenceState, OrderedMap};
use crate::engine::messages::{BinaryContent, UserContent};

/// One discovered evidence capability, as compaction sees it (§8.1). Built fresh
/// for every request, never stored.
#[derive(Debug, Clone)]
pub struct EvidenceView<'a> {
    /// The state namespace (`rag` / `analysis`); also the refs' `capability`.
    pub capability: &'a str,
    /// Its ledger.
    pub record: &'a CapabilityEvidenceRecord,
    /// Its citations by chunk id.
    pub citation_index: &'a OrderedMap<Citation>,
    /// Its evidence tools (`rag_search`; `analysis_search`, `analysis_execute_code`).
    /// The cite tool is not one.
    pub tool_names: Vec<String>,
    /// Whether its `for_run` found a record with a question (§3.1).
    pub state_carried: bool,
}

impl<'a> EvidenceView<'a> {
    /// The view of a capability's settled state.
    pub fn new(
        capability: &'a str,
        state: &'a EvidenceState,
        tool_names: &[&str],
        state_carried: bool,
    ) -> Self {
        EvidenceView {
            capability,
            record: &state.evidence,
            citation_index: &state.citation_index,
            tool_names: tool_names.iter().map(|s| s.to_string()).collect(),
            state_carried,
        }
    }
}

/// The boundary: identity of the question in progress, `max(question or 0)`.
pub fn question_in_progress(views: &[EvidenceView<'_>]) -> usize {
    views
        .iter()
        .map(|v| v.record.question.unwrap_or(0))
        .max()
        .unwrap_or(0) as usize
}

/// The union of the views' evidence tool names, sorted.
pub fn owned_tools(views: &[EvidenceView<'_>]) -> Vec<String> {
    let mut names: Vec<String> = views
        .iter()
        .flat_map(|v| v.tool_names.iter().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// One cited piece of evidence in the capsule.
#[derive(Debug, Clone, PartialEq)]
pub struct CapsuleEntry<'a> {
    pub capability: &'a str,
    pub chunk_id: &'a str,
    /// The newest question that cited it.
    pub question: u64,
    pub citation: &'a Citation,
}

impl CapsuleEntry<'_> {
    /// `"<title>"`, plus ` (<uri>)` when the uri differs; the uri alone without a title.
    pub fn source(&self) -> String {
        let uri = self.citation.document_uri.as_str();
        match self.citation.document_title.as_deref() {
            Some(title) if !title.is_empty() => {
                if !uri.is_empty() && uri != title {
                    format!("\"{title}\" ({uri})")
                } else {
                    format!("\"{title}\"")
                }
            }
            _ => uri.to_string(),
        }
    }

    /// `[<chunk_id>] Source: <source>`, the `Collection: <name>` line when asked for,
    /// then the content.
    pub fn render(&self, with_collection: bool) -> String {
        let mut text = String::new();
        self.render_into(&mut text, with_collection);
        text
    }

    /// [`Self::render`], appended to `out`.
    pub fn render_into(&self, out: &mut String, with_collection: bool) {
        out.push('[');
        out.push_str(self.chunk_id);
        out.push_str("] Source: ");
        let uri = self.citation.document_uri.as_str();
        match self.citation.document_title.as_deref() {
            Some(title) if !title.is_empty() => {
                out.push('"');
                out.push_str(title);
                out.push('"');
                if !uri.is_empty() && uri != title {
                    out.push_str(" (");
                    out.push_str(uri);
                    out.push(')');
                }
            }
            _ => out.push_str(uri),
        }
        if with_collection && let Some(collection) = &self.citation.collection {
            out.push_str("\nCollection: ");
            out.push_str(collection);
        }
        out.push('\n');
        out.push_str(&self.citation.content);
    }
}

/// The cited entries, sorted by (question desc, capability asc, chunk_id asc).
/// Retrieved-only occurrences are skipped; a cited one without a citation record is
/// an error.
pub fn eligible_entries<'a>(
    views: &[EvidenceView<'a>],
) -> Result<Vec<CapsuleEntry<'a>>, CompactionError> {
    let mut entries = Vec::new();
    for view in views {
        for (chunk_id, occurrence) in view.record.occurrences.iter() {
            let Some(&question) = occurrence.cited_in_questions.iter().max() else {
                continue;
            };
            let Some(citation) = view.citation_index.get(chunk_id) else {
                return Err(CompactionError::MissingCitation {
                    capability: view.capability.to_string(),
                    chunk_id: chunk_id.to_string(),
                    questions: occurrence.cited_in_questions.clone(),
                });
            };
            entries.push(CapsuleEntry {
                capability: view.capability,
                chunk_id,
                question,
                citation,
            });
        }
    }
    entries.sort_by(|a, b| {
        b.question
            .cmp(&a.question)
            .then_with(|| a.capability.cmp(b.capability))
            .then_with(|| a.chunk_id.cmp(b.chunk_id))
    });
    Ok(entries)
}

/// A capsule entry read back from a capsule's text: the cited chunk and its source line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapsuleEntryRef {
    pub chunk_id: String,
    /// What follows `Source: ` (`"<title>" (<uri>)`, `"<title>"` or the uri).
    pub source: String,
}

impl CapsuleEntryRef {
    /// The document as the source names it: the title without its quotes, else the uri.
    pub fn document(&self) -> String {
        match self
            .source
            .strip_prefix('"')
            .and_then(|r| r.split_once('"'))
        {
            Some((title, _)) => title.to_string(),
            None => self.source.clone(),
        }
    }
}

/// The entries of a capsule text as [`build_capsule`] writes it (the inverse of
/// [`CapsuleEntry::render_into`]), in capsule order: every piece after an
/// [`ENTRY_SEPARATOR`] whose first line is `[<chunk_id>] Source: <source>`. The header
/// and the group labels (`[Cited evidence group k]`, no `Source:`) are not entries; a
/// chunk cited by two capabilities is listed once.
pub fn capsule_entry_refs(text: &str) -> Vec<CapsuleEntryRef> {
    let mut out: Vec<CapsuleEntryRef> = Vec::new();
    for piece in text.split(ENTRY_SEPARATOR).skip(1) {
        let first = piece.lines().next().unwrap_or_default();
        let Some((id, source)) = first
            .strip_prefix('[')
            .and_then(|rest| rest.split_once("] Source: "))
        else {
            continue;
        };
        if id.is_empty() || id.contains(char::is_whitespace) || id.contains(']') {
            continue;
        }
        if out.iter().any(|e| e.chunk_id == id) {
            continue;
        }
        out.push(CapsuleEntryRef {
            chunk_id: id.to_string(),
            source: source.to_string(),
        });
    }
    out
}

/// A cited picture to re-attach, with the label that must travel with it (§8.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetainedPicture {
    /// The owning capability (ns), which fetches the bytes.
    pub capability: String,
    /// The first chunk (in capsule order) that cited it.
    pub chunk_id: String,
    pub document_id: String,
    pub self_ref: String,
    pub label: String,
}

/// Everything compaction inserts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capsule {
    /// `""` when nothing was cited.
    pub text: String,
    /// Deduplicated on (capability, document_id, self_ref), in capsule order.
    pub pictures: Vec<RetainedPicture>,
}

/// Builds the capsule text and its picture list (§8.2, §8.5).
///
/// When the entries name more than one collection, each entry carrying one gets a
/// `Collection: <name>` line after its source.
pub fn build_capsule(views: &[EvidenceView<'_>]) -> Result<Capsule, CompactionError> {
    let entries = eligible_entries(views)?;
    if entries.is_empty() {
        return Ok(Capsule::default());
    }
    let collections: HashSet<Option<&str>> = entries
        .iter()
        .map(|e| e.citation.collection.as_deref())
        .collect();
    let with_collection = collections.len() > 1;

    // One buffer, sized once: the contents dominate, plus a line of source per entry.
    let size: usize = entries
        .iter()
        .map(|e| {
            e.citation.content.len()
                + e.chunk_id.len()
                + e.citation.document_uri.len()
                + e.citation.document_title.as_ref().map_or(0, String::len)
                + 64
        })
        .sum();
    let mut text = String::with_capacity(capsule_header().len() + size);
    text.push_str(capsule_header());
    let mut pictures = Vec::new();
    let mut seen: HashSet<(&str, &str, &str)> = HashSet::new();
    let mut position = 0;
    let mut current: Option<u64> = None;
    for entry in &entries {
        if current != Some(entry.question) {
            position += 1;
            current = Some(entry.question);
            text.push_str(ENTRY_SEPARATOR);
            text.push_str(&group_label(position));
        }
        text.push_str(ENTRY_SEPARATOR);
        entry.render_into(&mut text, with_collection);
        for self_ref in &entry.citation.picture_refs {
            let identity = (
                entry.capability,
                entry.citation.document_id.as_str(),
                self_ref.as_str(),
            );
            if !seen.insert(identity) {
                continue;
            }
            pictures.push(RetainedPicture {
                capability: entry.capability.to_string(),
                chunk_id: entry.chunk_id.to_string(),
                document_id: entry.citation.document_id.clone(),
                self_ref: self_ref.clone(),
                label: picture_label(entry.chunk_id, self_ref),
            });
        }
    }
    Ok(Capsule { text, pictures })
}

/// What a capsule is built from, cheap to compare: per view its namespace and the size
/// of its citation index, and per cited occurrence its chunk id, its newest citing
/// question and the length of its citation's content. Citations are only ever added
/// (`cite` never replaces one), so while a run goes on, an equal key means the same
/// capsule text and the same pictures: the capsule is rebuilt only when a citation
/// changes, not for every request of a question (SPEC §8.1 step 4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapsuleKey {
    views: Vec<ViewKey>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ViewKey {
    capability: String,
    citations: usize,
    cited: Vec<(String, u64, usize)>,
}

/// The cited occurrences of a view, in record order: (chunk id, newest question,
/// content length; `usize::MAX` when the citation record is missing).
fn cited<'a>(view: &'a EvidenceView<'_>) -> impl Iterator<Item = (&'a str, u64, usize)> + 'a {
    view.record
        .occurrences
        .iter()
        .filter_map(move |(chunk_id, occurrence)| {
            let question = *occurrence.cited_in_questions.iter().max()?;
            let length = view
                .citation_index
                .get(chunk_id)
                .map_or(usize::MAX, |c| c.content.len());
            Some((chunk_id, question, length))
        })
}

impl CapsuleKey {
    /// The key of the capsule `views` would build.
    pub fn of(views: &[EvidenceView<'_>]) -> Self {
        CapsuleKey {
            views: views
                .iter()
                .map(|view| ViewKey {
                    capability: view.capability.to_string(),
                    citations: view.citation_index.len(),
                    cited: cited(view)
                        .map(|(id, question, length)| (id.to_string(), question, length))
                        .collect(),
                })
                .collect(),
        }
    }

    /// Whether a capsule built under this key is still the one `views` would build.
    /// Compares in place, allocating nothing.
    pub fn holds_for(&self, views: &[EvidenceView<'_>]) -> bool {
        self.views.len() == views.len()
            && self.views.iter().zip(views).all(|(key, view)| {
                key.capability == view.capability && key.citations == view.citation_index.len() && {
                    let mut now = cited(view);
                    key.cited.iter().all(|(id, question, length)| {
                        now.next() == Some((id.as_str(), *question, *length))
                    }) && now.next().is_none()
                }
            })
    }
}

/// The media type of PNG, JPEG, GIF or WebP bytes, from their signature; `None` for
/// anything else. A cheap stand-in for decoding (the engine may pass a real decoder
/// to [`capsule_images_with`]).
pub fn image_media_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 8 {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) && bytes.len() > 3 {
        Some("image/jpeg")
    } else if (bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a")) && bytes.len() > 6 {
        Some("image/gif")
    } else if bytes.len() > 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The `[label, image, label, image, ...]` user content for the retained pictures.
/// `fetch` returns a picture's bytes (`None` when the fetch failed or found nothing);
/// a picture without decodable bytes is left out together with its label.
pub fn capsule_images(
    pictures: &[RetainedPicture],
    fetch: impl FnMut(&RetainedPicture) -> Option<Vec<u8>>,
) -> Vec<UserContent> {
    capsule_images_with(pictures, fetch, |bytes| {
        image_media_type(bytes).map(str::to_string)
    })
}

/// [`capsule_images`] with the caller's decodability check, which returns the
/// media type of a decodable image.
pub fn capsule_images_with(
    pictures: &[RetainedPicture],
    mut fetch: impl FnMut(&RetainedPicture) -> Option<Vec<u8>>,
    decode: impl Fn(&[u8]) -> Option<String>,
) -> Vec<UserContent> {
    let mut content = Vec::new();
    for picture in pictures {
        let Some(bytes) = fetch(picture) else {
            continue;
        };
        let Some(media_type) = decode(&bytes) else {
            continue;
        };
        let mut image = BinaryContent::from_bytes(&bytes, media_type);
        image.identifier = Some(picture.self_ref.clone());
        content.push(UserContent::Text(picture.label.clone()));
        content.push(UserContent::Binary(image));
    }
    content
}
