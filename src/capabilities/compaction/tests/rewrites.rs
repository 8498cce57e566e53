//! A run's rewrites kept from request to request ([`Rewrites`]).

use super::*;

/// The run's later requests take the rewrites made for its first: the same messages,
/// with the same content as rewriting afresh. The carrier is rewritten for each request
/// (a message that carried the capsule gets a receipt once a newer return carries it),
/// and other owned tools rewrite afresh.
#[test]
fn later_requests_of_a_run_take_the_earlier_rewrites() {
    let mut messages = answered("first", "OLD 1");
    messages.extend(answered("second", "OLD 2"));
    messages.push(prompt("third"));
    let mut rewrites = Rewrites::default();
    let mut send = |messages: &[ModelMessage], boundary, tools: &[&str], capsule| {
        compact_history_owned(
            messages.to_vec(),
            &mut rewrites,
            boundary,
            tools,
            capsule,
            &[],
        )
    };
    let first = send(&messages, 8, RAG_TOOLS, "CAPSULE");
    assert_eq!(
        first,
        compact_history(&messages, 8, RAG_TOOLS, "CAPSULE", &[])
    );
    assert_eq!(returns_of(&first, "rag_search"), [receipt(), "CAPSULE"]);
    let second = send(&messages, 8, RAG_TOOLS, "CAPSULE 2");
    assert_eq!(returns_of(&second, "rag_search"), [receipt(), "CAPSULE 2"]);
    assert_eq!(
        first[2].identity(),
        second[2].identity(),
        "the receipt is the same message"
    );
    assert_ne!(
        first[6].identity(),
        second[6].identity(),
        "the carrier is rewritten"
    );

    // A newer search: the old carrier now gets a receipt.
    messages.push(calls(&[("rag_search", "s3")]));
    messages.push(request(vec![ret("rag_search", "s3", "OLD 3")]));
    messages.push(text("an answer"));
    messages.push(prompt("fourth"));
    let third = send(&messages, 12, RAG_TOOLS, "CAPSULE 3");
    assert_eq!(
        third,
        compact_history(&messages, 12, RAG_TOOLS, "CAPSULE 3", &[])
    );
    assert_eq!(
        returns_of(&third, "rag_search"),
        [receipt(), receipt(), "CAPSULE 3"]
    );
    assert_eq!(first[2].identity(), third[2].identity());

    // Other owned tools: nothing earlier is taken.
    let fourth = send(&messages, 12, ANALYSIS_TOOLS, "");
    assert_eq!(fourth, messages);
    let fifth = send(&messages, 12, RAG_TOOLS, "CAPSULE 3");
    assert_eq!(fifth, third);
    assert_ne!(fifth[2].identity(), third[2].identity());
}
