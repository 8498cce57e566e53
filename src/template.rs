//! Filling the `{name}` placeholders of the texts under `assets/` that the model reads.

/// Replaces `{name}` placeholders in one pass, so a value containing a placeholder is
/// never expanded again. Unknown placeholders are kept.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let replaced = after.find('}').and_then(|end| {
            let name = &after[..end];
            values
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value, end))
        });
        match replaced {
            Some((value, end)) => {
                out.push_str(value);
                rest = &after[end + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::fill;

    #[test]
    fn placeholders_are_filled_once_and_unknown_ones_kept() {
        assert_eq!(fill("a {x} b {y}", &[("x", "1"), ("y", "2")]), "a 1 b 2");
        assert_eq!(fill("{x}{x}", &[("x", "{y}"), ("y", "no")]), "{y}{y}");
        assert_eq!(fill("{z} {", &[("x", "1")]), "{z} {");
    }
}
