//! The page around a view: one HTML document with its style inline and a Content-Security-Policy
//! that allows nothing but that one style (by its hash): no script, no image, no font, no frame,
//! no connection, no form, no `<base>`. So even markup that got through could fetch nothing and
//! run nothing.

use base64::Engine;
use sha2::{Digest, Sha256};

use super::html::Html;

/// The page's one style sheet.
const STYLE: &str = include_str!("style.css");

/// The Content-Security-Policy of every page (the style's hash included).
pub fn content_security_policy() -> String {
    let digest = Sha256::digest(STYLE.as_bytes());
    let hash = base64::engine::general_purpose::STANDARD.encode(digest);
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; img-src 'none'; font-src 'none'; \
         connect-src 'none'; frame-src 'none'; form-action 'none'; base-uri 'none'"
    )
}

/// A whole document: `title` (text) and `body` (markup).
pub fn document(title: &str, body: &Html) -> String {
    let mut h = Html::new();
    h.raw("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
        .raw("<meta http-equiv=\"Content-Security-Policy\" content=\"")
        .text(&content_security_policy())
        .raw("\"><meta name=\"referrer\" content=\"no-referrer\">")
        .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
        .raw("<meta name=\"generator\" content=\"envcraft view\"><title>")
        .text(title)
        .raw("</title><style>")
        .raw(STYLE)
        .raw("</style></head>\n<body>\n")
        .append(body)
        .raw("\n</body></html>\n");
    h.into_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_policy_allows_only_the_pages_own_style() {
        let page = document("<t>", Html::new().text("x"));
        assert!(page.contains("<title>&lt;t&gt;</title>"));
        let csp = content_security_policy();
        assert!(csp.starts_with("default-src 'none'; style-src 'sha256-"));
        assert!(!csp.contains("unsafe"));
        assert!(
            !csp.contains("script-src"),
            "scripts fall to default-src 'none'"
        );
        // The CSP meta comes before anything that could load.
        let meta = page.find("Content-Security-Policy").unwrap();
        assert!(meta < page.find("<style>").unwrap());
    }
}
