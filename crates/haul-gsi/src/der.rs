//! The little DER reading GSI needs beyond x509-parser: the proxyCertInfo extension (RFC 3820
//! §3.8, and the GSI-3 draft form) and splitting a run of concatenated DER certificates. Every
//! length is checked against what is left; nothing here trusts its input.

/// A DER TLV with `tag` around `content`.
pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes = n.to_be_bytes();
        let skip = bytes
            .iter()
            .position(|&b| b != 0)
            .unwrap_or(bytes.len() - 1);
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

/// One TLV: its tag byte and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlv<'a> {
    /// The identifier octet.
    pub tag: u8,
    /// The contents.
    pub value: &'a [u8],
}

/// Reads one TLV from the front of `input`; gives it and the rest. Only single-octet tags and
/// definite lengths of at most four octets (DER's subset we meet) are read.
pub fn read_tlv(input: &[u8]) -> Option<(Tlv<'_>, &[u8])> {
    let (&tag, rest) = input.split_first()?;
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |a, &b| (a << 8) | b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((
        Tlv {
            tag,
            value: &rest[..len],
        },
        &rest[len..],
    ))
}

/// The TLVs of `input`, in order, while they parse.
pub fn children(mut input: &[u8]) -> Vec<Tlv<'_>> {
    let mut out = Vec::new();
    while let Some((t, rest)) = read_tlv(input) {
        out.push(t);
        input = rest;
    }
    out
}

/// The dotted form of an OID's contents.
pub fn oid_string(content: &[u8]) -> Option<String> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut cur: u64 = 0;
    for (i, &b) in content.iter().enumerate() {
        if cur > (u64::MAX >> 7) {
            return None;
        }
        cur = (cur << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (cur / 40).min(2);
                arcs.push(first);
                arcs.push(cur - first * 40);
            } else {
                arcs.push(cur);
            }
            cur = 0;
        } else if i + 1 == content.len() {
            return None;
        }
    }
    if arcs.is_empty() {
        return None;
    }
    Some(
        arcs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("."),
    )
}

/// A non-negative DER INTEGER of at most eight octets.
fn small_uint(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 9 || v[0] & 0x80 != 0 {
        return None;
    }
    let v = if v.len() == 9 {
        if v[0] != 0 {
            return None;
        }
        &v[1..]
    } else {
        v
    };
    Some(v.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b)))
}

/// What a proxyCertInfo extension says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyCertInfo {
    /// How many more proxies may follow this one, if limited.
    pub path_len: Option<u64>,
    /// The policy language OID (dotted).
    pub language: String,
}

/// Reads a proxyCertInfo extension value: a SEQUENCE holding an optional path length (an
/// INTEGER, or one inside `[1]` in the draft form) and the proxyPolicy SEQUENCE, whose first
/// element is the policy language.
pub fn proxy_cert_info(value: &[u8]) -> Option<ProxyCertInfo> {
    let (outer, rest) = read_tlv(value)?;
    if outer.tag != 0x30 || !rest.is_empty() {
        return None;
    }
    let mut path_len = None;
    let mut language = None;
    for t in children(outer.value) {
        match t.tag {
            0x02 => path_len = Some(small_uint(t.value)?),
            0xa1 => {
                let (i, _) = read_tlv(t.value)?;
                if i.tag != 0x02 {
                    return None;
                }
                path_len = Some(small_uint(i.value)?);
            }
            0x30 => {
                let (oid, _) = read_tlv(t.value)?;
                if oid.tag != 0x06 {
                    return None;
                }
                language = Some(oid_string(oid.value)?);
            }
            _ => return None,
        }
    }
    Some(ProxyCertInfo {
        path_len,
        language: language?,
    })
}

/// Splits concatenated DER values (certificates sent back to back, as Globus's delegation
/// does); None if anything is left over that is not a whole SEQUENCE.
pub fn split_sequences(mut input: &[u8]) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    while !input.is_empty() {
        let (t, rest) = read_tlv(input)?;
        if t.tag != 0x30 {
            return None;
        }
        let whole = input.len() - rest.len();
        out.push(&input[..whole]);
        input = rest;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_lengths() {
        assert_eq!(tlv(0x04, &[1, 2]), vec![0x04, 2, 1, 2]);
        let long = tlv(0x04, &[0; 300]);
        assert_eq!(&long[..4], &[0x04, 0x82, 0x01, 0x2c]);
    }

    #[test]
    fn oids() {
        assert_eq!(
            oid_string(&[0x2b, 6, 1, 5, 5, 7, 21, 1]).unwrap(),
            "1.3.6.1.5.5.7.21.1"
        );
        assert_eq!(
            oid_string(&[0x2b, 6, 1, 4, 1, 0x9b, 0x50, 1, 1, 1, 9]).unwrap(),
            "1.3.6.1.4.1.3536.1.1.1.9"
        );
        assert!(oid_string(&[0x2b, 0x86]).is_none());
        assert!(oid_string(&[]).is_none());
    }

    #[test]
    fn rfc_and_draft_proxy_cert_info() {
        // SEQUENCE { INTEGER 2, SEQUENCE { OID inheritAll } }
        let truncated = [
            0x30, 0x0d, 0x02, 0x01, 0x02, 0x30, 0x08, 0x06, 0x06, 0x2b, 6, 1,
        ];
        assert!(proxy_cert_info(&truncated).is_none());
        let rfc = [
            0x30, 0x0f, 0x02, 0x01, 0x02, 0x30, 0x0a, 0x06, 0x08, 0x2b, 6, 1, 5, 5, 7, 21, 1,
        ];
        let p = proxy_cert_info(&rfc).unwrap();
        assert_eq!(p.path_len, Some(2));
        assert_eq!(p.language, "1.3.6.1.5.5.7.21.1");
        // Draft: SEQUENCE { SEQUENCE { OID }, [1] { INTEGER 0 } }
        let draft = [
            0x30, 0x11, 0x30, 0x0a, 0x06, 0x08, 0x2b, 6, 1, 5, 5, 7, 21, 1, 0xa1, 0x03, 0x02, 0x01,
            0x00,
        ];
        let p = proxy_cert_info(&draft).unwrap();
        assert_eq!(p.path_len, Some(0));
        // No policy: refused.
        assert!(proxy_cert_info(&[0x30, 0x03, 0x02, 0x01, 0x01]).is_none());
    }

    #[test]
    fn splits_back_to_back_sequences() {
        let two = [0x30, 0x01, 0xaa, 0x30, 0x00];
        assert_eq!(split_sequences(&two).unwrap().len(), 2);
        assert!(split_sequences(&[0x30, 0x02, 0x00]).is_none());
        assert!(split_sequences(&[0x04, 0x00]).is_none());
        assert_eq!(split_sequences(&[]).unwrap().len(), 0);
    }
}
