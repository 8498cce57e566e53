//! Captions: which items caption a picture or table (and the reverse), and whether a
//! paragraph reads like a figure or table caption.

use crate::store::docling::label;

use super::ParsedItem;

/// Indices of each item's caption items (captions directly following a
/// picture/table, one level deeper).
pub(crate) fn captions_of(items: &[ParsedItem], idx: usize) -> Vec<usize> {
    let owner = &items[idx];
    if owner.label != label::PICTURE && owner.label != label::TABLE {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut j = idx + 1;
    while j < items.len()
        && items[j].label == label::CAPTION
        && items[j].tree_depth == owner.tree_depth + 1
    {
        out.push(j);
        j += 1;
    }
    out
}

/// Whether item `idx` is a caption owned by a preceding picture/table.
pub(crate) fn caption_owner(items: &[ParsedItem], idx: usize) -> Option<usize> {
    if items[idx].label != label::CAPTION {
        return None;
    }
    let mut j = idx;
    while j > 0 {
        j -= 1;
        let it = &items[j];
        if it.label == label::CAPTION && it.tree_depth == items[idx].tree_depth {
            continue;
        }
        if (it.label == label::PICTURE || it.label == label::TABLE)
            && it.tree_depth + 1 == items[idx].tree_depth
        {
            return Some(j);
        }
        return None;
    }
    None
}

/// Whether a paragraph reads like a figure caption ("Figure 3: ...",
/// "Fig. 2 - ...").
pub(crate) fn looks_like_figure_caption(s: &str) -> bool {
    let lower = s.trim_start().to_ascii_lowercase();
    for p in ["figure", "fig."] {
        if let Some(rest) = lower.strip_prefix(p) {
            let rest = rest.trim_start();
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            if !digits.is_empty() {
                let after = rest[digits.len()..].trim_start();
                return after.starts_with(':')
                    || after.starts_with('.')
                    || after.starts_with('-')
                    || after.starts_with('—');
            }
        }
    }
    false
}

/// Same for tables ("Table 1: ...").
pub(crate) fn looks_like_table_caption(s: &str) -> bool {
    let lower = s.trim_start().to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("table") {
        let rest = rest.trim_start();
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        if !digits.is_empty() {
            let after = rest[digits.len()..].trim_start();
            return after.starts_with(':') || after.starts_with('.');
        }
    }
    false
}
