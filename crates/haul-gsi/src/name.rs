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
