//! Requests as a client sends them: a RESP array of bulk strings (what a
//! replica link and the replication stream write).

/// Appends `args` to `out` as one RESP request.
pub fn write_request<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    out.push(b'*');
    super::reply::push_int(out, args.len() as i64);
    out.extend_from_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.push(b'$');
        super::reply::push_int(out, a.len() as i64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::write_request;

    #[test]
    fn encodes_a_multi_bulk_request() {
        let mut out = Vec::new();
        let long = vec![b'x'; 1234];
        write_request(&mut out, &[&b"SET"[..], b"", &long]);
        let mut want = b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$1234\r\n".to_vec();
        want.extend_from_slice(&long);
        want.extend_from_slice(b"\r\n");
        assert_eq!(out, want);
    }
}
