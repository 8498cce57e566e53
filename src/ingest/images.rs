//! Images referenced from Markdown/HTML: MIME sniffing and loading (`data:` URIs and
//! relative paths).

use std::path::Path;

/// Sniff an image's MIME type from its magic bytes.
pub(crate) fn image_mime(bytes: &[u8]) -> &'static str {
    match image::guess_format(bytes) {
        Ok(image::ImageFormat::Png) => "image/png",
        Ok(image::ImageFormat::Jpeg) => "image/jpeg",
        Ok(image::ImageFormat::Gif) => "image/gif",
        Ok(image::ImageFormat::WebP) => "image/webp",
        Ok(image::ImageFormat::Bmp) => "image/bmp",
        Ok(image::ImageFormat::Tiff) => "image/tiff",
        _ => "application/octet-stream",
    }
}

/// Load an image referenced from Markdown/HTML: `data:` URIs are decoded,
/// other non-URL paths are read relative to `base`. Remote URLs are not
/// fetched.
pub(crate) fn load_image(src: &str, base: Option<&Path>) -> Option<Vec<u8>> {
    use base64::Engine;
    let src = src.trim();
    if let Some(rest) = src.strip_prefix("data:") {
        let (meta, data) = rest.split_once(',')?;
        if meta.ends_with(";base64") {
            return base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .ok();
        }
        return Some(data.as_bytes().to_vec());
    }
    if src.contains("://") || src.is_empty() {
        return None;
    }
    let base = base?;
    let rel = src.split(['?', '#']).next().unwrap_or(src);
    let rel = percent_decode(rel);
    let p = base.join(rel);
    if p.is_file() {
        std::fs::read(p).ok()
    } else {
        None
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
