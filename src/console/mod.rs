//! The console the admin listener serves at `/`: one page, its script and its stylesheet,
//! embedded in the binary, drawing the node's own JSON endpoints; `window`, the figures of
//! the last minutes it plots; and `pools`, each pool's rates and latency over the last seconds.
//!
//! The page loads nothing from elsewhere, and its Content-Security-Policy lets it run only its
//! own script and style, fetch only from this listener, and be framed by no one. Names from
//! clients reach the page as JSON and are set as text, never as HTML.

mod pools;
mod window;

pub(crate) use window::Window;

/// What the console's responses are sent with.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// A file of the console: its media type and its bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asset {
    pub(crate) content_type: &'static str,
    pub(crate) body: &'static str,
}

/// The console file served at `path`, if one is.
pub(crate) fn asset(path: &str) -> Option<Asset> {
    let (content_type, body) = match path {
        "/" | "/index.html" => (
            "text/html; charset=utf-8",
            include_str!("assets/index.html"),
        ),
        "/console.js" => (
            "text/javascript; charset=utf-8",
            include_str!("assets/console.js"),
        ),
        "/console.css" => (
            "text/css; charset=utf-8",
            include_str!("assets/console.css"),
        ),
        _ => return None,
    };
    Some(Asset { content_type, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_never_turns_text_into_markup() {
        let script = asset("/console.js").map(|a| a.body).unwrap_or_default();
        assert!(script.contains("textContent"));
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
        ] {
            assert!(!script.contains(sink), "console.js uses {sink}");
        }
    }

    #[test]
    fn the_page_has_no_inline_script_or_style_and_names_no_other_host() {
        let page = asset("/").map(|a| a.body).unwrap_or_default();
        assert!(page.contains(r#"<script src="/console.js" defer></script>"#));
        assert!(!page.contains("<style"), "no inline style element");
        assert!(!page.contains(" style="), "no inline style attribute");
        assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("//cdn"));
        assert_eq!(
            page.matches("<script").count(),
            1,
            "one script, the console's own"
        );
    }
}
