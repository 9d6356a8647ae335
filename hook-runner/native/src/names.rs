//! Caps on a module's `name` custom section, and its removal from modules stored before the caps.
//! wasmtime copies a trapping frame's function name into every backtrace it captures (up to 16
//! frames): one function named with 7 MiB made each trap cost ~259 ms and ~1.2 GiB of the runner.

use wasmparser::{BinaryReader, CustomSectionReader, IndirectNameMap, KnownCustom, Name, NameMap};

use crate::refusal::{refuse, Refusal};

/// Longest name (of the module, a function, a local, ...) an upload may give; mangled Rust and C++
/// names run to a few hundred bytes.
pub const MAX_NAME_BYTES: usize = 1024;
/// Largest `name` section an upload may carry: ~20,000 functions with mangled names of ~200 bytes
/// (the function cap, scan.rs) need about 4 MiB; the upload cap is 8 MiB.
pub const MAX_NAME_SECTION_BYTES: usize = 4 * 1024 * 1024;

/// What compiling does with a module whose `name` section goes past the caps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LongNames {
    /// Refuse it (`exceeds_sandbox_limits`): an upload.
    Refuse,
    /// Compile it without its `name` sections (traps then name functions by index): bytes admitted
    /// before these caps existed (compiled again from the store, or sent back to restore a runner),
    /// which must keep running.
    Drop,
}

/// Checks one custom section named `name` against the caps. wasmtime reads such a section up to
/// its first malformed entry and keeps what it read; this check reads it the same way and stops there.
pub fn check_name_section(section: &CustomSectionReader<'_>) -> Result<(), Refusal> {
    let size = section.data().len();
    if size > MAX_NAME_SECTION_BYTES {
        return Err(refuse(
            "exceeds_sandbox_limits",
            format!("the name section is {size} bytes; the sandbox takes one of at most {MAX_NAME_SECTION_BYTES} bytes (strip debug names, e.g. wasm-opt --strip-debug)"),
        ));
    }
    let KnownCustom::Name(reader) = section.as_known() else {
        return Ok(());
    };
    for subsection in reader {
        let Ok(subsection) = subsection else {
            return Ok(());
        };
        let too_long = match subsection {
            Name::Module { name, .. } => {
                Some(("the module".to_owned(), name.len())).filter(|&(_, len)| len > MAX_NAME_BYTES)
            }
            Name::Function(map) => first_too_long(map, "function"),
            Name::Type(map) => first_too_long(map, "type"),
            Name::Table(map) => first_too_long(map, "table"),
            Name::Memory(map) => first_too_long(map, "memory"),
            Name::Global(map) => first_too_long(map, "global"),
            Name::Element(map) => first_too_long(map, "element segment"),
            Name::Data(map) => first_too_long(map, "data segment"),
            Name::Tag(map) => first_too_long(map, "tag"),
            Name::Local(map) => first_too_long_indirect(map, "local"),
            Name::Label(map) => first_too_long_indirect(map, "label"),
            Name::Field(map) => first_too_long_indirect(map, "field"),
            Name::Unknown { .. } => None,
        };
        if let Some((what, len)) = too_long {
            return Err(refuse(
                "exceeds_sandbox_limits",
                format!("the name section gives {what} a name of {len} bytes; the sandbox takes names of at most {MAX_NAME_BYTES} bytes (shorten it, or strip debug names, e.g. wasm-opt --strip-debug)"),
            ));
        }
    }
    Ok(())
}

/// The first name in `map` past the cap, described (`function #3`) with its length, or none.
fn first_too_long(map: NameMap<'_>, kind: &str) -> Option<(String, usize)> {
    for naming in map {
        let Ok(naming) = naming else { return None };
        if naming.name.len() > MAX_NAME_BYTES {
            return Some((format!("{kind} #{}", naming.index), naming.name.len()));
        }
    }
    None
}

fn first_too_long_indirect(map: IndirectNameMap<'_>, kind: &str) -> Option<(String, usize)> {
    for indirect in map {
        let Ok(indirect) = indirect else { return None };
        if let Some((what, len)) = first_too_long(indirect.names, kind) {
            return Some((format!("{what} of function #{}", indirect.index), len));
        }
    }
    None
}

/// `bytes` (a valid module) without its custom sections named `name`, every other byte kept.
pub fn without_name_sections(bytes: &[u8]) -> Result<Vec<u8>, Refusal> {
    let malformed = |e: wasmparser::BinaryReaderError| {
        refuse("invalid_module", format!("invalid WebAssembly module: {e}"))
    };
    let header = bytes
        .get(..8)
        .ok_or_else(|| refuse("invalid_module", "truncated WebAssembly header"))?;
    let mut kept = header.to_vec();
    let mut reader = BinaryReader::new(&bytes[8..], 8);
    while !reader.eof() {
        let start = reader.original_position();
        let id = reader.read_u8().map_err(malformed)?;
        let size = reader.read_var_u32().map_err(malformed)? as usize;
        let body_at = reader.original_position();
        let body = reader.read_bytes(size).map_err(malformed)?;
        let is_name =
            id == 0 && BinaryReader::new(body, body_at).read_string().ok() == Some("name");
        if !is_name {
            kept.extend_from_slice(&bytes[start..body_at + size]);
        }
    }
    Ok(kept)
}
