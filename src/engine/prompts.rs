//! Every sentence of engine prose the model reads, loaded from `assets/prompts/engine/`.
//!
//! The texts are ours (see SPEC preamble); machine literals such as tool names stay in
//! code. Templates use `{name}` placeholders filled by [`fill`]. Each file ends with a
//! newline that is trimmed here.

macro_rules! prompt {
    ($(#[$meta:meta])* $name:ident, $file:literal) => {
        $(#[$meta])*
        pub fn $name() -> &'static str {
            include_str!(concat!("../../assets/prompts/engine/", $file)).trim_end()
        }
    };
}

prompt!(
    /// Description of the `load_capability` tool.
    load_capability_description,
    "load_capability_description.txt"
);
prompt!(
    /// Description of the `id` argument of `load_capability`.
    load_capability_id_description,
    "load_capability_id_description.txt"
);
prompt!(
    /// First line of the deferred-capability catalogue.
    deferred_catalogue_header,
    "deferred_catalogue_header.txt"
);
prompt!(
    /// Closing sentence of the catalogue.
    deferred_catalogue_footer,
    "deferred_catalogue_footer.txt"
);
prompt!(
    /// Appended to a `load_capability` return; placeholder `{tools}`.
    load_capability_tools,
    "load_capability_tools.txt"
);
prompt!(
    /// Retry text for an unknown capability id; placeholder `{id}`.
    load_capability_unknown,
    "load_capability_unknown.txt"
);
prompt!(
    /// Retry text for an unknown tool; placeholders `{name}`, `{available}`.
    unknown_tool,
    "unknown_tool.txt"
);
prompt!(
    /// Retry text for arguments that are not a JSON object; placeholders `{name}`, `{error}`.
    invalid_tool_args,
    "invalid_tool_args.txt"
);
prompt!(
    /// How a tool retry prompt reads on the wire; placeholder `{content}`.
    retry_suffix,
    "retry_suffix.txt"
);
prompt!(
    /// Tool return recorded for an output-tool call.
    output_tool_return,
    "output_tool_return.txt"
);
prompt!(
    /// Tool return recorded for calls skipped after an output-tool call.
    output_tool_skipped,
    "output_tool_skipped.txt"
);

/// Placeholders are filled by the shared [`crate::template::fill`].
pub use crate::template::fill;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_have_their_placeholders() {
        assert!(load_capability_unknown().contains("{id}"));
        assert_eq!(
            fill(load_capability_unknown(), &[("id", "x")]),
            "No capability found with id 'x'."
        );
        assert!(deferred_catalogue_header().contains("`load_capability`"));
        assert!(unknown_tool().contains("{name}") && unknown_tool().contains("{available}"));
        assert!(retry_suffix().starts_with("{content}"));
        assert!(!output_tool_return().ends_with('\n'));
    }
}
