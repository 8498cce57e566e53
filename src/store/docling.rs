//! The docling-core literals the knowledge base is written in: the schema version a
//! stored `DoclingDocument` claims, the prefix of picture item references, and (in
//! [`label`]) the item and group labels items carry. Their one home; the ingest writer,
//! the store, expansion, the sandbox and the capabilities import them from here.

/// docling-core schema version we claim (docling-core 2.104 writes 1.10.0).
pub const DOCLING_SCHEMA_VERSION: &str = "1.10.0";

/// Prefix of picture item references (`#/pictures/0`).
pub const PICTURE_REF_PREFIX: &str = "#/pictures/";

/// docling-core's labels, spelled as `DocItemLabel` (item labels) and `GroupLabel`
/// (group labels) serialise them. They work as `match` patterns.
pub mod label {
    /// A caption of a picture or table.
    pub const CAPTION: &str = "caption";
    /// A chart.
    pub const CHART: &str = "chart";
    /// A footnote.
    pub const FOOTNOTE: &str = "footnote";
    /// A mathematical formula.
    pub const FORMULA: &str = "formula";
    /// One item of a list.
    pub const LIST_ITEM: &str = "list_item";
    /// A running page footer.
    pub const PAGE_FOOTER: &str = "page_footer";
    /// A running page header.
    pub const PAGE_HEADER: &str = "page_header";
    /// A picture (figure, image).
    pub const PICTURE: &str = "picture";
    /// A section heading.
    pub const SECTION_HEADER: &str = "section_header";
    /// A table.
    pub const TABLE: &str = "table";
    /// Plain body text.
    pub const TEXT: &str = "text";
    /// The document title.
    pub const TITLE: &str = "title";
    /// A table of contents or index.
    pub const DOCUMENT_INDEX: &str = "document_index";
    /// A code block.
    pub const CODE: &str = "code";
    /// A form.
    pub const FORM: &str = "form";
    /// A key-value region.
    pub const KEY_VALUE_REGION: &str = "key_value_region";
    /// A paragraph.
    pub const PARAGRAPH: &str = "paragraph";
    /// A region of a form's fields.
    pub const FIELD_REGION: &str = "field_region";
    /// A heading inside a form.
    pub const FIELD_HEADING: &str = "field_heading";
    /// One field of a form (key and value).
    pub const FIELD_ITEM: &str = "field_item";
    /// The key of a form field.
    pub const FIELD_KEY: &str = "field_key";
    /// The value of a form field.
    pub const FIELD_VALUE: &str = "field_value";
    /// A hint attached to a form field.
    pub const FIELD_HINT: &str = "field_hint";
    /// A marker (bullet, number) standing alone.
    pub const MARKER: &str = "marker";

    /// Group label: a list of list items.
    pub const GROUP_LIST: &str = "list";
    /// Group label: a section.
    pub const GROUP_SECTION: &str = "section";
    /// Group label of the body and furniture roots.
    pub const GROUP_UNSPECIFIED: &str = "unspecified";
}
