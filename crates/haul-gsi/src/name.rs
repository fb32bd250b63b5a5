//! Distinguished names as Globus writes them: OpenSSL's one-line form
//! (`/O=Grid/OU=site/CN=Jane Doe`), the form of grid-mapfiles, `DCAU S` subjects and every
//! identity haul logs.

use x509_parser::x509::{AttributeTypeAndValue, X509Name};

/// The short name OpenSSL gives an attribute type, or its dotted OID.
fn short_name(attr: &AttributeTypeAndValue<'_>) -> String {
    let oid = attr.attr_type().to_id_string();
    let short = match oid.as_str() {
        "2.5.4.3" => "CN",
        "2.5.4.4" => "SN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "street",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.12" => "title",
        "2.5.4.42" => "GN",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.2.840.113549.1.9.1" => "emailAddress",
        _ => return oid,
    };
    short.to_string()
}

/// An attribute's value as text: the string types as they are, anything else (BMPString,
/// T61String, ...) byte by byte with non-printable bytes as `\xHH`, as OpenSSL does.
fn value_text(attr: &AttributeTypeAndValue<'_>) -> String {
    if let Ok(s) = attr.as_str() {
        return s.to_string();
    }
    let mut out = String::new();
    for &b in attr.as_slice() {
        if (0x20..0x7f).contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

/// The one-line form of `name`: `/TYPE=value` per attribute in certificate order, the
/// attributes of a multi-valued RDN joined by `+`.
pub fn oneline(name: &X509Name<'_>) -> String {
    let mut out = String::new();
    for rdn in name.iter_rdn() {
        for (i, attr) in rdn.iter().enumerate() {
            out.push(if i == 0 { '/' } else { '+' });
            out.push_str(&short_name(attr));
            out.push('=');
            out.push_str(&value_text(attr));
        }
    }
    out
}

/// The value of the last RDN of `name` when it is a single common name.
pub fn last_cn(name: &X509Name<'_>) -> Option<String> {
    let rdn = name.iter_rdn().last()?;
    let mut attrs = rdn.iter();
    let a = attrs.next()?;
    if attrs.next().is_some() || a.attr_type().to_id_string() != "2.5.4.3" {
        return None;
    }
    Some(value_text(a))
}

/// Whether two one-line subjects name the same entity, as Globus compares them (case-blind).
pub fn same_subject(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Whether a server whose certificate names `names` ([`crate::Peer::host_names`]) may be
/// `host`, the host a client connected to, as the Globus tools check it: equal ignoring case
/// once a `host/` or `ftp/` service prefix (Globus host certificates' CN form) is dropped; a
/// leading `*.` matches exactly one DNS label; IP addresses compare as addresses.
pub fn host_matches(names: &[String], host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: Option<std::net::IpAddr> = host.parse().ok();
    names.iter().any(|n| {
        let n = n
            .strip_prefix("host/")
            .or_else(|| n.strip_prefix("ftp/"))
            .unwrap_or(n);
        if let Some(ip) = ip {
            return n.parse::<std::net::IpAddr>().is_ok_and(|a| a == ip);
        }
        if let Some(domain) = n.strip_prefix("*.") {
            return host.split_once('.').is_some_and(|(label, rest)| {
                !label.is_empty() && rest.eq_ignore_ascii_case(domain)
            });
        }
        n.eq_ignore_ascii_case(host)
    })
}

#[cfg(test)]
mod tests {
    use super::host_matches;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn hosts_match_as_globus_checks_them() {
        let n = names(&["dtn1.example.org", "127.0.0.1", "*.site.org", "::1"]);
        assert!(host_matches(&n, "DTN1.example.org"));
        assert!(host_matches(&n, "127.0.0.1"));
        assert!(host_matches(&n, "[::1]"));
        assert!(host_matches(&n, "a.site.org"));
        assert!(!host_matches(&n, "a.b.site.org"));
        assert!(!host_matches(&n, "site.org"));
        assert!(!host_matches(&n, "127.0.0.2"));
        assert!(!host_matches(&n, "dtn2.example.org"));
        assert!(host_matches(
            &names(&["host/dtn1.example.org"]),
            "dtn1.example.org"
        ));
        assert!(!host_matches(&names(&["dtn1.example.org"]), "1.2.3.4"));
        assert!(!host_matches(&[], "x"));
    }
}
