//! The guest output half of the ABI (DESIGN 6.5): a pointer to a NUL-terminated UTF-8
//! document, read with a scan bounded by the output cap. Pure: takes a memory snapshot.

/// Reads the output document at `ptr`. `cap` is the largest document accepted, not
/// counting the NUL, so at most `cap + 1` bytes are scanned.
pub fn read_output(memory: &[u8], ptr: u32, cap: usize) -> Result<String, String> {
    let start = ptr as usize;
    if start >= memory.len() {
        return Err(format!(
            "execute returned output pointer {ptr:#x}, past the end of guest memory ({} bytes)",
            memory.len()
        ));
    }
    let window_end = memory
        .len()
        .min(start.saturating_add(cap).saturating_add(1));
    let window = &memory[start..window_end];
    let Some(len) = window.iter().position(|&b| b == 0) else {
        if window.len() <= cap {
            return Err(format!(
                "output at {ptr:#x} runs to the end of guest memory without a NUL terminator"
            ));
        }
        return Err(format!(
            "output at {ptr:#x} has no NUL terminator within {cap} bytes (the output limit)"
        ));
    };
    match std::str::from_utf8(&window[..len]) {
        Ok(text) => Ok(text.to_owned()),
        Err(e) => Err(format!(
            "output at {ptr:#x} is not valid UTF-8 (invalid byte sequence at offset {} of {len})",
            e.valid_up_to()
        )),
    }
}

/// Pages to grow so `len` input bytes fit in freshly added pages (at least one).
pub fn pages_for_input(len: usize) -> u64 {
    let page = super::engine::WASM_PAGE_BYTES as usize;
    (len.div_ceil(page)).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_terminated_text() {
        let mem = b"..hello\0rest";
        assert_eq!(read_output(mem, 2, 16).unwrap(), "hello");
    }

    #[test]
    fn accepts_exactly_cap_bytes_and_refuses_one_more() {
        let mut mem = vec![b'a'; 10];
        mem.push(0);
        assert_eq!(read_output(&mem, 0, 10).unwrap().len(), 10);
        assert!(read_output(&mem, 0, 9)
            .unwrap_err()
            .contains("within 9 bytes"));
    }

    #[test]
    fn refuses_pointer_past_end_missing_nul_and_bad_utf8() {
        assert!(read_output(b"ab\0", 3, 8)
            .unwrap_err()
            .contains("past the end"));
        assert!(read_output(b"abc", 0, 8)
            .unwrap_err()
            .contains("end of guest memory"));
        assert!(read_output(b"a\xff\0", 0, 8).unwrap_err().contains("UTF-8"));
    }
}
