//! The bundled demo corpus (`assets/demo`) ingests completely and gives search, context
//! expansion, pictures and page images something real to show.

use std::path::Path;

use crate::support::hashembed;
use groundwork::embed::{self, EmbedderSpec};
use groundwork::ingest::pipeline::{self, Outcome};
use groundwork::store::Store;

#[tokio::test]
async fn the_demo_corpus_ingests_and_searches() {
    let server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(server.url.clone()),
    };
    let uri = dir
        .path()
        .join("demo.lancedb")
        .to_string_lossy()
        .into_owned();
    let mut store = Store::create(&uri, &spec).await.unwrap();
    store
        .set_embedder(embed::build(&spec, &Default::default()).unwrap())
        .unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo");
    let report = pipeline::ingest_paths(&store, &[demo], &()).await.unwrap();
    assert!(report.failed().is_empty(), "{:?}", report.failed());
    assert_eq!(report.count(|o| matches!(o, Outcome::Added { .. })), 5);

    let info = store.info().await.unwrap();
    assert_eq!(info.documents, 5);
    assert!(
        info.pictures >= 3,
        "two handbook figures and the PDF chart: {info:?}"
    );

    let docs = store.list_documents(None).await.unwrap();
    let pdf = docs
        .iter()
        .find(|d| d.uri.as_deref().unwrap().ends_with(".pdf"))
        .unwrap();
    assert_eq!(store.page_images(&pdf.id).await.unwrap().len(), 3);

    // A figure caption brings its picture's bytes along.
    let hits = store
        .search("monthly solar output figure", Some(5), None)
        .await
        .unwrap();
    assert!(
        hits.iter()
            .any(|h| h.image_data.as_ref().is_some_and(|m| !m.is_empty())),
        "{hits:#?}"
    );

    // Expansion grows a hit to its section.
    let hits = store
        .search_expanded("spare modules winter storage voltage", Some(3), None)
        .await
        .unwrap();
    // (Neighbouring hits of one document merge into one result, SCENARIOS 33.)
    let top = hits
        .iter()
        .find(|h| {
            h.headings
                .as_deref()
                .is_some_and(|h| h.iter().any(|x| x == "Winter storage of spare modules"))
        })
        .expect("the winter storage section among the top three");
    assert!(top.content.contains("3.2 V"), "{}", top.content);

    // The PDF's table and pages are searchable.
    let hits = store
        .search("battery bank cycles health", Some(5), None)
        .await
        .unwrap();
    assert!(hits.iter().any(|h| h.document_id.as_deref() == Some(pdf.id.as_str())
        && h.page_numbers == vec![2]));
}

/// The demo PDF embeds its fonts, so its pages rasterise to the same pixels whatever fonts
/// a machine has: here with the machine's own fonts and with none at all (a fontconfig
/// file that lists no font directory), which must give the same PNG. The page images in the
/// workbench snapshots (tests/workbench/tui_grounding.rs) are rasters of this PDF.
#[test]
fn the_demo_pdf_embeds_its_fonts_and_rasterises_alike_without_the_machines_fonts() {
    use std::process::Command;
    let pdf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/demo/harbor-point-field-report-2026.pdf");
    let listed = Command::new("pdffonts")
        .arg(&pdf)
        .output()
        .expect("pdffonts runs (poppler-utils: .ci/setup installs it)");
    let listed = String::from_utf8_lossy(&listed.stdout);
    let fonts: Vec<&str> = listed.lines().skip(2).collect();
    assert!(!fonts.is_empty(), "{listed}");
    for font in &fonts {
        // name type encoding emb sub uni object ID
        let cols: Vec<&str> = font.split_whitespace().collect();
        assert_eq!(cols[cols.len() - 5], "yes", "not embedded: {font}");
    }

    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("no-fonts.conf");
    std::fs::write(
        &bare,
        format!(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE fontconfig SYSTEM \"fonts.dtd\">\n\
             <fontconfig><cachedir>{}</cachedir></fontconfig>\n",
            dir.path().join("cache").display()
        ),
    )
    .unwrap();
    let raster = |fontconfig: Option<&Path>, name: &str| -> Vec<u8> {
        let out = dir.path().join(name);
        let mut c = Command::new("pdftoppm");
        c.args(["-png", "-r", "72", "-singlefile"])
            .arg(&pdf)
            .arg(&out);
        if let Some(conf) = fontconfig {
            c.env("FONTCONFIG_FILE", conf);
        }
        let o = c.output().expect("pdftoppm runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(out.with_extension("png")).unwrap()
    };
    let usual = raster(None, "usual");
    let without = raster(Some(&bare), "without");
    assert!(usual.len() > 1000);
    assert!(
        usual == without,
        "page 1 rasterises differently without the machine's fonts"
    );
}
