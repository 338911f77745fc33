//! Requests as a client sends them: a RESP array of bulk strings (what a
//! replica link and the replication stream write).

/// Appends `args` to `out` as one RESP request.
pub fn write_request<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}
