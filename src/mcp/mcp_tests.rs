#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"].as_i64().unwrap_or_default()
}

#[test]
fn messages_that_are_not_json_rpc_get_the_code_that_names_why() {
    assert_eq!(
        error_code(&parse(b"{not json").unwrap_err()),
        code::PARSE_ERROR
    );
    assert_eq!(
        error_code(&parse(b"[]").unwrap_err()),
        code::INVALID_REQUEST
    );
    assert_eq!(error_code(&parse(b"7").unwrap_err()), code::INVALID_REQUEST);
    let no_version = parse(br#"{"id": 3, "method": "ping"}"#).unwrap_err();
    assert_eq!(error_code(&no_version), code::INVALID_REQUEST);
    assert_eq!(no_version["id"], json!(3));
    let null_id = parse(br#"{"jsonrpc": "2.0", "id": null, "method": "ping"}"#).unwrap_err();
    assert_eq!(error_code(&null_id), code::INVALID_REQUEST);
    let bad_params = parse(br#"{"jsonrpc": "2.0", "id": "a", "method": "ping", "params": [1]}"#);
    assert_eq!(error_code(&bad_params.unwrap_err()), code::INVALID_PARAMS);
}

#[test]
fn requests_notifications_and_responses_are_told_apart() {
    let request = parse(br#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#).unwrap();
    assert!(matches!(request, Incoming::Request { ref method, .. } if method == "tools/list"));
    let note = parse(br#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#).unwrap();
    assert!(matches!(note, Incoming::Notification { .. }));
    let response = parse(br#"{"jsonrpc": "2.0", "id": 1, "result": {}}"#).unwrap();
    assert_eq!(response, Incoming::Response);
}

#[test]
fn the_handshake_agrees_on_a_version_it_speaks() {
    assert_eq!(negotiate("2025-06-18"), "2025-06-18");
    assert_eq!(negotiate("2025-11-25"), "2025-11-25");
    assert_eq!(negotiate("1999-01-01"), PROTOCOL_VERSIONS[0]);
    assert!(header_version_known("2025-03-26"));
    assert!(!header_version_known("1999-01-01"));
}

#[test]
fn ping_and_unknown_methods_need_no_session() {
    assert_eq!(answer_without_session("ping"), Some(Ok(json!({}))));
    let unknown = answer_without_session("server/discover")
        .unwrap()
        .unwrap_err();
    assert_eq!(unknown.code, code::METHOD_NOT_FOUND);
    assert!(answer_without_session("tools/call").is_none());
}

#[test]
fn a_failed_tool_is_an_error_result_with_its_structured_error() {
    let failed =
        json!({"ok": false, "error": {"category": "not_found", "message": "no such file"}});
    let result = call_result(&failed);
    assert_eq!(result["isError"], json!(true));
    assert_eq!(result["structuredContent"], failed);
    let text = result["content"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), failed);
    assert_eq!(call_result(&json!({"ok": true}))["isError"], json!(false));
}
