//! The nested URL of a chosen route (002 §1.4; docs/relay.md): each relay's URL, then the
//! destination's, then the path, so the client asks the first relay for the rest.

use super::RouteError;

/// The nested URL for `hops` (`scheme://host:port` of the relays in order, then of the
/// destination; not the source) and the destination's `path`:
/// `ftp://r1:2811/ftp://r2:2811/ftp://dst:2811/data/f`.
///
/// A trailing `/` on a hop is dropped; a hop must otherwise be `scheme://authority` with no
/// path, spaces or control characters. A `path` without a leading `/` gets one.
pub fn nest_url(hops: &[String], path: &str) -> Result<String, RouteError> {
    if hops.is_empty() {
        return Err(RouteError::NoHops);
    }
    let mut out = String::new();
    for (index, hop) in hops.iter().enumerate() {
        let hop = hop.strip_suffix('/').unwrap_or(hop);
        let ok = match hop.split_once("://") {
            Some((scheme, authority)) => {
                !scheme.is_empty()
                    && scheme
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                    && !authority.is_empty()
                    && !authority.contains('/')
                    && !authority
                        .chars()
                        .any(|c| c.is_whitespace() || c.is_control())
            }
            None => false,
        };
        if !ok {
            return Err(RouteError::BadHopUrl { index });
        }
        if index > 0 {
            out.push('/');
        }
        out.push_str(hop);
    }
    if !path.starts_with('/') {
        out.push('/');
    }
    out.push_str(path);
    Ok(out)
}
