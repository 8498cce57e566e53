//! The `documents.docling_pages` blob: page rasters in and out.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{PageRaster, Result, StoreError};

/// `docling_pages`: zstd JSON map `"<page_no>" -> {page_no, size{width,height}, image{uri}}`
/// with the raster as a PNG data URI.
pub(super) fn encode_pages(pages: &[PageRaster]) -> Result<Vec<u8>> {
    use base64::Engine;
    let mut map = Map::new();
    for p in pages {
        let data = base64::engine::general_purpose::STANDARD.encode(&p.png);
        map.insert(
            p.page_no.to_string(),
            json!({
                "page_no": p.page_no,
                "size": {"width": p.width, "height": p.height},
                "image": {
                    "mimetype": "image/png",
                    "dpi": 72,
                    "size": {"width": p.width, "height": p.height},
                    "uri": format!("data:image/png;base64,{data}"),
                },
            }),
        );
    }
    zstd::encode_all(Value::Object(map).to_string().as_bytes(), 3)
        .map_err(|e| StoreError::Other(format!("compressing docling_pages: {e}")))
}

pub(super) fn decode_pages(blob: &[u8]) -> BTreeMap<i64, Vec<u8>> {
    use base64::Engine;
    let Ok(raw) = zstd::decode_all(blob) else {
        return BTreeMap::new();
    };
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(&raw) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for (k, v) in map {
        let Ok(page) = k.parse::<i64>() else { continue };
        let uri = v
            .pointer("/image/uri")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some((_, data)) = uri.split_once("base64,")
            && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data)
        {
            out.insert(page, bytes);
        }
    }
    out
}

/// Page sizes in points (`<page_no>.size`) kept in a `docling_pages` blob; haiku.rag keeps
/// them here rather than in the stored `DoclingDocument`.
pub(super) fn decode_page_sizes(blob: &[u8]) -> BTreeMap<i64, (f64, f64)> {
    let Ok(raw) = zstd::decode_all(blob) else {
        return BTreeMap::new();
    };
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(&raw) else {
        return BTreeMap::new();
    };
    map.iter()
        .filter_map(|(k, v)| {
            let w = v.pointer("/size/width").and_then(Value::as_f64)?;
            let h = v.pointer("/size/height").and_then(Value::as_f64)?;
            Some((k.parse().ok()?, (w, h)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_round_trip() {
        let pages = vec![PageRaster {
            page_no: 2,
            png: vec![1, 2, 3],
            width: 10,
            height: 20,
        }];
        let blob = encode_pages(&pages).unwrap();
        let back = decode_pages(&blob);
        assert_eq!(back.get(&2), Some(&vec![1, 2, 3]));
        assert_eq!(decode_page_sizes(&blob).get(&2), Some(&(10.0, 20.0)));
    }
}
